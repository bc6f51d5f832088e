"""index.txt (the topic index): the Llama 3 8B FFN width from Meta's published formula, a head as a consensus step,
the "row-stochastic matrices must have a dominant" argument for sinks, spectra versus behaviour, and GQA's
KV-cache saving for the Llama 3 8B configuration.

Records of cited works are in references.yaml; the generic record tests are properties/test_records.py.
"""
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes
from claimcheck.plugin import references
from impl import param_counts as pc
from impl.attention import Mask, attention_weights
from impl.spectral import eig


def _fact(config, key, name):
    return references(config)[key].fact(name).value


# --- Llama 3 8B: d_ff from Meta's reference FeedForward (index.txt line 143) ----------------------------------

@pytest.mark.claim("architecture.index-llama3-8b-dff-14336")
def test_meta_ffn_width_formula_gives_14336_for_the_recorded_llama3_8b_arguments(pytestconfig):
    """Meta's FeedForward: h = int(2 * 4 dim / 3); h = int(multiplier * h); round h up to a multiple of multiple_of."""
    dim = _fact(pytestconfig, "meta-llama3-8b-config", "d-model")
    mult = _fact(pytestconfig, "meta-llama3-8b-config", "ffn-dim-multiplier")
    multiple_of = _fact(pytestconfig, "meta-llama3-8b-config", "multiple-of")
    hidden = int(2 * (4 * dim) / 3)
    hidden = int(mult * hidden)
    hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
    record("llama3_8b_ffn_hidden_dim", hidden)
    claim_assert(hidden == 14336, "Meta's formula does not give d_ff = 14336", hidden=hidden, dim=dim, mult=mult,
                 multiple_of=multiple_of)
    claim_assert(_fact(pytestconfig, "meta-llama3-8b-config", "ffn-hidden-dim") == hidden,
                 "the record's ffn-hidden-dim is not what its own formula inputs give", hidden=hidden)


# --- a head is a consensus step (index.txt line 108) -------------------------------------------------------------

@pytest.mark.claim("attention.index-attention-heads-are-consensus-protocols")
@pytest.mark.parametrize("layer", [
    pytest.param(lambda a, x: a @ x, id="head"),
    pytest.param(lambda a, x: a @ x + x, id="head-plus-residual", marks=control(
        "the head's average plus the token's own state (the residual F_l(x) = x of index.txt line 100): a step "
        "that is not an average, the falsity of 'a head is a consensus protocol'"))])
def test_iterating_a_head_brings_the_tokens_to_agreement(layer):
    """Two scalar tokens 0 and 1 under uniform attention (equal logits: row-stochastic, entries 1/2), 50 layers:
    averaging alone agrees at once, while any step that keeps each token's own state keeps the gap."""
    x = torch.tensor([0.0, 1.0], dtype=torch.float64)
    a = torch.full((2, 2), 0.5, dtype=torch.float64)
    gaps = []
    for _ in range(50):
        x = layer(a, x)
        gaps.append((x[1] - x[0]).item())
    record("gap_after_50_layers", gaps[-1])
    # the gap starts at 1; halving it is far above rounding (the averaged gap is exactly 0)
    claim_assert(abs(gaps[-1]) < 0.5, "the tokens do not approach a common value", gaps=gaps[:3] + gaps[-1:])


# --- "row-stochastic matrices must have a dominant" (index.txt line 112) -----------------------------------------

@pytest.mark.claim("attention.index-row-stochastic-forces-a-dominant-token")
@refutes(reason="n = 4 equal logits: softmax gives the uniform row-stochastic matrix, every entry 1/4; and with no "
                "positions or mask, permuting the tokens permutes the weights, so no position is singled out")
def test_a_row_stochastic_attention_matrix_need_not_have_a_dominant_token():
    n = 4
    q = torch.zeros((n, 3), dtype=torch.float64)
    k = torch.zeros((n, 3), dtype=torch.float64)
    a = attention_weights(q, k)
    perm = torch.tensor([1, 2, 3, 0])
    x = torch.randn((n, 3), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    equivariant = torch.allclose(attention_weights(x[perm], x[perm]), attention_weights(x, x)[perm][:, perm])
    record("uniform_row", a[0].tolist())
    claim_assert(not equivariant or a.max().item() > 1.0 / n + 1e-12,
                 "a row-stochastic attention matrix with no dominant entry, and no preferred position",
                 row=a[0].tolist(), permutation_equivariant=equivariant)


@pytest.mark.claim("attention.index-row-stochastic-forces-a-dominant-token")
@pytest.mark.parametrize("mask", [pytest.param(None, id="no-mask"), pytest.param(Mask(causal="top-left"), id="causal", marks=control(
    "a causal mask, the positional information the argument lacks: query 1 sees only token 1, so attention is neither "
    "uniform on equal logits nor permutation-equivariant, and the check must reject it",
    models=["attention.index-row-stochastic-forces-a-dominant-token"]))])
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 8), d=st.integers(1, 8), data=st.data())
def test_attention_without_positions_is_permutation_equivariant_and_uniform_on_equal_logits(mask, seed, n, d, data):
    perm = torch.tensor(data.draw(st.permutations(range(n)), label="permutation"))
    gen = torch.Generator().manual_seed(seed)
    x, w_q, w_k = (torch.randn(shape, generator=gen, dtype=torch.float64) for shape in ((n, d), (d, d), (d, d)))
    a = attention_weights(x @ w_q, x @ w_k, mask=mask)
    moved = attention_weights(x[perm] @ w_q, x[perm] @ w_k, mask=mask)
    same = x[:1].expand(n, d)  # n copies of one token: every row's logits are equal
    flat = attention_weights(same @ w_q, same @ w_k, mask=mask)
    # permuted (or equal) inputs give the same logits up to the matmul's blocking, a few ulps of max|S|, which move a
    # weight <= 1 by about as much: 16 eps (1 + max|S|) for both checks
    logits = max((x @ w_q @ (x @ w_k).T).abs().max().item(), (same @ w_q @ (same @ w_k).T).abs().max().item())
    tol = 16 * 2.0**-52 * (1 + logits / d**0.5)
    claim_assert((moved - a[perm][:, perm]).abs().max() <= tol and (flat - 1 / n).abs().max() <= tol,
                 "attention with no positions is not P A P^T under a permutation P, or not uniform on equal logits",
                 permutation=perm.tolist(), equivariance_error=(moved - a[perm][:, perm]).abs().max(),
                 max_deviation_from_uniform=(flat - 1 / n).abs().max())


# --- spectra do not determine behaviour (index.txt line 120) -----------------------------------------------------

@pytest.mark.claim("spectral.index-attention-and-jacobian-spectra-determine-behaviour")
@refutes(reason="a 3-token softmax attention matrix A and its conjugate P A P^T by a transposition: equal "
                "eigenvalues and singular values (attention and Jacobian spectra of the linear map V -> A V), "
                "different outputs on the same values")
def test_equal_attention_and_jacobian_spectra_with_different_outputs():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn((3, 2), generator=gen, dtype=torch.float64)
    a = attention_weights(x, x * 2.0)
    p = torch.eye(3, dtype=torch.float64)[[1, 0, 2]]
    b = p @ a @ p.T  # row-stochastic too: a permutation-similar attention matrix
    v = torch.tensor([[1.0], [0.0], [-1.0]], dtype=torch.float64)
    same_eig = torch.allclose(torch.sort(eig(a).real).values,
                              torch.sort(eig(b).real).values, atol=1e-12)
    same_sv = torch.allclose(torch.linalg.svdvals(a), torch.linalg.svdvals(b), atol=1e-12)
    differ = (a @ v - b @ v).abs().max().item()
    record("output_difference", differ)
    claim_assert(not (same_eig and same_sv and differ > 1e-6),
                 "equal spectra of the attention matrix and of the layer's Jacobian, different outputs",
                 same_eigenvalues=same_eig, same_singular_values=same_sv, output_difference=differ)


def _spectral_radius(a: torch.Tensor) -> float:
    return eig(a).abs().max().item()


def _largest_singular_value(a: torch.Tensor) -> float:
    return torch.linalg.svdvals(a).max().item()


@pytest.mark.claim("spectral.index-attention-and-jacobian-spectra-determine-behaviour")
@pytest.mark.parametrize("gain_bound", [
    pytest.param(_largest_singular_value, id="singular-values"),
    pytest.param(_spectral_radius, id="eigenvalues", marks=control(
        "the eigenvalue modulus (spectral radius 1 for a row-stochastic matrix) taken for the gain bound"))])
@given(n=st.integers(2, 8), seed=st.integers(0, 2**31 - 1), beta=st.floats(0.5, 4.0))
def test_the_jacobian_singular_values_bound_how_much_an_attention_layer_amplifies_a_gradient(gain_bound, n, seed,
                                                                                             beta):
    """The corrected reading: spectra govern what they measure. The layer V -> A V has Jacobian A (per value
    column), so its backward multiplies gradients by A^T: no gradient grows by more than the largest singular
    value of A, and the top left singular vector grows by exactly that. The eigenvalues do not bound it:
    a row-stochastic A has spectral radius 1, yet sigma_max(A) >= 1 (A 1 = 1) and is > 1 unless A is also
    column-stochastic."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.softmax(beta * torch.randn((n, n), generator=gen, dtype=torch.float64), dim=-1)
    bound = gain_bound(a)
    g = torch.randn((n, 3), generator=gen, dtype=torch.float64)
    gain = (torch.linalg.norm(a.T @ g) / torch.linalg.norm(g)).item()
    u, _, _ = torch.linalg.svd(a)
    top = torch.linalg.norm(a.T @ u[:, 0]).item()  # |u_1| = 1
    record("gain_over_sigma_max", gain / _largest_singular_value(a))
    # float64 products of <= 8 terms and an SVD: relative rounding ~1e-15; 1e-12 leaves three orders of margin
    claim_assert(gain <= bound * (1 + 1e-12) and abs(top - bound) <= 1e-12 * bound,
                 "the gain of the layer's backward is not bounded by, and attained at, this spectral quantity",
                 gain=gain, attained=top, bound=bound, n=n)


# --- GQA's KV-cache saving in the Llama 3 8B configuration (index.txt lines 142 and 256) --------------------------

@pytest.mark.claim("multi-head.index-gqa-divides-kv-by-h-over-g")
@pytest.mark.parametrize("kv_heads", [pytest.param(lambda h, g: g, id="g"), pytest.param(
    lambda h, g: h // g, id="group-size", marks=control("the group size h/g = 4 taken for the number of KV heads g"))])
def test_llama3_8b_gqa_divides_kv_cache_and_kv_projections_by_four(pytestconfig, kv_heads):
    h = _fact(pytestconfig, "meta-llama3-8b-config", "n-heads")
    g = kv_heads(h, _fact(pytestconfig, "meta-llama3-8b-config", "n-kv-heads"))
    d = _fact(pytestconfig, "meta-llama3-8b-config", "d-model")
    layers = _fact(pytestconfig, "meta-llama3-8b-config", "n-layers")
    d_head = d // h
    mha = pc.kv_cache_elements(layers, h, d_head, seq_len=8192)
    gqa = pc.kv_cache_elements(layers, g, d_head, seq_len=8192)
    kv_proj = lambda heads: 2 * pc.linear_params(d, heads * d_head, bias=False)  # noqa: E731
    record("kv_cache_bf16_gib_at_8192", {"mha": mha * 2 / 2**30, "gqa": gqa * 2 / 2**30})
    claim_assert(Fraction(mha, gqa) == Fraction(h, g) == 4, "KV cache ratio != h / g = 4", mha=mha, gqa=gqa)
    claim_assert(Fraction(kv_proj(h), kv_proj(g)) == 4, "K, V projection ratio != 4", mha=kv_proj(h), gqa=kv_proj(g))
