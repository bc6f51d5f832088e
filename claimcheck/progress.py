"""A progress line for the evidence run: phase, counts, time so far and time left.

``claims report`` asks the plugin for it (``--claims-progress``). Tests are grouped into phases by their
top folder (``properties``, ``experiments``); the time left is the expected time of the tests not yet
done, each expected to take what it took in the previous results (``seconds`` of its outcome), scaled
by how fast this run goes so far; a test never seen before counts as the median. On a terminal the line
is redrawn in place every second; elsewhere (a log, CI) a line is printed every 15 seconds.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import IO


PHASE_ORDER = ("properties", "experiments")  # claims report runs them in this order


class Progress:
    def __init__(self, nodeids: set[str], previous_seconds: dict[str, float], stream: IO[str] | None = None,
                 clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.clock = clock
        self.started = clock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = 1.0 if self.tty else 15.0
        known = [s for n, s in previous_seconds.items() if n in nodeids]
        typical = statistics.median(known) if known else 1.0
        self.expected = {n: previous_seconds.get(n, typical) for n in nodeids}
        self.phases: dict[str, list[int]] = {}  # phase -> [done, total], in the order the run takes them
        for n in sorted(nodeids, key=lambda n: (PHASE_ORDER.index(phase_of(n)) if phase_of(n) in PHASE_ORDER
                                                else len(PHASE_ORDER), n)):
            self.phases.setdefault(phase_of(n), [0, 0])[1] += 1
        self.done: set[str] = set()
        self.last_drawn = -1e9

    def finished(self, nodeid: str) -> None:
        """Count a test as done (once) and redraw the line when it is time."""
        if nodeid in self.done or nodeid not in self.expected:
            return
        self.done.add(nodeid)
        self.phases[phase_of(nodeid)][0] += 1
        if self.clock() - self.last_drawn >= self.every:
            self.draw()

    def seconds_left(self) -> float | None:
        elapsed = self.clock() - self.started
        done = sum(self.expected[n] for n in self.done)
        left = sum(s for n, s in self.expected.items() if n not in self.done)
        if done <= 0 or elapsed < 2:
            return None
        return left * elapsed / done

    def line(self) -> str:
        elapsed = self.clock() - self.started
        phases = "  ".join(f"{name} {d}/{t}" for name, (d, t) in self.phases.items())
        left = self.seconds_left()
        return f"claims: {phases}  {_clock(elapsed)} so far" + (f", about {_clock(left)} left" if left is not None else "")

    def draw(self, final: bool = False) -> None:
        self.last_drawn = self.clock()
        text = self.line()
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def phase_of(nodeid: str) -> str:
    """``properties`` for ``properties/test_x.py::test_y``: the top folder of a test."""
    head = nodeid.split("::", 1)[0]
    return head.split("/", 1)[0] if "/" in head else "tests"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"
