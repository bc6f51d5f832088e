"""From evidence outcomes to the observed status of each claim.

Observed statuses:

========== =================================================================================
verified   every property ran and held (verdict ``holds``)
refuted    a refutation found its counterexample and every correction property held
           (verdict ``fails`` or ``partly``)
unverifiable  recorded as not checkable offline; its consistency checks (if any) passed
open       recorded before its evidence exists; outcomes are shown but decide nothing
mismatch   the evidence disagrees with the recorded verdict: the run fails
error      a piece of evidence crashed (an exception that is not a violated assertion), a negative control's
           variant was stopped by something other than the claim's own check, a check of a comparator
           failed, or the only evidence that ran is negative controls (nothing asserts the claim itself)
skipped    every piece of evidence was skipped (the reasons are kept)
untested   no evidence for this claim ran in this session
========== =================================================================================
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.registry import Claim, Registry

STATUSES = ("verified", "refuted", "unverifiable", "open", "mismatch", "error", "skipped", "untested")
RESULTS_SCHEMA_VERSION = 1


@dataclass
class Outcome:
    """The outcome of one test (one node id) that is evidence for one or more claims."""

    nodeid: str
    claims: list[str]
    kind: str  # "property", "refutation", "control" (a negative control) or "comparator" (a check of a comparator)
    outcome: str = "untested"  # passed | failed | error | skipped
    message: str | None = None
    summary: str | None = None  # the one-line exception message of a failure
    counterexample: dict | None = None
    figures: list[dict] = field(default_factory=list)
    examples: int | None = None
    seconds: float = 0.0
    models: list[str] | None = None  # a control: the claims whose falsity its variant models (credited to them)

    def update(self, report: Any, props: dict[str, Any]) -> None:
        self.seconds = round(self.seconds + getattr(report, "duration", 0.0), 4)
        if "examples" in props:
            self.examples = props["examples"]
        if report.when == "call":
            self.figures = [v for k, v in report.user_properties if k == "claimcheck.figure"]
            found = [v for k, v in report.user_properties if k == "claimcheck.counterexample"]
            self.counterexample = found[-1] if found else None
        if report.skipped:
            if self.outcome in ("untested", "passed"):
                self.outcome, self.message = "skipped", _skip_reason(report)
            return
        if report.passed:
            if report.when == "call" and self.outcome == "untested":
                self.outcome = "passed"
            return
        # failed: in setup/teardown, or a crash in the call, is an error of the evidence
        exc = props.get("exception") or {}
        violated = report.when == "call" and exc.get("violated", False)
        self.outcome = "failed" if violated else "error"
        self.message = _tail(getattr(report, "longreprtext", "") or str(report.longrepr))
        crash = getattr(report.longrepr, "reprcrash", None)
        self.summary = crash.message.splitlines()[0] if crash is not None and crash.message else _last_line(self.message)


def reaches(evidence: str, nodeid: str) -> bool:
    """Whether a test node is a piece of evidence the registry names: the node itself, or a
    parametrized case of a test named without its parameters (``test_x`` covers ``test_x[a-b]``)."""
    return nodeid == evidence or ("[" not in evidence and nodeid.startswith(evidence + "["))


def evidence_index(nodeids: Any) -> set[str]:
    """Node ids and the parameter-free names they are cases of, for membership tests by :func:`reaches`."""
    nodeids = set(nodeids)
    return nodeids | {n.split("[", 1)[0] for n in nodeids if "[" in n}


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _tail(text: str, lines: int = 30) -> str:
    kept = text.strip().splitlines()[-lines:]
    return "\n".join(kept)


@dataclass
class Observed:
    status: str
    detail: str
    counterexample: dict | None = None


def observe(claim: Claim, outcomes: list[Outcome]) -> Observed:
    """The observed status of ``claim`` given the outcomes of its evidence tests."""
    if claim.verdict == "open":
        return Observed("open", "recorded; not yet decided")
    if not outcomes:
        if claim.verdict == "unverifiable":
            return Observed("unverifiable", claim.reason or "")
        return Observed("untested", "no evidence for this claim ran")
    errors = [o for o in outcomes if o.outcome == "error"]
    if errors:
        return Observed("error", f"{errors[0].nodeid} crashed: {errors[0].summary}")
    ran = [o for o in outcomes if o.outcome in ("passed", "failed")]
    if not ran:
        reasons = sorted({o.message or "" for o in outcomes})
        return Observed("skipped", "; ".join(reasons))
    comparators = [o for o in ran if o.kind == "comparator" and o.outcome == "failed"]
    if comparators:
        return Observed("error", f"{comparators[0].nodeid}: the comparator accepted a wrong field, so its comparison "
                        f"decides nothing: {comparators[0].summary}")
    controls = [o for o in ran if o.kind == "control"]
    accepted = [o for o in controls if o.outcome == "failed"]
    if accepted:
        return Observed("mismatch", f"{accepted[0].nodeid}: the negative control was accepted, so the evidence cannot "
                        "tell the claim from a wrong variant")
    if all(o.kind in ("control", "comparator") for o in outcomes):
        return Observed("error", "only negative controls ran: no evidence of its own asserts the claim, so nothing "
                        "decides it")
    ran = [o for o in ran if o.kind not in ("control", "comparator")]
    if not ran:
        return Observed("skipped", "the evidence was skipped; only negative controls ran")
    props = [o for o in ran if o.kind == "property"]
    refs = [o for o in ran if o.kind == "refutation"]
    broken = [o for o in props if o.outcome == "failed"]
    found = [o for o in refs if o.outcome == "passed"]
    missing = [o for o in refs if o.outcome == "failed"]
    counterexample = found[0].counterexample if found else None

    if claim.verdict in ("holds", "unverifiable"):
        if broken:
            return Observed("mismatch", f"recorded {claim.verdict}, but {broken[0].nodeid} failed: "
                            f"{broken[0].summary}", _failure_example(broken[0]))
        if found:
            return Observed("mismatch", f"recorded {claim.verdict}, but {found[0].nodeid} found a counterexample",
                            counterexample)
        if claim.verdict == "unverifiable":
            return Observed("unverifiable", "consistency checks passed; " + (claim.reason or ""))
        return Observed("verified", f"{len(props)} propert{'y' if len(props) == 1 else 'ies'} held")

    # fails / partly: the claim as written must be refuted, the correction must hold
    if missing:
        return Observed("mismatch", f"recorded {claim.verdict}, but {missing[0].nodeid} found no counterexample")
    if broken:
        return Observed("mismatch", f"the correction does not hold: {broken[0].nodeid} failed: "
                        f"{broken[0].summary}", _failure_example(broken[0]))
    if not found:
        return Observed("skipped", "the refutation did not run")
    detail = "counterexample found"
    if props:
        detail += f"; correction held ({len(props)} propert{'y' if len(props) == 1 else 'ies'})"
    return Observed("refuted", detail, counterexample)


def _last_line(text: str | None) -> str:
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    for line in reversed(lines):
        if line.lstrip().startswith("E "):
            return line.strip()[1:].strip()
    return lines[-1].strip() if lines else ""


def _failure_example(outcome: Outcome) -> dict:
    return {"message": outcome.summary, "how": "property failed", "detail": outcome.message}


def observe_all(registry: Registry, outcomes: list[Outcome]) -> dict[str, Observed]:
    by_claim: dict[str, list[Outcome]] = {c.id: [] for c in registry.claims}
    for outcome in outcomes:
        for cid in outcome.claims:
            by_claim.setdefault(cid, []).append(outcome)
    observed = {c.id: observe(c, by_claim[c.id]) for c in registry.claims}
    for c in registry.claims:  # a repeat without evidence of its own shows what its original showed
        target = registry.get(c.same_as) if c.same_as else None
        if target is not None and not by_claim[c.id] and c.verdict == target.verdict and c.verdict != "open":
            original = observed[target.id]
            observed[c.id] = Observed(original.status, f"same as {target.id}: {original.detail}",
                                      original.counterexample)
    for cid in by_claim:
        if cid not in observed:  # a test tagged with an id that is not in the registry
            observed[cid] = Observed("error", "evidence names a claim id that is not in the registry")
    return observed


def summary_counts(results: dict) -> dict[str, int]:
    counts = Counter(row["status"] for row in results["claims"])
    return {s: counts.get(s, 0) for s in STATUSES}


def write_results(path: Path, registry: Registry, observed: dict[str, Observed], outcomes: list[Outcome],
                  meta: dict[str, Any]) -> dict:
    """Write the per-claim results JSON atomically and return it."""
    results = build_results(registry, observed, outcomes, meta)
    atomic_write(path, json.dumps(results, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    return results


def build_results(registry: Registry, observed: dict[str, Observed], outcomes: list[Outcome],
                  meta: dict[str, Any]) -> dict:
    """The per-claim results of one run, as written to the results JSON."""
    by_claim: dict[str, list[str]] = {}
    for o in outcomes:
        for cid in o.claims:
            by_claim.setdefault(cid, []).append(o.nodeid)
    rows = []
    for cid, obs in observed.items():
        claim = registry.get(cid)
        mine = [o for o in outcomes if cid in o.claims and o.kind == "control"]
        checks = [o for o in outcomes if cid in o.claims and o.kind == "comparator"]
        rows.append({
            "id": cid,
            "verdict": claim.verdict if claim else None,
            "status": obs.status,
            "controls": {"ran": sum(o.outcome in ("passed", "failed") for o in mine),
                         "rejected": sum(o.outcome == "passed" for o in mine),
                         # rejected controls whose variant models this claim's own falsity
                         "models": sum(o.outcome == "passed" and cid in (o.models or ()) for o in mine)},
            "comparator": {"ran": sum(o.outcome in ("passed", "failed") for o in checks),
                           "passed": sum(o.outcome == "passed" for o in checks)},
            "detail": obs.detail,
            "counterexample": obs.counterexample,
            "evidence_run": sorted(by_claim.get(cid, [])),
        })
    results = {
        "schema": RESULTS_SCHEMA_VERSION,
        "meta": meta,
        "claims": rows,
        "tests": sorted((asdict(o) for o in outcomes), key=lambda d: d["nodeid"]),
    }
    return results


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves either the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
