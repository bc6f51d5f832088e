"""Blocks: pre-norm and post-norm (foundations.txt lines 369-373, linear-algebra.txt lines 372-378), the
block equations of linear-algebra.txt line 24, SwiGLU (index.txt line 92), and the layer classes the
documents print (foundations.txt lines 325-367, linear-algebra.txt lines 28-78 and 425-561,
spectral.txt lines 473-492 and 702-720), executed from sources/.

Our layers (:mod:`impl.blocks`) are compared with torch's ``TransformerEncoderLayer`` and
``TransformerDecoderLayer`` (``norm_first=False`` is Vaswani et al.'s post-norm layer), and the printed
layers with ours, weights copied across. Dropout is off (eval mode) throughout.
"""
import functools
from types import SimpleNamespace

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from hypothesis import example, given
from hypothesis import strategies as st
from torch import nn
from torch.autograd.functional import jacobian

from claimcheck import claim_assert, control, record, refutes
from claimcheck.snippets import project_root
from claimcheck.sources import load_sources
from impl import param_counts as pc
from impl.blocks import DecoderLayer, EncoderLayer, post_norm, pre_norm
from impl.ffn import SwiGLUFeedForward, gelu, relu, silu, swiglu
from impl.multihead import MultiHeadAttention, causal_mask
from properties.strategies.architecture import (HeadLayout, assert_equal_up_to_rounding, batch_lengths, gaussian,
                                                head_layouts, locals_at_return, printed, seeded_module, seeds)

layouts = head_layouts(max_heads=3, max_d_head=3, kv_sharing=False)
d_ffs = st.integers(1, 8)
placements = st.sampled_from([("pre", True), ("post", False)])  # (name, torch's norm_first)
PLACEMENTS = {"pre": pre_norm, "post": post_norm}
SWAPPED = {"pre": post_norm, "post": pre_norm}  # negative control: each name on the other formula


def _unnormalised(sublayer: str) -> dict:
    """Negative control: each placement with the ``sublayer`` ("attention" or "ffn") residual left un-normalised,
    X + F(X), as linear-algebra.txt line 24 writes it; the FFN is the only sublayer that is a module."""
    def placement(formula):
        def residual(x, f, norm):
            return x + f(x) if isinstance(f, nn.Module) == (sublayer == "ffn") else formula(x, f, norm)
        return residual
    return {name: placement(formula) for name, formula in PLACEMENTS.items()}


# --- our layers against torch's: the two placements ---------------------------------------------------------------

def _load(module: nn.Module, state: dict, rename: dict[str, str]) -> nn.Module:
    """Load ``state`` into ``module`` after replacing the key fragments in ``rename``."""
    renamed = {}
    for key, value in state.items():
        for old, new in rename.items():
            key = key.replace(old, new)
        renamed[key] = value
    module.load_state_dict(renamed)
    return module


def _split_in_proj(state: dict) -> dict:
    """torch.nn.MultiheadAttention's stacked in_proj_{weight,bias} -> separate w_q, w_k, w_v entries."""
    out = {}
    for key, value in state.items():
        if "in_proj_" in key:
            prefix, kind = key.split("in_proj_")
            for role, part in zip("qkv", value.chunk(3)):
                out[f"{prefix}w_{role}.{kind}"] = part
        else:
            out[key] = value
    return out


_FROM_TORCH = {"out_proj": "w_o", "multihead_attn": "cross_attn", "linear1": "ffn.up", "linear2": "ffn.down"}


@pytest.mark.claim("architecture.post-norm-formula", "architecture.pre-norm-formula",
                   "architecture.la-prenorm-definition", "architecture.la-block-residual-x1",
                   "architecture.la-block-ffn-residual-x2")
@pytest.mark.parametrize("formulas", [pytest.param(PLACEMENTS, id="as-stated"), pytest.param(
    SWAPPED, id="swapped", marks=control("pre- and post-norm swapped: Norm(x + F(x)) called pre-norm, x + F(Norm x) "
                                         "post-norm",
                                             models=["architecture.post-norm-formula", "architecture.pre-norm-formula",
                                                     "architecture.la-prenorm-definition"])), pytest.param(
    _unnormalised("attention"), id="attention-unnormalised", marks=control(
        "line 24's X_1 = X_0 + Y W^O: the attention sublayer's residual without LayerNorm",
        models="architecture.la-block-residual-x1")), pytest.param(
    _unnormalised("ffn"), id="ffn-unnormalised", marks=control(
        "line 24's X_2 = X_1 + FFN(X_1): the FFN sublayer's residual without LayerNorm",
        models="architecture.la-block-ffn-residual-x2"))])
@given(layout=layouts, d_ff=d_ffs, bn=batch_lengths(), seed=seeds(), placement=placements)
def test_pre_and_post_norm_layers_are_torchs_norm_first_and_original_layers(formulas, layout, d_ff, bn, seed,
                                                                            placement):
    (b, n), d, h = bn, layout.d_model, layout.n_heads
    name, norm_first = placement
    residual = formulas[name]
    kw = dict(dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first)
    t_enc = seeded_module(nn.TransformerEncoderLayer(d, h, d_ff, **kw), seed).eval()
    t_dec = seeded_module(nn.TransformerDecoderLayer(d, h, d_ff, **kw), seed + 1).eval()
    enc = _load(EncoderLayer(d, h, d_ff, residual).double(), _split_in_proj(t_enc.state_dict()), _FROM_TORCH)
    dec = _load(DecoderLayer(d, h, d_ff, residual).double(), _split_in_proj(t_dec.state_dict()), _FROM_TORCH)
    x, memory = gaussian(seed + 2, b, n, d), gaussian(seed + 3, b, n + 1, d)
    with torch.no_grad():
        assert_equal_up_to_rounding(enc(x), t_enc(x), f"{name}-norm encoder layer != torch's", layout=layout)
        ours = dec(x, memory, tgt_mask=causal_mask(n))
        theirs = t_dec(x, memory, tgt_mask=~causal_mask(n))  # torch's boolean masks mark what is NOT attended
        assert_equal_up_to_rounding(ours, theirs, f"{name}-norm decoder layer != torch's", layout=layout)


@pytest.mark.claim("architecture.la-prenorm-residual-path-jacobian-exactly-identity")
@pytest.mark.parametrize("residual", [pytest.param(pre_norm, id="pre-norm"), pytest.param(
    post_norm, id="post-norm", marks=control("the layer taken as Norm(x + F(x)): its skip path carries J_LN, not I"))])
@given(layout=layouts, n=st.integers(1, 3), seed=seeds())
def test_pre_norm_jacobian_is_identity_plus_the_branch_and_post_norm_multiplies_the_skip_by_ln(residual, layout, n,
                                                                                                seed):
    d = layout.d_model
    layer = seeded_module(EncoderLayer(d, layout.n_heads, 2), seed)
    attn = lambda h: layer.self_attn(h, h)  # noqa: E731
    x = gaussian(seed + 1, 1, n, d)
    as_matrix = lambda j: j.reshape(n * d, n * d)  # noqa: E731
    full = as_matrix(jacobian(lambda x: residual(x, attn, layer.norm1), x))
    branch = as_matrix(jacobian(lambda x: attn(layer.norm1(x)), x))
    eye = torch.eye(n * d, dtype=x.dtype)
    assert_equal_up_to_rounding(full - branch, eye, "pre-norm: d x_{l+1}/d x_l - J_branch != I")
    # post-norm, Norm(x + f(x)): its Jacobian is J_LN (I + J_f), so the skip path carries J_LN, not I
    post = as_matrix(jacobian(lambda x: post_norm(x, attn, layer.norm1), x))
    y = x + attn(x)
    j_ln = as_matrix(jacobian(layer.norm1, y))
    assert_equal_up_to_rounding(post, j_ln @ (eye + as_matrix(jacobian(attn, x))), "post-norm J != J_LN (I + J_f)")
    # J_LN = (1/s)(I - 11^T/d - y y^T/d) differs from I by O(1/d) entries at least; rounding is ~1e-15
    claim_assert(d == 1 or (j_ln - eye).abs().max() > 1e-6, "post-norm's skip-path Jacobian J_LN is I", d=d)


def _stack(layout, d_ff, depth, seed):
    return [seeded_module(EncoderLayer(layout.d_model, layout.n_heads, d_ff, pre_norm), seed + i) for i in range(depth)]


def _updates(layers, x, decoupled: bool = False):
    """The pre-norm updates f(LN(x)) of every sublayer in order, and the final state: X_L = X_0 + sum of updates.
    ``decoupled`` evaluates every f at LN(X_0), the input, instead of at the stream below it (a negative control)."""
    updates, x0 = [], x
    for layer in layers:
        for f, norm in ((lambda h, m=layer: m.self_attn(h, h), layer.norm1), (layer.ffn, layer.norm2)):
            updates.append(f(norm(x0 if decoupled else x)))
            x = x + updates[-1]
    return updates, x


@pytest.mark.claim("architecture.la-prenorm-additive-decoupled-updates")
@pytest.mark.parametrize("decoupled", [pytest.param(False, id="f_l-at-X_l"), pytest.param(
    True, id="decoupled", marks=control("decoupled updates: every f_l evaluated at LN(X_0), independent of the layers "
                                        "below", models="architecture.la-prenorm-additive-decoupled-updates"))])
@given(layout=layouts, d_ff=d_ffs, depth=st.integers(1, 3), bn=batch_lengths(), seed=seeds())
def test_pre_norm_stack_output_is_its_input_plus_the_sum_of_every_sublayers_update(decoupled, layout, d_ff, depth, bn,
                                                                                    seed):
    layers = _stack(layout, d_ff, depth, seed)
    x0 = gaussian(seed + 9, *bn, layout.d_model)
    with torch.no_grad():
        out = x0
        for layer in layers:
            out = layer(out)
        updates, _ = _updates(layers, x0, decoupled)
    assert_equal_up_to_rounding(out, x0 + sum(updates), "X_L != X_0 + sum_l f_l(LN(X_l))", depth=depth)


@pytest.mark.claim("architecture.la-prenorm-additive-decoupled-updates")
@refutes(reason="two layers (one has no layer below), one head, d_ff = 1, two tokens, and d = 3, the smallest "
                "width at which LayerNorm passes more than a sign on (d = 1 maps every token to beta, d = 2 to "
                "+-gamma + beta)")
def test_pre_norm_layer_updates_are_decoupled_from_the_layers_below():
    layers = _stack(HeadLayout(3, 1, 1, 3), 1, 2, 0)
    x0 = gaussian(9, 1, 2, 3)
    with torch.no_grad():
        top_update = _updates(layers, x0)[0][2]  # layer 2's attention update
        for p in layers[0].parameters():
            p.add_(0.5)  # change only layer 1
        moved = _updates(layers, x0)[0][2]
    claim_assert(torch.equal(top_update, moved), "layer 2's update changed when only layer 1 changed",
                 change=(moved - top_update).abs().max())


def _line24_block(enc: EncoderLayer, x: torch.Tensor) -> torch.Tensor:
    """linear-algebra.txt line 24: X_1 = X_0 + Y W^O, X_2 = X_1 + FFN(X_1), built from ``enc``'s sublayers."""
    x1 = x + enc.self_attn(x, x)
    return x1 + enc.ffn(x1)


@pytest.mark.claim("architecture.la-block-residual-x1", "architecture.la-block-ffn-residual-x2")
@refutes(reason="the smallest standard layer (d = h = d_ff = 1 is degenerate for LayerNorm, so d = 2, one head, one "
                "token, d_ff = 1) in both placements; torch's layers are the reference for 'standard'")
def test_the_line24_flow_is_a_standard_transformer_layer():
    gaps = {}
    for name, residual in (("post", post_norm), ("pre", pre_norm)):
        enc = seeded_module(EncoderLayer(2, 1, 1, residual), 3)
        x = gaussian(4, 1, 1, 2)
        with torch.no_grad():
            gaps[name] = (_line24_block(enc, x) - enc(x)).abs().max().item()
    # a matching layer would agree to rounding (IDENTITY_RTOL ~ 1e-12 on O(1) values); the gaps are 1.1 and 0.35
    claim_assert(min(gaps.values()) <= 1e-12, "X_2 = X_1 + FFN(X_1), X_1 = X_0 + Y W^O is neither the post-norm "
                 "nor the pre-norm layer", **{f"gap_to_{k}_norm": v for k, v in gaps.items()})


# --- SwiGLU, index.txt line 92 ------------------------------------------------------------------------------------

@pytest.mark.claim("architecture.index-swiglu-definition")
@pytest.mark.parametrize("gate", [pytest.param(F.silu, id="silu"), pytest.param(
    torch.sigmoid, id="sigmoid", marks=control("a sigmoid gate, sigmoid(x W_1) * x W_2: GLU, not SwiGLU"))])
@given(bn=batch_lengths(), d=st.integers(1, 8), d_ff=d_ffs, seed=seeds())
def test_swiglu_is_silu_of_the_gate_times_the_linear_branch(gate, bn, d, d_ff, seed):
    x, w_1, w_2 = gaussian(seed, *bn, d), gaussian(seed + 1, d, d_ff), gaussian(seed + 2, d, d_ff)
    assert_equal_up_to_rounding(swiglu(x, w_1, w_2), gate(x @ w_1) * (x @ w_2), "SwiGLU != SiLU(x W_1) * x W_2")
    z = x @ w_1
    assert_equal_up_to_rounding(silu(z), z * torch.sigmoid(z), "SiLU(z) != z sigmoid(z)")
    assert_equal_up_to_rounding(silu(z), F.silu(z), "SiLU != torch.nn.functional.silu")
    ffn = seeded_module(SwiGLUFeedForward(d, d_ff), seed + 3)
    with torch.no_grad():
        gated = swiglu(x, ffn.gate.weight.T, ffn.up.weight.T)  # (..., d_ff): the formula's output width
        assert_equal_up_to_rounding(ffn(x), gated @ ffn.down.weight.T, "SwiGLU FFN != W_3(SwiGLU(x))")
    claim_assert(gated.shape[-1] == d_ff, "SwiGLU(x) is not d_ff wide", shape=tuple(gated.shape))


@pytest.mark.claim("architecture.index-swiglu-definition")
@pytest.mark.parametrize("b", [pytest.param(1, id="beta=1"), pytest.param(
    2, id="beta=2", marks=control("Swish with beta = 2, z sigmoid(2 z), taken for SiLU"))])
def test_silu_is_swish_with_beta_one_symbolically(b):
    z, beta = sp.symbols("z beta", real=True)
    swish = z / (1 + sp.exp(-beta * z))  # Swish_beta(z) = z sigmoid(beta z) (Ramachandran et al. 2017)
    claim_assert(sp.simplify(swish.subs(beta, b) - z * (1 / (1 + sp.exp(-z)))) == 0, "Swish_1 != z sigmoid(z)")
    claim_assert(sp.simplify(sp.diff(swish.subs(beta, b), z).subs(z, 0) - sp.Rational(1, 2)) == 0,
                 "SiLU'(0) != 1/2")


# --- the printed encoder and decoder layers, foundations.txt lines 325-367 ------------------------------------------

class _SelfAttention(nn.Module):
    """Routes the printed layers' call ``self_attn(h, mask)`` to MultiHeadAttention(query=h, key=h, value=h, mask)."""

    def __init__(self, mha: nn.Module):
        super().__init__()
        self.mha = mha

    def forward(self, h, mask=None):
        return self.mha(h, h, h, mask)


class _CrossAttention(nn.Module):
    """Routes ``cross_attn(h, memory, mask)`` to MultiHeadAttention(query=h, key=memory, value=memory, mask)."""

    def __init__(self, mha: nn.Module):
        super().__init__()
        self.mha = mha

    def forward(self, h, memory, mask=None):
        return self.mha(h, memory, memory, mask)


class _Spy(nn.Module):
    """Records the positional arguments of its calls; returns zeros shaped like the first."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, *args):
        self.calls.append(args)
        return torch.zeros_like(args[0])


_FROM_PRINTED = {"W_q": "w_q", "W_k": "w_k", "W_v": "w_v", "W_o": "w_o", "ffn.0": "ffn.up", "ffn.2": "ffn.down"}


def _printed_layer(claim_id: str, cls: str, d: int, h: int, d_ff: int, seed: int) -> nn.Module:
    run = printed(claim_id)
    assert run.ran, run.describe()
    return seeded_module(run.namespace[cls](d, h, d_ff), seed).eval()


def _printed_encoder(d, h, d_ff, seed):
    return _printed_layer("architecture.snippet-encoder-layer", "EncoderLayer", d, h, d_ff, seed)


def _printed_decoder(d, h, d_ff, seed):
    return _printed_layer("architecture.snippet-decoder-layer", "DecoderLayer", d, h, d_ff, seed)


def _raised(call) -> str | None:
    try:
        call()
    except (TypeError, NameError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _runs(call, what: str):
    """``call()``, its failure to run (a wrong call, an undefined name) reported as a violation of ``what``."""
    try:
        return call()
    except (TypeError, NameError, AttributeError) as exc:
        claim_assert(False, what, error=f"{type(exc).__name__}: {exc}")


def _as_printed(module: nn.Module) -> nn.Module:
    """Negative control: the attention module called with the printed line's arguments, unrouted."""
    return module


@pytest.mark.claim("architecture.snippet-encoder-layer-forward")
@refutes(reason="the smallest layer (d = h = d_ff = 1, one token, mask=None): the call fails on its arguments "
                "before any arithmetic, so every shape fails the same way")
def test_printed_encoder_layer_forward_runs():
    layer = _printed_encoder(1, 1, 1, 0)
    error = _raised(lambda: layer(gaussian(0, 1, 1, 1)))
    claim_assert(error is None, "EncoderLayer.forward does not run as printed", error=error)


@pytest.mark.claim("architecture.snippet-encoder-layer-forward", "architecture.encoder-is-pre-norm",
                   "architecture.ffn-linear-gelu-linear")
@pytest.mark.parametrize("residual,activation,route", [
    pytest.param(pre_norm, gelu, _SelfAttention, id="pre-norm-gelu"),
    pytest.param(post_norm, gelu, _SelfAttention, id="post-norm", marks=control(
        "the post-norm layer, Norm(x + F(x)), as reference", models="architecture.encoder-is-pre-norm")),
    pytest.param(pre_norm, relu, _SelfAttention, id="relu", marks=control(
        "ReLU in place of GELU in the FFN formula", models="architecture.ffn-linear-gelu-linear")),
    pytest.param(pre_norm, gelu, _as_printed, id="call-as-printed", marks=control(
        "line 340's call self_attn(norm1(x), mask) taken to match forward(query, key, value, mask)",
        models="architecture.snippet-encoder-layer-forward"))])
@given(layout=layouts, d_ff=d_ffs, bn=batch_lengths(), seed=seeds())
def test_printed_encoder_layer_with_its_attention_call_repaired_is_our_pre_norm_layer(residual, activation, route,
                                                                                      layout, d_ff, bn, seed):
    d, h = layout.d_model, layout.n_heads
    layer = _printed_encoder(d, h, d_ff, seed)
    ffn = layer.ffn
    claim_assert([type(m) for m in ffn] == [nn.Linear, nn.GELU, nn.Linear] and ffn[0].in_features == d
                 and ffn[0].out_features == d_ff and ffn[2].in_features == d_ff and ffn[2].out_features == d,
                 "the FFN is not Linear(d, d_ff) -> GELU -> Linear(d_ff, d)", ffn=repr(ffn))
    ours = _load(EncoderLayer(d, h, d_ff, residual).double(), layer.state_dict(), _FROM_PRINTED)
    layer.self_attn = route(layer.self_attn)
    x = gaussian(seed + 1, *bn, d)
    with torch.no_grad():
        theirs = _runs(lambda: layer(x), "the printed encoder layer does not run with its attention call")
        assert_equal_up_to_rounding(theirs, ours(x), "repaired printed encoder layer != x + MHA(LN x), + FFN(LN x)")
        assert_equal_up_to_rounding(ffn(x), activation(x @ ffn[0].weight.T + ffn[0].bias) @ ffn[2].weight.T
                                    + ffn[2].bias,
                                    "printed FFN != GELU(x W_1 + b_1) W_2 + b_2")


@pytest.mark.claim("architecture.snippet-decoder-layer-forward")
@refutes(reason="the smallest layer (d = h = d_ff = 1, one token, no masks): the first sublayer's call fails on "
                "its arguments before any arithmetic")
def test_printed_decoder_layer_forward_runs():
    layer = _printed_decoder(1, 1, 1, 0)
    error = _raised(lambda: layer(gaussian(0, 1, 1, 1), gaussian(1, 1, 1, 1)))
    claim_assert(error is None, "DecoderLayer.forward does not run as printed", error=error)


@pytest.mark.claim("architecture.decoder-cross-attention-to-encoder")
@refutes(reason="one call of the smallest layer (d = h = d_ff = 1, one token); which tensor the printed line passes "
                "as value does not depend on shapes")
def test_printed_cross_attention_takes_keys_and_values_from_the_encoder_output():
    layer = _printed_decoder(1, 1, 1, 0)
    layer.self_attn = _SelfAttention(layer.self_attn)  # get past line 362
    spy = layer.cross_attn = _Spy()
    memory = gaussian(1, 1, 1, 1)
    with torch.no_grad():
        layer(gaussian(0, 1, 1, 1), memory)
    args = spy.calls[0]
    value = args[2] if len(args) > 2 else "(not passed)"
    claim_assert(len(args) >= 3 and args[1] is memory and args[2] is memory,
                 "cross_attn does not receive the encoder output as both key and value",
                 key_is_encoder_output=args[1] is memory, value=repr(value), n_args=len(args))


class _MaskDropped(_SelfAttention):
    """Negative control: self-attention whose mask never reaches the attention, MultiHeadAttention(h, h, h, None)."""

    def forward(self, h, mask=None):
        return self.mha(h, h, h, None)


@pytest.mark.claim("architecture.snippet-decoder-layer-forward", "architecture.decoder-cross-attention-to-encoder",
                   "architecture.decoder-masked-self-attention-comment")
@pytest.mark.parametrize("self_route,cross_route", [
    pytest.param(_SelfAttention, _CrossAttention, id="repaired"),
    pytest.param(_as_printed, _as_printed, id="calls-as-printed", marks=control(
        "lines 362 and 364 taken to match forward(query, key, value, mask) as printed",
        models="architecture.snippet-decoder-layer-forward")),
    pytest.param(_SelfAttention, _as_printed, id="cross-call-as-printed", marks=control(
        "line 364's cross_attn(norm2(x), encoder_output, src_mask): src_mask in the value slot",
        models="architecture.decoder-cross-attention-to-encoder")),
    pytest.param(_MaskDropped, _CrossAttention, id="tgt-mask-unapplied", marks=control(
        "line 362's tgt_mask never reaching the attention as its mask",
        models="architecture.decoder-masked-self-attention-comment"))])
@given(layout=layouts, d_ff=d_ffs, bn=batch_lengths(), extra=st.integers(0, 2), seed=seeds())
@example(layout=HeadLayout(2, 1, 1, 2), d_ff=2, bn=(1, 3), extra=1, seed=0)  # n > 1: a dropped mask shows
def test_printed_decoder_layer_with_its_attention_calls_repaired_is_our_pre_norm_decoder(self_route, cross_route, layout,
                                                                                         d_ff, bn, extra, seed):
    (b, n), d, h = bn, layout.d_model, layout.n_heads
    layer = _printed_decoder(d, h, d_ff, seed)
    ours = _load(DecoderLayer(d, h, d_ff, pre_norm).double(), layer.state_dict(), _FROM_PRINTED)
    layer.self_attn, layer.cross_attn = self_route(layer.self_attn), cross_route(layer.cross_attn)
    x, memory = gaussian(seed + 1, b, n, d), gaussian(seed + 2, b, n + extra, d)
    causal = torch.ones(n, n).tril()  # the printed convention: 0 masks
    with torch.no_grad():
        theirs = _runs(lambda: layer(x, memory, tgt_mask=causal),
                       "the printed decoder layer does not run with its attention calls")
        assert_equal_up_to_rounding(theirs, ours(x, memory, tgt_mask=causal.bool()),
                                    "repaired printed decoder layer != our pre-norm decoder layer")
        x_later = x.clone()
        x_later[:, 1:] = gaussian(seed + 3, b, n - 1, d)
        claim_assert(torch.equal(layer(x_later, memory, tgt_mask=causal)[:, 0], theirs[:, 0]),
                     "with a causal tgt_mask, position 0 depends on later positions")


@pytest.mark.claim("architecture.decoder-masked-self-attention-comment")
@refutes(reason="one call of the smallest layer (d = h = d_ff = 1, one token) with a causal tgt_mask; where line 362 "
                "puts the mask among MultiHeadAttention.forward(query, key, value, mask)'s arguments does not depend "
                "on shapes")
def test_printed_decoder_self_attention_receives_tgt_mask_as_its_mask():
    layer = _printed_decoder(1, 1, 1, 0)
    spy = layer.self_attn = _Spy()
    layer.cross_attn = _CrossAttention(layer.cross_attn)  # get past line 364
    tgt_mask = torch.ones(1, 1).tril()  # the printed convention: 1 keeps, 0 masks
    with torch.no_grad():
        layer(gaussian(0, 1, 1, 1), gaussian(1, 1, 1, 1), tgt_mask=tgt_mask)
    args = spy.calls[0]
    claim_assert(len(args) >= 4 and args[3] is tgt_mask,
                 "line 362 does not hand tgt_mask to the self-attention as its mask (the 4th argument)",
                 n_args=len(args), tgt_mask_passed_as=[("query", "key", "value", "mask")[i] for i, a in enumerate(args)
                                                       if a is tgt_mask])


# --- the printed TransformerBlock, linear-algebra.txt lines 28-78 ----------------------------------------------------

def _printed_block(d, h, d_ff, seed, repaired: bool):
    """The printed TransformerBlock; ``repaired`` binds the name ``not_mask`` = None that line 67 reads, which makes
    ``mask is not_mask is not None`` False, i.e. no masking: the right behaviour for mask=None."""
    run = printed("architecture.snippet-la-transformer-block", bindings={"not_mask": None} if repaired else None)
    assert run.ran, run.describe()
    return seeded_module(run.namespace["TransformerBlock"](d, h, d_ff), seed).eval()


def _block_reference(block: nn.Module, x: torch.Tensor, ffn_norm: bool) -> torch.Tensor:
    """X_1 = X_0 + W_o(MHA(X_0)) (no norm), X_2 = X_1 + FFN(LN_2(X_1)) if ``ffn_norm`` else X_1 + FFN(X_1)."""
    d, h = block.d_model, block.n_heads
    attn = MultiHeadAttention(d, h, bias=True).double()
    state = {k.replace("W_", "w_"): v for k, v in block.state_dict().items() if k.startswith("W_")}
    state.update({f"w_{r}.bias": torch.zeros(d, dtype=x.dtype) for r in "qkv"})  # the printed W_q, W_k, W_v: no bias
    attn.load_state_dict(state)
    x1 = x + attn(x)
    return pre_norm(x1, block.ffn, block.ln2) if ffn_norm else x1 + block.ffn(x1)


@pytest.mark.claim("architecture.snippet-la-transformer-block-forward")
@refutes(reason="the smallest block (d = h = d_ff = 1, one token, mask=None): line 67 evaluates the undefined name "
                "not_mask whatever the input")
def test_printed_transformer_block_forward_runs():
    block = _printed_block(1, 1, 1, 0, repaired=False)
    error = _raised(lambda: block(gaussian(0, 1, 1, 1)))
    claim_assert(error is None, "TransformerBlock.forward does not run as printed", error=error)


@pytest.mark.claim("architecture.snippet-la-transformer-block-forward",
                   "architecture.transformerblock-matches-line24-flow", "architecture.la-intro-ffn-two-matmuls",
                   "architecture.la-ffn-up-act-down")
@pytest.mark.parametrize("order,repaired,ffn_norm", [pytest.param("up-down", True, True, id="up-act-down"), pytest.param(
    "down-up", True, True, id="down-up", marks=control(
        "the FFN read as d_ff -> d then d -> d_ff (the two products swapped)",
        models=["architecture.la-intro-ffn-two-matmuls", "architecture.la-ffn-up-act-down"])), pytest.param(
    "up-down", False, True, id="line-67-as-printed", marks=control(
        "line 67 as printed, (mask is not_mask) and (not_mask is not None), taken to run",
        models="architecture.snippet-la-transformer-block-forward")), pytest.param(
    "up-down", True, False, id="line-24-reference", marks=control(
        "line 24's X_2 = X_1 + FFN(X_1) as the reference: the FFN branch un-normalised",
        models="architecture.transformerblock-matches-line24-flow"))])
@given(layout=layouts, d_ff=d_ffs, bn=batch_lengths(), seed=seeds())
@example(layout=HeadLayout(2, 1, 1, 2), d_ff=3, bn=(1, 2), seed=0)  # d != d_ff: the control's shapes differ
def test_repaired_transformer_block_adds_attention_then_ffn_of_ln2(order, repaired, ffn_norm, layout, d_ff, bn, seed):
    d = layout.d_model
    block = _printed_block(d, layout.n_heads, d_ff, seed, repaired=repaired)
    linears = [m for m in block.ffn if isinstance(m, nn.Linear)]
    shapes = [(m.in_features, m.out_features) for m in linears]
    stated = [(d, d_ff), (d_ff, d)] if order == "up-down" else [(d_ff, d), (d, d_ff)]
    claim_assert(shapes == stated and isinstance(block.ffn[1], nn.GELU),
                 "the FFN is not two matrix products d -> d_ff -> d around an activation", ffn=repr(block.ffn))
    x = gaussian(seed + 1, *bn, d)
    with torch.no_grad():
        theirs = _runs(lambda: block(x), "TransformerBlock.forward does not run")
        assert_equal_up_to_rounding(theirs, _block_reference(block, x, ffn_norm=ffn_norm),
                                    "repaired block != X_1 = X_0 + W_o(MHA X_0), X_2 = X_1 + FFN(LN_2 X_1)")


@pytest.mark.claim("architecture.transformerblock-matches-line24-flow")
@refutes(reason="the smallest block where LayerNorm is not degenerate (d = 2, one head, d_ff = 1, one token), run "
                "with line 67's undefined name supplied; as printed it does not run at all")
def test_printed_transformer_block_computes_the_line24_equations():
    block = _printed_block(2, 1, 1, 5, repaired=True)
    x = gaussian(6, 1, 1, 2)
    with torch.no_grad():
        gap = (block(x) - _block_reference(block, x, ffn_norm=False)).abs().max().item()
    # equal computations would agree to rounding (IDENTITY_RTOL ~ 1e-12 on O(1) values); the gap is 0.05
    claim_assert(gap <= 1e-12, "TransformerBlock != X_1 = X_0 + Y W^O, X_2 = X_1 + FFN(X_1)", gap=gap,
                 as_printed=_raised(lambda: _printed_block(2, 1, 1, 5, repaired=False)(x)))


@pytest.mark.claim("architecture.transformerblock-ln1-unused")
@refutes(reason="a static property of the printed forward (the attribute names its code reads), the same for every "
                "instance")
def test_printed_transformer_block_uses_both_layernorms():
    names = _printed_block(1, 1, 1, 0, repaired=False).forward.__code__.co_names
    claim_assert("ln1" in names and "ln2" in names, "forward does not use both LayerNorms",
                 ln1_used="ln1" in names, ln2_used="ln2" in names)


def _ln1_applied(block: nn.Module) -> None:
    """Negative control: the block's input passed through ln1 before its forward, as a block using ln1 would."""
    block.register_forward_pre_hook(lambda module, args: (module.ln1(args[0]), *args[1:]))


@pytest.mark.claim("architecture.transformerblock-ln1-unused")
@pytest.mark.parametrize("variant", [pytest.param(lambda block: None, id="as-printed"), pytest.param(
    _ln1_applied, id="ln1-applied", marks=control("a forward that applies ln1 (to the attention input), as the claim "
                                                  "says", models="architecture.transformerblock-ln1-unused"))])
@given(layout=layouts, d_ff=d_ffs, seed=seeds())
def test_printed_transformer_block_ln1_gets_no_gradient_and_ln2_does(variant, layout, d_ff, seed):
    block = _printed_block(layout.d_model, layout.n_heads, d_ff, seed, repaired=True)
    variant(block)
    block(gaussian(seed + 1, 1, 2, layout.d_model)).sum().backward()
    claim_assert(block.ln1.weight.grad is None and block.ln2.weight.grad is not None,
                 "ln1 is used or ln2 is not", ln1_grad=block.ln1.weight.grad is not None)
    claim_assert(pc.count_parameters(block.ln1) == pc.layer_norm_params(layout.d_model), "ln1's 2d parameters")


# --- the printed LinearAlgebraicTransformer, linear-algebra.txt lines 425-561 ----------------------------------------

@functools.cache
def _la_namespace() -> dict:
    run = printed("architecture.snippet-la-linear-algebraic-transformer")
    assert run.ran, run.describe()
    return run.namespace


VOCAB = 11


@pytest.mark.claim("architecture.la-transformer-defaults-dk-64", "architecture.la-transformer-defaults-layers-seq")
@pytest.mark.parametrize("changed", [
    pytest.param({}, id="defaults"),
    pytest.param({"n_heads": 8}, id="8-heads", marks=control("8 heads by default: d_k = 32, not 64",
                                                             models="architecture.la-transformer-defaults-dk-64")),
    pytest.param({"n_layers": 6}, id="6-layers", marks=control("6 layers by default, not 4",
        models="architecture.la-transformer-defaults-layers-seq")),
    pytest.param({"max_seq_len": 1024}, id="1024-positions", marks=control("a 1024-position table, not 512",
        models="architecture.la-transformer-defaults-layers-seq"))])
def test_linear_algebraic_transformer_defaults(changed):
    model = _la_namespace()["LinearAlgebraicTransformer"](VOCAB, **changed)
    block = model.blocks[0]
    defaults = dict(d_model=model.d_model, n_heads=model.n_heads, d_k=model.d_k, d_ff=block.ffn[0].out_features,
                    n_layers=len(model.blocks), max_seq_len=model.pos_emb.num_embeddings,
                    dropout=block.dropout.p, pos_emb=tuple(model.pos_emb.weight.shape))
    record("defaults", defaults)
    claim_assert((defaults["d_model"], defaults["n_heads"], defaults["d_k"], defaults["d_ff"]) == (256, 4, 64, 1024)
                 and defaults["d_ff"] == 4 * defaults["d_model"], "d_model, n_heads, d_k, d_ff defaults", **defaults)
    claim_assert((defaults["n_layers"], defaults["max_seq_len"], defaults["dropout"], defaults["pos_emb"])
                 == (4, 512, 0.1, (512, 256)), "n_layers, max_seq_len, dropout defaults", **defaults)
    per_block = pc.count_parameters(block)
    record("lablock_parameters", per_block)
    claim_assert(per_block == 3 * 256**2 + 256**2 + 256 + 2 * 256 * 1024 + 2 * pc.layer_norm_params(256) == 787_712,
                 "LABlock parameter count", counted=per_block)


@pytest.mark.claim("architecture.la-transformer-collects-spectral-per-layer")
@pytest.mark.parametrize("kept", [pytest.param(slice(None), id="every-block"), pytest.param(
    slice(-1), id="last-missing", marks=control("an off-by-one: the last block's dict missing")), pytest.param(
    slice(None, None, -1), id="reversed", marks=control("the dicts in reverse block order"))])
@given(n=st.integers(2, 8), seed=seeds())
def test_forward_returns_logits_and_one_spectral_dict_per_block(kept, n, seed):
    torch.manual_seed(seed)
    model = _la_namespace()["LinearAlgebraicTransformer"](VOCAB, d_model=8, n_heads=2, d_ff=16, n_layers=3).eval()
    ids = torch.randint(0, VOCAB, (1, n))
    with torch.no_grad():
        (logits, info), seen = locals_at_return(type(model.blocks[0]).forward, lambda: model(ids))
    info = info[kept]
    claim_assert(tuple(logits.shape) == (1, n, VOCAB), "logits are not (B, n, vocab)", shape=tuple(logits.shape))
    keys = {"sigma_1", "sigma_2", "spectral_gap", "effective_rank"}
    claim_assert(len(info) == len(model.blocks) and all(set(i) == keys for i in info),
                 "not one dict with the four entries per block", info=info)
    top = torch.linalg.svdvals(seen["A"])[..., 0].mean().item()  # the last block's attention matrices
    # two float32 SVDs of the same n x n matrices (sigma_1 in [1, sqrt n]) agree to a few n eps32 sigma_1
    tol = 8 * n * 2.0**-23 * max(1.0, top)
    claim_assert(abs(info[-1]["sigma_1"] - top) <= tol, "sigma_1 is not the mean top singular value of A",
                 recorded=info[-1]["sigma_1"], recomputed=top)


@pytest.mark.claim("architecture.lablock-ffn-no-bias")
@pytest.mark.parametrize("bias", [pytest.param(False, id="no-bias"), pytest.param(
    True, id="bias", marks=control("Linear layers with biases: 2 d d_ff + d_ff + d parameters"))])
@given(d=st.integers(1, 16), d_ff=st.integers(1, 32))
def test_lablock_ffn_holds_exactly_2_d_d_ff_parameters(bias, d, d_ff):
    block = _la_namespace()["LABlock"](d, 1, d_ff)
    linears = [m for m in block.ffn if isinstance(m, nn.Linear)]
    claim_assert(all((m.bias is not None) == bias for m in linears) and pc.count_parameters(block.ffn)
                 == 2 * d * d_ff + (d_ff + d) * bias == pc.ffn_params(d, d_ff, bias=bias),
                 "LABlock FFN is not 2 d d_ff bias-free weights",
                 counted=pc.count_parameters(block.ffn), d=d, d_ff=d_ff)


def _normalised_stream(x, sublayer, norm):
    """LN(x) + F(LN(x)): the residual taken from the normalised stream (a negative control)."""
    return norm(x) + sublayer(norm(x))


@pytest.mark.claim("architecture.lablock-prenorm-comment", "architecture.lablock-residual-attention-output")
@pytest.mark.parametrize("residual", [pytest.param(pre_norm, id="pre-norm"), pytest.param(
    post_norm, id="post-norm", marks=control("the post-norm block, Norm(x + F(x)), as reference",
                                             models="architecture.lablock-prenorm-comment")), pytest.param(
    _normalised_stream, id="normalised-stream", marks=control("the output added to LN(x), not to the stream x",
        models="architecture.lablock-residual-attention-output"))])
@given(layout=layouts, d_ff=d_ffs, bn=batch_lengths(), seed=seeds())
def test_lablock_is_a_pre_norm_block_adding_w_o_of_the_heads_to_the_unnormalised_stream(residual, layout, d_ff, bn,
                                                                                        seed):
    d, h = layout.d_model, layout.n_heads
    block = seeded_module(_la_namespace()["LABlock"](d, h, d_ff), seed).eval()
    attn = MultiHeadAttention(d, h, bias=True).double()
    state = {k.replace("W_", "w_"): v for k, v in block.state_dict().items() if k.startswith("W_")}
    attn.load_state_dict({**state, **{f"w_{r}.bias": torch.zeros(d, dtype=torch.float64) for r in "qkv"}})
    x = gaussian(seed + 1, *bn, d)
    with torch.no_grad():
        out, _ = block(x)
        ours = residual(residual(x, attn, block.ln1), block.ffn, block.ln2)
    assert_equal_up_to_rounding(out, ours, "LABlock != x + W_o(MHA(LN_1 x)), then + FFN(LN_2 x)", layout=layout)


@pytest.mark.claim("architecture.snippet-la-train-loop-runs")
@pytest.mark.parametrize("epochs", [pytest.param(1, id="one-epoch"), pytest.param(
    0, id="no-epoch", marks=control("an off-by-one in the epoch loop: no batch is run, nothing stepped or logged"))])
def test_printed_training_loop_runs_adamw_steps_and_logs_spectral_figures(epochs, capsys):
    torch.manual_seed(0)
    ns = _la_namespace()
    model = ns["LinearAlgebraicTransformer"](VOCAB, d_model=8, n_heads=2, d_ff=16, n_layers=2)
    ids = torch.randint(0, VOCAB, (2, 5))
    before = [p.detach().clone() for p in model.parameters()]
    ns["train_transformer"](model, [(ids, ids.roll(-1, dims=1))], n_epochs=epochs)
    moved = sum(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    logged = capsys.readouterr().out
    claim_assert(moved > 0 and "Avg Spectral Gap" in logged and "Avg Eff Rank" in logged,
                 "the loop did not update the parameters or log the spectral figures", moved=moved, logged=logged)


# --- spectral.txt lines 473-492 and 702-720 ------------------------------------------------------------------------

@pytest.mark.claim("architecture.evaluate-architecture-spectral-call")
@refutes(reason="any config and sample: line 704 reads the name build_transformer, which the document never defines")
def test_evaluate_architecture_spectral_runs():
    run = printed("spectral.snippet-evaluate-architecture-spectral")
    error = _raised(lambda: run.namespace["evaluate_architecture_spectral"](SimpleNamespace(), torch.zeros(1, 4, 8)))
    claim_assert(error is None, "evaluate_architecture_spectral does not run as printed", error=error)


class _AttentionStack(nn.Module):
    """Self-attention layers returning per-head weights (B, h, n, n), the shape the printed analyzer indexes
    (``attn[0, 0]``); torch's default, head-averaged (B, n, n), would make it take the SVD of a vector."""

    def __init__(self, d: int, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.MultiheadAttention(d, 1, batch_first=True) for _ in range(n_layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x, x, x, need_weights=True, average_attn_weights=False)[0]
        return x


@pytest.mark.claim("architecture.evaluate-architecture-spectral-call")
@pytest.mark.parametrize("bound", [pytest.param(True, id="builder-bound"), pytest.param(
    False, id="as-printed", marks=control("the function as printed, build_transformer left undefined, taken to run",
                                          models="architecture.evaluate-architecture-spectral-call"))])
@given(n=st.integers(2, 30), n_layers=st.integers(1, 3), seed=seeds())
def test_evaluate_architecture_spectral_with_a_model_builder_scores_zero_for_30_tokens_or_fewer(bound, n, n_layers,
                                                                                                seed):
    build = lambda config: _AttentionStack(8, config.n_layers)  # noqa: E731  the builder the document never defines
    run = printed("spectral.snippet-evaluate-architecture-spectral",
                  bindings={"build_transformer": build} if bound else None)
    torch.manual_seed(seed)
    score = _runs(lambda: run.namespace["evaluate_architecture_spectral"](SimpleNamespace(n_layers=n_layers),
                                                                          torch.randn(1, n, 8)),
                  "evaluate_architecture_spectral does not run")
    # effective rank counts singular values of an n x n matrix: at most n <= 30, never in (30, 100)
    claim_assert(score == 0.0, "score is not 0 although no layer can have effective rank above 30", score=score, n=n)


@pytest.mark.claim("spectral.design-d-model-divisible-by-heads")
@pytest.mark.parametrize("d_head", [pytest.param(None, id="d_k=d_model/h"), pytest.param(1, id="explicit-width", marks=control(
    "heads of an explicit width (d_head = 1) not tied to d_model / h, as some models have them: without the "
    "premise d_k = d_model / h any d_model builds, so divisibility is no longer required"))])
@example(d=1, h=2)  # the smallest non-divisible case: the control differs from the claim here
@given(d=st.integers(1, 24), h=st.integers(1, 8))
def test_divisibility_is_required_exactly_where_d_k_is_defined_as_d_model_over_h(d_head, d, h):
    check = printed("spectral.snippet-spectral-design-check").namespace["spectral_design_check"]
    flagged = "d_model 应能被 num_heads 整除" in check(SimpleNamespace(num_layers=12, d_model=d, num_heads=h))
    refused = {}
    builders = [("impl MultiHeadAttention, d_head = d // h" if d_head is None else f"impl MultiHeadAttention, d_head = {d_head}",
                 lambda: MultiHeadAttention(d, h, d_head=d_head))]
    if d_head is None:  # torch's module has no head width of its own: it is always d_model / h
        builders.append(("torch.nn.MultiheadAttention", lambda: nn.MultiheadAttention(d, h)))
    for name, build in builders:
        try:
            build()
            refused[name] = False
        except (AssertionError, ValueError):  # torch asserts embed_dim % num_heads == 0; ours raises ValueError
            refused[name] = True
    # with d_k = d_model / h (the design check's own line 486, foundations:141, torch) exactly d % h != 0 is refused
    claim_assert(flagged == (d % h != 0) and all(r == (d % h != 0) for r in refused.values()),
                 "the design check or the d_k = d_model / h implementations do not single out d % h != 0",
                 d=d, h=h, flagged=flagged, refused=refused)


# --- the index's statements about the documents --------------------------------------------------------------------

@functools.cache
def _documents():
    return load_sources(project_root())


TENSOR_DECOMPOSITION_TERMS = ("张量", "tensor decomposition", "Tucker", "CP 分解")


@pytest.mark.claim("architecture.index-foundations-doc-covers-tensor-decomposition")
@refutes(reason="an exact search of the whole of foundations.txt (the document titled Transformer数学基础)")
def test_foundations_contains_tensor_decompositions():
    text = _documents()["foundations"].text
    hits = {term: text.count(term) for term in TENSOR_DECOMPOSITION_TERMS}
    claim_assert(any(hits.values()), "foundations.txt has no tensor decomposition", hits=hits)


@pytest.mark.claim("architecture.index-foundations-doc-covers-tensor-decomposition")
@pytest.mark.parametrize("appended", [pytest.param("", id="as-written"), pytest.param(
    "\n## 张量分解\nTucker 分解与 CP 分解\n", id="with-tensor-section", marks=control(
        "foundations.txt with the tensor-decomposition section the index credits it with",
        models="architecture.index-foundations-doc-covers-tensor-decomposition"))])
def test_foundations_has_a_matrix_view_and_a_geometric_reading_of_multi_head_information_flow(appended):
    doc = _documents()["foundations"]
    matrix_view = doc.find_quote(r"\mathbf{Q}=\mathbf{X}{\mathbf{W}}_Q", 19) is not None
    geometry = doc.find_quote("多头的几何意义", 114) is not None and doc.find_quote("信息流", 119) is not None
    claim_assert(matrix_view and geometry, "the matrix view (line 19) or the multi-head geometry table (114-120) "
                 "is missing", matrix_view=matrix_view, geometry=geometry)
    text = doc.text + appended
    hits = {term: text.count(term) for term in TENSOR_DECOMPOSITION_TERMS}
    claim_assert(not any(hits.values()), "foundations.txt has a tensor decomposition", hits=hits)


@pytest.mark.claim("architecture.index-topic-contains-7-core-documents")
@pytest.mark.parametrize("stated", [pytest.param(7, id="seven"), pytest.param(
    8, id="eight", marks=control("a wrong count: 8 core documents"))])
def test_index_lists_seven_core_documents_in_both_places(stated):
    lines = _documents()["index"].lines
    bullets = [l for l in lines[274:281] if l.startswith("•")]  # lines 275-281
    navigation = [l for rows in ((27, 30), (35, 36), (41, 41)) for l in lines[rows[0] - 1:rows[1]]]
    record("core_documents", [b.lstrip("• ").strip() for b in bullets])
    claim_assert(len(bullets) == stated and len(navigation) == stated,
                 "the index does not list 7 core documents", bullets=len(bullets), navigation=len(navigation))
