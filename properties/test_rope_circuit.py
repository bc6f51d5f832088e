"""The circuit-complexity statements of foundations.txt lines 576-638.

Theorem 1 and the size table (lines 580-591) are refuted by counting: the n d output sign bits of one
attention layer are pairwise different Boolean functions, so every circuit computing the layer has at
least n d gates, in any basis and with any fan-in, which is not O(L H d^2 d_k log n). Lemma 1 and the
pseudocode's gate counts (lines 595-638) state no circuit model and stay unverifiable; two measurable
analogues bear on them:

* dependence: the output of a RoPE attention layer at the last position depends on every one of
  the n d input numbers (n tokens of d coordinates), so a circuit of fan-in-2 gates computing it has at least
  n d - 1 gates;
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

from claimcheck import claim_assert, control, record, refutes
from impl.rope import rope_frequencies, rope_interleaved
from impl.softmax import stable_softmax


def _rope_attention_last_output(x: torch.Tensor, w: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """One RoPE attention head, output at the last position: (d,)."""
    d = x.shape[-1]
    pos, theta = torch.arange(x.shape[0], dtype=torch.float64), rope_frequencies(d)
    q, k, v = (x @ wi for wi in w)
    q, k = rope_interleaved(q, pos, theta), rope_interleaved(k, pos, theta)
    return stable_softmax(q[-1] @ k.T / math.sqrt(d)) @ v


def _rope_attention_over_a_log_window(x: torch.Tensor, w: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Negative control: the head's last output read from the last ceil(log2 n) tokens only, all that a fan-in-2
    circuit whose size grows like log n can depend on (constant 1 in front of the log)."""
    window = max(1, math.ceil(math.log2(x.shape[0])))
    return _rope_attention_last_output(x[-window:], w)


@pytest.mark.claim("expressivity.rope-transformer-circuit-size-bound", "expressivity.rope-transformer-circuit-size-table")
@pytest.mark.parametrize("head", [pytest.param(_rope_attention_last_output, id="rope-head"), pytest.param(
    _rope_attention_over_a_log_window, id="log-n-window", marks=control(
        "a layer of O(log n) size: its output reads O(log n) of the n d input numbers",
        models=["expressivity.rope-transformer-circuit-size-bound", "expressivity.rope-transformer-circuit-size-table"]))])
@given(n=st.integers(2, 64), seed=st.integers(0, 2**31 - 1))
def test_rope_attention_output_depends_on_every_input_number(head, n, seed):
    d = 4
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, dtype=torch.float64, generator=g)
    w = tuple(torch.randn(d, d, dtype=torch.float64, generator=g) / d for _ in range(3))  # unsaturated softmax
    y = head(x, w)
    changed = 0
    for j in range(n):
        for c in range(d):  # perturb one input number alone: coordinate c of token j
            x2 = x.clone()
            x2[j, c] += 0.5
            # rounding moves y by at most ~n eps |y| < 1e-13 |y|: a change above 1e-9 (1 + |y|) is a real dependence
            changed += int((head(x2, w) - y).abs().max().item() > 1e-9 * (1 + y.abs().max().item()))
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


# --- Theorem 1 and the table of lines 586-591, decided (issue 12) -----------------------------------------------
# A circuit computing a layer's output must contain, for every output number, the gate that computes its sign
# bit (any encoding of a real number has one). Gates that compute different Boolean functions are different
# gates, whatever the basis and fan-in. So if the n d output sign bits are pairwise different functions, none
# constant and none equal to an input bit, the circuit has at least n d gates: it grows linearly in n, and
# n d / (L H d^2 d_k log n) -> infinity, so no O(L H d^2 d_k log n) size bound can hold (L = H = 1 here).

def _attention_layer(x: torch.Tensor, w: tuple[torch.Tensor, ...], pe: str) -> torch.Tensor:
    """One unmasked attention head over a batch (B, n, d), RoPE or additive sinusoidal position encoding."""
    n, d = x.shape[-2:]
    pos = torch.arange(n, dtype=torch.float64)
    if pe == "additive":
        x = x + torch.sin(pos[:, None] / 10000.0 ** (torch.arange(d, dtype=torch.float64) / d))
    q, k, v = (x @ wi for wi in w)
    if pe == "rope":
        theta = rope_frequencies(d)
        q, k = rope_interleaved(q, pos, theta), rope_interleaved(k, pos, theta)
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ v


def _distinct_output_sign_functions(n: int, d: int, pe: str, batch: int = 128) -> int:
    """How many of the n d output sign bits are pairwise different, non-constant and differ from every input
    sign bit, as witnessed on `batch` random inputs (a witness of difference is exact: two functions that
    differ on one input are different functions)."""
    g = torch.Generator().manual_seed(1000 + n)
    w = tuple(torch.randn(d, d, dtype=torch.float64, generator=g) for _ in range(3))
    x = torch.randn(batch, n, d, dtype=torch.float64, generator=g)
    out_bits = (_attention_layer(x, w, pe) > 0).reshape(batch, -1).T  # (n d, batch): truth table rows
    in_bits = {tuple(r) for r in (x > 0).reshape(batch, -1).T.tolist()}
    rows = {tuple(r) for r in out_bits.tolist() if 0 < sum(r) < batch}
    return len(rows - in_bits)


@pytest.mark.claim("expressivity.rope-transformer-circuit-size-bound", "expressivity.rope-transformer-circuit-size-table",
                   "expressivity.rope-vs-relative-log-n-advantage")
@refutes(reason="one RoPE attention head (L = H = 1, d = d_k = 4): every output sign bit is a distinct gate, so the "
                "exact count of distinct output sign functions is a lower bound on the circuit size in any basis")
def test_rope_layer_needs_a_gate_per_output_so_size_grows_like_n():
    _size_grows_like_n("rope")


@pytest.mark.claim("expressivity.standard-transformer-circuit-size-table")
@refutes(reason="one attention head with additive sinusoidal position encoding (L = H = 1, d = d_k = 4): every "
                "output sign bit is a distinct gate, a lower bound on the circuit size in any basis")
def test_additive_pe_layer_needs_a_gate_per_output_so_size_grows_like_n():
    _size_grows_like_n("additive")


def _size_grows_like_n(pe: str) -> None:
    import sympy as sp
    d = 4
    ns = [4, 16, 64]
    lower = [_distinct_output_sign_functions(n, d, pe) for n in ns]
    record("n", ns)
    record("gates needed (distinct output sign functions)", lower)
    assert lower == [n * d for n in ns], f"expected n d distinct output bits, found {lower}"  # the witness itself
    n = sp.symbols("n", positive=True)
    ratio = sp.limit(n * d / (d**2 * d * sp.log(n)), n, sp.oo)  # lower bound / (L H d^2 d_k log n)
    claim_assert(ratio.is_finite, "the size needed, n d, is not O(L H d^2 d_k log n): n d / log n -> oo",
                 lower_bound=lower, limit=str(ratio))
