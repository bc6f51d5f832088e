"""The MultiHeadAttention class printed at foundations.txt lines 133-176, executed from sources/.

Whether it computes Concat(head_1..head_h) W^O (lines 108-112), its constructor's contract, its
parameter count, the shapes its comments state (read from the locals of the printed ``forward``),
and its masking. Also the head-spectral-diversity function of spectral.txt lines 388-404.
"""
import functools
import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, refutes
from impl import param_counts as pc
from impl.multihead import MultiHeadAttention
from properties.strategies.architecture import (HeadLayout, assert_equal_up_to_rounding, batch_lengths, gaussian,
                                                head_layouts, locals_at_return, printed, seeded_module, seeds)


@functools.cache
def _printed_class() -> type:
    run = printed("multi-head.snippet-multi-head-attention")
    assert run.ran, run.describe()
    return run.namespace["MultiHeadAttention"]


def _printed_mha(d: int, h: int, seed: int) -> torch.nn.Module:
    """The printed module in float64, parameters redrawn from ``seed``, dropout off (eval)."""
    return seeded_module(_printed_class()(d, h), seed).eval()


def _as_ours(printed_mha: torch.nn.Module, transpose_w_o: bool = False) -> MultiHeadAttention:
    """:class:`impl.multihead.MultiHeadAttention` holding the printed module's weights and biases (``transpose_w_o``:
    W^O transposed, a negative control)."""
    ours = MultiHeadAttention(printed_mha.d_model, printed_mha.num_heads, bias=True).double()
    state = {k.replace("W_", "w_"): v for k, v in printed_mha.state_dict().items()}
    if transpose_w_o:
        state["w_o.weight"] = state["w_o.weight"].T.contiguous()
    ours.load_state_dict(state)
    return ours


def _head_block(t: torch.Tensor, i: int, n_heads: int, d_k: int) -> torch.Tensor:
    """Head i's features of a (..., h d_k) tensor: column block i."""
    return t[..., i * d_k:(i + 1) * d_k]


def _interleaved(t: torch.Tensor, i: int, n_heads: int, d_k: int) -> torch.Tensor:
    """A negative control: every h-th column from i, the split of view(..., d_k, h) instead of (..., h, d_k)."""
    return t[..., i::n_heads]



@pytest.mark.claim("multi-head.snippet-mha-forward-computes-formula")
@pytest.mark.parametrize("transpose_w_o", [pytest.param(False, id="W^O"), pytest.param(
    True, id="W^O-transposed", marks=control("Concat(head_i) (W^O)^T: the output projection transposed"))])
@given(layout=head_layouts(kv_sharing=False), bn=batch_lengths(), seed=seeds(), cross=st.booleans())
@example(layout=HeadLayout(2, 1, 1, 2), bn=(1, 2), seed=0, cross=False)  # d > 1: (W^O)^T differs from W^O
def test_printed_multi_head_attention_computes_concat_of_heads_times_wo(transpose_w_o, layout, bn, seed, cross):
    (b, n), d = bn, layout.d_model
    m = _printed_mha(d, layout.n_heads, seed)
    x_q = gaussian(seed + 1, b, n, d)
    x_kv = gaussian(seed + 2, b, n + 2, d) if cross else x_q
    with torch.no_grad():
        theirs, ours = m(x_q, x_kv, x_kv), _as_ours(m, transpose_w_o)(x_q, x_kv)
    assert_equal_up_to_rounding(theirs, ours, "printed forward != Concat(head_i) W^O", layout=layout, cross=cross)


@pytest.mark.claim("multi-head.snippet-requires-divisible-dmodel")
@pytest.mark.parametrize("scale_of", [pytest.param(lambda d, h: math.sqrt(d // h), id="sqrt-d_k"), pytest.param(
    lambda d, h: math.sqrt(d), id="sqrt-d_model", marks=control("the scale sqrt(d_model), not sqrt(d_k)"))])
@given(d=st.integers(1, 24), h=st.integers(1, 8))
@example(d=8, h=2)  # h > 1 divides d: sqrt(d_model) != sqrt(d_k)
def test_printed_constructor_accepts_exactly_divisible_widths_and_scales_by_sqrt_d_k(scale_of, d, h):
    try:
        m = _printed_class()(d, h)
    except AssertionError:  # the printed `assert d_model % num_heads == 0`
        m = None
    claim_assert((m is not None) == (d % h == 0), "construction succeeds other than exactly when h divides d",
                 d=d, h=h, built=m is not None)
    if m is not None:
        claim_assert(m.d_k == d // h and m.scale == scale_of(d, h), "d_k != d // h or scale != sqrt(d_k)",
                     d_k=m.d_k, scale=m.scale)


@pytest.mark.claim("multi-head.snippet-qkv-linear-d-model-square", "multi-head.param-total-360k")
@pytest.mark.parametrize("shape", [pytest.param((512, 512), id="512x512"), pytest.param(
    (64, 512), id="64x512", marks=control("one 512 -> 64 linear per head, not one 512 x 512 linear for all heads"))])
def test_printed_mha_512_8_has_four_512_by_512_linears_and_1050624_parameters(shape):
    m = _printed_class()(512, 8)
    shapes = {name: tuple(lin.weight.shape) for name, lin in (("W_q", m.W_q), ("W_k", m.W_k), ("W_v", m.W_v),
                                                                 ("W_o", m.W_o))}
    total = pc.count_parameters(m)
    claim_assert(all(s == shape for s in shapes.values()), "a projection is not 512 x 512", **shapes)
    claim_assert(total == 4 * 512 * 512 + 4 * 512 == 1_050_624 == pc.attention_params(512, 8, bias=True)
                 == pc.count_parameters(torch.nn.MultiheadAttention(512, 8)),
                 "the printed module does not hold 1,050,624 parameters", counted=total)


def _forward_locals(layout, bn, seed, n_k=None):
    (b, n), d = bn, layout.d_model
    m = _printed_mha(d, layout.n_heads, seed)
    x_q, x_kv = gaussian(seed + 1, b, n, d), gaussian(seed + 2, b, n_k or n, d)
    with torch.no_grad():
        return m, x_q, x_kv, *locals_at_return(type(m).forward, lambda: m(x_q, x_kv, x_kv))


@pytest.mark.claim("multi-head.snippet-split-heads-shape-comment")
@pytest.mark.parametrize("block", [pytest.param(_head_block, id="column-block"), pytest.param(
    _interleaved, id="interleaved", marks=control(
    "heads as every h-th column, view(..., d_k, h) in place of (..., h, d_k)"))])
@given(layout=head_layouts(kv_sharing=False), bn=batch_lengths(), seed=seeds())
@example(layout=HeadLayout(4, 2, 2, 2), bn=(1, 3), seed=0)  # h, d_k > 1: interleaving differs here
def test_printed_split_gives_b_h_n_d_k_with_head_i_the_ith_column_block(block, layout, bn, seed):
    m, x, _, _, seen = _forward_locals(layout, bn, seed)
    q, (b, n), dk = seen["Q"], bn, layout.d_head
    claim_assert(tuple(q.shape) == (b, layout.n_heads, n, dk), "Q is not (B, h, n, d_k)", shape=tuple(q.shape))
    with torch.no_grad():
        projected = m.W_q(x)  # (B, n, d_model)
    for i in range(layout.n_heads):
        assert_equal_up_to_rounding(q[:, i], block(projected, i, layout.n_heads, dk), "head i is not column block i")


@pytest.mark.claim("multi-head.snippet-scores-shape-comment")
@pytest.mark.parametrize("stated", [pytest.param(lambda b, h, n, d_k: (b, h, n, n), id="B,h,n,n"), pytest.param(
    lambda b, h, n, d_k: (b, h, n, d_k), id="B,h,n,d_k", marks=control("the scores taken as (B, h, n, d_k)"))])
@given(layout=head_layouts(kv_sharing=False), bn=batch_lengths(), seed=seeds())
@example(layout=HeadLayout(4, 2, 2, 2), bn=(1, 3), seed=0)  # n != d_k
def test_printed_scores_are_b_h_n_n_in_self_attention(stated, layout, bn, seed):
    *_, seen = _forward_locals(layout, bn, seed)
    (b, n) = bn
    claim_assert(tuple(seen["scores"].shape) == stated(b, layout.n_heads, n, layout.d_head),
                 "scores are not (B, h, n, n)",
                 shape=tuple(seen["scores"].shape))


@pytest.mark.claim("multi-head.snippet-merge-heads-shape-comment")
@pytest.mark.parametrize("block", [pytest.param(_head_block, id="column-block"), pytest.param(
    _interleaved, id="interleaved", marks=control(
    "heads as every h-th column, view(..., d_k, h) in place of (..., h, d_k)"))])
@given(layout=head_layouts(kv_sharing=False), bn=batch_lengths(), seed=seeds(), extra=st.integers(0, 3))
@example(layout=HeadLayout(4, 2, 2, 2), bn=(1, 3), seed=0, extra=1)  # h, d_k > 1: interleaving differs here
def test_printed_merge_turns_b_h_n_d_k_into_b_n_d_model_concatenating_heads_in_order(block, layout, bn, seed, extra):
    (b, n), dk = bn, layout.d_head
    *_, seen = _forward_locals(layout, bn, seed, n_k=n + extra)
    per_head = seen["attn_weights"] @ seen["V"]  # (B, h, n, d_k)
    context = seen["context"]
    claim_assert(tuple(per_head.shape) == (b, layout.n_heads, n, dk), "attn_weights @ V is not (B, h, n, d_k)",
                 shape=tuple(per_head.shape))
    claim_assert(tuple(context.shape) == (b, n, layout.d_model), "context is not (B, n, d_model)",
                 shape=tuple(context.shape))
    for i in range(layout.n_heads):
        claim_assert(torch.equal(block(context, i, layout.n_heads, dk), per_head[:, i]), "merged block i != head i",
                     i=i)


def _causal_run(layout, n, seed, dtype, later_seed=None):
    m = _printed_mha(layout.d_model, layout.n_heads, seed).to(dtype)
    x = gaussian(seed + 1, 1, n, layout.d_model)
    if later_seed is not None:
        x[:, 1:] = gaussian(later_seed, 1, n - 1, layout.d_model)  # change every position after the first
    x = x.to(dtype)
    mask = torch.ones(n, n).tril()  # 1 keeps, 0 masks (the printed convention)
    with torch.no_grad():
        return locals_at_return(type(m).forward, lambda: m(x, x, x, mask))


@pytest.mark.claim("multi-head.snippet-mask-zero-means-masked")
@refutes(reason="the smallest masked problem (n = 2, d = h = 1, one masked score) in float16, the precision models "
                "are commonly run in; masked_fill(-1e9) cannot store -1e9 in float16 (max 65504)")
def test_printed_mask_gives_masked_positions_zero_weight_in_every_precision():
    layout = HeadLayout(d_model=1, n_heads=1, n_kv_heads=1, d_head=1)
    try:
        _, seen = _causal_run(layout, 2, 0, torch.float16)
        weights = seen["attn_weights"]
        zero = bool((weights[..., 0, 1] == 0).all())
        error = None
    except RuntimeError as exc:
        zero, error = False, str(exc)
    claim_assert(zero, "a position with mask == 0 did not receive -1e9 and zero weight", dtype="float16", error=error)


@pytest.mark.claim("multi-head.snippet-mask-zero-means-masked")
@given(layout=head_layouts(kv_sharing=False), n=st.integers(2, 6), seed=seeds(),
       dtype=st.sampled_from([torch.float64, torch.float32, torch.bfloat16]))
def test_printed_mask_zeroes_masked_weights_and_a_causal_output_ignores_later_positions(layout, n, seed, dtype):
    out, seen = _causal_run(layout, n, seed, dtype)
    masked = torch.ones(n, n).tril() == 0
    claim_assert(bool((seen["attn_weights"][..., masked] == 0).all()), "a masked weight is not exactly 0",
                 dtype=str(dtype))
    moved, _ = _causal_run(layout, n, seed, dtype, later_seed=seed + 5)
    claim_assert(torch.equal(out[:, 0], moved[:, 0]), "position 0's output depends on later positions",
                 dtype=str(dtype))


# --- spectral.txt lines 388-404 ----------------------------------------------------------------------------------

@functools.cache
def _head_spectral_diversity():
    run = printed("spectral.snippet-head-spectral-diversity")
    assert run.ran, run.describe()
    return run.namespace["head_spectral_diversity"]


def _attention_stack(h: int, n: int, seed: int) -> torch.Tensor:
    """h row-stochastic n x n matrices with distinct spectra: (h, n, n)."""
    return torch.softmax(3 * gaussian(seed, h, n, n), dim=-1)


@pytest.mark.claim("spectral.snippet-head-diversity-most-similar-is-self")
@refutes(reason="two heads (one cannot name another head with one) of 2 x 2 attention matrices with distinct spectra")
def test_most_similar_heads_names_for_each_head_another_head():
    result = _head_spectral_diversity()(_attention_stack(2, 2, 0))
    values, indices = result["most_similar_heads"]
    others = [int(j) != i for i, j in enumerate(indices)]
    claim_assert(all(others), "most_similar_heads names a head as its own most similar head",
                 indices=indices, distances=values)


@pytest.mark.claim("spectral.snippet-head-diversity-most-similar-is-self")
@given(h=st.integers(1, 5), n=st.integers(1, 6), seed=seeds())
def test_most_similar_heads_returns_every_head_itself_at_distance_zero(h, n, seed):
    stack = _attention_stack(h, n, seed)
    result = _head_spectral_diversity()(stack)
    values, indices = result["most_similar_heads"]
    spectra = torch.linalg.svdvals(stack)
    dist = torch.cdist(spectra, spectra)
    # the minimum is the zero diagonal: head i itself, or (for n = 1, where every spectrum is [1]) a tied copy
    claim_assert(bool((values == 0).all()) and all(dist[j, i] == 0 for i, j in enumerate(indices.tolist())),
                 "min over the cdist matrix is not a zero-distance (self) entry", indices=indices, values=values)
    if n >= 2:  # generic spectra are distinct: the index is the head itself
        claim_assert(torch.equal(indices, torch.arange(h)), "a head's most similar head is not itself", indices=indices)
    # per-head vs batched svdvals differ by ~n eps sigma_1 (sigma_1 <= sqrt n), so each distance by ~n^2 eps; the
    # mean of h^2 terms adds h^2 eps: bound 16 n^2 + h^2 eps, relative to max(1, sum of distances)
    tol = (16 * n**2 + h**2) * 2.0**-52 * max(1.0, dist.sum().item())
    claim_assert(abs(result["mean_diversity"] - dist.sum().item() / h**2) <= tol,
                 "mean_diversity is not the mean over all h^2 pairs, zero diagonal included",
                 mean_diversity=result["mean_diversity"])
