"""Shared tolerance rules for comparing computed values with a float64 oracle.

The rule (DESIGN.md, and FlashAttention's own tests): an implementation evaluated in precision p
may err, relative to the float64 reference, by at most ``c`` times the error of the naive
reference computed in the same precision p, plus a tiny floor for results the naive reference
happens to get exactly right.
"""
from __future__ import annotations

import torch

from claimcheck import claim_assert, record
from claimcheck.kernel import EPS, attention_term_scales, max_abs_error, relative_error, within_reference_error

__all__ = ["EPS", "assert_within_reference_error", "attention_term_scales", "max_abs_error", "relative_error"]


def assert_within_reference_error(
    actual: torch.Tensor,
    oracle64: torch.Tensor,
    naive_same_precision: torch.Tensor,
    c: float,
    what: str,
    floor_ulps: float = 4.0,
    scale: float | None = None,
    extra_floor: float = 0.0,
) -> float:
    """Assert ``err(actual) <= c * err(naive) + floor`` against the float64 oracle; return the ratio.

    The floor is ``floor_ulps`` units of the precision's epsilon scaled by ``scale`` (default: the
    oracle's magnitude, at least 1): the rounding of storing the exact result in that precision is
    unavoidable for any algorithm. Pass a larger ``scale`` when the result cancels from terms of
    that size, and an ``extra_floor`` for a rounding the algorithm class cannot avoid (say why
    where it is passed). The rule itself is :func:`claimcheck.kernel.within_reference_error`.
    """
    check = within_reference_error(actual, oracle64, naive_same_precision, c, floor_ulps=floor_ulps, scale=scale,
                                   extra_floor=extra_floor)
    record(f"error_ratio[{what}]", check.ratio)
    claim_assert(check.ok, f"{what}: error exceeds {c} x the naive same-precision error + floor",
                 error=check.error, naive_error=check.naive_error, floor=check.floor, c=c, dtype=str(actual.dtype))
    return check.ratio
