"""Flakes, found before users find them: the property suite under the random profile with N seeds.

Each run is ``pytest properties/`` with ``CLAIMS_PROFILE`` (default ``dev``: 100 random examples per
property) and its own ``--hypothesis-seed``, writing its per-claim results and a JUnit XML file to a
temporary folder (never the project's ``results/claims-results.json``). A test that fails in any run,
and a claim that ends ``mismatch`` or ``error`` in any run, is a flake: the table lists each with the
seeds it failed under and the first line of its message, so a failure can be replayed exactly:

    .venv/bin/python tools/flakes.py                       # 20 seeds, dev profile
    .venv/bin/python tools/flakes.py --runs 5 --first-seed 100 properties/test_spectral.py
    .venv/bin/python tools/flakes.py --profile thorough --runs 1
    CLAIMS_PROFILE=dev .venv/bin/pytest properties/test_spectral.py --hypothesis-seed 7   # replay seed 7

Writes ``results/flakes.json`` (every run: seed, seconds, exit code, failures). Exit status: 0 when no
run failed, 1 when one did, 2 on a usage error. A failure is fixed at its root (an input outside the
claim's domain is excluded in the strategy with the reason; a negative control draws where its variant
differs), never by pinning a seed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def failures_of(junit: Path) -> dict[str, str]:
    """Node id -> first line of the failure, for every test that failed or errored in a JUnit XML file."""
    out: dict[str, str] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is None:
            continue
        path = case.get("classname", "").replace(".", "/")
        nodeid = f"{path}.py::{case.get('name')}"
        first = (bad.get("message") or bad.text or "").strip().splitlines()
        out[nodeid] = first[0][:160] if first else ""
    return out


def bad_claims(results: Path) -> dict[str, str]:
    """Claim id -> status: detail, for every claim a run left ``mismatch`` or ``error``."""
    try:
        rows = json.loads(results.read_text(encoding="utf-8")).get("claims", [])
    except (OSError, ValueError):
        return {}
    return {r["id"]: f"{r['status']}: {' '.join(str(r.get('detail', '')).split())[:140]}"
            for r in rows if r.get("status") in ("mismatch", "error")}


def one_run(seed: int, profile: str, paths: list[str], workers: str, folder: Path) -> dict:
    junit, results = folder / f"junit-{seed}.xml", folder / f"claims-{seed}.json"
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI selects the derandomized profile
    env["CLAIMS_PROFILE"] = profile
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:randomly", f"--hypothesis-seed={seed}",
           f"--junitxml={junit}", "--claims-results", str(results)]
    if workers != "0":
        cmd += ["-n", workers]
    started = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    return {"seed": seed, "profile": profile, "seconds": round(time.time() - started, 1), "exit": proc.returncode,
            "summary": tail[0] if tail else "", "tests": failures_of(junit), "claims": bad_claims(results)}


def table(runs: list[dict]) -> list[str]:
    """One line per failing test or claim: how many runs it failed in, under which seeds, and why."""
    seen: dict[str, dict] = {}
    for run in runs:
        for kind in ("tests", "claims"):
            for name, why in run[kind].items():
                row = seen.setdefault(name, {"kind": kind[:-1], "seeds": [], "why": why})
                row["seeds"].append(run["seed"])
    if not seen:
        return [f"no failures in {len(runs)} run(s)"]
    width = max(len(n) for n in seen)
    lines = [f"{'failed':>7}  {'what':<{width}}  seeds / first line"]
    for name, row in sorted(seen.items(), key=lambda kv: -len(kv[1]["seeds"])):
        lines.append(f"{len(row['seeds']):>3} / {len(runs):<2} {name:<{width}}  {','.join(map(str, row['seeds']))}")
        lines.append(f"{'':>7}  {'':<{width}}  {row['kind']}: {row['why']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["properties/"], help="what to run (default: properties/)")
    parser.add_argument("--runs", type=int, default=20, help="how many seeds (default: 20)")
    parser.add_argument("--first-seed", type=int, default=1, help="seeds are first-seed, first-seed + 1, ...")
    parser.add_argument("--profile", default="dev", choices=("dev", "thorough"), help="random profile (default: dev)")
    parser.add_argument("--workers", default="auto", help="pytest-xdist workers per run, 0 for none (default: auto)")
    parser.add_argument("--out", default=str(ROOT / "results" / "flakes.json"), help="where to write the runs")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    runs = []
    with tempfile.TemporaryDirectory(prefix="claims-flakes-") as tmp:
        for seed in range(args.first_seed, args.first_seed + args.runs):
            run = one_run(seed, args.profile, args.paths, args.workers, Path(tmp))
            runs.append(run)
            bad = len(run["tests"]) + len(run["claims"])
            print(f"seed {seed:>4}: exit {run['exit']}, {run['seconds']:>6.1f} s, "
                  f"{bad} failure(s)  {run['summary']}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"profile": args.profile, "paths": args.paths, "runs": runs}, indent=1) + "\n",
                   encoding="utf-8")
    print("\n".join(table(runs)))
    failed = [r for r in runs if r["exit"] not in (0,) or r["tests"] or r["claims"]]
    print(f"{len(runs) - len(failed)} of {len(runs)} run(s) clean; runs in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
