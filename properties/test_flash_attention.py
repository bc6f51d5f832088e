"""FlashAttention's exactness (foundations.txt lines 282-300): the tiled algorithm with an online
softmax against standard attention, in exact arithmetic (sympy) and in floating point.

Memory, FLOPs and HBM accesses of the same algorithm are in ``test_complexity.py``; other
FlashAttention implementations (SDPA, FlexAttention, our Triton kernel) in ``test_backends.py``.
"""
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record
from impl.attention import attention
from impl.tiled_attention import flash_attention
from properties.assertions import attention_term_scales, max_abs_error, relative_error
from properties.strategies.attention import attention_problems

EPS64 = 2.0**-52
# float64: an output entry is a convex combination of <= 40 values, rescaled once per key tile
# (<= 40 tiles): a few hundred roundings of relative size eps at most, i.e. < 1e-13; 1e-12 leaves
# a factor 10 and is still 10^4 times below float32's epsilon, so an algorithmic error cannot hide.
RTOL64 = 1e-12
block_sizes = st.integers(1, 20)


def _grads(fn, q, k, v, d_out):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out, lse = fn(q, k, v)
    return (out, lse, *torch.autograd.grad((out * d_out).sum(), (q, k, v)))


@pytest.mark.claim("flash-attention.exact-no-approximation", "flash-attention.tiling-no-full-attention-matrix")
@given(problem=attention_problems(), block_m=block_sizes, block_n=block_sizes)
def test_tiled_attention_equals_the_reference_in_float64_for_every_block_size(problem, block_m, block_n):
    q, k, v, mask = problem.cast(torch.float64)
    d_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(problem.seed),
                        dtype=torch.float64)
    ref = _grads(lambda *a: attention(*a, mask=mask, return_lse=True), q, k, v, d_out)
    tiled = _grads(lambda *a: flash_attention(*a, mask=mask, block_m=block_m, block_n=block_n, return_lse=True),
                   q, k, v, d_out)
    # errors relative to the size of the summed terms (dQ, dK cancel to 0 for one key; see assertions.py)
    terms = attention_term_scales(q, k, v, mask, d_out)
    terms["lse"] = terms["logits"]
    errors = {name: max_abs_error(t, r) / max(terms[name], 1e-300)
              for name, t, r in zip(("out", "lse", "dq", "dk", "dv"), tiled, ref)}
    record("relative_error[tiled vs reference, float64]", max(errors.values()))
    claim_assert(max(errors.values()) <= RTOL64, "tiled attention differs from standard attention beyond rounding",
                 problem=problem, block_m=block_m, block_n=block_n, errors=errors)


@pytest.mark.claim("flash-attention.exact-no-approximation")
@given(problem=attention_problems(), blocks=st.tuples(block_sizes, block_sizes, block_sizes, block_sizes))
def test_tiled_output_does_not_depend_on_the_block_size(problem, blocks):
    q, k, v, mask = problem.cast(torch.float64)
    a = flash_attention(q, k, v, mask=mask, block_m=blocks[0], block_n=blocks[1])
    b = flash_attention(q, k, v, mask=mask, block_m=blocks[2], block_n=blocks[3])
    err = relative_error(a, b)
    claim_assert(err <= RTOL64, "the output depends on the tiling beyond rounding", problem=problem, blocks=blocks,
                 relative_difference=err)


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("rescaled", [
    pytest.param(True, id="online-softmax"),
    pytest.param(False, id="no-rescale", marks=control(
        "the two blocks' statistics added without the factors exp(m_b - m) that bring them to the common maximum: "
        "a tiling that is not an identity, i.e. an approximation of softmax")),
])
def test_online_softmax_over_two_key_blocks_equals_softmax_symbolically(rescaled):
    """Dao et al. 2022, eq. (2)-(3): merging per-block statistics (m, l, O) is an identity."""
    s = sp.symbols("s1:5", real=True)  # one query row's scores, keys split into blocks {1,2} and {3,4}
    v = sp.symbols("v1:5", real=True)  # one value coordinate per key
    exact = sum(sp.exp(si) * vi for si, vi in zip(s, v)) / sum(sp.exp(si) for si in s)
    m1, m2 = sp.Max(s[0], s[1]), sp.Max(s[2], s[3])
    l1, l2 = sp.exp(s[0] - m1) + sp.exp(s[1] - m1), sp.exp(s[2] - m2) + sp.exp(s[3] - m2)
    o1 = (sp.exp(s[0] - m1) * v[0] + sp.exp(s[1] - m1) * v[1]) / l1
    o2 = (sp.exp(s[2] - m2) * v[2] + sp.exp(s[3] - m2) * v[3]) / l2
    m = sp.Max(m1, m2)
    r1, r2 = (sp.exp(m1 - m), sp.exp(m2 - m)) if rescaled else (1, 1)
    l_new = r1 * l1 + r2 * l2
    merged = (r1 * l1 * o1 + r2 * l2 * o2) / l_new
    # exp(a - Max(..)) factors cancel whatever the maxima are: check on each ordering of the blocks
    for order in ({s[0]: 3, s[1]: -1, s[2]: 2, s[3]: 0}, {s[0]: -2, s[1]: 0, s[2]: 5, s[3]: 1}):
        diff = sp.simplify((merged - exact).subs(order))
        claim_assert(diff == 0, "the online softmax merge differs from softmax", order=str(order), diff=str(diff))
    shift = sp.Symbol("c", real=True)  # and symbolically for any common shift c of a block's maximum
    lhs = (sp.exp(-shift) * (sp.exp(s[0]) * v[0] + sp.exp(s[1]) * v[1])) / (sp.exp(-shift) * (sp.exp(s[0]) + sp.exp(s[1])))
    claim_assert(sp.simplify(lhs - (sp.exp(s[0]) * v[0] + sp.exp(s[1]) * v[1]) / (sp.exp(s[0]) + sp.exp(s[1]))) == 0,
                 "the factor exp(-m) does not cancel")
