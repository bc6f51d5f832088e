"""Scaled dot-product attention: the definitions of foundations.txt lines 9-58."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from claimcheck import claim_assert
from impl.attention import attention, attention_weights

EPS64 = 2.0**-52


@st.composite
def qkv_triples(draw, max_n: int = 10, max_d: int = 8):
    """float64 (q, k, v) with q (n_q, d_k), k (n_k, d_k), v (n_k, d_v)."""
    n_q, n_k, d_k, d_v = (draw(st.integers(1, m)) for m in (max_n, max_n, max_d, max_d))
    elements = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
    q, k, v = (draw(hnp.arrays(np.float64, s, elements=elements)) for s in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)


@pytest.mark.claim("attention.output-convex-combination")
@given(qkv=qkv_triples())
def test_each_output_row_is_a_convex_combination_of_value_rows(qkv):
    q, k, v = qkv
    a = attention_weights(q, k)
    y = attention(q, k, v)
    n_k = k.shape[0]
    # Weights: non-negative, rows sum to 1 up to summation rounding (n_k terms, one division).
    claim_assert(bool((a >= 0).all()) and (a.sum(-1) - 1).abs().max().item() <= 2 * n_k * EPS64,
                 "attention weights are not row-stochastic", q=q, k=k)
    # A convex combination lies inside the bounding box of the value rows, up to the rounding of
    # an n_k-term dot product with entries bounded by max|v| (n_k * eps * max|v|, doubled).
    slack = 2 * n_k * EPS64 * max(v.abs().max().item(), 1.0)
    lo, hi = v.min(0).values, v.max(0).values
    claim_assert(bool((y >= lo - slack).all() and (y <= hi + slack).all()),
                 "an output row leaves the convex hull of the value rows", q=q, k=k, v=v, y=y)
