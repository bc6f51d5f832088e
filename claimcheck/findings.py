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
"""
from __future__ import annotations

import math
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
DOCUMENT_ORDER = ("foundations", "linear-algebra", "spectral", "index")


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
            "actual": f.get("actual"), "ratio": f.get("ratio"), "grade": c.get("grade"),
        })
    return out
