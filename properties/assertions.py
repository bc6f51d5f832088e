"""Shared tolerance rules for comparing computed values with a float64 oracle.

The rule (DESIGN.md, and FlashAttention's own tests): an implementation evaluated in precision p
may err, relative to the float64 reference, by at most ``c`` times the error of the naive
reference computed in the same precision p, plus a tiny floor for results the naive reference
happens to get exactly right.
"""
from __future__ import annotations

import torch

from claimcheck import claim_assert, record

EPS = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}


def max_abs_error(x: torch.Tensor, reference: torch.Tensor) -> float:
    return (x.double() - reference.double()).abs().max().item() if x.numel() else 0.0


def assert_within_reference_error(
    actual: torch.Tensor,
    oracle64: torch.Tensor,
    naive_same_precision: torch.Tensor,
    c: float,
    what: str,
    floor_ulps: float = 4.0,
) -> float:
    """Assert ``err(actual) <= c * err(naive) + floor`` against the float64 oracle; return the ratio.

    The floor is ``floor_ulps`` units of the precision's epsilon scaled by the oracle's magnitude:
    the rounding of storing the exact result in that precision is unavoidable for any algorithm.
    """
    err = max_abs_error(actual, oracle64)
    ref_err = max_abs_error(naive_same_precision, oracle64)
    scale = max(oracle64.abs().max().item(), 1.0) if oracle64.numel() else 1.0
    floor = floor_ulps * EPS[actual.dtype] * scale
    ratio = err / max(ref_err, floor)
    record(f"error_ratio[{what}]", ratio)
    claim_assert(err <= c * ref_err + floor, f"{what}: error exceeds {c} x the naive same-precision error + floor",
                 error=err, naive_error=ref_err, floor=floor, c=c, dtype=str(actual.dtype))
    return ratio
