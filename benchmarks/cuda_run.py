"""Run the CUDA benchmarks within a fixed time and write asv results plus a plain summary table.

For a short GPU lease (see benchmarks/README.md)::

    python benchmarks/cuda_run.py --out "$OUT/asv-results" --commit <sha> --budget 400

runs the points of every benchmark (or of those whose asv name matches ``--bench``) that are
on the device: the ``*Cuda`` classes, and the ``device="cuda"`` parameter values of the others.
It runs them in this process, cheapest first and FlexAttention last (each of its shapes
compiles), starts nothing new after ``--budget`` seconds, interrupts a benchmark still running a
minute later, and saves asv's files after every parameter combination
(:mod:`benchmarks._runner`): copy ``<out>/`` into ``.asv/results/`` and ``asv publish`` shows
them, the report reads them. The summary table goes to stdout and to
``<out>/summary-<machine>-<commit>.txt``. Without CUDA it exits with status 2 and says so;
``--device cpu`` runs the CPU points instead (to test the script), ``--dry-run`` lists the work.
Needs torch only (asv is not required).
"""
from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` and `impl` importable from this tree
    sys.path.insert(0, str(ROOT))

from benchmarks import _runner  # noqa: E402

EXIT_NO_CUDA = 2


class _HardStop(BaseException):
    """Raised by SIGALRM ``--grace`` seconds after the budget: ends the run (what ran is saved)."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"cuda_run: CUDA is not available (torch {torch.__version__}, torch.version.cuda = "
              f"{torch.version.cuda}, torch.cuda.is_available() is False): nothing was run. Run this on a machine "
              "with a CUDA GPU and a CUDA build of torch, or pass --device cpu to exercise the script on CPU.",
              file=sys.stderr)
        return EXIT_NO_CUDA
    commit, commit_ms = _commit(args.commit)
    if commit is None:
        print("cuda_run: no commit: this tree is not a git checkout; pass --commit <40-hex sha of the tree>",
              file=sys.stderr)
        return EXIT_NO_CUDA + 1
    machine = args.machine or _machine_name(args.device)
    suites = _runner.discover(args.bench or "")
    jobs = _jobs(suites, args.device, args.max_combos)
    if args.dry_run:
        for suite, combo in jobs:
            print(f"{suite.name}{combo}")
        print(f"{len(jobs)} parameter combinations in {len(suites)} classes")
        return 0

    out = Path(args.out)
    results = _runner.ResultsFile(out, machine, commit, commit_ms, f"{sys.version_info[0]}.{sys.version_info[1]}")
    _runner.update_benchmarks_json(out, suites)
    done: dict[str, dict] = {}  # suite name -> {combo: {method: Outcome}}
    deadline = time.monotonic() + args.budget
    left_out = 0
    signal.signal(signal.SIGALRM, _hard_stop)
    # Fires at budget + grace, then every second: an exception raised where Python swallows it
    # (a finaliser, a callback from C) is raised again until it ends the run.
    signal.setitimer(signal.ITIMER_REAL, args.budget + args.grace, 1.0)
    try:
        for suite, combo in jobs:
            if time.monotonic() > deadline:
                left_out += 1
                continue
            outcomes = _runner.run_combo(suite, combo)
            done.setdefault(suite.name, {})[combo] = outcomes
            for method in suite.methods:
                results.record(suite, method, {c: o[method] for c, o in done[suite.name].items()})
            results.save()
            _progress(suite, combo, outcomes)
    except _HardStop:
        ran = sum(len(v) for v in done.values())
        left_out = len(jobs) - ran
        print(f"cuda_run: interrupted {args.grace:.0f} s past the budget; {suite.name}{combo} did not finish",
              flush=True)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    results.save()

    table = _summary(jobs, done, machine, commit, left_out, args.budget)
    print(table)
    summary = out / f"summary-{machine}-{commit[:8]}.txt"
    summary.write_text(table + "\n")
    print(f"\nasv results: {results.path}\nsummary: {summary}")
    return 0


def _hard_stop(signum, frame) -> None:
    raise _HardStop()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / ".asv" / "results"), help="asv results directory (default .asv/results)")
    p.add_argument("--commit", help="the commit these files are of (default: git rev-parse HEAD)")
    p.add_argument("--machine", help="asv machine name (default: cuda-<GPU name>, or the host name on CPU)")
    p.add_argument("--budget", type=float, default=400.0,
                   help="seconds after which no new benchmark starts (default 400: under 8 minutes in all)")
    p.add_argument("--grace", type=float, default=60.0,
                   help="seconds past the budget after which a benchmark still running is interrupted (default 60)")
    p.add_argument("--bench", help="regex on asv names module.Class.method (default: all, on --device)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default); cpu runs the CPU points, to test this script without a GPU")
    p.add_argument("--max-combos", type=int, default=None, help="at most this many parameter combinations per class")
    p.add_argument("--dry-run", action="store_true", help="list the parameter combinations and exit")
    return p


def _commit(given: str | None) -> tuple[str | None, int]:
    if given:
        return given, int(time.time() * 1000)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        ts = subprocess.run(["git", "log", "-1", "--format=%ct", sha], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
        return sha, int(ts) * 1000
    except (OSError, subprocess.CalledProcessError):
        return None, 0


def _machine_name(device: str) -> str:
    import platform

    import torch

    if device == "cuda":
        return "cuda-" + re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-")
    return platform.node() or "cpu"


def _jobs(suites: list[_runner.Suite], device: str, max_combos: int | None) -> list[tuple]:
    """(suite, combo) pairs that run on ``device``, cheapest first, FlexAttention's last."""
    jobs = []
    for order, suite in enumerate(suites):
        names = suite.param_names
        suite_device = getattr(suite.cls, "device", None)
        combos = []
        for combo in suite.combos():
            point = dict(zip(names, combo))
            if point.get("device", suite_device) != device:
                continue
            combos.append(combo)
        for index, combo in enumerate(combos[:max_combos]):
            point = dict(zip(names, combo))
            jobs.append(((point.get("backend") == "flex", _scale(point), order, index), suite, combo))
    jobs.sort(key=lambda job: job[0])
    return [(suite, combo) for _, suite, combo in jobs]


def _scale(point: dict) -> int:
    """A rough cost rank: longer sequences later (so a deadline drops the largest first)."""
    return int(point.get("n", 0))


def _progress(suite: _runner.Suite, combo: tuple, outcomes: dict) -> None:
    states = {"ok" if o.value is not None else "skip" if o.skipped else "FAIL" for o in outcomes.values()}
    print(f"[{'/'.join(sorted(states))}] {suite.name}{combo}", flush=True)


def _summary(jobs: list[tuple], done: dict, machine: str, commit: str, left_out: int, budget: float) -> str:
    rows = [("benchmark", "parameters", "value", "unit")]
    skipped: dict[str, int] = {}
    failed = []
    for suite, combo in jobs:
        outcomes = done.get(suite.name, {}).get(combo)
        if outcomes is None:
            continue
        params = ", ".join(f"{k}={v}" for k, v in zip(suite.param_names, combo))
        for method, o in outcomes.items():
            name = f"{suite.name}.{method}"
            if o.value is not None:
                value, unit = _show(o.value, method, getattr(getattr(suite.cls, method), "unit", ""))
                rows.append((name, params, value, unit))
            elif o.skipped:
                skipped[o.skipped] = skipped.get(o.skipped, 0) + 1
            else:
                failed.append(f"{name} [{params}]: {o.failed}")
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"machine {machine}, commit {commit[:8]}, budget {budget:.0f} s"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(2, "  ".join("-" * w for w in widths))
    if left_out:
        lines.append(f"\nnot run (budget reached): {left_out} parameter combinations")
    if skipped:
        lines.append("\nskipped (method x combination counts):")
        lines += [f"  {n:4d}  {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1])]
    if failed:
        lines.append("\nFAILED:")
        lines += [f"  {f}" for f in failed]
    return "\n".join(lines)


def _show(value: float, method: str, unit: str) -> tuple[str, str]:
    if method.startswith("time_"):
        return f"{value * 1e3:.4g}", "ms"
    if unit == "bytes":
        return f"{value / 2**20:.4g}", "MiB"
    return f"{value:.4g}", unit or "-"


if __name__ == "__main__":
    sys.exit(main())
