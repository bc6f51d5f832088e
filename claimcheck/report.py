"""The claim-status report: ``report/claims.json`` and ``report/claims.md``.

Built from the registry and the per-claim results written by the pytest plugin. Claims without
results are reported as ``untested`` (decided verdicts), ``open`` or ``unverifiable``.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from claimcheck.registry import Registry
from claimcheck.sources import Sources
from claimcheck.status import STATUSES, atomic_write

REPORT_SCHEMA_VERSION = 1


def build(registry: Registry, sources: Sources, results: dict | None) -> dict[str, Any]:
    """The report as one JSON-ready mapping (see docs in README: 'The report')."""
    rows = {r["id"]: r for r in (results or {}).get("claims", [])}
    tests = {t["nodeid"]: t for t in (results or {}).get("tests", [])}
    claims = []
    for c in registry.claims:
        row = rows.get(c.id)
        if row is not None:
            status, detail, counterexample = row["status"], row["detail"], row["counterexample"]
        elif c.verdict in ("open", "unverifiable"):
            status, detail, counterexample = c.verdict, c.reason or "recorded; not yet decided", None
        else:
            status, detail, counterexample = "untested", "no results for this claim", None
        doc = sources[c.source]
        outcomes = [_outcome(tests[n]) for n in (row or {}).get("evidence_run", []) if n in tests]
        claims.append({
            "id": c.id,
            "document": c.source,
            "line": c.line,
            "section": doc.heading_of(c.line),
            "quote": c.quote,
            "statement": c.statement,
            "topic": c.topic,
            "kind": c.kind,
            "verdict": c.verdict,
            "status": status,
            "detail": detail,
            "correction": c.correction,
            "reason": c.reason,
            "counterexample": counterexample,
            "evidence": list(c.evidence),
            "outcomes": outcomes,
            "uses": list(c.uses),
            "same_as": c.same_as,
            "contradicts": list(c.contradicts),
            "snippet": {"start": c.snippet.start, "end": c.snippet.end} if c.snippet else None,
            "notes": c.notes,
        })
    return {
        "schema": REPORT_SCHEMA_VERSION,
        "run": (results or {}).get("meta"),
        "counts": {
            "status": _count(claims, "status", STATUSES),
            "verdict": _count(claims, "verdict", ("holds", "fails", "partly", "unverifiable", "open")),
            "document": _count(claims, "document", tuple(sources.documents)),
            "topic": _count(claims, "topic", ()),
        },
        "claims": claims,
    }


def _outcome(test: dict) -> dict:
    keep = ("nodeid", "kind", "outcome", "message", "examples", "figures", "seconds", "counterexample")
    return {k: test.get(k) for k in keep}


def _count(claims: list[dict], key: str, order: tuple[str, ...]) -> dict[str, int]:
    counts = Counter(c[key] for c in claims)
    keys = list(order) + sorted(k for k in counts if k not in order)
    return {k: counts.get(k, 0) for k in keys}


def render_markdown(report: dict[str, Any]) -> str:
    out = ["# Claim-status report", ""]
    run = report.get("run")
    if run:
        out.append(f"Evidence run: Hypothesis profile `{run.get('profile')}`, {run.get('seconds')} s.")
    else:
        out.append("No evidence results were available: decided claims show as `untested`.")
    out.append("")
    for title, key in (("Observed status", "status"), ("Verdict", "verdict"), ("Document", "document"), ("Topic", "topic")):
        counts = {k: v for k, v in report["counts"][key].items() if v}
        out += [f"**{title}:** " + ", ".join(f"{k} {v}" for k, v in counts.items()), ""]
    by_doc: dict[str, list[dict]] = {}
    for c in report["claims"]:
        by_doc.setdefault(c["document"], []).append(c)
    for doc, claims in by_doc.items():
        out += [f"## {doc}", "", "| id | line | verdict | status | statement |", "| --- | --- | --- | --- | --- |"]
        for c in sorted(claims, key=lambda c: c["line"]):
            out.append(f"| `{c['id']}` | {c['line']} | {c['verdict']} | {c['status']} | {_cell(c['statement'])} |")
        out.append("")
    out += ["## Details", ""]
    for c in report["claims"]:
        out += [f"### `{c['id']}`", "",
                f"- source: {c['document']}:{c['line']} ({c['section']}), quote: 「{c['quote']}」",
                f"- statement: {c['statement']}",
                f"- verdict: **{c['verdict']}**, observed: **{c['status']}**: {c['detail']}"]
        if c["correction"]:
            out.append(f"- correction: {c['correction']}")
        if c["reason"] and c["verdict"] == "unverifiable":
            out.append(f"- why not checkable offline: {c['reason']}")
        if c["counterexample"]:
            out.append("- counterexample:")
            out += ["", "```", _show_counterexample(c["counterexample"]), "```", ""]
        for o in c["outcomes"]:
            extra = f", {o['examples']} examples" if o.get("examples") else ""
            out.append(f"- evidence `{o['nodeid']}` ({o['kind']}): {o['outcome']}{extra}")
            for fig in o.get("figures") or []:
                out.append(f"  - {fig['name']} = {json.dumps(fig['value'])[:200]}")
        out.append("")
    return "\n".join(out) + "\n"


def _show_counterexample(cx: dict) -> str:
    lines = [str(cx.get("message") or "")]
    for k, v in (cx.get("values") or {}).items():
        lines.append(f"{k} = {json.dumps(v)[:600]}")
    if cx.get("hypothesis"):
        lines.append(cx["hypothesis"])
    if cx.get("reason"):
        lines.append(f"(constructed: {cx['reason']})")
    return "\n".join(lines)


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= 140 else text[:137] + "..."


def write(report: dict[str, Any], folder: Path) -> None:
    """Write claims.json and claims.md into ``folder``, each atomically."""
    atomic_write(folder / "claims.json", json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    atomic_write(folder / "claims.md", render_markdown(report))
