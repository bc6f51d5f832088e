"""Long-context claims that cite experiments: internal consistency of the reported tables."""
from decimal import Decimal

import pytest

from claimcheck import claim_assert, record

# foundations.txt lines 747-750: standard PPL, critical-scaling PPL and improvement %, as printed
# (the number of decimals printed tells how much each figure was rounded).
LLAMA2_ROWS = [
    pytest.param("5.47", "5.47", "0", id="4K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-4k-improvement")),
    pytest.param("9.21", "6.12", "33.5", id="8K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-8k-improvement")),
    pytest.param("25.3", "7.45", "70.6", id="16K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-16k-improvement")),
    pytest.param("89.7", "9.83", "89.0", id="32K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-32k-improvement")),
]


def _half_unit(printed: str) -> float:
    """Half a unit in the last printed digit: how far the exact value may be from the printed one."""
    return 0.5 * 10.0 ** Decimal(printed).as_tuple().exponent


def _improvement_range(standard: str, critical: str) -> tuple[float, float]:
    """min and max of 100 (s - c) / s over s, c within rounding of their printed values."""
    s, hs = float(standard), _half_unit(standard)
    c, hc = float(critical), _half_unit(critical)
    corners = [100 * (si - ci) / si for si in (s - hs, s + hs) for ci in (c - hc, c + hc)]
    return min(corners), max(corners)


@pytest.mark.parametrize("standard, critical, printed", LLAMA2_ROWS)
def test_llama2_improvement_is_the_relative_ppl_reduction(standard, critical, printed):
    lo, hi = _improvement_range(standard, critical)
    record("implied improvement % (range)", [round(lo, 3), round(hi, 3)])
    # The PPLs are themselves rounded, so the improvement is only known to an interval; the printed
    # improvement, itself rounded, must lie within that interval widened by its own half unit.
    slack = _half_unit(printed)
    claim_assert(lo - slack <= float(printed) <= hi + slack,
                 "improvement is not (standard - critical) / standard for any PPLs that round to the table's",
                 implied_range=[lo, hi], printed_percent=printed)
