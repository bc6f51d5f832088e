"""The ``claims`` command line: check the registry, run the evidence, write and query the report.

Subcommands:

  check          validate claims.yaml, its sources and its evidence
  report         run the evidence (or read saved results), merge asv results, write report/
  list           list claims, filtered by document, topic, kind, verdict or observed status
  show ID        everything about one claim: quote, statement, verdict, status and why,
                 correction, counterexample, evidence outcomes, figures, benchmarks, links

Exit codes: 0 success; 1 claims failed (the evidence disagrees with a recorded verdict or
crashed, or ``check`` found problems in the registry); 2 usage or input error (bad arguments,
an unreadable registry or results file, an unknown claim id).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from claimcheck import report as report_mod
from claimcheck.asv_results import format_row, load_asv_results
from claimcheck.check import check
from claimcheck.references import default_path, load_references
from claimcheck.registry import SCHEMA as REGISTRY_SCHEMA
from claimcheck.registry import GRADES, VERDICTS, RegistryError, load_registry
from claimcheck.sources import load_sources
from claimcheck.status import STATUSES

PROFILES = ("ci", "dev", "thorough")
TOPICS = tuple(REGISTRY_SCHEMA["properties"]["topic"]["enum"])
KINDS = tuple(REGISTRY_SCHEMA["properties"]["kind"]["enum"])
EXIT_OK, EXIT_CLAIMS_FAILED, EXIT_USAGE = 0, 1, 2


class InputError(Exception):
    """An input the command cannot use (exit code 2)."""


def find_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / "claims.yaml").exists() and (folder / "sources" / "sources.yaml").exists():
            return folder
    raise InputError(f"no claims.yaml with sources/ found at or above {start} (use --root)")


def say(message: str) -> None:
    """Progress and diagnostics go to stderr, so stdout stays clean for ``list`` and ``show``."""
    print(f"claims: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# check


def cmd_check(args: argparse.Namespace, root: Path) -> int:
    registry_path = Path(args.registry) if args.registry else root / "claims.yaml"
    problems = check(root, registry_path, Path(args.references) if args.references else None)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"claims check: {len(problems)} problem(s)", file=sys.stderr)
        return EXIT_CLAIMS_FAILED
    registry = load_registry(registry_path)
    print(f"claims check: {len(registry.claims)} claims, no problems")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# report


def cmd_report(args: argparse.Namespace, root: Path) -> int:
    registry = load_registry(root / "claims.yaml")
    results_path = _results_path(args, root)
    code, fresh = EXIT_OK, True
    if not args.from_results:
        code, fresh = _run_evidence(args, root, results_path)
    elif not results_path.exists():
        raise InputError(f"--from-results: no results file at {results_path} (run `claims report` without it first)")
    results = _read_results(results_path, required=False) if fresh else None
    if results is None:
        say(f"no evidence results at {results_path}: decided claims are shown as untested")
    asv = None if args.no_asv else load_asv_results(root, Path(args.asv_results) if args.asv_results else None)
    if asv is not None:
        say(f"asv results: {len(asv.runs)} benchmark result(s) from {len(asv.machines) or 'no'} machine(s) in {asv.results_dir}"
            if asv.available else f"asv results: none in {asv.results_dir}")
        for skipped in asv.skipped:
            say(f"asv results: skipped {skipped}")
    data = report_mod.build(registry, load_sources(root), results, asv, references=load_references(default_path(root)))
    out = Path(args.out) if args.out else root / "report"
    from claimcheck import html

    started = time.time()
    report_mod.write(data, out, html=lambda r: html.render(r, progress=say))
    say(f"wrote {out}/index.html, claims.md, claims.json in {time.time() - started:.1f} s")
    counts = {k: v for k, v in data["counts"]["status"].items() if v}
    print(f"report written to {out}/: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    partial = data["partial"]
    if partial["not_run"]:
        say(f"partial results: {len(partial['not_run'])} piece(s) of evidence did not run "
            f"({len(partial['claims_affected'])} claims); listed in the report")
    if counts.get("mismatch") or counts.get("error"):
        for c in data["claims"]:
            if c["status"] in ("mismatch", "error"):
                say(f"{c['status'].upper()} {c['id']}: {c['detail']}")
        code = EXIT_CLAIMS_FAILED
    return code


def _run_evidence(args: argparse.Namespace, root: Path, results_path: Path) -> tuple[int, bool]:
    """Run the property suite with the plugin writing ``results_path`` (pytest prints progress).

    Returns the exit code it implies and whether the run wrote fresh results.
    """
    env = dict(os.environ)
    if args.profile:
        env["CLAIMS_PROFILE"] = args.profile
    cmd = [sys.executable, "-m", "pytest", "properties/", "--claims-results", str(results_path)]
    if not _plugin_installed():
        cmd += ["-p", "claimcheck.plugin"]  # running from a checkout that is not pip-installed
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    if args.workers != "0":
        cmd += ["-n", args.workers]
    profile = args.profile or env.get("CLAIMS_PROFILE") or ("ci" if env.get("CI") else "dev")
    say(f"running the evidence (profile {profile}): {' '.join(cmd)}")
    before = results_path.stat().st_mtime_ns if results_path.exists() else None
    proc = subprocess.run(cmd, cwd=root, env=env)
    after = results_path.stat().st_mtime_ns if results_path.exists() else None
    if after is None or after == before:
        # no fresh results: never report older ones as if they came from this run
        say(f"the evidence run wrote no results (pytest exit {proc.returncode})")
        return (EXIT_OK if proc.returncode == 5 else EXIT_CLAIMS_FAILED), False
    if proc.returncode not in (0, 1):
        say(f"the evidence run did not complete (pytest exit {proc.returncode}); the report shows what ran")
    return (EXIT_OK if proc.returncode == 0 else EXIT_CLAIMS_FAILED), True


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "claimcheck" for ep in entry_points(group="pytest11"))


def _results_path(args: argparse.Namespace, root: Path) -> Path:
    return Path(args.results) if getattr(args, "results", None) else root / "results" / "claims-results.json"


def _read_results(path: Path, required: bool) -> dict | None:
    if not path.exists():
        if required:
            raise InputError(f"no results file at {path}")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the results file {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise InputError(f"{path} is not a claims results file (no 'claims' list)")
    return data


def _saved_report(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The report built from the registry and the saved results (no evidence run, no plots)."""
    registry = load_registry(root / "claims.yaml")
    results = _read_results(_results_path(args, root), required=False)
    asv = load_asv_results(root)
    return report_mod.build(registry, load_sources(root), results, asv, references=load_references(default_path(root)))


# ---------------------------------------------------------------------------------------------
# list and show


def cmd_list(args: argparse.Namespace, root: Path) -> int:
    data = _saved_report(args, root)
    documents = {c["document"] for c in data["claims"]} | set(data["counts"]["document"])
    for doc in args.document or []:
        if doc not in documents:
            raise InputError(f"unknown document '{doc}' (known: {', '.join(sorted(documents))})")
    picked = [c for c in data["claims"] if all(
        not wanted or c[key] in wanted for key, wanted in (
            ("document", args.document), ("topic", args.topic), ("kind", args.kind),
            ("verdict", args.verdict), ("status", args.status), ("grade", args.grade)))]
    if args.format == "json":
        print(json.dumps(picked, indent=1, ensure_ascii=False))
    elif args.format == "ids":
        for c in picked:
            print(c["id"])
    else:
        width = max((len(c["id"]) for c in picked), default=2)
        for c in picked:
            where = f"{c['document']}:{c['line']}"
            print(f"{c['id']:<{width}}  {where:<20} {c['verdict']:<12} {c['grade'] or '-':<9} {c['status']:<12} "
                  f"{_one_line(c['statement'], 80)}")
        say(f"{len(picked)} of {len(data['claims'])} claims")
    return EXIT_OK


def cmd_show(args: argparse.Namespace, root: Path) -> int:
    data = _saved_report(args, root)
    by_id = {c["id"]: c for c in data["claims"]}
    c = by_id.get(args.id)
    if c is None:
        near = difflib.get_close_matches(args.id, list(by_id), n=5, cutoff=0.5)
        near += [i for i in by_id if args.id in i and i not in near][:5]
        hint = f"; did you mean: {', '.join(near)}" if near else ""
        raise InputError(f"no claim with id '{args.id}'{hint}")
    if args.json:
        print(json.dumps(c, indent=1, ensure_ascii=False))
    else:
        print(render_claim_text(c, by_id, {r["key"]: r for r in data.get("references", [])}))
    return EXIT_OK


def render_claim_text(c: dict, by_id: dict[str, dict], refs: dict[str, dict] | None = None) -> str:
    wrap = lambda text, indent="  ": textwrap.fill(" ".join(str(text).split()), 100, initial_indent=indent,
                                                    subsequent_indent=indent)
    out = [c["id"], "=" * len(c["id"]),
           f"source:    {c['document']}:{c['line']}  (section: {c['section']})",
           f"topic:     {c['topic']}    kind: {c['kind']}",
           f"verdict:   {c['verdict']} (recorded)    status: {c['status']} (observed)"
           + (f"    grade: {c['grade']}" if c.get("grade") else ""),
           "why:", wrap(c["detail"] or "-"),
           "quote:", f"  「{c['quote']}」",
           "statement:", wrap(c["statement"])]
    if c["rests_on_refuted"]:
        out.append("rests on refuted: " + ", ".join(c["rests_on_refuted"]))
    if c["correction"]:
        out += ["correction:", wrap(c["correction"])]
    if c["reason"]:
        out += ["reason:", wrap(c["reason"])]
    for key in c.get("cites", []):
        r = (refs or {}).get(key)
        if r is None:
            out.append(f"cites:     {key} (no record)")
            continue
        who = ", ".join(r["authors"][:3]) + (" et al." if len(r["authors"]) > 3 else "")
        out.append(f"cites:     {key}: {who} ({r['year']}). {r['title']}. {r['venue'] or ''} <{r['url']}>")
    for k in c.get("record_checks", []):
        out.append(f"  {'ok ' if k['match'] else 'DIFF'} {k['field']}: document {k['document']!r}, record {k['record']!r}")
    for w in c.get("witness", []):
        out.append(f"witness:   {w['role']} {w['source']}:{w['line']} 「{w['quote']}」")
    if c["counterexample"]:
        out += ["counterexample:", textwrap.indent(report_mod.show_counterexample(c["counterexample"]), "  ")]
    if c["outcomes"] or c["not_run"]:
        out.append("evidence:")
    for o in c["outcomes"]:
        examples = f", {o['examples']} examples" if o.get("examples") is not None else ""
        seconds = f", {o['seconds']} s" if o.get("seconds") is not None else ""
        out.append(f"  {o['outcome']:<8} {o['kind'] or '':<10} {o['nodeid']}{examples}{seconds}")
        if o.get("message") and o["outcome"] != "passed":
            out.append(textwrap.indent(o["message"].strip()[-1500:], "      | "))
        for f in o.get("figures") or []:
            out.append(f"      figure {f['name']} = {report_mod._short_json(f['value'], 160)}")
    for ev in c["not_run"]:
        out.append(f"  {'not run':<8} {'':<10} {ev}")
    for b in c["benchmarks"]:
        if not b["runs"]:
            out.append(f"benchmark {b['name']}: no asv results")
        for run in b["runs"]:
            out.append(f"benchmark {b['name']} on {run['machine']} ({run['env']}) at {run['commit'][:10]}:")
            for row in run["rows"][:40]:
                params = ", ".join(f"{n}={v}" for n, v in zip(run["param_names"], row["params"])) or "-"
                out.append(f"  {params}: {format_row(row, run['unit'])}")
    for label, ids in (("uses", c["uses"]), ("used by", c["used_by"]), ("contradicts", c["contradicts"]),
                       ("same as", [c["same_as"]] if c["same_as"] else [])):
        if ids:
            shown = [f"{i} [{by_id[i]['status']}]" if i in by_id else f"{i} [unknown]" for i in ids]
            out.append(f"{label}: " + ", ".join(shown))
    if c["snippet"]:
        out.append(f"code: {c['document']} lines {c['snippet']['start']}-{c['snippet']['end']}")
    if c["notes"]:
        out += ["notes:", wrap(c["notes"])]
    return "\n".join(out)


def _one_line(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ---------------------------------------------------------------------------------------------
# parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claims", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="project folder (default: found from the current directory)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,report,list,show}")

    p = sub.add_parser("check", help="validate claims.yaml, its sources and its evidence",
                       description="Validate claims.yaml, its sources and its evidence. Exit 1 when problems are found.")
    p.add_argument("--registry", help="registry file (default: <root>/claims.yaml)")
    p.add_argument("--references", help="references of record (default: <root>/references.yaml)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("report", help="run the evidence (or read saved results) and write report/",
                       description="Run the property suite (or read saved results), merge asv results when "
                                   "present, and write report/index.html, claims.md and claims.json. "
                                   "Exit 1 when a claim's evidence disagrees with its verdict or crashed.")
    p.add_argument("--profile", choices=PROFILES, help="Hypothesis profile for the evidence run "
                   "(ci: 50 derandomized examples, dev: 100, thorough: 1000; default: ci when CI is set, else dev)")
    p.add_argument("--from-results", action="store_true", help="do not run the evidence; read saved results")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--out", help="output folder (default: <root>/report)")
    p.add_argument("--workers", default="auto", help="pytest-xdist workers, or 0 for none (default: auto)")
    p.add_argument("--asv-results", help="asv results folder (default: results_dir of asv.conf.json, .asv/results)")
    p.add_argument("--no-asv", action="store_true", help="do not read asv results")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("list", help="list claims, filtered", description="List claims with their verdict and "
                       "observed status (from the saved results). Filters of one kind may be repeated (OR); "
                       "filters of different kinds combine (AND).")
    p.add_argument("--document", "-d", action="append", help="document key (foundations, linear-algebra, ...)")
    p.add_argument("--topic", "-t", action="append", choices=TOPICS, metavar="TOPIC", help="topic: " + ", ".join(TOPICS))
    p.add_argument("--kind", "-k", action="append", choices=KINDS, metavar="KIND", help="kind: " + ", ".join(KINDS))
    p.add_argument("--verdict", "-v", action="append", choices=VERDICTS, help="recorded verdict")
    p.add_argument("--status", "-s", action="append", choices=STATUSES, help="observed status")
    p.add_argument("--grade", "-g", action="append", choices=GRADES, help="evidence grade of a decided verdict")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--format", choices=("table", "ids", "json"), default="table", help="output format (default: table)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="everything about one claim", description="Everything about one claim: "
                       "quote, statement, verdict, observed status and why, correction, counterexample, "
                       "evidence outcomes, figures, benchmarks and related claims.")
    p.add_argument("id", help="claim id, e.g. softmax.row-stochastic")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--json", action="store_true", help="print the claim's report entry as JSON")
    p.set_defaults(func=cmd_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on a usage error, 0 on --help
    try:
        root = Path(args.root).resolve() if args.root else find_root(Path.cwd().resolve())
        if not (root / "claims.yaml").exists():
            raise InputError(f"no claims.yaml in {root}")
        return args.func(args, root)
    except RegistryError as exc:
        print(f"claims: the registry cannot be loaded:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except (InputError, FileNotFoundError) as exc:
        print(f"claims: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `claims list | head`
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
