"""The benchmarks' arithmetic: log-log fits (benchmarks/_fit.py) and FLOP counts (benchmarks/_flops.py)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._fit import fit_power_law, scaling_exponent  # noqa: E402
from benchmarks._flops import attended_pairs, attention_flops  # noqa: E402


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0])
def test_fit_recovers_the_exponent_and_prefactor_of_an_exact_power_law(p):
    n = [256, 512, 1024, 4096]
    fit = fit_power_law(n, [7.0 * v ** p for v in n])
    assert fit.exponent == pytest.approx(p, abs=1e-12)
    assert fit.prefactor == pytest.approx(7.0, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit(2048) == pytest.approx(7.0 * 2048 ** p, rel=1e-9)


def test_a_constant_term_pulls_the_fitted_exponent_below_the_asymptotic_one():
    n = [512, 1024, 2048, 4096]
    p = scaling_exponent(lambda v: 1e6 + 100.0 * v, n)  # linear cost plus a fixed workspace
    assert 0 < p < 1


def test_fit_rejects_what_has_no_log_log_slope():
    with pytest.raises(ValueError, match="same length"):
        fit_power_law([1, 2], [1.0])
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([1, 2], [1.0, 0.0])
    with pytest.raises(ValueError, match="two distinct"):
        fit_power_law([4, 4], [1.0, 2.0])


def _pairs_by_mask(n_q, n_k, alignment):
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    offset = 0 if alignment == "top-left" else n_k - n_q
    return int((j <= i + offset).sum())


@pytest.mark.parametrize("alignment", ["top-left", "bottom-right"])
@pytest.mark.parametrize("n_q, n_k", [(0, 5), (5, 0), (1, 1), (7, 7), (3, 11), (11, 3), (64, 48), (48, 64)])
def test_causal_pair_count_equals_the_count_of_allowed_mask_entries(n_q, n_k, alignment):
    assert attended_pairs(n_q, n_k, causal=True, alignment=alignment) == _pairs_by_mask(n_q, n_k, alignment)


def test_attention_flops_are_4_b_h_nq_nk_d_without_mask_and_half_plus_diagonal_under_causal_mask():
    b, h, n, d = 2, 3, 128, 64
    assert attention_flops(b, h, n, n, d) == 4 * b * h * n * n * d
    assert attention_flops(b, h, n, n, d, causal=True) == 4 * b * h * d * n * (n + 1) // 2
    assert attention_flops(b, h, 16, 32, 64, d_v=32) == 2 * b * h * 16 * 32 * (64 + 32)
    assert attention_flops(b, h, n, n, d, backward=True) == 2.5 * attention_flops(b, h, n, n, d)
    assert math.isclose(attention_flops(1, 1, 5, 3, 8, causal=True, alignment="bottom-right"),
                        4 * 8 * (1 + 2 + 3))  # rows 0, 1 see no key; rows 2, 3, 4 see 1, 2, 3
