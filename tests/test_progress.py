"""The progress line of the evidence run and what the terminal shows of pytest's log."""
import io

from claimcheck.cli import _run_summary
from claimcheck.progress import Progress, phase_of


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_line_gives_each_phase_its_counts_and_the_time_left_from_the_previous_durations():
    clock, out = Clock(), io.StringIO()
    nodes = {"properties/test_a.py::t1", "properties/test_a.py::t2", "experiments/test_e.py::t3"}
    p = Progress(nodes, {"properties/test_a.py::t1": 1.0, "properties/test_a.py::t2": 1.0,
                         "experiments/test_e.py::t3": 8.0}, stream=out, clock=clock)
    clock.now = 4.0
    p.finished("properties/test_a.py::t1")
    p.finished("properties/test_a.py::t1")  # counted once
    p.finished("tests/test_x.py::not_collected")  # not part of this run: ignored
    assert "properties 1/2" in p.line() and "experiments 0/1" in p.line()
    # 1 s of expected work took 4 s: the 9 s left are expected to take 36 s
    assert p.seconds_left() == 36.0 and "about 0:36 left" in p.line()
    assert out.getvalue().count("\n") == 1  # not a terminal: one line per draw


def test_phases_are_top_folders():
    assert phase_of("properties/test_a.py::t[x/y]") == "properties" and phase_of("test_a.py::t") == "tests"


def test_the_terminal_gets_the_failures_the_claims_section_and_the_last_line_of_the_log():
    log = "\n".join(["cmd", "....F", "=== claims ===", "MISMATCH a.b: wrong", "claims: 1 mismatch",
                     "PARTIAL: 3 evidence test(s) reached by no run", "=== short test summary info ===",
                     "FAILED properties/test_a.py::t - boom", "=== 1 failed in 2s ==="])
    assert _run_summary(log) == ["FAILED properties/test_a.py::t - boom", "MISMATCH a.b: wrong", "claims: 1 mismatch",
                                 "PARTIAL: 3 evidence test(s) reached by no run", "=== 1 failed in 2s ==="]
