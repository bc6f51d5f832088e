"""The ``claims`` command line.

Exit codes: 0 success, 1 claims failed (a mismatch or an error in the evidence, or registry
problems found by ``check``), 2 usage or input error.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from claimcheck import report as report_mod
from claimcheck.check import check
from claimcheck.registry import RegistryError, load_registry
from claimcheck.sources import load_sources

PROFILES = ("ci", "dev", "thorough")


def find_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / "claims.yaml").exists() and (folder / "sources" / "sources.yaml").exists():
            return folder
    raise FileNotFoundError(f"no claims.yaml with sources/ found at or above {start}")


def cmd_check(args: argparse.Namespace, root: Path) -> int:
    problems = check(root, Path(args.registry) if args.registry else None)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"claims check: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    registry = load_registry(Path(args.registry) if args.registry else root / "claims.yaml")
    print(f"claims check: {len(registry.claims)} claims, no problems")
    return 0


def cmd_report(args: argparse.Namespace, root: Path) -> int:
    registry = load_registry(root / "claims.yaml")
    results_path = Path(args.results) if args.results else root / "results" / "claims-results.json"
    code = 0
    if not args.from_results:
        env = dict(os.environ)
        if args.profile:
            env["CLAIMS_PROFILE"] = args.profile
        cmd = [sys.executable, "-m", "pytest", "-n", str(args.workers), "properties/", "-q",
               "--claims-results", str(results_path)]
        print("running the evidence:", " ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, cwd=root, env=env)
        if proc.returncode not in (0, 1):
            print(f"claims report: the evidence run failed to complete (pytest exit {proc.returncode})", file=sys.stderr)
            if not results_path.exists():
                return 2
        code = 1 if proc.returncode else 0
    results = json.loads(results_path.read_text(encoding="utf-8")) if results_path.exists() else None
    if results is None:
        print(f"claims report: no results at {results_path}; decided claims are shown as untested", file=sys.stderr)
    data = report_mod.build(registry, load_sources(root), results)
    out = Path(args.out) if args.out else root / "report"
    report_mod.write(data, out)
    counts = {k: v for k, v in data["counts"]["status"].items() if v}
    print(f"report written to {out}/: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if counts.get("mismatch") or counts.get("error"):
        code = 1
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claims", description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="project folder (default: found from the current directory)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="validate claims.yaml, its sources and its evidence")
    p.add_argument("--registry", help="registry file (default: <root>/claims.yaml)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("report", help="run the evidence (or read saved results) and write report/")
    p.add_argument("--profile", choices=PROFILES, help="Hypothesis profile for the evidence run")
    p.add_argument("--from-results", action="store_true", help="do not run the evidence; read saved results")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--out", help="output folder (default: <root>/report)")
    p.add_argument("--workers", default="auto", help="pytest-xdist workers (default: auto)")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        root = Path(args.root).resolve() if args.root else find_root(Path.cwd().resolve())
        return args.func(args, root)
    except (FileNotFoundError, RegistryError) as exc:
        print(f"claims: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
