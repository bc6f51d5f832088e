"""``make test``: every part of the test command runs, each is reported, and any failure fails the whole.

The parts, in order: the registry check (``claims check``), the property suite (``pytest -n auto
properties/``, work stealing; its backend matrix at the ``smoke`` tier), the backend matrix again at the ``ci``
tier (kernel-scale shapes, FlexAttention in every dtype), the experiments at the CI scale, and the suite's
own tests (``tests/``). A part that
fails does not stop the others: the table at the end says which failed and how, and the exit status is
1 when any did. pytest's exit 5 (no tests collected) is a failure: a part that runs nothing proves nothing.

    .venv/bin/python tools/test_parts.py                   # every part
    .venv/bin/python tools/test_parts.py --only properties --only tests
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PARTS = {
    "check": [str(BIN / "claims"), "check"],
    # work stealing: FlexAttention's compiles and the interpreted Triton cells are long tests among short ones, and
    # an idle worker takes over queued tests instead of waiting at the end (60-70 s -> 57-62 s on two cores)
    "properties": [sys.executable, "-m", "pytest", "-n", "auto", "--dist", "worksteal", "properties/"],
    # the property suite's matrix is the smoke tier; this is the ci one (a superset: 1025 and 8193 keys, head dims 128 and
    # 256, FlexAttention in float16 and bfloat16 too), one FlexAttention node a dtype spread over the workers
    "kernels": [sys.executable, "-m", "pytest", "-n", "auto", "--dist", "worksteal", "--kernel-tier", "ci",
                "properties/test_backends.py"],
    "experiments": [sys.executable, "-m", "pytest", "-n", "auto", "--dist", "loadgroup", "experiments/"],
    "tests": [sys.executable, "-m", "pytest", "-n", "auto", "tests/"],
}
MEANING = {0: "passed", 1: "tests failed", 2: "interrupted or usage error", 3: "internal error",
           4: "usage error", 5: "no tests collected"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(PARTS), help="run only this part (repeat)")
    args = parser.parse_args(argv)
    rows = []
    for name, cmd in PARTS.items():
        if args.only and name not in args.only:
            continue
        print(f"==> {name}: {' '.join(cmd)}", flush=True)
        started = time.time()
        code = subprocess.run(cmd, cwd=ROOT).returncode
        rows.append((name, code, time.time() - started))
    print("\n==> make test")
    for name, code, seconds in rows:
        verdict = "ok  " if code == 0 else "FAIL"
        print(f"{verdict} {name:<12} {seconds:>6.0f} s  exit {code} ({MEANING.get(code, 'failed')})")
    failed = [name for name, code, _ in rows if code != 0]
    print(f"make test: {len(failed)} of {len(rows)} parts failed: {', '.join(failed)}" if failed
          else f"make test: all {len(rows)} parts passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
