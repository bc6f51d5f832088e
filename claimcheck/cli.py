"""The ``claims`` command line: check the registry, run the evidence, write and query the report.

Subcommands:

  check          validate claims.yaml, its sources and its evidence
  report         run the evidence (or read saved results), merge asv results, write report/
  findings       what the documents get wrong, worst first
  list           list claims, filtered by document, topic, kind, verdict or observed status
  show ID        everything about one claim: quote, statement, verdict, status and why,
                 correction, counterexample, evidence outcomes, figures, benchmarks, links
  kernel FN      run the backend matrix on an attention function (module:function) or a
                 registry backend, and print a verdict per case

Exit codes, one rule for every subcommand: 0 success (for the queries list, show and findings:
they answered, whatever the claims' status); 1 the claims or the kernel failed (a mismatch or an
error in the evidence, problems ``check`` found in the registry, a ``kernel`` case that failed);
2 usage or input error (bad arguments, a file that cannot be read or parsed at all, an unknown
claim id or document, a function that cannot be imported); 130 ``report`` stopped with Ctrl-C
(the report of what ran is written all the same).
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
from claimcheck import results as results_file
from claimcheck.asv_results import format_row, load_asv_results
from claimcheck.collect import EVIDENCE_FOLDERS
from claimcheck.check import audit
from claimcheck.references import default_path, load_references
from claimcheck.registry import SCHEMA as REGISTRY_SCHEMA
from claimcheck.registry import GRADES, VERDICTS, RegistryError, load_registry
from claimcheck.runrecord import partial_note
from claimcheck.sources import load_sources
from claimcheck.status import STATUSES
from claimcheck.terminal import GAP, Column, Parser, fit, table, terminal_width

PROFILES = ("ci", "dev", "thorough")
TOPICS = tuple(REGISTRY_SCHEMA["properties"]["topic"]["enum"])
KINDS = tuple(REGISTRY_SCHEMA["properties"]["kind"]["enum"])
EXIT_OK, EXIT_CLAIMS_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's 128 + SIGINT; the report of what ran is written all the same


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
    references_path = Path(args.references) if args.references else default_path(root)
    found = audit(root, registry_path, references_path)
    for p in found.problems:
        print(p, file=sys.stderr)
    if found.unreadable:  # a registry or references file that cannot be read or parsed is an input error
        print("claims check: cannot read the input", file=sys.stderr)
        return EXIT_USAGE
    if found.problems:
        print(f"claims check: {len(found.problems)} problem(s)", file=sys.stderr)
        return EXIT_CLAIMS_FAILED
    print(f"claims check: {found.claims} claims, no problems")
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
    note = partial_note(data["run"] or {})
    if note:
        say(f"{note} ({len(partial['claims_affected'])} claims affected; listed in the report)")
    elif partial["not_run"]:
        say(f"PARTIAL: {len(partial['not_run'])} evidence test(s) did not run "
            f"({len(partial['claims_affected'])} claims affected); listed in the report")
    if counts.get("mismatch") or counts.get("error"):
        for c in data["claims"]:
            if c["status"] in ("mismatch", "error"):
                say(f"{c['status'].upper()} {c['id']}: {c['detail']}")
        code = EXIT_CLAIMS_FAILED
    return code


def _run_evidence(args: argparse.Namespace, root: Path, results_path: Path) -> tuple[int, bool]:
    """Run the evidence with the plugin writing ``results_path``: pytest's own output goes to
    ``last-run.log`` beside it, the terminal gets a progress line (phase, counts, time left), then the
    run's summary. Ctrl-C stops the run, which still writes what it has (marked interrupted).

    Returns the exit code it implies and whether the run wrote fresh results.
    """
    env = dict(os.environ)
    if args.profile:
        env["CLAIMS_PROFILE"] = args.profile
    if args.experiments:
        env["CLAIMS_EXPERIMENTS"] = "rerun"  # run every experiment again, replacing its stored artefact
    folders = [f"{f}/" for f in EVIDENCE_FOLDERS if (root / f).is_dir()]  # properties/, then experiments/
    cmd = [sys.executable, "-m", "pytest", *folders, "--claims-results", str(results_path), "--claims-progress",
           "-rfE", "--color=no"]
    if not _plugin_installed():
        cmd += ["-p", "claimcheck.plugin"]  # running from a checkout that is not pip-installed
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    if args.workers != "0":
        cmd += ["-n", args.workers, "--dist", "loadgroup"]  # one worker per experiments/ file (its xdist group)
    profile = args.profile or env.get("CLAIMS_PROFILE") or ("ci" if env.get("CI") else "dev")
    log = results_path.parent / "last-run.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"running the evidence (profile {profile}{', experiments run again' if args.experiments else ''}); "
        f"pytest's output: {log}")
    before = results_path.stat().st_mtime_ns if results_path.exists() else None
    with open(log, "w", encoding="utf-8") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        terminal = os.dup(sys.stderr.fileno())  # the progress line's way out, past the log
        env["CLAIMS_PROGRESS_FD"] = str(terminal)
        try:
            proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, pass_fds=(terminal,))
        finally:
            os.close(terminal)
        try:
            returncode = proc.wait()
        except KeyboardInterrupt:  # the run got the same SIGINT: let it write what it has
            say("interrupted: waiting for the evidence run to write its results (Ctrl-C again to kill it)")
            try:
                returncode = proc.wait()
            except KeyboardInterrupt:
                proc.kill()
                returncode = proc.wait()
    for line in _run_summary(log.read_text(encoding="utf-8", errors="replace")):
        print(line)
    after = results_path.stat().st_mtime_ns if results_path.exists() else None
    if after is None or after == before:
        # no fresh results: never report older ones as if they came from this run
        say(f"the evidence run wrote no results (pytest exit {returncode}); see {log}")
        return (EXIT_OK if returncode == 5 else EXIT_CLAIMS_FAILED), False
    if returncode == 2:
        say("the evidence run was interrupted; the report shows what ran, marked interrupted")
        return EXIT_INTERRUPTED, True
    if returncode not in (0, 1):
        say(f"the evidence run did not complete (pytest exit {returncode}); the report shows what ran; see {log}")
    return (EXIT_OK if returncode == 0 else EXIT_CLAIMS_FAILED), True


RUN_SUMMARY_LINES = 30  # failing tests listed from the log; the rest are in the log


def _run_summary(log: str) -> list[str]:
    """What the terminal shows of pytest's log: the failing tests, the claims section and pytest's last line."""
    lines = log.rstrip().splitlines()
    failing = [l for l in lines if l.startswith(("FAILED ", "ERROR "))]
    shown = failing[:RUN_SUMMARY_LINES] + ([f"... and {len(failing) - RUN_SUMMARY_LINES} more"]
                                           if len(failing) > RUN_SUMMARY_LINES else [])
    claims = []
    for i, line in enumerate(lines):
        if line.strip("= ") == "claims" and line.startswith("="):
            for later in lines[i + 1:]:
                if later.startswith("="):
                    break
                claims.append(later)
            break
    return shown + claims + lines[-1:]


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "claimcheck" for ep in entry_points(group="pytest11"))


def _results_path(args: argparse.Namespace, root: Path) -> Path:
    return Path(args.results) if getattr(args, "results", None) else root / "results" / "claims-results.json"


def _read_results(path: Path, required: bool) -> dict | None:
    """The saved results, validated (claimcheck/results.py); an unusable file is an input error naming its rows."""
    try:
        data = results_file.read(path)
    except results_file.UnreadableResults as exc:
        raise InputError(f"cannot use the results file {exc}") from exc
    if data is None and required:
        raise InputError(f"no results file at {path}")
    return data


def _saved_report(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The report built from the registry and the saved results (no evidence run, no plots)."""
    registry = load_registry(root / "claims.yaml")
    results = _read_results(_results_path(args, root), required=False)
    asv = load_asv_results(root)
    return report_mod.build(registry, load_sources(root), results, asv, references=load_references(default_path(root)),
                            backends=False)


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
        if picked:  # the statement where the terminal leaves room for it, ids cut last
            print("\n".join(table([Column("claim", [c["id"] for c in picked], cut=ID_CUT),
                                   Column("where", [_where(c) for c in picked]),
                                   Column("verdict", [c["verdict"] for c in picked]),
                                   Column("grade", [c["grade"] or "-" for c in picked]),
                                   Column("status", [c["status"] for c in picked]),
                                   Column("statement", [c["statement"] for c in picked], cut=TEXT_CUT,
                                          optional=True)])))
        say(f"{len(picked)} of {len(data['claims'])} claims")
    return EXIT_OK


def cmd_findings(args: argparse.Namespace, root: Path) -> int:
    found = [f for f in _saved_report(args, root)["findings"]
             if (not args.verdict or f["verdict"] in args.verdict) and (not args.kind or f["kind"] in args.kind)]
    found = found[:args.top] if args.top is not None else found
    if args.format == "json":
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return EXIT_OK
    if found:
        print("\n".join(f["id"] for f in found) if args.format == "ids" else "\n".join(_findings_table(found)))
    say(f"{len(found)} finding(s)")
    return EXIT_OK


# the fewest columns a table's cells are cut to when the terminal is narrow
TEXT_CUT, OFF_CUT, ID_CUT = 24, 12, 24


def _findings_table(found: list[dict]) -> list[str]:
    """A line per finding (rank, verdict, where, claim, how far off) under a header line, each followed
    by what is wrong on a line of its own, indented under the verdict and cut to the terminal."""
    lines = table([Column("#", [str(f["rank"]) for f in found], right=True),
                   Column("verdict", [f["verdict"] for f in found]),
                   Column("where", [_where(f) for f in found]),
                   Column("claim", [f["id"] for f in found], cut=ID_CUT),
                   Column("off", [f.get("off") or "" for f in found], cut=OFF_CUT)])
    indent = " " * (max(len(str(f["rank"])) for f in found) + len(GAP))
    summaries = [indent + fit(f["summary"], terminal_width() - len(indent)) for f in found]
    return [lines[0], *(line for pair in zip(lines[1:], summaries) for line in pair)]


def _where(row: dict) -> str:
    return f"{row['document']}:{row['line']}"


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
        print(render_claim_text(c, by_id, {r["key"]: r for r in data.get("references", [])}, full=args.full))
    return EXIT_OK


SHOW_LINES = 80  # the most lines `claims show` prints for a claim by default (--full: everything)
SHOW_CASES = 4  # parametrized cases of one test listed one by one; beyond, the passing ones share a line


def render_claim_text(c: dict, by_id: dict[str, dict], refs: dict[str, dict] | None = None,
                      full: bool = False) -> str:
    """Everything about one claim as text. By default at most ``SHOW_LINES`` lines: the passing cases of
    a parametrized test summarised in one line, a family of many figures in its quantiles and worst
    case, output and counterexamples cut to their last lines; ``full`` prints every line of all of it."""
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
        shown = report_mod.show_counterexample(c["counterexample"]).splitlines()
        if not full and len(shown) > 16:
            shown = shown[:15] + [f"... {len(shown) - 15} more lines (--full)"]
        out += ["counterexample:", textwrap.indent("\n".join(shown), "  ")]
    if c["outcomes"] or c["not_run"]:
        out.append("evidence:")
    out += _outcome_lines(c["outcomes"], full)
    for ev in c["not_run"]:
        out.append(f"  {'not run':<8} {'':<10} {ev}")
    for b in c["benchmarks"]:
        if not b["runs"]:
            out.append(f"benchmark {b['name']}: no asv results (fill with: {b.get('fill', '')})")
        for run in b["runs"]:
            out.append(f"benchmark {b['name']} on {run['machine']} ({run['env']}) at {run['commit'][:10]}:")
            for row in run["rows"][:None if full else 8]:
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
    if not full and len(out) > SHOW_LINES:
        out = out[:SHOW_LINES - 1] + [f"... {len(out) - SHOW_LINES + 1} more lines: claims show --full {c['id']}"]
    return "\n".join(out)


def _outcome_lines(outcomes: list[dict], full: bool) -> list[str]:
    """The evidence lines of ``claims show``: each outcome, its output and its figures (see render_claim_text)."""
    cases: dict[str, list[dict]] = {}
    for o in outcomes:
        cases.setdefault(o["nodeid"].split("[", 1)[0], []).append(o)
    out = []
    for question, group in cases.items():
        buckets: dict[str, list[dict]] = {}  # passing cases together, skipped ones together (--full: each)
        if not full and len(group) > SHOW_CASES:
            for o in group:
                if o["outcome"] in ("passed", "skipped"):
                    buckets.setdefault(o["outcome"], []).append(o)
        buckets = {k: v for k, v in buckets.items() if len(v) > 1}
        shared = {id(o) for v in buckets.values() for o in v}
        for outcome, bucket in buckets.items():
            examples = sum(o.get("examples") or 0 for o in bucket)
            seconds = sum(o.get("seconds") or 0 for o in bucket)
            reasons = [(o.get("message") or "").strip() for o in bucket if outcome == "skipped"]
            why = f": {_first_reason(reasons, 80)}" if reasons else ""
            out.append(f"  {outcome:<8} {bucket[0]['kind'] or '':<10} {question} x {len(bucket)} cases, "
                       f"{examples} examples, {seconds:.3g} s{why}")
        for o in group:
            if id(o) in shared:
                continue
            examples = f", {o['examples']} examples" if o.get("examples") is not None else ""
            seconds = f", {o['seconds']} s" if o.get("seconds") is not None else ""
            out.append(f"  {o['outcome']:<8} {o['kind'] or '':<10} {o['nodeid']}{examples}{seconds}")
            if o.get("message") and o["outcome"] != "passed":
                lines = o["message"].strip()[-1500:].splitlines()
                out.append(textwrap.indent("\n".join(lines if full else lines[-6:]), "      | "))
        figures = [f for o in group for f in o.get("figures") or []]
        families: dict[str, list[dict]] = {}
        for f in figures:
            families.setdefault(str(f["name"]).split("[", 1)[0], []).append(f)
        for family, figs in families.items():
            if full or len(figs) <= SHOW_CASES:
                out += [f"      figure {f['name']} = {report_mod._short_json(f['value'], 160)}" for f in figs]
                continue
            values = sorted(float(x) for f in figs for x in (f["value"] if isinstance(f["value"], list) else [f["value"]])
                            if isinstance(x, (int, float)) and not isinstance(x, bool))
            worst = max(figs, key=lambda f: max((x for x in (f["value"] if isinstance(f["value"], list) else [f["value"]])
                                                 if isinstance(x, (int, float)) and not isinstance(x, bool)),
                                                default=float("-inf")))
            summary = (f"{len(values)} values, min {values[0]:.4g}, median {values[len(values) // 2]:.4g}, "
                       f"max {values[-1]:.4g}; worst {worst['name']}" if values else "not numeric")
            out.append(f"      figure {family}[...] x {len(figs)}: {summary} (--full lists them)")
    return out


def _first_reason(reasons: list[str], width: int | None = None) -> str:
    """The first of ``reasons`` (on one line of ``width`` when given), and how many others there are."""
    distinct = list(dict.fromkeys(reasons))
    first = _one_line(distinct[0], width) if width else distinct[0]
    return first + (f" (and {len(distinct) - 1} other reasons)" if len(distinct) > 1 else "")


def _one_line(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ---------------------------------------------------------------------------------------------
# kernel


def cmd_kernel(args: argparse.Namespace, root: Path) -> int:
    import torch

    if args.device == "cpu" or not torch.cuda.is_available():
        # before anything imports triton: CPU tensors need Triton's interpreter (on a GPU machine too)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from claimcheck import kernel

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # `claims kernel mypkg.attn:fn` from the user's folder
    try:
        dtypes = [kernel.DTYPES[d] for d in args.dtype] if args.dtype else None
        masks = None
        if args.causal is not None or args.key_padding is not None or args.bias is not None:
            masks = {f"causal-{a}" for a in (args.causal or []) if a != "none"}
            masks |= {"key-padding"} if args.key_padding is not False else set()
            masks |= {"additive"} if args.bias is not False else set()
            if args.causal is None:
                masks |= {"causal-top-left", "causal-bottom-right"}
        lo_hi = None
        if args.head_dims:
            lo, sep, hi = args.head_dims.partition("-")
            if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) > int(hi):
                raise InputError(f"--head-dims {args.head_dims!r}: expected LO-HI, e.g. 16-128")
            lo_hi = (int(lo), int(hi))
        if args.head_dim_multiple is not None and args.head_dim_multiple < 1:
            raise InputError(f"--head-dim-multiple {args.head_dim_multiple}: expected a positive integer")
        overrides = dict(dtypes=dtypes and [kernel.dtype_name(d) for d in dtypes], masks=masks, gqa=args.gqa,
                         backward=args.backward, head_dims=lo_hi, equal_head_dims=args.equal_head_dims,
                         fully_masked=args.fully_masked, head_dim_multiple=args.head_dim_multiple, scale=args.scale,
                         deterministic=args.deterministic, features=args.feature, **_convention_options(args))
        device = args.device
        if ":" not in args.function:  # a registry backend: --dtype only narrows the run
            backend = kernel.resolve(args.function, **{**overrides, "dtypes": None})
            device = device or "cpu"
        else:
            backend = kernel.resolve(args.function, device, **overrides)
            device = device or next(iter(backend.devices))
        problem = kernel.ProblemSpec.parse(args.problem, args.mask[0] if args.mask else "none") if args.problem else None
    except (ValueError, ImportError) as exc:
        raise InputError(str(exc)) from exc
    if device not in backend.devices:
        raise InputError(f"{backend.name} does not declare {device} (declared: {', '.join(backend.devices)})")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: this machine has no CUDA device")
    if args.problem and (not args.mask or len(args.mask) != 1 or not args.dtype or len(args.dtype) != 1):
        raise InputError("--problem needs exactly one --mask and one --dtype")
    for kind in args.mask or []:
        kinds = (*kernel.CASE_KINDS, kernel.DROPOUT, kernel.FULLY_MASKED)
        if kind not in kinds:
            raise InputError(f"--mask {kind!r}: expected one of {', '.join(kinds)}")
    if args.problem and args.mask and args.mask[0] in (*kernel.FEATURE_KINDS, kernel.DROPOUT):
        raise InputError(f"--problem: the {args.mask[0]} case has no problem syntax; re-run the case (its problems "
                         "are seeded: --seed)")
    print(f"claims kernel: {args.function} on {device}: {_capabilities(backend, device)}")
    if problem is None:
        counts = kernel.tier_counts(backend, device, dtypes, args.mask, args.examples, args.tier)
        print(f"claims kernel: tier {args.tier}: {counts['cases']} cases, {counts['fixed']} fixed and up to "
              f"{counts['drawn']} drawn problems" + (f", {counts['dropout']} dropout cases" if counts["dropout"] else "")
              + (", the fully masked rows" if counts["fully_masked"] else ""))
        for label, why in kernel.undeclared_problems(backend, args.tier):
            print(f"claims kernel: not in this kernel's matrix: {label} ({why})")
    if problem is not None:
        results = [kernel.run_problem(backend, kernel.Case(dtypes[0], args.mask[0], device), problem)]
        skipped = []
        _print_case(results[0], args.function, backend)
    else:
        results, skipped = kernel.run_matrix(backend, device, dtypes, args.mask, examples=args.examples,
                                             base_seed=args.seed, shrink=not args.no_shrink,
                                             on_result=lambda r: _print_case(r, args.function, backend),
                                             tier=args.tier)
    for case, reason in skipped:
        print(f"skip  {case.name:<32} {reason}")
    failed = [r for r in results if not r.ok]
    declined = [r for r in results if r.status == "declined"]
    passed = len(results) - len(failed) - len(declined)
    print(f"claims kernel: {passed} of {len(results)} cases passed"
          + (f", {len(failed)} failed" if failed else "")
          + (f", {len(declined)} declined by the kernel's library" if declined else "")
          + (f", {len(skipped)} not declared or not runnable here" if skipped else ""))
    if not backend.scale:
        print("claims kernel: the kernel declares no scale argument: only its default 1/sqrt(d_k) was checked")
    if args.bench:
        if failed or not results:
            print("claims kernel: --bench: speed not measured: a kernel that fails the matrix has no speed worth "
                  "reporting" if failed else "claims kernel: --bench: speed not measured: no case ran")
        else:
            _bench(backend, device, dtypes)
    return EXIT_CLAIMS_FAILED if failed else EXIT_OK


BENCH_SHAPE = (1, 8, 1024, 64)  # B, H, n, d: one mid-size prefill shape, the same for every kernel


def _bench(backend, device: str, dtypes) -> None:
    """Time the kernel that passed against torch's SDPA (its default choice of kernel) on one shape, per
    declared dtype: the median of a few calls after a warm-up (compiled kernels compile there)."""
    import statistics
    import time

    import torch

    from claimcheck import kernel

    def median_seconds(call) -> float:
        call()
        times = []
        for _ in range(5):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            call()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    b, h, n, d = BENCH_SHAPE
    for dtype in [t for t in (dtypes or sorted(backend.devices[device].dtypes, key=str))
                  if t in backend.devices[device].dtypes]:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn((b, h, n, d), generator=gen).to(device, dtype) for _ in range(3))
        with torch.no_grad():
            ours = median_seconds(lambda: backend.fn(q, k, v, None, None))
            sdpa = median_seconds(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
        print(f"claims kernel: --bench {kernel.dtype_name(dtype)} B={b} H={h} n={n} d={d}: {ours * 1e3:.3g} ms, "
              f"torch SDPA {sdpa * 1e3:.3g} ms ({sdpa / ours:.2g}x its speed; wall clock on this machine, "
              "the median of 5 calls)")


def _capabilities(backend, device: str) -> str:
    from claimcheck import conventions

    s = backend.devices[device]
    dtypes = ", ".join(sorted(str(d).removeprefix("torch.") for d in s.dtypes))
    lo, hi = backend.head_dims
    dims = f"head dims {lo}..{hi}" + (f" in steps of {backend.head_dim_multiple}" if backend.head_dim_multiple > 1 else "")
    return (f"dtypes {dtypes}; masks {', '.join(sorted(s.masks)) or 'none'}; GQA {'yes' if backend.gqa else 'no'}; "
            f"backward {'yes' if s.backward else 'no'}"
            + (f" ({backend.backward_note})" if getattr(backend, "backward_note", "") else "") + f"; {dims}{' (d_v = d_k)' if backend.equal_head_dims else ''}; "
            f"scale {'yes' if backend.scale else 'no (only 1/sqrt(d_k) checked)'}; "
            f"fully masked rows {backend.fully_masked or 'not declared'}; "
            f"deterministic {'yes (checked)' if backend.deterministic else 'not declared (not checked)'}"
            + ("; the kernel's library may decline problems (listed)" if backend.declines else "")
            + f"; {conventions.of(backend.fn).describe()}")


def _convention_options(args: argparse.Namespace) -> dict:
    """The calling conventions given as options (None: not given), for :mod:`claimcheck.conventions`."""
    return dict(layout=args.layout, out_layout=args.out_layout, padding=args.padding, output=args.output_index,
                strided=args.strided)


def _print_case(result, spec: str, backend) -> None:
    from claimcheck import kernel

    ratio, where = result.worst
    verdict = {"pass": "ok", "fail": "FAIL", "error": "ERROR", "declined": "skip"}[result.status]
    line = f"{verdict:<5} {result.case.name:<32} {result.problems:>3} problems"
    if result.declined:
        line += f" ({len(result.declined)} declined)"
    if result.case.mask == kernel.DROPOUT:
        from claimcheck.kernel_dropout import summary

        line += "  " + summary(result.dropout)
    elif result.case.mask != kernel.FULLY_MASKED:
        line += f"  worst error ratio {ratio:.3g} ({where})"
    else:
        line += "  " + ", ".join(f"{r.mask}: {r.detail or r.seen}" for r in result.masked_rows)
        named = [r for r in result.masked_rows if not r.judged and r.seen in ("nan", "zero", "other")]
        if named and result.ok:
            line += (" (named, not judged: " + ("declared any" if backend.fully_masked == "any" else
                                                "no convention declared; declare nan or zero to check it") + ")")
    print(line, flush=True)
    if result.declined:  # the kernel library's refusals: listed, never silent
        print(f"      declined: {_first_reason([reason for _, reason in result.declined])}")
    if result.ok:
        return
    print(f"      {result.message}")
    if result.diagnosis:
        print(f"      the output matches: {result.diagnosis}")
    if result.failed_checks:
        print(f"      failing checks: {', '.join(dict.fromkeys(result.failed_checks))}")
    p = result.failing
    if p is not None and p.spec is not None:
        regime = f"max logit {p.spec.max_logit:g}" if p.spec.max_logit else f"logit scale {p.spec.logit_scale:g}"
        regime += f", scale {p.spec.scale:g}" if p.spec.scale is not None else ""
        regime += f", causal {p.spec.causal} with the padding" if p.spec.causal else ""
        print(f"      problem ({p.label}{', shrunk' if p.label == 'drawn' else ''}): {p.shape} seed={p.seed} {regime}")
    elif p is not None:  # a feature's problem (packed sequences, a KV cache): its shape says it whole
        print(f"      problem ({p.label}{', shrunk' if p.label == 'drawn' else ''}): {p.shape} seed={p.seed}")
    print(f"      repro: {kernel.repro(spec, backend, result.case, p)}", flush=True)


# ---------------------------------------------------------------------------------------------
# parser

KERNEL_HELP = """\
Run the backend matrix of properties/test_backends.py on FUNCTION, with the contract
fn(q, k, v, scale=None, mask=None) -> out of impl.attention.attention (q (B, H_q, n_q, d_k),
k (B, H_kv, n_k, d_k), v (B, H_kv, n_k, d_v), mask an impl.attention.Mask): every declared dtype x
mask kind, each with fixed problems and drawn ones, under the error-ratio rule (error <= 2 x the naive
same-precision error + floor; 3 x for gradients), then fully masked rows (nan or zero when nothing is
declared; any other value, such as the mean of V, fails). The tier sets the fixed problems: smoke (4
and 8 query heads over 2 key/value heads, odd lengths, n_q < n_k and n_q > n_k, scores up to 110 and
all below -110, the caller's scale 0.3, key padding, a sink, a softcap and ALiBi under each causal
alignment), ci (the default: smoke plus 71 keys across a 64-wide tile, one query against 130 keys,
1025 keys, one key, a batch of 3, head dims 128 and 256), full (ci plus lengths 63 to 1025 on both
sides of the 64- and 128-wide tiles, head dims 32 to 256, 59 and 111). The counts of the run are printed before it starts.

Capabilities come from the options, else from fn.claims_capabilities (a dict: devices, dtypes, masks,
gqa, backward, head_dims, equal_head_dims, fully_masked, head_dim_multiple, declines, scale, and the
calling conventions layout, out_layout, padding, output, strided), else the defaults. The conventions
are applied around FUNCTION (q, k, v transposed, the key padding inverted, element N of a returned
tuple taken); an undeclared one is the contract's, and the capability line says so. Problems the kernel's own library declines (declines(q, k, v, mask, backward) -> reason;
SDPA's CUDA kernels: torch's eligibility checks) are listed, not checked; a case it declines whole is
a skip.

Exit 1 when a case fails."""

KERNEL_EXAMPLE = """\
example:
  claims kernel mypkg.attn:my_attention --device cuda --dtype bfloat16 --causal bottom-right \\
      --no-key-padding --no-bias --backward --head-dims 64-128"""



def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="claims", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n")[-1])
    parser.add_argument("--root", help="project folder (default: found from the current directory)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,report,findings,list,show,kernel}")

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
    p.add_argument("--experiments", action="store_true", help="run every experiment again, replacing its stored "
                   "artefact in experiments/artefacts/ (default: reuse an artefact whose code and configuration match)")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--out", help="output folder (default: <root>/report)")
    p.add_argument("--workers", default="auto", help="pytest-xdist workers, or 0 for none (default: auto)")
    p.add_argument("--asv-results", help="asv results folder (default: results_dir of asv.conf.json, .asv/results)")
    p.add_argument("--no-asv", action="store_true", help="do not read asv results")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("findings", help="what the documents get wrong, worst first",
                       description="The fails and partly claims, ranked (code that does not run, wrong numbers by "
                                   "how far they are off, misattributions, missing conditions, bibliographic details, "
                                   "wording; rule in claimcheck/findings.py).")
    p.add_argument("--top", type=int, default=None, metavar="N", help="only the N worst")
    p.add_argument("--verdict", "-v", action="append", choices=("fails", "partly"), help="only this verdict")
    p.add_argument("--kind", action="append", metavar="KIND", help="only this kind of finding (repeat)")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--format", choices=("table", "ids", "json"), default="table", help="output format (default: table)")
    p.set_defaults(func=cmd_findings)

    p = sub.add_parser("list", help="list claims, filtered", description="List claims with their verdict and "
                       "observed status (from the saved results). Filters of one kind may be repeated (OR); "
                       "filters of different kinds combine (AND).")
    p.add_argument("--document", "-d", action="append", help="document key (foundations, linear-algebra, ...)")
    p.add_argument("--topic", "-t", action="append", choices=TOPICS, metavar="TOPIC", help="topic: " + ", ".join(TOPICS))
    p.add_argument("--kind", "-k", action="append", choices=KINDS, metavar="KIND", help="kind: " + ", ".join(KINDS))
    p.add_argument("--verdict", "-v", action="append", choices=VERDICTS, metavar="VERDICT",
                   help="recorded verdict: " + ", ".join(VERDICTS))
    p.add_argument("--status", "-s", action="append", choices=STATUSES, metavar="STATUS",
                   help="observed status: " + ", ".join(STATUSES))
    p.add_argument("--grade", "-g", action="append", choices=GRADES, metavar="GRADE",
                   help="evidence grade of a decided verdict: " + ", ".join(GRADES))
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--format", choices=("table", "ids", "json"), default="table", help="output format (default: table)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="everything about one claim", description="Everything about one claim: "
                       "quote, statement, verdict, observed status and why, correction, counterexample, "
                       "evidence outcomes, figures, benchmarks and related claims.")
    p.add_argument("id", help="claim id, e.g. softmax.row-stochastic")
    p.add_argument("--results", help="results file (default: <root>/results/claims-results.json)")
    p.add_argument("--json", action="store_true", help="print the claim's report entry as JSON")
    p.add_argument("--full", action="store_true", help=f"print every line (default: at most {SHOW_LINES}, long "
                   "series summarised)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("kernel", help="check an attention function against the float64 reference",
                       description=KERNEL_HELP, epilog=KERNEL_EXAMPLE)
    p.add_argument("function", metavar="FUNCTION", help="module:function, or a backend of impl/backends.py (triton)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the first declared, else cpu)")
    p.add_argument("--dtype", action="append", choices=("float32", "float16", "bfloat16", "float64"),
                   help="dtype to check (repeat; default: the declared ones)")
    p.add_argument("--causal", action="append", choices=("top-left", "bottom-right", "none"),
                   help="causal alignments supported (repeat; none: no causal mask; default: both)")
    p.add_argument("--key-padding", action=argparse.BooleanOptionalAction, default=None,
                   help="boolean key padding supported (default: yes)")
    p.add_argument("--bias", action=argparse.BooleanOptionalAction, default=None,
                   help="an additive float bias (with -inf entries) supported (default: yes)")
    p.add_argument("--feature", action="append", choices=("window", "alibi", "softcap", "sink", "dropout", "lse",
                                                           "varlen", "kvcache"),
                   help="a fused-kernel feature the kernel takes (repeat; default: none: those cases are listed as not "
                        "declared): window, alibi, softcap, sink and dropout through the mask's field of that name "
                        "(dropout = (p, seed), checked by its own case: keep rate, independence, reproducibility, kept "
                        "values); lse, varlen, kvcache as calls of their own (README: return_lse=True, cu_seqlens_q/k, "
                        "cache_seqlens)")
    p.add_argument("--gqa", action=argparse.BooleanOptionalAction, default=None,
                   help="grouped-query attention (H_kv < H_q) supported (default: yes)")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=None,
                   help="check the gradients dq, dk, dv too (default: whenever autograd reaches q, k and v "
                        "through the kernel, probed on one small problem; --no-backward: the forward only)")
    p.add_argument("--head-dims", metavar="LO-HI", help="supported head dimensions, inclusive (default: any)")
    p.add_argument("--equal-head-dims", action=argparse.BooleanOptionalAction, default=None,
                   help="the kernel needs d_v = d_k (default: no)")
    p.add_argument("--head-dim-multiple", type=int, metavar="M",
                   help="the kernel needs d_k and d_v to be multiples of M (its alignment; default: 1)")
    p.add_argument("--fully-masked", choices=("zero", "nan", "any"), help="what a row with no allowed key gives: "
                   "zero (fused kernels), nan (the reference's 0/0), any (left unspecified on purpose: shown, never "
                   "judged); default: not declared: nan or zero is shown, not judged, any other value fails")
    p.add_argument("--scale", action=argparse.BooleanOptionalAction, default=None,
                   help="the kernel takes the caller's softmax scale (default: yes; --no-scale: only 1/sqrt(d_k) "
                   "is checked, and the verdict says so)")
    p.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                   help="the forward gives bitwise-equal outputs on equal inputs: every problem is run twice and "
                   "compared (default: not declared, not checked)")
    p.add_argument("--layout", choices=("bhsd", "bshd"), help="the layout the kernel takes q, k, v in: bhsd (B, H, "
                   "n, d) or bshd (B, n, H, d), as flash-attn; the output read back in the same (default: not declared: "
                   "bhsd, the contract's, and said)")
    p.add_argument("--out-layout", choices=("bhsd", "bshd"), help="the output's layout when it differs from the "
                   "inputs' (transformers' attention functions take bhsd and return bshd; default: --layout's)")
    p.add_argument("--padding", choices=("true-means-keep", "true-means-ignore"), help="what True means in the "
                   "boolean key padding the kernel is given: attend to this key (the contract's) or ignore it "
                   "(nn.MultiheadAttention's key_padding_mask); default: not declared: true-means-keep, and said")
    p.add_argument("--output-index", type=int, metavar="N", help="the kernel returns a tuple: element N is the "
                   "attention output (default: not declared: a tensor)")
    p.add_argument("--strided", action=argparse.BooleanOptionalAction, default=None, help="the kernel takes "
                   "non-contiguous q, k, v (default: yes, checked on transposed and packed-QKV views; --no-strided: "
                   "those problems are listed as outside the declaration)")
    p.add_argument("--mask", action="append", metavar="KIND", help="run only these mask kinds (repeat): "
                   "none, causal-top-left, causal-bottom-right, key-padding, additive, window, alibi, softcap, sink, "
                   "lse, varlen, kvcache, dropout, fully-masked")
    p.add_argument("--tier", choices=("smoke", "ci", "full"), default="ci",
                   help="how much to check (default: ci): smoke, small shapes with every feature; ci, plus "
                   "kernel-scale shapes; full, plus the length and head-dim sweeps")
    p.add_argument("--examples", type=int, help="drawn problems per case (default: the tier's: smoke 2, ci 10, "
                   "full 40)")
    p.add_argument("--seed", type=int, default=0, help="base of the per-case seeds (default: 0)")
    p.add_argument("--no-shrink", action="store_true", help="report the first failing drawn problem unshrunk")
    p.add_argument("--bench", action="store_true", help="after a matrix with no failure, time the kernel against "
                   "torch's SDPA on one shape per dtype (a kernel that fails gets no speed)")
    p.add_argument("--problem", metavar="SPEC", help="run one problem (the repro a failure prints), e.g. "
                   "'B=1,H_q=4,H_kv=2,n_q=9,n_k=20,d_k=16,d_v=16,seed=1000,logit_scale=1.0'")
    p.set_defaults(func=cmd_kernel)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on a usage error, 0 on --help
    try:
        if args.command == "kernel":  # a user's kernel needs no registry
            return args.func(args, Path.cwd())
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
