"""What the documents get wrong, ranked: the findings that lead every report surface.

Every ``fails`` and ``partly`` claim carries a ``finding`` in the registry: its kind, what the
document says and what is true, the factor between them for numbers, and a one-line summary.
The ranking rule, in order:

1. the kind's tier: printed code that does not run first; then wrong numbers, exponents,
   formulas, signs and directions; then misattributions; then true-only-under-a-condition and
   overstated claims; then bibliographic details (a year, a venue); wording last;
2. ``fails`` before ``partly`` within a tier;
3. the larger factor first (``ratio``, how far a number is off; a finding without one counts as 1);
4. document order.

Each finding also says how far off it is (``off``: a factor for numbers, a word for the rest) and
``by_kind`` groups the ranked findings by kind, each with its count and its worst.
"""
from __future__ import annotations

import math
import re
from typing import Any

TIERS = {
    "code-does-not-run": 1,
    "wrong-number": 2, "wrong-exponent": 2, "wrong-formula": 2, "flipped-sign": 2, "reversed-direction": 2,
    "misattribution": 3,
    "unstated-condition": 4, "overstated": 4,
    "wrong-bibliographic-detail": 5,
    "wording": 6,
}
TIER_NAMES = {1: "code that does not run", 2: "wrong numbers, exponents, formulas, signs and directions",
              3: "misattributions", 4: "true only under an unstated condition, or overstated",
              5: "bibliographic details", 6: "wording"}
KIND_NAMES = {
    "code-does-not-run": "code that does not run", "wrong-number": "wrong numbers", "wrong-exponent": "wrong exponents",
    "wrong-formula": "wrong formulas", "flipped-sign": "flipped signs", "reversed-direction": "reversed directions",
    "misattribution": "misattributions", "unstated-condition": "unstated conditions", "overstated": "overstated claims",
    "wrong-bibliographic-detail": "bibliographic details", "wording": "wording",
}
# what is off, for a finding without a factor: the word shown in the "off" column
OFF_WORDS = {
    "code-does-not-run": "does not run", "wrong-number": "number", "wrong-exponent": "exponent",
    "wrong-formula": "formula", "flipped-sign": "sign", "reversed-direction": "direction",
    "misattribution": "attribution", "unstated-condition": "condition", "overstated": "overstated",
    "wrong-bibliographic-detail": "citation", "wording": "wording",
}
DOCUMENT_ORDER = ("foundations", "linear-algebra", "spectral", "index")
RAISED = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\breturns None\b")  # what printed code does instead of running
SHAPE = re.compile(r"^\(.*,.*\)$")  # a tuple of sizes, "(B, H, T, d)"


def rank_key(c: dict[str, Any]) -> tuple:
    f = c.get("finding") or {}
    tier = TIERS.get(f.get("kind"), 7)
    ratio = f.get("ratio") or 1.0
    doc = DOCUMENT_ORDER.index(c["document"]) if c["document"] in DOCUMENT_ORDER else len(DOCUMENT_ORDER)
    return (tier, 0 if c["verdict"] == "fails" else 1, -abs(math.log(ratio)), doc, c["line"])


def findings(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ranked findings of a report's claims (its ``fails`` and ``partly`` ones)."""
    wrong = sorted((c for c in claims if c["verdict"] in ("fails", "partly")), key=rank_key)
    out = []
    for rank, c in enumerate(wrong, start=1):
        f = c.get("finding") or {}
        tier = TIERS.get(f.get("kind"), 7)
        out.append({
            "rank": rank, "id": c["id"], "verdict": c["verdict"], "status": c["status"],
            "document": c["document"], "line": c["line"], "kind": f.get("kind"), "tier": tier,
            "tier_name": TIER_NAMES.get(tier, "not classified"),
            "summary": f.get("summary") or c.get("correction") or "", "claimed": f.get("claimed"),
            "actual": f.get("actual"), "ratio": f.get("ratio"), "off": off(f), "grade": c.get("grade"),
        })
    return out


def off(finding: dict[str, Any]) -> str:
    """How far off a finding is, from its registry data: the factor ``actual / claimed`` for a wrong number
    ("x8", "x0.5"; the recorded ``ratio`` when the two are not plain numbers), the true value for other
    numbers ("exponent 1, not -0.75", "year 2021, not 2022"), what printed code does instead of running
    ("does not run: NameError"), else a word for what is wrong ("formula", "sign", "direction")."""
    kind, claimed, actual = finding.get("kind"), finding.get("claimed"), finding.get("actual")
    word = OFF_WORDS.get(kind, "")
    numbers = _is_number(claimed) and _is_number(actual)
    if kind == "wrong-number" and numbers and claimed * actual > 0:
        return _factor(actual / claimed)
    if finding.get("ratio"):
        return _factor(finding["ratio"])
    if numbers:
        what = "year" if kind == "wrong-bibliographic-detail" else word  # the one number a citation has
        return f"{what} {actual:g}, not {claimed:g}"
    if kind == "code-does-not-run":
        what = RAISED.search(finding.get("summary") or "")
        if what is None:
            return word
        return what[0] if what[0] == "returns None" else f"{word}: {what[0]}"
    if kind == "wrong-number" and SHAPE.match(str(claimed or "")):
        return "shape"
    return word


def by_kind(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranked findings grouped by kind, in the order of each kind's worst: per kind its ``name``, ``count``,
    how many ``fails``, and its ``worst`` finding (the first of the kind in the ranking)."""
    groups: dict[Any, dict[str, Any]] = {}
    for f in sorted(found, key=lambda f: f["rank"]):
        g = groups.setdefault(f["kind"], {"kind": f["kind"], "name": KIND_NAMES.get(f["kind"], "not classified"),
                                          "count": 0, "fails": 0, "worst": f})
        g["count"] += 1
        g["fails"] += f["verdict"] == "fails"
    return list(groups.values())


def _factor(x: float) -> str:
    """A factor in two significant digits, three when two would round it to 1 ("x2.9", "x994", "x1.04")."""
    text = f"{x:.0f}" if x >= 100 else f"{x:.2g}"
    return "x" + (f"{x:.3g}" if text == "1" else text)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
