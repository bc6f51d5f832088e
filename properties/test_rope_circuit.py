"""Empirical analogues of the circuit-complexity statements of foundations.txt lines 576-638.

The theorems are attributed to a paper and stated without a circuit model (gate basis, fan-in,
precision), so they are recorded as unverifiable. Two measurable analogues bear on them:

* dependence: the output of a RoPE attention layer at the last position depends on every one of
  the n d input numbers (n tokens of d coordinates), so a circuit of fan-in-2 gates computing it has at least
  n d - 1 gates
  (a gate count of O(log n) is possible only when unbounded fan-in gates are counted without wires);
* precision: the number of bits of theta needed to get cos(m theta) to a fixed accuracy grows like
  log2 m (the ``bits=O(log m)`` of the pseudocode at line 632), one bit per doubling of m.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from claimcheck import claim_assert, record
from impl.rope import rope_frequencies, rope_interleaved
from impl.softmax import stable_softmax


def _rope_attention_last_output(x: torch.Tensor, w: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """One RoPE attention head, output at the last position: (d,)."""
    d = x.shape[-1]
    pos, theta = torch.arange(x.shape[0], dtype=torch.float64), rope_frequencies(d)
    q, k, v = (x @ wi for wi in w)
    q, k = rope_interleaved(q, pos, theta), rope_interleaved(k, pos, theta)
    return stable_softmax(q[-1] @ k.T / math.sqrt(d)) @ v


@pytest.mark.claim("expressivity.rope-transformer-circuit-size-bound", "expressivity.standard-transformer-circuit-size-table",
                   "expressivity.rope-transformer-circuit-size-table")
@given(n=st.integers(2, 64), seed=st.integers(0, 2**31 - 1))
def test_rope_attention_output_depends_on_every_input_number(n, seed):
    d = 4
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, dtype=torch.float64, generator=g)
    w = tuple(torch.randn(d, d, dtype=torch.float64, generator=g) / d for _ in range(3))  # unsaturated softmax
    y = _rope_attention_last_output(x, w)
    changed = 0
    for j in range(n):
        for c in range(d):  # perturb one input number alone: coordinate c of token j
            x2 = x.clone()
            x2[j, c] += 0.5
            # rounding moves y by at most ~n eps |y| < 1e-13 |y|: a change above 1e-9 (1 + |y|) is a real dependence
            changed += int((_rope_attention_last_output(x2, w) - y).abs().max().item() > 1e-9 * (1 + y.abs().max().item()))
    claim_assert(changed == n * d, "the last output does not depend on some input number", n=n, d=d,
                 depends_on=changed)


def _bits_needed(m: int, theta: np.ndarray, tol: float = 2.0**-10) -> int:
    """Fewest fractional bits b of theta (rounded to a multiple of 2^-b) for which cos and sin of m theta are
    within tol for every plane, and stay so for the next 4 bits (so a lucky rounding does not count)."""
    def ok(b: int) -> bool:
        t = np.round(theta * 2.0**b) / 2.0**b
        return bool(np.all(np.abs(np.cos(m * t) - np.cos(m * theta)) <= tol)
                    and np.all(np.abs(np.sin(m * t) - np.sin(m * theta)) <= tol))
    return next(b for b in range(0, 64) if all(ok(b + j) for j in range(5)))


@pytest.mark.claim("rope.rotation-block-olog-m-gates", "rope.rotation-matrix-circuit-size-lemma",
                   "rope.rope-circuit-total-gates-comment")
def test_bits_of_theta_needed_for_the_rotation_grow_like_log2_m():
    theta = rope_frequencies(64).numpy()
    log_m = np.arange(4, 21)
    bits = np.array([_bits_needed(2**int(k), theta) for k in log_m])
    slope = np.polyfit(log_m, bits, 1)[0]
    record("bits needed for m = 2^4 .. 2^20", bits.tolist())
    record("fitted bits per doubling of m", float(slope))
    # |m (theta_b - theta)| <= m 2^{-b-1} must stay below the tolerance: b ~ log2 m + const, slope 1.
    claim_assert(0.8 <= slope <= 1.2, "the precision needed does not grow like log2 m", slope=float(slope),
                 bits=bits.tolist())
