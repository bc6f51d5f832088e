"""Shared tolerance rules for comparing computed values with a float64 oracle.

The rule (DESIGN.md, and FlashAttention's own tests): an implementation evaluated in precision p
may err, relative to the float64 reference, by at most ``c`` times the error of the naive
reference computed in the same precision p, plus a tiny floor for results the naive reference
happens to get exactly right.
"""
from __future__ import annotations

import torch

from claimcheck import claim_assert, record
from impl.attention import Mask, default_scale, repeat_kv, scores
from impl.softmax import stable_softmax

EPS = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}


def max_abs_error(x: torch.Tensor, reference: torch.Tensor) -> float:
    return (x.double() - reference.double()).abs().max().item() if x.numel() else 0.0


def relative_error(x: torch.Tensor, reference: torch.Tensor) -> float:
    """``max |x - ref| / max |ref|`` (``inf`` when they disagree on a non-finite entry)."""
    x, reference = x.double(), reference.double()
    finite = torch.isfinite(reference)
    if not torch.equal(finite, torch.isfinite(x)) or not torch.equal(x[~finite].nan_to_num(), reference[~finite].nan_to_num()):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = max(reference[finite].abs().max().item(), torch.finfo(torch.float64).tiny)
    return (x[finite] - reference[finite]).abs().max().item() / scale


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
    where it is passed).
    """
    err = max_abs_error(actual, oracle64)
    ref_err = max_abs_error(naive_same_precision, oracle64)
    if scale is None:
        scale = max(oracle64.abs().max().item(), 1.0) if oracle64.numel() else 1.0
    floor = floor_ulps * EPS[actual.dtype] * scale + extra_floor
    # the ratio to the naive error, which cannot beat half an ulp of the terms' size (storing them)
    ratio = err / max(ref_err, 0.5 * EPS[actual.dtype] * scale)
    record(f"error_ratio[{what}]", ratio)
    claim_assert(err <= c * ref_err + floor, f"{what}: error exceeds {c} x the naive same-precision error + floor",
                 error=err, naive_error=ref_err, floor=floor, c=c, dtype=str(actual.dtype))
    return ratio


def attention_term_scales(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None,
                          d_out: torch.Tensor, scale: float | None = None) -> dict[str, float]:
    """The size of the terms each attention result is summed from, for rounding floors (float64).

    Any algorithm computing ``A B`` rounds by up to ``gamma_n |A| |B|`` (Higham, Accuracy and
    Stability, 3.5): so ``out = P V`` is summed from terms of size ``P |V|``, ``dV = P^T dO`` from
    ``P^T |dO|``, and ``dQ = s dS K``, ``dK = s dS^T Q`` with ``dS = P (dP - D)`` from terms of size
    ``T = P (|dO| |V|^T + |D|)`` times ``|K|`` or ``|Q|``: dQ and dK can cancel to exactly 0 (one
    key) while their terms, and so any algorithm's rounding, stay of that size.
    ``logits``: ``max |S| + max |L|`` (L the log-sum-exp), the size of the exponent of
    ``P = exp(S - L)`` when a backward recomputes P.
    Shapes as :func:`impl.attention.attention`; returns the largest entry of each bound.
    """
    q, k, v, d_out = (t.double() for t in (q, k, v, d_out))
    group = q.shape[-3] // k.shape[-3]
    s = default_scale(q.shape[-1]) if scale is None else scale
    kk, vv = repeat_kv(k, group), repeat_kv(v, group)
    m = mask if mask is None or mask.bias is None else Mask(mask.causal, mask.key_padding, mask.bias.double())
    logits = scores(q, k, s, m)  # (..., H_q, n_q, n_k)
    p = stable_softmax(logits).nan_to_num()
    lse = torch.logsumexp(logits, dim=-1)
    finite = torch.isfinite(logits)
    out = p @ vv
    delta = (d_out * out).sum(-1, keepdim=True).abs()
    t = p * (d_out.abs() @ vv.abs().transpose(-2, -1) + delta)

    def per_kv_head(x: torch.Tensor) -> torch.Tensor:  # a K/V head's gradient sums over its group
        return x.unflatten(-3, (k.shape[-3], group)).sum(-3)

    return {
        "out": (p @ vv.abs()).max().item(),
        "dq": s * (t @ kk.abs()).max().item(),
        "dk": s * per_kv_head(t.transpose(-2, -1) @ q.abs()).max().item(),
        "dv": per_kv_head(p.transpose(-2, -1) @ d_out.abs()).max().item(),
        "logits": logits[finite].abs().max().item() + lse[torch.isfinite(lse)].abs().max().item(),
    }
