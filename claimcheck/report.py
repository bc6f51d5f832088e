"""The claim-status report: ``report/index.html``, ``report/claims.md`` and ``report/claims.json``.

Built from the registry, the per-claim results written by the pytest plugin
(``results/claims-results.json``) and asv's saved benchmark results when there are any.
``claims.json`` follows ``claimcheck/report.schema.json``. Claims without results are reported
as ``untested`` (decided verdicts), ``open`` or ``unverifiable``; evidence that did not run is
listed, per claim and for the whole report.

The folder is written atomically: everything goes to a temporary folder beside it, which then
replaces the old one, so a crash mid-way leaves the previous report intact.
"""
from __future__ import annotations

import ctypes
import datetime as dt
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from claimcheck import backends_status
from claimcheck import findings as findings_mod
from claimcheck.asv_results import AsvResults, format_row
from claimcheck.records import GENERIC_RECORD_TESTS, CannotCompare, compare
from claimcheck.runrecord import headline, partial_note
from claimcheck.references import Reference
from claimcheck.registry import DECIDED, GRADES, VERDICTS, Claim, Registry
from claimcheck.sources import Sources
from claimcheck.status import STATUSES, reaches

REPORT_SCHEMA_VERSION = 2
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
REFUTED_VERDICTS = ("fails", "partly")



def _correction_by_property(c: dict) -> bool:
    """Whether a property test proves the claim's correction, by the rule of ``claims check`` (the generic record
    check proves a correction by the record it compares, and is no such test)."""
    return c["verdict"] in ("fails", "partly") and any(
        o["kind"] == "property" and not o["nodeid"].startswith(GENERIC_RECORD_TESTS) for o in c["outcomes"])


def build(registry: Registry, sources: Sources, results: dict | None, asv: AsvResults | None = None,
          generated: str | None = None, references: dict[str, Reference] | None = None,
          backends: bool = True) -> dict[str, Any]:
    """The report as one JSON-ready mapping (schema: ``claimcheck/report.schema.json``).

    ``backends=False`` leaves out which attention backends run on this machine (``backends`` is None):
    asking imports torch, which the queries of the command line do without."""
    references = references or {}
    rows = {r["id"]: r for r in (results or {}).get("claims", []) if isinstance(r, dict) and "id" in r}
    tests = {t["nodeid"]: t for t in (results or {}).get("tests", []) if isinstance(t, dict) and "nodeid" in t}
    claims = []
    for c in registry.claims:
        row = rows.get(c.id)
        if row is not None:
            status, detail = row.get("status") or "untested", row.get("detail") or ""
            counterexample = row.get("counterexample")
        elif c.verdict in ("open", "unverifiable"):
            status, detail, counterexample = c.verdict, c.reason or "recorded; not yet decided", None
        else:
            status, detail, counterexample = "untested", "no results for this claim", None
        doc = sources[c.source] if c.source in sources else None
        ran, not_run = _match_evidence(c.evidence, tests, (row or {}).get("evidence_run", []), c.id)
        section = _section_of(doc, c.line)
        claims.append({
            "id": c.id,
            "document": c.source,
            "line": c.line,
            "section": section["title"],
            "section_line": section["line"],
            "quote": c.quote,
            "statement": c.statement,
            "topic": c.topic,
            "kind": c.kind,
            "verdict": c.verdict,
            "decided": c.verdict in DECIDED,
            "status": status,
            "detail": detail,
            "correction": c.correction,
            "reason": c.reason,
            "grade": c.grade,
            "cites": list(c.cites),
            "record_checks": _record_checks(c, references),
            "witness": [{"source": w.source, "line": w.line, "quote": w.quote, "role": w.role} for w in c.witness],
            "counterexample": counterexample,
            "controls": (row or {}).get("controls"),
            "comparator": (row or {}).get("comparator"),
            "evidence": list(c.evidence),
            "outcomes": [_outcome(tests[n]) for n in ran],
            "not_run": not_run,
            "benchmarks": [_benchmark(ev, asv) for ev in c.evidence if ev.startswith("benchmarks/")],
            "uses": list(c.uses),
            "used_by": [],
            "rests_on_refuted": [],
            "same_as": c.same_as,
            "contradicts": list(c.contradicts),
            "snippet": _snippet(c, doc),
            "notes": c.notes,
            "finding": c.finding,
            "experiment": experiment_summary(c, [tests[n] for n in ran]),
        })
    _link(claims)
    known = {c["id"] for c in claims}
    not_run = sorted({ev for c in claims for ev in c["not_run"]})
    return {
        "schema": REPORT_SCHEMA_VERSION,
        "generated": generated or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "run": (results or {}).get("meta"),
        "partial": {
            "results": results is not None,
            "complete": results is not None and not not_run,
            "not_run": not_run,
            "claims_affected": sorted(c["id"] for c in claims if c["not_run"]),
            "unknown_claims": sorted(cid for cid in rows if cid not in known),
            "benchmarks_without_results": sorted({b["name"] for c in claims for b in c["benchmarks"] if not b["runs"]}),
        },
        "asv": {
            "results_dir": str(asv.results_dir) if asv else None,
            "machines": sorted(asv.machines) if asv else [],
            "runs": len(asv.runs) if asv else 0,
            "skipped_files": list(asv.skipped) if asv else [],
        },
        "counts": {
            "status": _count(claims, "status", STATUSES),
            "verdict": _count(claims, "verdict", VERDICTS),
            "document": _count(claims, "document", tuple(sources.documents)),
            "topic": _count(claims, "topic", ()),
            "kind": _count(claims, "kind", ()),
            "grade": _count([c for c in claims if c["decided"] and c["grade"]], "grade", GRADES),
            "decided": {
                "decided": sum(c["decided"] for c in claims),
                "unverifiable": sum(c["verdict"] == "unverifiable" for c in claims),
                "open": sum(c["verdict"] == "open" for c in claims),
            },
            "rests_on_refuted": sum(bool(c["rests_on_refuted"]) for c in claims),
            "controlled_holds": {
                "holds": sum(c["verdict"] == "holds" for c in claims),
                "with_rejected_control": sum(c["verdict"] == "holds" and bool((c["controls"] or {}).get("rejected"))
                                             for c in claims)},
            # claims (any verdict) whose evidence rejected a control that models their own falsity
            "control_models_falsity": sum(bool((c["controls"] or {}).get("models")) for c in claims),
            # refuted claims whose correction a property proves, and how many of those have a control of their own
            "corrections": {
                "by_property": sum(_correction_by_property(c) for c in claims),
                "with_own_control": sum(_correction_by_property(c) and bool((c["controls"] or {}).get("models"))
                                        for c in claims)},
        },
        "findings": findings_mod.findings(claims),
        "coverage": _coverage(sources, claims),
        "references": [_reference(r, claims) for r in references.values()],
        "experiments": experiments_reuse(claims),
        "backends": backends_status.summary(list(tests.values()), registry.path.parent / "results") if backends else None,
        "claims": claims,
    }


EXPERIMENT_FIGURE = "experiment"  # the figure experiments.harness.record_result attaches


def experiments_reuse(claims: list[dict]) -> dict[str, Any]:
    """How many experiment results (registered ones and their controls) this report reuses from their stored
    artefacts, how many were run now, and when the reused ones were made."""
    runs = [r for c in claims if c["experiment"] for r in [c["experiment"]["measured"], *c["experiment"]["controls"]] if r]
    reused = [r["artefact"] for r in runs if (r.get("artefact") or {}).get("reused")]
    made = sorted(a["created"] for a in reused if a.get("created"))
    return {"results": len(runs), "reused": len(reused), "run_now": len(runs) - len(reused),
            "made": [made[0], made[-1]] if made else []}


def experiment_summary(c: Claim, outcomes: list[dict]) -> dict[str, Any] | None:
    """The claim's experiment: the registered prediction and scale, and what this run measured.

    ``measured`` is the result recorded at the registered scale (None when it did not run); ``controls``
    are the other results its tests record, each with its outcome: controls of the mechanism (the decision's
    scale, the proposed cause removed, with the outcome they predicted: ``predicted_text``, ``as_predicted``)
    and broken variants at another scale. ``text`` is the
    sentence the verdict states: the outcome (confirmed, contradicted, inconclusive or uninformative by design)
    "at small scale (...)" with the deciding interval; ``registration`` says whether the history shows the
    prediction registered before its result.
    """
    e = c.experiment
    if e is None:
        return None
    measured, controls = None, []
    for test in outcomes:
        for fig in test.get("figures") or []:
            value = fig.get("value")
            if fig.get("name") != EXPERIMENT_FIGURE or not isinstance(value, dict):
                continue
            row = {**value, "test": test["nodeid"], "test_outcome": test.get("outcome")}
            if measured is None and value.get("name") == e.name and value.get("scale") == e.scale:
                measured = row
            else:
                controls.append({**row, "superseded": _superseded_run(c, str(value.get("name") or ""))})
    text = None
    if measured is not None:
        interval = measured.get("interval_text") or \
            f"95% interval [{_num(measured.get('ci_low'))}, {_num(measured.get('ci_high'))}]"
        shown = f"effect {_num(measured.get('effect'))}, {interval} over {len(measured.get('seeds') or [])} seeds " \
                f"vs {e.comparison} {e.threshold:g}"
        seen = f" (the interval is {measured['side']})" if measured.get("side") and e.uninformative else ""
        text = f"{measured.get('outcome')}{seen} at small scale ({measured.get('scale_text')}): {shown}"
    return {"name": e.name, "prediction": " ".join(e.prediction.split()), "metric": e.metric,
            "comparison": e.comparison, "threshold": e.threshold, "scale": dict(e.scale),
            "registered": e.registered, "registration": registration_sentence(e.registered),
            "uninformative": e.uninformative, "measured": measured, "controls": controls, "text": text,
            "larger": larger_scales(e.name, e.uninformative)}


def larger_scales(name: str, uninformative: str | None = None) -> list[dict[str, Any]]:
    """Experiment ``name`` at its scales beyond CI, read from their stored artefacts (``experiments/larger.py``;
    the report never trains at them): each decided as the CI scale is, or stale, or missing."""
    try:
        from experiments.larger import stored
    except Exception as exc:  # noqa: BLE001 - torch or the experiments package missing: say so, do not fail
        return [{"scale_name": "-", "scale_text": "-", "state": "unavailable", "stale": [],
                 "why": f"{type(exc).__name__}: {exc}"}]
    return [s.to_json(uninformative) for s in stored(name)]


def larger_text(row: dict[str, Any]) -> str:
    """One larger scale in words: ``small (2 layers, ...): confirmed, effect 1.3, 95% t interval [...]``."""
    head = f"{row['scale_name']} ({row['scale_text']})"
    if row["state"] == "current":
        seen = f" (the interval is {row['side']})" if row.get("uninformative") and row.get("side") else ""
        made = (row.get("artefact") or {})
        return (f"{head}: {row.get('outcome')}{seen}, effect {_num(row.get('effect'))}, "
                f"{row.get('interval_text')} over {len(row.get('seeds') or [])} seeds (artefact {made.get('path')}, "
                f"made {made.get('created')} at {str(made.get('commit') or '?')[:10]})")
    if row["state"] == "stale":
        made = ", ".join(f"{a['path']} at {str(a.get('commit') or '?')[:10]}" for a in row["stale"])
        return f"{head}: stale, the stored result is of other code ({made}); run `tools/run_scale.py {row['scale_name']}`"
    if row["state"] == "unavailable":
        return f"larger scales unavailable: {row.get('why')}"
    return f"{head}: not run (`tools/run_scale.py {row['scale_name']}` runs it once and stores it)"


def control_prediction(k: dict) -> str:
    """``; predicted not confirmed, as predicted`` for a control of the mechanism (empty for another control)."""
    if not k.get("predicted_text"):
        return ""
    return f"; predicted {k['predicted_text']}, {'as' if k.get('as_predicted') else 'NOT as'} predicted"


def _of(name: str, experiment: str) -> bool:
    """Whether run ``name`` is experiment ``experiment`` or one of its variants (``<experiment>-<variant>``)."""
    return name == experiment or name.startswith(experiment + "-")


def _superseded_run(c: Claim, name: str) -> bool:
    """Whether run ``name`` belongs to an experiment the claim's current one superseded (not to the current one)."""
    return not _of(name, c.experiment.name) and any(_of(name, s.name) for s in c.superseded)


def registration_sentence(registered: str) -> str:
    """What the history shows of an experiment's registration, in words (the page shows it)."""
    if registered == "after-result":
        return ("Registered after the result: the prediction entered the registry in the same commit as its "
                "measured outcome, so the history does not show that it was registered first.")
    return "Registered before the result: the history shows the prediction committed before any result of it."


def experiments_sentence(e: dict | None) -> str:
    """`` 14 experiment results reused from their artefacts (made ... to ...), 0 run now.`` (empty: none ran)."""
    if not e or not e["results"]:
        return ""
    made = f" (made {e['made'][0]}" + (f" to {e['made'][1]}" if e["made"][1] != e["made"][0] else "") + ")" if e["made"] else ""
    return f" {e['reused']} experiment result(s) reused from their artefacts{made}, {e['run_now']} run now."


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


def _record_checks(c: Claim, references: dict[str, Reference]) -> list[dict[str, Any]]:
    """The attribution compared field by field with its record (empty when there is none)."""
    if not c.attribution or c.attribution["ref"] not in references:
        return []
    try:
        checks = compare(c.attribution, references[c.attribution["ref"]])
    except CannotCompare:
        return []
    return [{"field": k.field, "document": _jsonable(k.stated), "record": _jsonable(k.recorded), "match": k.match,
             "core": k.core} for k in checks]


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _reference(r: Reference, claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "key": r.key, "kind": r.kind, "title": r.title, "authors": list(r.authors), "year": r.year,
        "published_year": r.published_year, "venue": r.venue, "ids": dict(r.ids), "url": r.url,
        "read": [{"url": p["url"], "date": p["date"], "fields": list(p["fields"]), "secondary": bool(p.get("secondary"))}
                 for p in r.read],
        "facts": [{"key": f.key, "value": f.value, "text": f.text, "url": f.url, "date": f.date,
                   "secondary": f.secondary} for f in r.facts],
        "cited_by": [c["id"] for c in claims if r.key in c["cites"]],
    }


def _match_evidence(evidence: tuple[str, ...], tests: dict[str, dict], evidence_run: list[str],
                    cid: str | None = None) -> tuple[list[str], list[str]]:
    """The test node ids that ran as this claim's evidence, and the named tests that did not run.

    A name without parameters (``test_x``) matches every parametrized node (``test_x[a-b]``), except the
    nodes that are evidence for other claims only (a negative control credited to the claims it models).
    """
    ran: list[str] = [n for n in evidence_run if n in tests]
    not_run: list[str] = []
    for ev in evidence:
        if ev.startswith("benchmarks/"):
            continue
        found = [n for n in tests if reaches(ev, n)]
        if not found:
            not_run.append(ev)
        ran += [n for n in found if n not in ran and (cid is None or cid in tests[n].get("claims", [cid]))]
    return ran, not_run


def _snippet(c: Any, doc: Any) -> dict[str, Any] | None:
    if not c.snippet:
        return None
    try:
        text = doc.line_range(c.snippet.start, c.snippet.end) if doc is not None else None
    except ValueError:
        text = None
    return {"start": c.snippet.start, "end": c.snippet.end, "requires": list(c.snippet.requires), "text": text}


def _section_of(doc: Any, line: int) -> dict[str, Any]:
    current = {"title": "(preamble)", "line": 0}
    for h in doc.headings if doc is not None else ():
        if h.line > line:
            break
        current = {"title": h.title, "line": h.line}
    return current


def _outcome(test: dict) -> dict:
    keep = ("nodeid", "kind", "outcome", "summary", "message", "examples", "figures", "seconds", "counterexample",
            "models")
    return {k: test.get(k) for k in keep}


def _benchmark(evidence: str, asv: AsvResults | None) -> dict[str, Any]:
    history = asv.history(evidence) if asv else []
    latest = asv.latest(evidence) if asv else []
    return {
        "name": evidence,
        "asv_name": asv.asv_name(evidence) if asv else None,
        "runs": [r.to_json() for r in latest],
        "history": len(history),
        "commits": sorted({r.commit for r in history}),
        "fill": fill_command(evidence),
    }


def fill_command(evidence: str) -> str:
    """The one command that records results for a benchmark named in the registry."""
    name = evidence.split("::", 1)[1]
    if "Cuda" in name.split(".")[0]:
        return "python benchmarks/cuda_run.py   # on a CUDA machine; its results merge into this report"
    module = evidence.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return f".venv/bin/asv run --python=same --quick --bench '{module}\\.{name.replace('.', chr(92) + '.')}(\\(|$)'"


def _link(claims: list[dict]) -> None:
    """Fill ``used_by`` and ``rests_on_refuted`` (every claim reachable through ``uses`` that is
    refuted as written, nearest first)."""
    by_id = {c["id"]: c for c in claims}
    for c in claims:
        for u in c["uses"]:
            if u in by_id:
                by_id[u]["used_by"].append(c["id"])

    def refuted(c: dict) -> bool:
        return c["status"] == "refuted" or c["verdict"] in REFUTED_VERDICTS

    for c in claims:
        seen, queue, found = {c["id"]}, list(c["uses"]), []
        while queue:
            cid = queue.pop(0)
            if cid in seen or cid not in by_id:
                continue
            seen.add(cid)
            if refuted(by_id[cid]):
                found.append(cid)
            queue += by_id[cid]["uses"]
        c["rests_on_refuted"] = found


def _coverage(sources: Sources, claims: list[dict]) -> list[dict]:
    """Per document, every section (heading) with the claims recorded in it, empty ones included."""
    out = []
    for key, doc in sources.documents.items():
        mine = [c for c in claims if c["document"] == key]
        heads = [{"line": 0, "title": "(preamble)", "level": 0}] + [
            {"line": h.line, "title": h.title, "level": h.level} for h in doc.headings]
        sections = []
        for h in heads:
            inside = [c for c in mine if c["section_line"] == h["line"]]
            if h["line"] == 0 and not inside:
                continue
            sections.append({**h, "claims": len(inside), "decided": sum(c["decided"] for c in inside),
                             "status": dict(Counter(c["status"] for c in inside))})
        out.append({"document": key, "title": doc.title, "claims": len(mine), "sections": sections,
                    "sections_with_claims": sum(1 for s in sections if s["claims"])})
    return out


def _count(claims: list[dict], key: str, order: tuple[str, ...]) -> dict[str, int]:
    counts = Counter(c[key] for c in claims)
    keys = list(order) + sorted(k for k in counts if k not in order)
    return {k: counts.get(k, 0) for k in keys}


# ---------------------------------------------------------------------------------------------
# Markdown


def render_markdown(report: dict[str, Any]) -> str:
    out = ["# Claim-status report", ""]
    run = report.get("run")
    out.append(f"{headline(run)}. Generated {report['generated']}.{experiments_sentence(report.get('experiments'))}")
    if run and "commit" in run:
        pk = ", ".join(f"{k} {v}" for k, v in (run.get("packages") or {}).items() if v)
        out.append(f"Latest run `{run.get('id')}` at commit `{(run.get('commit') or '?')[:12]}`"
                   f"{' (dirty tree)' if run.get('dirty') else ''}, started {run.get('started')}; Python "
                   f"{run.get('python')}, {pk}; {(run.get('device') or {}).get('type')} on {run.get('cpu')}.")
    if run and partial_note(run):
        out += ["", f"**{partial_note(run)}.**"]
    out.append("")
    partial = report["partial"]
    if partial["not_run"]:
        out += [f"**Partial results:** {len(partial['not_run'])} piece(s) of evidence did not run "
                f"({len(partial['claims_affected'])} claims affected):", ""]
        out += [f"- `{ev}`" for ev in partial["not_run"][:200]]
        if len(partial["not_run"]) > 200:
            out.append(f"- ... and {len(partial['not_run']) - 200} more (see claims.json)")
        out.append("")
    out += _markdown_findings(report)
    d = report["counts"]["decided"]
    out += [f"**Decided:** {d['decided']} of {len(report['claims'])} claims "
            f"({d['unverifiable']} unverifiable offline, {d['open']} open).", ""]
    for title, key in (("Observed status", "status"), ("Verdict", "verdict"), ("Evidence grade (decided claims)", "grade"),
                       ("Document", "document"), ("Topic", "topic"), ("Kind", "kind")):
        counts = {k: v for k, v in report["counts"][key].items() if v}
        out += [f"**{title}:** " + ", ".join(f"{k} {v}" for k, v in counts.items()), ""]
    if report["counts"]["rests_on_refuted"]:
        out += [f"**Rests on a refuted claim:** {report['counts']['rests_on_refuted']} claims.", ""]

    out += ["## Coverage by section", ""]
    for doc in report["coverage"]:
        out += [f"### {doc['document']}: {doc['title']}", "",
                f"{doc['claims']} claims in {doc['sections_with_claims']} of {len(doc['sections'])} sections.", "",
                "| line | section | claims | decided |", "| --- | --- | --- | --- |"]
        for s in doc["sections"]:
            indent = "&nbsp;&nbsp;" * max(0, s["level"] - 1)
            out.append(f"| {s['line']} | {indent}{_cell(s['title'])} | {s['claims']} | {s['decided']} |")
        out.append("")

    by_doc: dict[str, list[dict]] = {}
    for c in report["claims"]:
        by_doc.setdefault(c["document"], []).append(c)
    out += ["## Claims", ""]
    for doc, claims in by_doc.items():
        out += [f"### {doc}", "", "| id | line | verdict | grade | status | statement |",
                "| --- | --- | --- | --- | --- | --- |"]
        for c in sorted(claims, key=lambda c: c["line"]):
            out.append(f"| [`{c['id']}`](#{_anchor(c['id'])}) | {c['line']} | {c['verdict']} | {c['grade'] or ''} | "
                       f"{c['status']} | {_cell(c['statement'])} |")
        out.append("")
    out += ["## Details", ""]
    refs = {r["key"]: r for r in report.get("references", [])}
    for c in report["claims"]:
        out += _markdown_claim(c, refs)
    if refs:
        out += ["## References of record", ""]
        for r in refs.values():
            who = ", ".join(r["authors"])
            ids = ", ".join(f"{k} {v}" for k, v in r["ids"].items())
            out.append(f"- `{r['key']}`: {who} ({r['year']}). *{r['title']}*. {r['venue'] or ''} {ids}. "
                       f"<{r['url']}> (read {r['read'][0]['date']}); cited by "
                       + ", ".join(f"`{i}`" for i in r["cited_by"]))
        out.append("")
    return "\n".join(out) + "\n"


def _markdown_findings(report: dict[str, Any]) -> list[str]:
    found = report.get("findings") or []
    if not found:
        return []
    n_fails = sum(f["verdict"] == "fails" for f in found)
    out = ["## Findings: what the documents get wrong", "",
           f"{len(found)} claims are wrong as written: **{n_fails} fail** (false as stated) and "
           f"**{len(found) - n_fails} hold only partly** (true only under an unstated condition, or only in part). "
           "*Off* says how far: a factor for numbers (x8: the true value is 8 times the printed one; a factor alone "
           "where only how many times off is recorded), else what is wrong.", "",
           "### By kind, the worst of each", "",
           "| kind | findings | fail | off | the worst of its kind |", "| --- | --- | --- | --- | --- |"]
    for g in findings_mod.by_kind(found):
        w = g["worst"]
        out.append(f"| {g['name']} | {g['count']} | {g['fails']} | {_cell(w['off'])} | "
                   f"[`{w['id']}`](#{_anchor(w['id'])}): {_cell(w['summary'])} |")
    out += ["", "### Every finding, worst first", "",
            "Ranked by the rule in `claimcheck/findings.py`: code that does not run, then wrong numbers by how far "
            "they are off, exponents, formulas, signs and directions, then misattributions, conditions, bibliographic "
            "details, wording.", "",
            "| # | claim | verdict | kind | off | what is wrong |", "| --- | --- | --- | --- | --- | --- |"]
    for f in found:
        verdict = "**FAILS**" if f["verdict"] == "fails" else "partly"
        out.append(f"| {f['rank']} | [`{f['id']}`](#{_anchor(f['id'])}) | {verdict} | {f['kind'] or '-'} | "
                   f"{_cell(f['off']) or '-'} | {_cell(f['summary'])} |")
    return out + [""]


def _markdown_claim(c: dict, refs: dict[str, dict] | None = None) -> list[str]:
    grade = f" ({c['grade']})" if c["grade"] else ""
    out = [f"### {c['id']}", "",
           f"- source: {c['document']}:{c['line']} ({c['section']}), quote: 「{c['quote']}」",
           f"- statement: {c['statement']}",
           f"- verdict: **{c['verdict']}**{grade}, observed: **{c['status']}**: {c['detail']}"]
    for key in c["cites"]:
        r = (refs or {}).get(key)
        out.append(f"- cites `{key}`" + (f": *{r['title']}* <{r['url']}>" if r else " (no record)"))
    for k in c["record_checks"]:
        out.append(f"  - {k['field']}: document {k['document']!r}, record {k['record']!r}: "
                   + ("matches" if k["match"] else "**differs**"))
    for w in c["witness"]:
        out.append(f"- witness ({w['role']}): {w['source']}:{w['line']} 「{w['quote']}」")
    if c["rests_on_refuted"]:
        out.append("- rests on refuted claim(s): " + ", ".join(f"`{u}`" for u in c["rests_on_refuted"]))
    if c["correction"]:
        out.append(f"- correction: {c['correction']}")
    if c["reason"] and c["verdict"] == "unverifiable":
        out.append(f"- why not checkable offline: {c['reason']}")
    if c["uses"]:
        out.append("- uses: " + ", ".join(f"`{u}`" for u in c["uses"]))
    if c["counterexample"]:
        out += ["- counterexample:", "", "```", show_counterexample(c["counterexample"]), "```", ""]
    out += _markdown_experiment(c.get("experiment"))
    for o in c["outcomes"]:
        extra = f", {o['examples']} examples" if o.get("examples") else ""
        out.append(f"- evidence `{o['nodeid']}` ({o['kind']}): {o['outcome']}{extra}")
        for fig in (f for f in o.get("figures") or [] if f.get("name") != EXPERIMENT_FIGURE):
            out.append(f"  - {fig['name']} = {_short_json(fig['value'])}")
    for ev in c["not_run"]:
        out.append(f"- evidence `{ev}`: did not run")
    for b in c["benchmarks"]:
        if not b["runs"]:
            out.append(f"- benchmark `{b['name']}`: no asv results (fill with `{b['fill']}`)")
        for run in b["runs"]:
            rows = "; ".join(f"{','.join(r['params']) or '-'}: {format_row(r, run['unit'])}"
                             for r in run["rows"][:12])
            out.append(f"- benchmark `{b['name']}` on {run['machine']} at {run['commit'][:8]}: {rows}")
    out.append("")
    return out


def _markdown_experiment(e: dict | None) -> list[str]:
    if not e:
        return []
    scale = ", ".join(f"{k} {v}" for k, v in e["scale"].items() if k != "extra")
    out = [f"- experiment `{e['name']}`: {e['prediction']} "
           f"(`{e['metric']} {e['comparison']} {e['threshold']:g}`; registered scale: {scale})",
           f"  - {e['registration']}"]
    if e.get("uninformative"):
        out.append(f"  - uninformative by design (set at registration): {e['uninformative']}")
    m = e["measured"]
    if m is None:
        out.append("  - measured: did not run in this evidence run")
    else:
        values = ", ".join(_num(v) for v in m.get("values") or [])
        out.append(f"  - **{m['outcome']}**: {e['text']}; per seed ({', '.join(map(str, m.get('seeds') or []))}): "
                   f"{values}")
    for row in e.get("larger") or []:
        out.append(f"  - at a larger scale, {larger_text(row)}")
    for k in e["controls"]:
        kind = "superseded experiment" if k.get("superseded") else "control"
        out.append(f"  - {kind} `{k['test'].split('::')[-1]}` ({k.get('scale_text')}): {k.get('outcome')}, "
                   f"effect {_num(k.get('effect'))} [{_num(k.get('ci_low'))}, {_num(k.get('ci_high'))}]"
                   + control_prediction(k))
    return out


def show_counterexample(cx: dict) -> str:
    """A counterexample as plain text (the HTML page shows matrices as tables)."""
    lines = [str(cx.get("message") or "")]
    for k, v in (cx.get("values") or {}).items():
        lines.append(f"{k} = {_short_json(v, 600)}")
    if cx.get("hypothesis"):
        lines.append(cx["hypothesis"])
    if cx.get("reason"):
        lines.append(f"(constructed: {cx['reason']})")
    if cx.get("detail") and cx.get("how") == "property failed":
        lines.append(cx["detail"])
    return "\n".join(lines)


def _short_json(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + " ..."


def _anchor(cid: str) -> str:
    return cid.replace(".", "")


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= 140 else text[:137] + "..."


# ---------------------------------------------------------------------------------------------
# Writing


def write(report: dict[str, Any], folder: Path, html: Callable[[dict[str, Any]], str] | None = None) -> None:
    """Write claims.json, claims.md and (given a renderer) index.html into ``folder`` atomically."""
    folder = folder.resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.new-"))
    try:
        (tmp / "claims.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (tmp / "claims.md").write_text(render_markdown(report), encoding="utf-8")
        if html is not None:
            (tmp / "index.html").write_text(html(report), encoding="utf-8")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a report is for reading
        _swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(new: Path, folder: Path) -> None:
    """Put ``new`` in place of ``folder``: one atomic exchange where the system has it
    (renameat2 RENAME_EXCHANGE), otherwise two renames with the old folder kept until the end."""
    if not folder.exists():
        os.rename(new, folder)
        return
    if _exchange(new, folder):
        shutil.rmtree(new, ignore_errors=True)  # `new` now holds the old report
        return
    old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.old-"))
    os.rename(folder, old / folder.name)
    os.rename(new, folder)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
