"""Parameter counts: every formula of :mod:`impl.param_counts` against the parameters of a real module
(ours and torch's), the symbolic identities behind "attention 4d^2, FFN 8d^2, FFN = 2/3"
(linear-algebra.txt lines 94-96), GQA's savings, the LLaMA 3 8B total (index.txt lines 138-144) and its KV cache
in bytes (against the keys and values its layers project).
"""
import dataclasses
from fractions import Fraction

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record
from impl import param_counts as pc
from impl.blocks import DecoderLayer, DecoderOnlyBlock, DecoderOnlyModel, EncoderLayer, post_norm, pre_norm
from impl.configs import LLAMA3_8B, LLAMA3_8B_PUBLISHED_BILLIONS
from impl.ffn import FeedForward, SwiGLUFeedForward
from impl.multihead import MultiHeadAttention
from properties.strategies.architecture import head_layouts

count = pc.count_parameters
widths = st.integers(1, 24)


# --- formulas against real modules -----------------------------------------------------------------------------

@pytest.mark.claim("multi-head.la-obs3-attention-params-4d2")
@pytest.mark.parametrize("attention_params", [pytest.param(pc.attention_params, id="formula"), pytest.param(
    lambda d, h, g, d_head, bias: 4 * d * d + 4 * d * bias, id="4d^2-always",
    marks=control("4 d^2 (+ 4 d) for every layout: head width and KV sharing ignored"))])
@given(layout=head_layouts(d_head_is_d_over_h=False), bias=st.booleans())
def test_attention_formula_counts_mha_gqa_and_mqa_modules(attention_params, layout, bias):
    d, h, g, dh = layout.d_model, layout.n_heads, layout.n_kv_heads, layout.d_head
    counted = count(MultiHeadAttention(d, h, g, d_head=dh, bias=bias))
    formula = attention_params(d, h, g, d_head=dh, bias=bias)
    claim_assert(counted == formula, "attention_params != parameters of the module", counted=counted, formula=formula,
                 layout=layout, bias=bias)


@pytest.mark.claim("multi-head.la-obs3-attention-params-4d2")
@pytest.mark.parametrize("matrices", [pytest.param(4, id="4d^2"), pytest.param(
    3, id="3d^2", marks=control("W^O not counted: 3 d^2 (+ 3 d)"))])
@given(h=st.integers(1, 8), d_k=st.integers(1, 8), bias=st.booleans())
def test_mha_has_4_d_squared_weights_plus_4_d_biases_in_torch_multihead_attention(matrices, h, d_k, bias):
    d = h * d_k
    counted = count(torch.nn.MultiheadAttention(d, h, bias=bias))
    claim_assert(counted == pc.attention_params(d, h, bias=bias) == matrices * (d * d + (d if bias else 0)),
                 "torch.nn.MultiheadAttention does not hold 4 d^2 (+ 4 d) parameters", counted=counted, d=d, h=h)


@pytest.mark.claim("multi-head.la-obs3-attention-params-4d2", "multi-head.param-comparable-single-head")
@pytest.mark.parametrize("stated", [pytest.param(lambda d, d_k: 4 * d**2, id="4d^2"), pytest.param(
    lambda d, d_k: 4 * d * d_k, id="4d*d_k", marks=control("4 d d_k: one head's width in place of d"))])
def test_mha_weights_are_4_d_squared_whatever_the_head_count_symbolically(stated):
    h, d_k = sp.symbols("h d_k", positive=True, integer=True)
    d = h * d_k
    weights = sp.expand(pc.attention_params(d, h, d_head=d_k))
    claim_assert(sp.simplify(weights - stated(d, d_k)) == 0, "MHA weights are not 4 d^2", weights=str(weights))
    gqa = sp.Symbol("g", positive=True, integer=True)
    saving = sp.factor(pc.attention_params(d, h, d_head=d_k) - pc.attention_params(d, h, gqa, d_head=d_k))
    claim_assert(sp.simplify(saving - 2 * d * d_k * (h - gqa)) == 0, "GQA saves other than 2 d d_k (h - g)",
                 saving=str(saving))


@pytest.mark.claim("architecture.la-obs3-ffn-params-8d2")
@pytest.mark.parametrize("matrices", [pytest.param(2, id="2dd_ff"), pytest.param(
    3, id="3dd_ff", marks=control("the SwiGLU count, 3 d d_ff, for the two-matrix FFN"))])
@given(d=widths, d_ff=st.integers(1, 64), bias=st.booleans())
def test_ffn_formulas_count_gelu_and_swiglu_modules(matrices, d, d_ff, bias):
    counted = count(FeedForward(d, d_ff, bias=bias))
    torch_ffn = torch.nn.Sequential(torch.nn.Linear(d, d_ff, bias=bias), torch.nn.GELU(),
                                    torch.nn.Linear(d_ff, d, bias=bias))
    claim_assert(counted == count(torch_ffn) == pc.ffn_params(d, d_ff, bias)
                 == matrices * d * d_ff + (d_ff + d) * bias,
                 "FFN parameters are not 2 d d_ff (+ d_ff + d)", counted=counted, d=d, d_ff=d_ff, bias=bias)
    swiglu = count(SwiGLUFeedForward(d, d_ff, bias=bias))
    claim_assert(swiglu == pc.swiglu_ffn_params(d, d_ff, bias) == 3 * d * d_ff + (2 * d_ff + d) * bias,
                 "SwiGLU FFN parameters are not 3 d d_ff (+ 2 d_ff + d)", counted=swiglu, d=d, d_ff=d_ff)


@pytest.mark.claim("architecture.la-obs3-ffn-params-8d2")
@pytest.mark.parametrize("total", [pytest.param(8, id="8d^2"), pytest.param(
    4, id="4d^2", marks=control("a total of 4 d^2 (the attention's) stated for the FFN"))])
def test_ffn_weights_are_8_d_squared_exactly_when_d_ff_is_4_d_symbolically(total):
    d, d_ff = sp.symbols("d d_ff", positive=True)
    solutions = sp.solve(sp.Eq(pc.ffn_params(d, d_ff, bias=False), total * d**2), d_ff)
    claim_assert(solutions == [4 * d], "2 d d_ff = 8 d^2 does not single out d_ff = 4 d", solutions=str(solutions))
    swiglu = sp.solve(sp.Eq(pc.swiglu_ffn_params(d, d_ff), total * d**2), d_ff)
    claim_assert(swiglu == [sp.Rational(8, 3) * d], "SwiGLU 3 d d_ff = 8 d^2 does not give d_ff = 8d/3",
                 solutions=str(swiglu))


@pytest.mark.claim("architecture.la-obs3-ffn-two-thirds-params")
@given(layout=head_layouts(kv_sharing=False), d_ff=st.integers(1, 32), bias=st.booleans())
def test_layer_formulas_count_our_and_torchs_encoder_and_decoder_layers(layout, d_ff, bias):
    d, h = layout.d_model, layout.n_heads
    enc, dec = pc.encoder_layer_params(d, h, d_ff, bias), pc.decoder_layer_params(d, h, d_ff, bias)
    # torch's bias=False also drops the LayerNorms' beta (d each: 2 norms per encoder, 3 per decoder layer)
    torch_enc, torch_dec = enc - (0 if bias else 2 * d), dec - (0 if bias else 3 * d)
    for norm_first, residual in ((True, pre_norm), (False, post_norm)):
        kw = dict(bias=bias, norm_first=norm_first)
        counts = {"ours_encoder": count(EncoderLayer(d, h, d_ff, residual, bias)),
                  "torch_encoder": count(torch.nn.TransformerEncoderLayer(d, h, d_ff, **kw)),
                  "ours_decoder": count(DecoderLayer(d, h, d_ff, residual, bias)),
                  "torch_decoder": count(torch.nn.TransformerDecoderLayer(d, h, d_ff, **kw))}
        claim_assert(counts["ours_encoder"] == enc and counts["torch_encoder"] == torch_enc
                     and counts["ours_decoder"] == dec and counts["torch_decoder"] == torch_dec,
                     "layer counts differ from the formulas", **counts, encoder_formula=enc, decoder_formula=dec,
                     norm_first=norm_first, bias=bias)


@pytest.mark.claim("architecture.index-llama3-8b-total-about-8b-params")
@pytest.mark.parametrize("final_norm", [pytest.param(True, id="final-norm"), pytest.param(
    False, id="no-final-norm", marks=control("the final RMSNorm's d gains not counted"))])
@given(layout=head_layouts(d_head_is_d_over_h=True), d_ff=st.integers(1, 16), vocab=st.integers(1, 40),
       n_layers=st.integers(0, 3), tie=st.booleans())
def test_decoder_only_model_formula_counts_the_model(final_norm, layout, d_ff, vocab, n_layers, tie):
    d, h, g = layout.d_model, layout.n_heads, layout.n_kv_heads
    model = DecoderOnlyModel(vocab, d, n_layers, h, g, d_ff, tie_embeddings=tie)
    formula = pc.decoder_only_model_params(vocab, d, n_layers, h, g, d_ff, tie) - (0 if final_norm else d)
    claim_assert(count(model) == formula, "decoder-only model count differs", counted=count(model), formula=formula)
    block = pc.decoder_only_block_params(d, h, g, d_ff)
    claim_assert(count(DecoderOnlyBlock(d, h, g, d_ff)) == block, "block count differs", formula=block)


# --- "FFN holds 2/3 of the parameters" --------------------------------------------------------------------------

def _ffn_share(model: torch.nn.Module) -> tuple[Fraction, Fraction]:
    """(FFN share of all parameters, FFN share of attention + FFN) of a torch.nn.Transformer."""
    ffn = sum(count(m) for name, m in model.named_modules() if name.endswith(("linear1", "linear2")))
    attn = sum(count(m) for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention))
    return Fraction(ffn, count(model)), Fraction(ffn, ffn + attn)


@pytest.mark.claim("architecture.la-obs3-ffn-two-thirds-params")
@pytest.mark.parametrize("ffn_width", [
    pytest.param(4, id="d_ff=4d"),
    pytest.param(2, id="d_ff=2d", marks=control(
        "an FFN of width 2d, whose 4 d^2 weights are not line 96's 8 d^2: the count the 2/3 would fail with")),
])
@given(layout=head_layouts(kv_sharing=False))
def test_ffn_holds_two_thirds_of_the_block_line_96_counts(ffn_width, layout):
    """Line 96 counts one block: FFN 2 d d_ff ~ 8 d^2 (so d_ff = 4d) and attention 4 d^2 (one multi-head
    attention); the block of linear-algebra:24, built bias-free, is counted from its modules."""
    d, h = layout.d_model, layout.n_heads
    block = EncoderLayer(d, h, ffn_width * d, bias=False)
    ffn, attn = count(block.ffn), count(block.self_attn)
    premise(attn == 4 * d**2, "the block's attention does not have line 96's 4 d^2 weights", attn=attn, d=d)
    claim_assert(Fraction(ffn, ffn + attn) == Fraction(2, 3), "the FFN does not hold 2/3 of the block's parameters",
                 ffn=ffn, attention=attn, d=d, n_heads=h, d_ff=ffn_width * d)


@pytest.mark.claim("architecture.la-obs3-ffn-two-thirds-params")
@given(d=st.integers(1, 24), mult=st.integers(1, 6), decoder=st.booleans())
def test_ffn_share_of_a_bias_free_layer_is_d_ff_over_d_ff_plus_2d_times_attentions(d, mult, decoder):
    d_ff = mult * d
    layer = DecoderLayer(d, 1, d_ff, bias=False) if decoder else EncoderLayer(d, 1, d_ff, bias=False)
    n_attn = 2 if decoder else 1
    ffn, attn = count(layer.ffn), count(layer.self_attn) * n_attn
    share = Fraction(ffn, ffn + attn)
    claim_assert(share == Fraction(d_ff, d_ff + 2 * d * n_attn), "FFN share != d_ff / (d_ff + 2 d n_attention)",
                 share=str(share), d=d, d_ff=d_ff, decoder=decoder)
    claim_assert((share == Fraction(2, 3)) == (d_ff == 4 * d * n_attn), "share is 2/3 for another d_ff",
                 share=str(share), d=d, d_ff=d_ff)


@pytest.mark.claim("architecture.la-obs3-ffn-two-thirds-params")
def test_ffn_share_of_llama3_8b():
    c = LLAMA3_8B
    ffn = pc.swiglu_ffn_params(c.d_model, c.d_ff)
    attn = pc.attention_params(c.d_model, c.n_heads, c.n_kv_heads)
    share_blocks = Fraction(ffn, ffn + attn)
    share_all = Fraction(c.n_layers * ffn, c.n_params())
    record("llama3_8b_ffn_share_of_attention_plus_ffn", float(share_blocks))
    record("llama3_8b_ffn_share_of_all_parameters", float(share_all))
    claim_assert(share_blocks == Fraction(21, 26), "LLaMA 3 8B: FFN / (FFN + attention) != 10.5 d^2 / 13 d^2",
                 share=str(share_blocks))
    claim_assert(round(float(share_all), 2) == 0.70, "LLaMA 3 8B: the FFNs do not hold 0.70 of all parameters",
                 share=float(share_all))


@pytest.mark.claim("architecture.la-obs3-ffn-two-thirds-params")
def test_ffn_share_of_the_base_encoder_decoder_transformer_is_4_7():
    # 6 encoder layers (one attention, 4 d^2, and one FFN, 8 d^2, each) and 6 decoder layers (two attentions):
    # bias-free, 96 d^2 of FFN against 72 d^2 of attention
    d, h, d_ff = 512, 8, 2048
    enc, dec = EncoderLayer(d, h, d_ff, bias=False), DecoderLayer(d, h, d_ff, bias=False)
    ffn = 6 * count(enc.ffn) + 6 * count(dec.ffn)
    attn = 6 * count(enc.self_attn) + 6 * (count(dec.self_attn) + count(dec.cross_attn))
    claim_assert(Fraction(ffn, ffn + attn) == Fraction(4, 7), "bias-free base Transformer: FFN share != 4/7",
                 share=str(Fraction(ffn, ffn + attn)))
    with torch.device("meta"):  # torch's base model, biases and norms included: shapes only
        share, _ = _ffn_share(torch.nn.Transformer(d, h, 6, 6, d_ff, batch_first=True))
    record("ffn_share_of_torch_nn_transformer_base", float(share))
    claim_assert(round(float(share), 3) == 0.571, "torch.nn.Transformer base: FFN share does not round to 0.571",
                 share=float(share))


# --- LLaMA 3 8B --------------------------------------------------------------------------------------------------

@pytest.mark.claim("architecture.index-llama3-8b-total-about-8b-params", "architecture.index-llama3-8b-32-layers",
                   "architecture.index-llama3-8b-dmodel-4096", "multi-head.index-llama3-8b-32-query-heads",
                   "multi-head.index-llama3-8b-8-kv-heads", "architecture.index-llama3-8b-dff-14336")
@pytest.mark.parametrize("changed", [
    pytest.param({}, id="llama3-8b"),
    pytest.param({"vocab_size": 32_000}, id="vocab-32000", marks=control("Llama 2's vocabulary of 32,000 tokens")),
    pytest.param({"n_kv_heads": 32}, id="mha", marks=control("32 KV heads (MHA) in place of GQA's 8")),
    pytest.param({"d_ff": 11_008}, id="d_ff-11008", marks=control("Llama 2 7B's FFN width 11,008, not 14,336"))])
def test_llama3_8b_configuration_implies_the_published_8_03b_parameters(changed):
    config = dataclasses.replace(LLAMA3_8B, **changed)
    with torch.device("meta"):  # shapes only: no memory for 8 billion parameters
        model = DecoderOnlyModel(**config.model_kwargs())
    counted, formula = count(model), config.n_params()
    non_embedding = counted - 2 * config.vocab_size * config.d_model
    tied = pc.decoder_only_model_params(**{**config.model_kwargs(), "tie_embeddings": True})
    record("llama3_8b_parameters", counted)
    record("llama3_8b_non_embedding_parameters", non_embedding)
    record("llama3_8b_parameters_if_tied", tied)
    claim_assert(counted == formula == 8_030_261_248, "LLaMA 3 8B count", counted=counted, formula=formula)
    claim_assert(round(counted / 1e9, 2) == LLAMA3_8B_PUBLISHED_BILLIONS, "does not round to the published 8.03B",
                 counted=counted, assumptions="vocab 128,256, untied embedding and LM head")
    claim_assert(round(tied / 1e9, 2) != LLAMA3_8B_PUBLISHED_BILLIONS, "tied embeddings also give 8.03B", tied=tied)


@pytest.mark.claim("multi-head.index-checklist-gqa-for-large-models")
@given(layout=head_layouts(), n_layers=st.integers(1, 4), seq_len=st.integers(1, 64))
def test_gqa_divides_the_kv_cache_and_kv_projections_by_h_over_g(layout, n_layers, seq_len):
    mha = pc.kv_cache_elements(n_layers, layout.n_heads, layout.d_head, seq_len)
    gqa = pc.kv_cache_elements(n_layers, layout.n_kv_heads, layout.d_head, seq_len)
    claim_assert(Fraction(mha, gqa) == layout.group, "KV cache ratio != h / g", mha=mha, gqa=gqa, layout=layout)
    kv = lambda g: count(MultiHeadAttention(layout.d_model, layout.n_heads, g, bias=False).w_k) * 2  # noqa: E731
    claim_assert(Fraction(kv(layout.n_heads), kv(layout.n_kv_heads)) == layout.group,
                 "K, V projection ratio != h / g", layout=layout)


@pytest.mark.claim("multi-head.index-stack-gqa-mainstream",
                   "architecture.index-stack-swiglu-mainstream-gelu-alternative",
                   "architecture.index-modern-stack-components")
def test_llama3_8b_total_needs_gqa_and_the_three_matrix_swiglu_ffn():
    c = LLAMA3_8B
    embeddings = 2 * c.vocab_size * c.d_model + c.d_model  # embedding, untied head, final norm
    norms = 2 * pc.rms_norm_params(c.d_model)
    variants = {
        "GQA + SwiGLU (the index)": c.n_params(),
        "MHA + SwiGLU": embeddings + c.n_layers * (pc.attention_params(c.d_model, c.n_heads)
                                                  + pc.swiglu_ffn_params(c.d_model, c.d_ff) + norms),
        "GQA + two-matrix GELU FFN": embeddings + c.n_layers * (pc.attention_params(c.d_model, c.n_heads, c.n_kv_heads)
                                                               + pc.ffn_params(c.d_model, c.d_ff, bias=False) + norms),
    }
    billions = {k: round(v / 1e9, 2) for k, v in variants.items()}
    record("llama3_8b_variants_billions", billions)
    matching = [k for k, b in billions.items() if b == LLAMA3_8B_PUBLISHED_BILLIONS]
    claim_assert(matching == ["GQA + SwiGLU (the index)"], "the published 8.03B does not single out GQA + SwiGLU",
                 **billions)


# --- the KV cache in bytes, not only as a ratio (LLaMA 3 8B) -----------------------------------------------------

BF16 = 2  # bytes per bfloat16 element, the dtype LLaMA 3's weights and cache are served in
KV_TOKENS = 8192  # LLaMA 3's context length


@pytest.mark.claim("multi-head.index-gqa-divides-kv-by-h-over-g")
def test_llama3_8b_kv_cache_is_128_kib_per_token_and_1_gib_at_8192_tokens_in_bfloat16():
    """2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131072 bytes = 128 KiB per token."""
    c = LLAMA3_8B
    per_token = pc.kv_cache_elements(c.n_layers, c.n_kv_heads, c.d_head, seq_len=1) * BF16
    total = pc.kv_cache_elements(c.n_layers, c.n_kv_heads, c.d_head, seq_len=KV_TOKENS) * BF16
    mha = pc.kv_cache_elements(c.n_layers, c.n_heads, c.d_head, seq_len=KV_TOKENS) * BF16
    record("llama3_8b_kv_cache_bytes", {"per_token": per_token, f"gqa_{KV_TOKENS}": total, f"mha_{KV_TOKENS}": mha})
    claim_assert(per_token == 2 * 32 * 8 * 128 * 2 == 128 * 2**10 and total == 2**30 and mha == 4 * 2**30,
                 "the LLaMA 3 8B KV cache is not 128 KiB per token, 1 GiB at 8192 tokens (4 GiB without GQA)",
                 per_token=per_token, total=total, mha=mha)


@pytest.mark.claim("multi-head.index-gqa-divides-kv-by-h-over-g")
@pytest.mark.parametrize("n_tokens", [1, 8192])
def test_kv_cache_formula_equals_the_bytes_of_the_keys_and_values_the_model_projects(n_tokens):
    """Oracle independent of the formula: run every layer's K and V projections of the real LLaMA 3 8B module
    (meta device, bfloat16: shapes only) on n tokens and add up the bytes of the tensors a cache would keep."""
    c = LLAMA3_8B
    with torch.device("meta"):
        model = DecoderOnlyModel(**c.model_kwargs()).to(torch.bfloat16)
        x = torch.empty((1, n_tokens, c.d_model), dtype=torch.bfloat16)
        attns = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
        cached = sum(t.numel() * t.element_size() for a in attns for t in (a.w_k(x), a.w_v(x)))
    formula = pc.kv_cache_elements(c.n_layers, c.n_kv_heads, c.d_head, seq_len=n_tokens) * BF16
    record(f"llama3_8b_kv_cache_bytes_projected[n={n_tokens}]", cached)
    claim_assert(len(attns) == c.n_layers and cached == formula, "the KV-cache formula differs from the bytes the "
                 "layers' K, V projections produce", layers=len(attns), projected=cached, formula=formula)
