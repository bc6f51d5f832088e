"""Does the code printed in the documents run as a reader would use it?

``test_snippets.py`` executes each snippet's lines (its ``def``, ``class`` and ``import`` statements); here each
snippet's objects are constructed and its functions called with the shapes and arguments the document implies,
and the outputs are checked where the document says what they are. What the outputs compute in detail (the
formulas, the shape comments) is decided by the claims each snippet claim ``uses``; these tests decide whether
the printed code can be used at all.

A call that raises inside the document's code violates the claim that the code runs: :func:`reader_call` turns
that exception (type, message and the document line it came from) into the counterexample. An exception raised
before the call reaches the document's code is the test's own error and is re-raised, never a counterexample.

Each test of a ``holds`` snippet is also run on a mutant of the printed code (:func:`mutant`, a one-line plausible
bug: a wrong constant, index, axis or condition) as its negative control: the same checks must reject it. The
correction of a ``fails`` snippet is tested on the printed code with exactly the repair it names
(:func:`edited_code`), against a reference computed by hand, and on a wrong repair as its control.
"""
import contextlib
import functools
import io
import math
import traceback
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import matplotlib
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, refutes
from claimcheck.snippets import SnippetRun, execute
from impl.blocks import pre_norm
from impl.ffn import ffn, gelu
from impl.multihead import attend_heads
from impl.norms import layer_norm
from impl.rope import rope_frequencies, rotation_matrix
from impl.spectral import eigenvalues, mass_rank, relative_singular_value_gap, singular_value_gap, stable_rank
from properties.strategies.architecture import assert_equal_up_to_rounding, seeded_module
from properties.strategies.spectral import fresh_code, gaussian, printed_code, seeds

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402  (the spectral snippets import it: load it once, at collection)

EPS64 = 2.0**-52


def edited_run(claim_id: str, edits: Sequence[tuple[str, str]], **extra: Any) -> SnippetRun:
    """The snippet of ``claim_id`` executed afresh with each ``(old, new)`` of ``edits`` applied in turn (``old`` must
    occur exactly once), in a copy of the printed code's namespace (its ``requires`` included) with ``extra`` names
    added. The run may fail: its outcome is recorded, as for the printed code."""
    printed = printed_code(claim_id)
    code = printed.code
    for old, new in edits:
        premise(code.count(old) == 1, "the text an edit replaces does not occur exactly once", claim=claim_id, old=old)
        code = code.replace(old, new)
    run = SnippetRun(printed.source, printed.start, printed.end, code, namespace={**printed.namespace, **extra})
    return execute(run, filename=f"sources/{printed.source}.txt")  # the document's file: as the printed code's frames


def edited_code(claim_id: str, edits: Sequence[tuple[str, str]], **extra: Any) -> SnippetRun:
    """:func:`edited_run`, which must run: an edited snippet that fails to define its names breaks the evidence."""
    run = edited_run(claim_id, edits, **extra)
    premise(run.ran, "the edited printed code does not run", snippet=run.describe())
    return run


def mutant_code(claim_id: str, old: str, new: str, **extra: Any) -> SnippetRun:
    """The snippet of ``claim_id`` executed with its text ``old`` (which must occur once) replaced by ``new``, in a
    copy of the printed code's namespace (its ``requires`` included) with ``extra`` names added."""
    return edited_code(claim_id, [(old, new)], **extra)


def readers_code(claim_id: str, mutation: tuple[str, str] | None, **helpers: Any) -> SnippetRun:
    """The snippet of ``claim_id`` run afresh with the reader's ``helpers`` in its namespace, or, with a
    ``mutation`` ``(old, new)``, its mutant with them."""
    return mutant_code(claim_id, *mutation, **helpers) if mutation else fresh_code(claim_id, **helpers)


AS_PRINTED = pytest.param(None, id="printed")


def mutant(old: str, new: str, why: str, models: str | list[str] | None = None) -> Any:
    """A ``mutation`` parameter: the negative control that runs the test on the printed code with ``old`` -> ``new``
    (credited to the claims ``models`` names, needed when the test is evidence for several)."""
    return pytest.param((old, new), id="mutant",
                        marks=control(f"the printed code with {old!r} -> {new!r}: {why}", models=models))


def _code(claim_id: str, name: str, mutation: tuple[str, str] | None = None) -> Any:
    """A name the snippet of ``claim_id`` defines (executed from sources/, its ``requires`` first), or its mutant."""
    run = mutant_code(claim_id, *mutation) if mutation else printed_code(claim_id)
    premise(name in run.namespace, "the printed code does not define the name the test calls", name=name,
            snippet=run.describe())
    return run.namespace[name]


def _document_frame(exc: BaseException) -> str | None:
    """``sources/<doc>:<line>`` of the innermost frame of the documents' code in ``exc``'s traceback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("sources/")]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def reader_call(what: str, call: Callable[[], Any]) -> Any:
    """``call()``; an exception raised inside the documents' code is a violation of "the printed code runs"."""
    try:
        return call()
    except Exception as exc:
        where = _document_frame(exc)
        if where is None:  # never reached the printed code: the evidence is broken, not the claim
            raise
        claim_assert(False, f"{what} raises", error=f"{type(exc).__name__}: {exc}", at=where)


def _quietly(call: Callable[[], Any]) -> tuple[Any, str]:
    """``call()`` with stdout captured: (result, printed text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = call()
    return result, out.getvalue()


def _shape(t: Any) -> tuple | None:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def _softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) v written out, the oracle for the printed attention functions."""
    s = q @ k.transpose(-2, -1) * scale
    w = torch.exp(s - s.amax(-1, keepdim=True))
    return (w / w.sum(-1, keepdim=True)) @ v


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    # two float64 evaluations of one softmax-attention (sums of <= 64 terms of O(1) values): 2^12 eps covers rounding,
    # a wrong scale or softmax axis errs by O(0.1)
    return a.shape == b.shape and bool((a - b).abs().max() <= 2.0**12 * EPS64 * max(1.0, b.abs().max().item()))


def _affine(x: torch.Tensor, linear: torch.nn.Linear) -> torch.Tensor:
    """``x W^T + b`` of an ``nn.Linear``, written out."""
    return x @ linear.weight.T if linear.bias is None else x @ linear.weight.T + linear.bias


def _attention_by_hand(proj: tuple[torch.nn.Linear, ...], n_heads: int, x_q: torch.Tensor, x_kv: torch.Tensor,
                       mask: torch.Tensor | None) -> torch.Tensor:
    """``W_o Concat_i(softmax(Q_i K_i^T / sqrt(d_k)) V_i)`` with the printed projections ``(W_q, W_k, W_v, W_o)``, the
    heads by :func:`impl.multihead.attend_heads`; ``mask`` in the printed convention (0 masks)."""
    w_q, w_k, w_v, w_o = proj
    heads = attend_heads(_affine(x_q, w_q), _affine(x_kv, w_k), _affine(x_kv, w_v), n_heads,
                         mask=None if mask is None else mask != 0)  # (B, n_q, d_model)
    return _affine(heads, w_o)


def _mha_by_hand(mha: torch.nn.Module, mask: torch.Tensor | None, kv: torch.Tensor | None = None) -> Callable:
    """The sublayer ``h -> MHA(h, kv, kv)`` (``kv = h``: self-attention) with the weights of a printed
    MultiHeadAttention (foundations.txt lines 138-176)."""
    return lambda h: _attention_by_hand((mha.W_q, mha.W_k, mha.W_v, mha.W_o), mha.num_heads, h,
                                        h if kv is None else kv, mask)


def _ffn_by_hand(seq: torch.nn.Sequential) -> Callable:
    """``h -> GELU(h W_1 + b_1) W_2 + b_2`` with the weights of a printed Linear-GELU-Linear."""
    return lambda h: ffn(h, seq[0].weight.T, seq[2].weight.T, seq[0].bias, seq[2].bias, gelu)


def _ln(norm: torch.nn.LayerNorm) -> Callable:
    return lambda h: layer_norm(h, norm.weight, norm.bias, norm.eps)


# --- foundations.txt ----------------------------------------------------------------------------------------------

@pytest.mark.claim("multi-head.snippet-multi-head-attention")
def test_printed_multi_head_attention_512_8_maps_b_n_512_to_b_n_512():
    mha = reader_call("MultiHeadAttention(512, 8)", lambda: _code("multi-head.snippet-multi-head-attention",
                                                                   "MultiHeadAttention")(512, 8)).eval()
    x, memory = torch.randn(2, 5, 512, generator=torch.Generator().manual_seed(0)), torch.randn(2, 7, 512)
    with torch.no_grad():
        self_out = reader_call("mha(x, x, x)", lambda: mha(x, x, x))
        cross = reader_call("mha(x, memory, memory)", lambda: mha(x, memory, memory))
        causal = reader_call("mha(x, x, x, causal mask)", lambda: mha(x, x, x, torch.ones(5, 5).tril()))
        moved = x.clone()
        moved[:, 1:] += 1.0
        causal_moved = mha(moved, moved, moved, torch.ones(5, 5).tril())
    claim_assert(_shape(self_out) == _shape(cross) == _shape(causal) == (2, 5, 512),
                 "the output is not (B, n, d_model)", self_attention=_shape(self_out), cross=_shape(cross))
    claim_assert(torch.equal(causal[:, 0], causal_moved[:, 0]), "with the causal mask position 0 sees later positions")


@pytest.mark.claim("multi-head.snippet-multi-head-attention")
@refutes(reason="n = 2 and one masked score, the smallest masked call, in float16 (the half precision models are run "
                "in): masked_fill(mask == 0, -1e9) at line 167 cannot store -1e9 in float16 (largest finite 65504)")
def test_printed_multi_head_attention_runs_masked_in_half_precision():
    mha = _code("multi-head.snippet-multi-head-attention", "MultiHeadAttention")(512, 8).half().eval()
    x = torch.randn(1, 2, 512, generator=torch.Generator().manual_seed(23)).half()
    with torch.no_grad():
        out = reader_call("mha(x, x, x, causal mask) in float16", lambda: mha(x, x, x, torch.ones(2, 2).tril()))
    claim_assert(_shape(out) == (1, 2, 512), "the output is not (B, n, d_model)", shape=_shape(out))


def _float16_masked(claim_id: str) -> Any:
    """The control of a correction that excepts masked float16 calls: the masked float16 call the claim includes."""
    return control("a masked float16 call, as the claim's 'with or without a mask, in the precisions models are run "
                   "in' has it: -1e9 does not fit float16", models=claim_id)


@pytest.mark.claim("multi-head.snippet-multi-head-attention")
@pytest.mark.parametrize("half_mask", [pytest.param(None, id="float16-unmasked"), pytest.param(
    torch.ones(4, 4).tril(), id="float16-masked", marks=_float16_masked("multi-head.snippet-multi-head-attention"))])
def test_printed_multi_head_attention_runs_in_bfloat16_masked_and_in_float16_unmasked(half_mask):
    mha = _code("multi-head.snippet-multi-head-attention", "MultiHeadAttention")(512, 8).eval()
    x = torch.randn(1, 4, 512, generator=torch.Generator().manual_seed(24))
    with torch.no_grad():
        bf16 = reader_call("mha(x, x, x, mask) in bfloat16",
                           lambda: mha.bfloat16()(*[x.bfloat16()] * 3, torch.ones(4, 4).tril()))
        half = reader_call("mha(x, x, x) in float16", lambda: mha.half()(*[x.half()] * 3, half_mask))
    claim_assert(_shape(bf16) == _shape(half) == (1, 4, 512) and bf16.dtype == torch.bfloat16
                 and half.dtype == torch.float16,
                 "the masked bfloat16 or the unmasked float16 call does not return (B, n, d_model) in its precision",
                 bfloat16=_shape(bf16), float16=_shape(half))
    # the correction's repair: a fill of the scores' own dtype, torch.finfo(scores.dtype).min, runs masked in float16
    repaired = mutant_code("multi-head.snippet-multi-head-attention", "-1e9", "torch.finfo(scores.dtype).min")
    with torch.no_grad():
        fixed = reader_call("the repaired mha(x, x, x, mask) in float16", lambda: repaired.namespace[
            "MultiHeadAttention"](512, 8).eval().half()(*[x.half()] * 3, torch.ones(4, 4).tril()))
    claim_assert(_shape(fixed) == (1, 4, 512) and bool(torch.isfinite(fixed).all()),
                 "with the finfo(dtype).min fill the masked float16 call still fails", shape=_shape(fixed))


@pytest.mark.claim("positional.snippet-positional-encoding")
@pytest.mark.parametrize("d", [pytest.param(512, id="512"), pytest.param(
    3, id="3", marks=control("an odd width, as the claim's 'for the model width d_model' allows: line 217 fails",
                             models="positional.snippet-positional-encoding"))])
def test_printed_positional_encoding_adds_the_sinusoidal_table_to_an_even_width_input(d):
    n = 10
    pe = reader_call(f"PositionalEncoding({d})", lambda: _code("positional.snippet-positional-encoding",
                                                               "PositionalEncoding")(d)).eval()
    x = torch.randn(2, n, d, generator=torch.Generator().manual_seed(1))
    out = reader_call(f"pe(x) for x (2, 10, {d})", lambda: pe(x))
    pos, i = torch.arange(n, dtype=torch.float64)[:, None], torch.arange(0, d, 2, dtype=torch.float64)
    table = torch.stack([torch.sin(pos / 10000 ** (i / d)), torch.cos(pos / 10000 ** (i / d))], -1).flatten(1)  # line 188
    # float32 table: angles up to n, sin/cos of them within ~n float32 ulps; the added x rounds once more
    claim_assert(_shape(out) == (2, n, d) and bool(((out - x).double() - table).abs().max() <= 64 * n * 2.0**-24),
                 "pe(x) is not x + PE[:n] (sin on even, cos on odd columns)", shape=_shape(out))


@pytest.mark.claim("positional.snippet-positional-encoding")
@refutes(reason="d_model = 3, the smallest odd width that fails (for d = 1 the one cos column broadcasts into the "
                "empty pe[:, 1::2]): pe[:, 1::2] has floor(d/2) = 1 column, div_term ceil(d/2) = 2 entries")
def test_printed_positional_encoding_builds_for_every_width():
    reader_call("PositionalEncoding(3)", lambda: _code("positional.snippet-positional-encoding", "PositionalEncoding")(3))


def _rope_angles(t: int, d: int) -> torch.Tensor:
    """m theta_j for m < t and theta_j = 10000^(-2j/d), j < d/2: (t, d/2)."""
    return torch.arange(t, dtype=torch.float64)[:, None] * 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)


@pytest.mark.claim("rope.snippet-apply-rotary-pos-emb")
@pytest.mark.parametrize("copies", [pytest.param(1, id="half-width"), pytest.param(
    2, id="full-width", marks=control("the full-width (n, d_k) tables the comment x * cos + (-x2, x1) * sin implies",
                                      models="rope.snippet-apply-rotary-pos-emb"))])
def test_printed_apply_rotary_pos_emb_rotates_b_h_n_d_k_queries_with_half_width_tables(copies):
    x = gaussian((2, 8, 6, 64), 2)
    angles = torch.cat([_rope_angles(6, 64)] * copies, -1)
    fn = _code("rope.snippet-apply-rotary-pos-emb", "apply_rotary_pos_emb")
    out = reader_call("apply_rotary_pos_emb(x, cos, sin), cos/sin (n, d_k/2)", lambda: fn(x, angles.cos(), angles.sin()))
    pairs_in, pairs_out = x.unflatten(-1, (2, 32)).norm(dim=-2), out.unflatten(-1, (2, 32)).norm(dim=-2)
    # a rotation of each pair (x_j, x_{j+d/2}) keeps its length: a few ulps of |x|
    claim_assert(_shape(out) == (2, 8, 6, 64) and bool((pairs_in - pairs_out).abs().max() <= 16 * EPS64 * x.abs().max()),
                 "the output is not x with each pair (x_j, x_{j+d/2}) rotated", shape=_shape(out))
    claim_assert(torch.equal(out[:, :, 0], x[:, :, 0]), "position 0 (angle 0) is not left unchanged")


@pytest.mark.claim("rope.snippet-apply-rotary-pos-emb")
@refutes(reason="one query (1, 1, 1, 2) at position 0, the smallest even d_k, with the full-width tables of the "
                "comment's x * cos (line 266, cos and sin duplicated over both halves): x1 (width 1) broadcasts against "
                "them and the result has width 4; from d_k = 4 on the call raises")
def test_printed_apply_rotary_pos_emb_takes_the_full_width_tables_of_its_comment():
    x = gaussian((1, 1, 1, 2), 3)
    angles = _rope_angles(1, 2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # (n, d_k), as x * cos needs
    out = reader_call("apply_rotary_pos_emb(x, cos, sin), cos/sin (n, d_k)",
                      lambda: _code("rope.snippet-apply-rotary-pos-emb", "apply_rotary_pos_emb")(x, cos, sin))
    claim_assert(_shape(out) == _shape(x) and torch.equal(out, x), "with full-width tables the output is not x rotated "
                 "(at position 0: x itself)", x_shape=_shape(x), out_shape=_shape(out))


@pytest.mark.claim("architecture.snippet-encoder-layer")
@refutes(reason="one call with the default mask=None, the document's d_model = 512 and h = 8: line 340 calls "
                "self_attn(norm1(x), mask) without a value, so every call raises")
def test_printed_encoder_layer_maps_b_n_d_to_b_n_d():
    layer = reader_call("EncoderLayer(512, 8, 2048)",
                        lambda: _code("architecture.snippet-encoder-layer", "EncoderLayer")(512, 8, 2048))
    out = reader_call("layer(x) for x (2, 5, 512)", lambda: layer(torch.randn(2, 5, 512)))
    claim_assert(_shape(out) == (2, 5, 512), "the output is not (B, n, d_model)", shape=_shape(out))


_ENCODER_CALL = "self.self_attn(self.norm1(x), mask)"  # line 340


@pytest.mark.claim("architecture.snippet-encoder-layer")
@pytest.mark.parametrize("call", [
    pytest.param("self.self_attn(self.norm1(x), self.norm1(x), self.norm1(x), mask)", id="query-key-value-norm1-x"),
    pytest.param("self.self_attn(self.norm1(x), x, x, mask)", id="key-value-x", marks=control(
        "line 340 repaired with keys and values from x, not norm1(x): it runs, but is not the pre-norm layer",
        models="architecture.snippet-encoder-layer"))])
def test_encoder_layer_with_query_key_value_norm1_x_is_the_pre_norm_layer(call):
    cls = edited_code("architecture.snippet-encoder-layer", [(_ENCODER_CALL, call)]).namespace["EncoderLayer"]
    layer = seeded_module(reader_call("EncoderLayer(512, 8, 2048)", lambda: cls(512, 8, 2048)), 26).eval()
    x = gaussian((2, 5, 512), 27)
    with torch.no_grad():
        for mask in (None, torch.ones(5, 5).tril()):
            out = reader_call("layer(x, mask) for x (2, 5, 512)", lambda: layer(x, mask))
            x1 = pre_norm(x, _mha_by_hand(layer.self_attn, mask), _ln(layer.norm1))
            assert_equal_up_to_rounding(out, pre_norm(x1, _ffn_by_hand(layer.ffn), _ln(layer.norm2)),
                                        "the layer is not x + MHA(LN_1 x), then + FFN(LN_2 .)", masked=mask is not None)


@pytest.mark.claim("architecture.snippet-decoder-layer")
@refutes(reason="one call with the default masks (None), d_model = 512, h = 8: line 362 calls self_attn(norm1(x), "
                "tgt_mask) without a value, so every call raises")
def test_printed_decoder_layer_maps_b_n_d_to_b_n_d():
    layer = reader_call("DecoderLayer(512, 8, 2048)",
                        lambda: _code("architecture.snippet-decoder-layer", "DecoderLayer")(512, 8, 2048))
    out = reader_call("layer(x, encoder_output)", lambda: layer(torch.randn(2, 5, 512), torch.randn(2, 7, 512)))
    claim_assert(_shape(out) == (2, 5, 512), "the output is not (B, n, d_model)", shape=_shape(out))


_DECODER_SELF_CALL = ("self.self_attn(self.norm1(x), tgt_mask)",  # line 362
                      "self.self_attn(self.norm1(x), self.norm1(x), self.norm1(x), tgt_mask)")
_DECODER_CROSS_CALL = "self.cross_attn(self.norm2(x), encoder_output, src_mask)"  # line 364


@pytest.mark.claim("architecture.snippet-decoder-layer")
@pytest.mark.parametrize("cross_call", [
    pytest.param("self.cross_attn(self.norm2(x), encoder_output, encoder_output, src_mask)", id="value-encoder-output"),
    pytest.param("self.cross_attn(self.norm2(x), self.norm2(x), self.norm2(x), src_mask)", id="no-encoder-output",
                 marks=control("line 364 repaired as a second self-attention on norm2(x): it runs unmasked, but never "
                               "reads the encoder output", models="architecture.snippet-decoder-layer"))])
def test_decoder_layer_with_its_attention_calls_given_query_key_value_is_the_pre_norm_decoder_layer(cross_call):
    edits = [_DECODER_SELF_CALL, (_DECODER_CROSS_CALL, cross_call)]
    cls = edited_code("architecture.snippet-decoder-layer", edits).namespace["DecoderLayer"]
    layer = seeded_module(reader_call("DecoderLayer(512, 8, 2048)", lambda: cls(512, 8, 2048)), 28).eval()
    x, memory = gaussian((2, 5, 512), 29), gaussian((2, 7, 512), 30)
    padding = torch.ones(5, 7)
    padding[:, -1] = 0  # the last encoder position is padding
    with torch.no_grad():
        for src_mask, tgt_mask in ((None, None), (padding, torch.ones(5, 5).tril())):
            out = reader_call("layer(x, encoder_output, src_mask, tgt_mask)",
                              lambda: layer(x, memory, src_mask, tgt_mask))
            x1 = pre_norm(x, _mha_by_hand(layer.self_attn, tgt_mask), _ln(layer.norm1))
            x2 = pre_norm(x1, _mha_by_hand(layer.cross_attn, src_mask, kv=memory), _ln(layer.norm2))
            assert_equal_up_to_rounding(out, pre_norm(x2, _ffn_by_hand(layer.ffn), _ln(layer.norm3)),
                                        "the layer is not x + MHA(LN_1 x), + CrossMHA(LN_2 ., enc), + FFN(LN_3 .)",
                                        masked=src_mask is not None)


@pytest.mark.claim("rope.snippet-ndimensional-rope")
@refutes(reason="NDimensionalRoPE(8, 2, 16): head_dim 8 divisible by 2 n_dims = 4, two position axes; line 527 reads "
                "the undefined name pairs_per_dim on every construction, before any argument matters")
def test_printed_ndimensional_rope_rotates_b_h_t_head_dim_by_multi_axis_positions():
    rope = reader_call("NDimensionalRoPE(8, 2, 16)", lambda: _code("rope.snippet-ndimensional-rope", "NDimensionalRoPE")(8, 2, 16))
    x, positions = torch.randn(1, 2, 3, 8), torch.randint(0, 16, (1, 3, 2))
    out = reader_call("rope.apply(x, positions)", lambda: rope.apply(x, positions))
    claim_assert(_shape(out) == (1, 2, 3, 8), "apply does not return x's shape (B, H, T, head_dim)", shape=_shape(out))


_SELF_PAIRS_PER_DIM = ("(torch.arange(0, pairs_per_dim, 2).float() / pairs_per_dim)",  # line 527
                       "(torch.arange(0, self.pairs_per_dim, 2).float() / self.pairs_per_dim)")


@functools.cache  # one execution of each edited class per process
def _ndimensional_rope(*edits: tuple[str, str]) -> type:
    """NDimensionalRoPE with line 527 reading self.pairs_per_dim, and ``edits`` besides."""
    return edited_code("rope.snippet-ndimensional-rope", [_SELF_PAIRS_PER_DIM, *edits]).namespace["NDimensionalRoPE"]


@pytest.mark.claim("rope.snippet-ndimensional-rope")
@pytest.mark.parametrize("edits", [pytest.param((), id="self-pairs-per-dim"), pytest.param(
    (("return x * cos + self.rotate_half(x) * sin", "return x"),), id="apply-returns-x",
    marks=control("apply returning x itself, as a working apply returns a tensor of x's shape",
                  models="rope.snippet-ndimensional-rope"))])
@given(n_dims=st.integers(1, 3), pairs=st.integers(1, 3), max_pos=st.integers(1, 8), b=st.integers(1, 2),
       h=st.integers(1, 3), t=st.integers(1, 4), seed=seeds())
def test_ndimensional_rope_with_self_pairs_per_dim_builds_but_apply_never_returns_x_shape(edits, n_dims, pairs,
                                                                                            max_pos, b, h, t, seed):
    head_dim = 2 * n_dims * pairs  # the divisibility the constructor asserts (line 515)
    rope = reader_call(f"NDimensionalRoPE({head_dim}, {n_dims}, {max_pos})",
                       lambda: _ndimensional_rope(*edits)(head_dim, n_dims, max_pos))
    # arange(0, pairs, 2) gives ceil(pairs / 2) frequencies per axis, and the cache doubles them: one table of
    # max_pos rows, not one per axis, so cos_cached[:, :, positions] is (1, 1, B, T, n_dims, width)
    width = 2 * n_dims * math.ceil(pairs / 2)
    claim_assert(_shape(rope.cos_cached) == (1, 1, max_pos, width), "the cos table is not (1, 1, max_pos, "
                 "2 n_dims ceil(pairs_per_dim / 2))", shape=_shape(rope.cos_cached), width=width)
    x = gaussian((b, h, t, head_dim), seed)
    positions = torch.randint(0, max_pos, (b, t, n_dims), generator=torch.Generator().manual_seed(seed))
    try:
        out, error = rope.apply(x, positions), None
    except RuntimeError as exc:  # x (B, H, T, head_dim) against the 6-dimensional lookup
        premise(_document_frame(exc) is not None, "the error is not raised in the printed apply", error=str(exc))
        out, error = None, f"{type(exc).__name__}: {exc}"
    claim_assert(out is None or _shape(out) != _shape(x), "apply returns a tensor of x's shape (B, H, T, head_dim)",
                 x_shape=_shape(x), out_shape=_shape(out), error=error)


@pytest.mark.claim("long-context.snippet-critical-attention-scaling")
@pytest.mark.parametrize("half_mask", [pytest.param(None, id="float16-unmasked"), pytest.param(
    "causal", id="float16-masked", marks=_float16_masked("long-context.snippet-critical-attention-scaling"))])
def test_printed_critical_attention_scaling_attends_with_sqrt_d_k_f_t(half_mask):
    d_k, t = 64, 16
    attn = reader_call("CriticalAttentionScaling(64)",
                       lambda: _code("long-context.snippet-critical-attention-scaling", "CriticalAttentionScaling")(d_k))
    q, k, v = gaussian((2, 4, t, d_k), 4), gaussian((2, 4, t, d_k), 5), gaussian((2, 4, t, d_k), 6)
    out = reader_call("attn(q, k, v)", lambda: attn(q, k, v))
    masked = reader_call("attn(q, k, v, causal mask)", lambda: attn(q, k, v, torch.ones(t, t).tril()))
    f = 1 + math.log(t) ** 1.5  # f(T) = 1 + c (ln T)^1.5, c = 1 (line 729)
    claim_assert(_close(out, _softmax_attention(q, k, v, 1 / math.sqrt(d_k * f))),
                 "the output is not softmax(q k^T / sqrt(d_k f(T))) v", shape=_shape(out))
    claim_assert(_shape(masked) == (2, 4, t, d_k) and _close(masked[..., 0, :], v[..., 0, :]),
                 "with the causal mask the first query does not attend to the first key only")
    bf16 = reader_call("attn(q, k, v, causal mask) in bfloat16",
                       lambda: attn(q.bfloat16(), k.bfloat16(), v.bfloat16(), torch.ones(t, t).tril()))
    half = reader_call("attn(q, k, v) in float16", lambda: attn(q.half(), k.half(), v.half(),
                                                                None if half_mask is None else torch.ones(t, t).tril()))
    claim_assert(_shape(bf16) == _shape(half) == (2, 4, t, d_k), "the masked bfloat16 or unmasked float16 call fails",
                 bfloat16=_shape(bf16), float16=_shape(half))


@pytest.mark.claim("long-context.snippet-critical-attention-scaling")
@refutes(reason="T = 2 and one masked score, the smallest masked call, in float16: masked_fill(mask == 0, -1e9) at "
                "line 738 cannot store -1e9 in float16 (largest finite 65504)")
def test_printed_critical_attention_scaling_runs_masked_in_half_precision():
    attn = _code("long-context.snippet-critical-attention-scaling", "CriticalAttentionScaling")(64)
    q = torch.randn(1, 1, 2, 64, generator=torch.Generator().manual_seed(25)).half()
    out = reader_call("attn(q, k, v, causal mask) in float16", lambda: attn(q, q, q, torch.ones(2, 2).tril()))
    claim_assert(_shape(out) == (1, 1, 2, 64), "the output is not (B, H, T, d_k)", shape=_shape(out))


@pytest.mark.claim("spectral.snippet-qk-spectrum-monitor")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "if kappa > 0.8:", "if kappa > 1.0:", "the warning threshold 0.8 raised to 1.0, so kappa = 1 is not flagged")])
def test_printed_qk_spectrum_monitor_logs_kappa_and_warns_above_0_8_and_below_0_3(mutation):
    monitor = reader_call("QKSpectrumMonitor()", lambda: _code("spectral.snippet-qk-spectrum-monitor", "QKSpectrumMonitor", mutation)())
    w = gaussian((64, 16), 7)
    spike = torch.zeros(64, 16, dtype=torch.float64)
    spike[0, 0] = 1.0  # W_qk = e_1 e_1^T: one nonzero eigenvalue, kappa = 1
    _, flat = _quietly(lambda: reader_call("monitor.log(0, W_q, W_k)", lambda: monitor.log(0, w, gaussian((64, 16), 8))))
    _, peaked = _quietly(lambda: reader_call("monitor.log(1, W_q, W_k)", lambda: monitor.log(1, spike, spike)))
    steps = [h.get("step") for h in monitor.history]
    kappas = [h.get("kappa") for h in monitor.history]
    claim_assert(steps == [0, 1] and all(isinstance(k, float) and 0 < k <= 1 for k in kappas),
                 "log does not record one {'step', 'kappa'} entry with kappa in (0, 1] per call", history=monitor.history)
    claim_assert(kappas[0] < 0.3 and "平坦" in flat and kappas[1] == 1.0 and "⚠️" in peaked,
                 "the flat-spectrum note (kappa < 0.3) or the concentration warning (kappa > 0.8) is not printed",
                 kappas=kappas, printed=[flat, peaked])


# --- linear-algebra.txt -------------------------------------------------------------------------------------------

@pytest.mark.claim("architecture.snippet-la-transformer-block")
@refutes(reason="one call with the default mask=None, d_model = 512, h = 8: line 67 evaluates the undefined name "
                "not_mask whatever the input")
def test_printed_transformer_block_maps_b_n_d_to_b_n_d():
    block = reader_call("TransformerBlock(512, 8, 2048)",
                        lambda: _code("architecture.snippet-la-transformer-block", "TransformerBlock")(512, 8, 2048))
    out = reader_call("block(x) for x (2, 5, 512)", lambda: block(torch.randn(2, 5, 512)))
    claim_assert(_shape(out) == (2, 5, 512), "the output is not (B, n, d_model)", shape=_shape(out))


@pytest.mark.claim("architecture.snippet-la-transformer-block")
@pytest.mark.parametrize("condition", [pytest.param("if mask is not None:", id="mask-is-not-none"), pytest.param(
    "if False:", id="masking-dropped", marks=control("line 67 repaired by dropping the masking: it runs, but a "
                                                     "causal mask is ignored",
                                                     models="architecture.snippet-la-transformer-block"))])
def test_transformer_block_with_if_mask_is_not_none_adds_attention_then_ffn_of_ln2(condition):
    cls = edited_code("architecture.snippet-la-transformer-block",
                      [("if mask is not_mask is not None:", condition)]).namespace["TransformerBlock"]
    block = seeded_module(reader_call("TransformerBlock(512, 8, 2048)", lambda: cls(512, 8, 2048)), 31).eval()
    x = gaussian((2, 5, 512), 32)
    with torch.no_grad():
        for mask in (None, torch.ones(5, 5).tril()):
            out = reader_call("block(x, mask) for x (2, 5, 512)", lambda: block(x, mask))
            x1 = x + _attention_by_hand((block.W_q, block.W_k, block.W_v, block.W_o), block.n_heads, x, x, mask)
            assert_equal_up_to_rounding(out, pre_norm(x1, _ffn_by_hand(block.ffn), _ln(block.ln2)),
                                        "the block is not X_1 = X_0 + W_o(MHA X_0), X_2 = X_1 + FFN(LN_2 X_1)",
                                        masked=mask is not None)


@pytest.mark.claim("spectral.snippet-la-analyze-attention-spectrum")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "sigma_1 = S[:, :, 0]", "sigma_1 = S[:, :, -1]", "the smallest singular value taken for sigma_1")])
def test_printed_la_analyze_attention_spectrum_reports_per_head_sigmas_gap_and_rank(mutation):
    q, k = gaussian((2, 4, 16, 32), 9), gaussian((2, 4, 16, 32), 10)
    out = reader_call("analyze_attention_spectrum(Q, K) for Q, K (B, h, n, d_k)",
                      lambda: _code("spectral.snippet-la-analyze-attention-spectrum", "analyze_attention_spectrum", mutation)(q, k))
    s1, s2, gap, rank = (out[key] for key in ("sigma_1", "sigma_2", "spectral_gap", "effective_rank"))
    claim_assert(all(_shape(v) == (2, 4) for v in (s1, s2, gap, rank)), "the statistics are not one per (batch, head)",
                 shapes={key: _shape(v) for key, v in out.items()})
    # A is row-stochastic, so sigma_1 >= ||A 1|| / ||1|| = 1 (up to rounding); 1 <= exp(entropy) <= n
    claim_assert(bool((s1 >= 1 - 1e-12).all() and (s2 <= s1).all() and ((gap >= 0) & (gap <= 1)).all()
                      and ((rank >= 1 - 1e-6) & (rank <= 16 + 1e-6)).all()),
                 "sigma_1 < 1, sigma_2 > sigma_1, the ratio outside [0, 1] or the rank outside [1, n]", sigma_1=s1, rank=rank)


@pytest.mark.claim("linear-attention.snippet-la-gated-deltanet")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "S = torch.zeros(B, d, self.d_state, device=x.device)", "S = V.transpose(1, 2) @ K / n",
    "the state starts from the whole sequence, V^T K / n, not zero: a look-ahead")])
def test_printed_gated_deltanet_maps_b_n_d_to_b_n_d_causally(mutation):
    net = reader_call("GatedDeltaNet(64)", lambda: _code("linear-attention.snippet-la-gated-deltanet", "GatedDeltaNet", mutation)(64))
    x = torch.randn(2, 10, 64, generator=torch.Generator().manual_seed(11))
    later = x.clone()
    later[:, 5:] = torch.randn(2, 5, 64)
    with torch.no_grad():
        out = reader_call("net(x) for x (2, 10, 64)", lambda: net(x))
        out_later = net(later)
    claim_assert(_shape(out) == (2, 10, 64) and bool(torch.isfinite(out).all()), "the output is not a finite (B, n, d)",
                 shape=_shape(out))
    claim_assert(torch.equal(out[:, :5], out_later[:, :5]), "an output depends on later inputs (not a recurrence)")


@pytest.mark.claim("optimization.snippet-la-spectral-conditioned-attention")
@refutes(reason="one call SpectralConditionedAttention(64, 4)(x), x (2, 10, 64): forward ends at the placeholder "
                "comment of line 326 with no return statement, whatever the input")
def test_printed_spectral_conditioned_attention_returns_a_b_n_d_output():
    attn = reader_call("SpectralConditionedAttention(64, 4)",
                       lambda: _code("optimization.snippet-la-spectral-conditioned-attention", "SpectralConditionedAttention")(64, 4))
    out = reader_call("attn(x) for x (2, 10, 64)", lambda: attn(torch.randn(2, 10, 64)))
    claim_assert(_shape(out) == (2, 10, 64), "forward returns no (B, n, d_model) attention output",
                 returned=type(out).__name__)


@pytest.mark.claim("architecture.snippet-la-linear-algebraic-transformer")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "logits = self.head(x)", "logits = self.head(x[:, -1])", "logits of the last position only")])
def test_printed_linear_algebraic_transformer_returns_logits_and_per_layer_spectra(mutation):
    vocab = 100
    model = reader_call("LinearAlgebraicTransformer(100, d_model=32, n_heads=4, d_ff=64, n_layers=4)",
                        lambda: _code("architecture.snippet-la-linear-algebraic-transformer", "LinearAlgebraicTransformer", mutation)(
                            vocab, d_model=32, n_heads=4, d_ff=64, n_layers=4))
    ids = torch.randint(0, vocab, (2, 16), generator=torch.Generator().manual_seed(12))
    logits, info = reader_call("model(ids) for ids (2, 16)", lambda: model(ids))
    claim_assert(_shape(logits) == (2, 16, vocab) and len(info) == 4
                 and all(set(i) == {"sigma_1", "sigma_2", "spectral_gap", "effective_rank"} for i in info),
                 "forward does not return logits (B, n, vocab) and one spectral record per layer", shape=_shape(logits))
    # train_transformer (lines 544-561) is run by architecture.snippet-la-train-loop-runs, which this claim uses


# --- spectral.txt -------------------------------------------------------------------------------------------------

def _attention(n: int, seed: int) -> torch.Tensor:
    """A row-stochastic n x n attention matrix (float64)."""
    return torch.softmax(2 * gaussian((n, n), seed), -1)


@pytest.mark.claim("spectral.snippet-spectral-doc-analyze-attention-spectrum")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "'top_5': s[:5]", "'top_5': s[:4]", "an off-by-one in the top-5 slice")])
def test_printed_analyze_attention_spectrum_reports_the_statistics_of_an_n_by_n_matrix(mutation):
    a = _attention(16, 13)
    out = reader_call("analyze_attention_spectrum(A) for A (16, 16)",
                      lambda: _code("spectral.snippet-spectral-doc-analyze-attention-spectrum", "analyze_attention_spectrum", mutation)(a))
    claim_assert(set(out) == {"singular_values", "normalized", "effective_rank", "spectral_gap", "top_5", "tail_ratio"}
                 and len(out["singular_values"]) == 16 and len(out["top_5"]) == 5,
                 "the result does not hold the six statistics of the 16 singular values", keys=sorted(out))
    claim_assert(1 <= out["effective_rank"] <= 16 and 0 <= out["spectral_gap"] <= 1 and 0 <= out["tail_ratio"] <= 1,
                 "a statistic is outside its range", effective_rank=out["effective_rank"], gap=out["spectral_gap"])


class _ModelWithDModel(torch.nn.Module):
    """A one-layer self-attention model exposing d_model, as measure_rank_collapse expects."""

    def __init__(self, d_model: int = 64):
        super().__init__()
        self.d_model = d_model
        self.mha = torch.nn.MultiheadAttention(d_model, 4, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=True, average_attn_weights=False)[0]


@pytest.mark.claim("spectral.snippet-measure-rank-collapse")
@refutes(reason="one model and the lengths [16, 32]: get_attention_matrix (line 170) is defined nowhere in the "
                "document, so the first length already raises")
def test_printed_measure_rank_collapse_returns_one_record_per_length():
    fn = _code("spectral.snippet-measure-rank-collapse", "measure_rank_collapse")
    results = reader_call("measure_rank_collapse(model, [16, 32])", lambda: fn(_ModelWithDModel(), [16, 32]))
    claim_assert([r["n"] for r in results] == [16, 32], "not one record per length", results=results)


def _head_zero_weights(model, x):
    """A reader's get_attention_matrix (line 170): the model's head-0 weights on x, [n, n], in float64."""
    return model.mha(x, x, x, need_weights=True, average_attn_weights=False)[1][0, 0].double()


@pytest.mark.claim("spectral.snippet-measure-rank-collapse")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "'spectral_gap': spectrum['spectral_gap']", "'spectral_gap': spectrum['tail_ratio']",
    "another of the six statistics reported as the gap")])
def test_measure_rank_collapse_with_a_readers_attention_helper_reports_each_lengths_rank_and_gap(mutation):
    seen = []

    def get_attention_matrix(model, x):  # the helper the reader supplies; records what it returns
        seen.append(_head_zero_weights(model, x))
        return seen[-1]

    claim = "spectral.snippet-measure-rank-collapse"
    run = readers_code(claim, mutation, get_attention_matrix=get_attention_matrix)
    results = reader_call("measure_rank_collapse(model, [16, 32])",
                          lambda: run.namespace["measure_rank_collapse"](_ModelWithDModel(), [16, 32]))
    claim_assert([r["n"] for r in results] == [16, 32] and len(seen) == 2, "not one record per length",
                 results=results)
    for r, a in zip(results, seen):
        n = a.shape[0]
        # numpy's and torch's float64 SVDs of one matrix agree to 64 eps s_1 (s_1 >= 1 for A 1 = 1): the n-term
        # stable rank within 4 n of that, the relative gap within 2 of it
        claim_assert(abs(r["effective_rank"] - stable_rank(a).item()) <= 4 * n * 64 * EPS64
                     and abs(r["spectral_gap"] - relative_singular_value_gap(a).item()) <= 2 * 64 * EPS64,
                     "a record is not the stable rank and 1 - s_2/s_1 of the length's attention matrix", record=r,
                     stable_rank=stable_rank(a).item(), gap=relative_singular_value_gap(a).item())


@pytest.mark.claim("spectral.snippet-spectral-pruning")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "s_pruned[:k] = s[:k]", "s_pruned[:k] = s[-k:]", "the k smallest singular values kept, not the k largest")])
def test_printed_spectral_pruning_keeps_the_top_half_of_the_spectrum(mutation):
    w = gaussian((64, 64), 14)
    out = reader_call("spectral_pruning(W, 0.5)", lambda: _code("spectral.snippet-spectral-pruning", "spectral_pruning", mutation)(w, 0.5))
    s, kept = torch.linalg.svdvals(w), torch.linalg.svdvals(out)
    # the rebuilt U diag(s_k) V^T: each singular value within a backward-stable SVD's 16 n eps s_1
    tol = 16 * 64 * EPS64 * s[0].item()
    claim_assert(_shape(out) == (64, 64) and bool((kept[:32] - s[:32]).abs().max() <= tol and kept[32:].max() <= tol),
                 "the output does not keep the top 32 of 64 singular values and drop the rest", shape=_shape(out))


@pytest.mark.claim("spectral.snippet-length-aware-attention")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "poly_alpha=1.7", "poly_alpha=1.5", "the exponent of ln n changed from 1.7 to 1.5")])
def test_printed_length_aware_attention_scales_scores_by_log_n_to_the_1_7(mutation):
    q, k, v = gaussian((2, 4, 16, 32), 15), gaussian((2, 4, 16, 32), 16), gaussian((2, 4, 16, 32), 17)
    out = reader_call("length_aware_attention(Q, K, V)",
                      lambda: _code("spectral.snippet-length-aware-attention", "length_aware_attention", mutation)(q, k, v))
    scale = math.log(16) ** 1.7 / math.sqrt(32)
    # the printed code takes ln n in float32 (torch.tensor(16)): the factor is off by <= 1.7 * 2^-24 relative, so each
    # score by that much of max |score|, which moves softmax(.) v by at most twice that times max |v|
    tol = 2 * 1.7 * 2.0**-24 * (q @ k.transpose(-2, -1)).abs().max().item() * scale * v.abs().max().item()
    claim_assert(_shape(out) == _shape(v) and bool((out - _softmax_attention(q, k, v, scale)).abs().max() <= tol + 1e-12),
                 "the output is not softmax(Q K^T / sqrt(d_k) (ln n)^1.7) V", shape=_shape(out))


@pytest.mark.claim("spectral.snippet-head-spectral-diversity")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "torch.cdist(spectra_tensor, spectra_tensor)", "torch.cdist(spectra_tensor, spectra_tensor, p=1)",
    "the L1 distance between spectra, not the Euclidean one")])
def test_printed_head_spectral_diversity_summarises_an_h_n_n_stack(mutation):
    stack = torch.softmax(2 * gaussian((8, 16, 16), 18), -1)
    out = reader_call("head_spectral_diversity(A) for A (8, 16, 16)",
                      lambda: _code("spectral.snippet-head-spectral-diversity", "head_spectral_diversity", mutation)(stack))
    spectra = torch.linalg.svdvals(stack)
    mean = torch.cdist(spectra, spectra).mean().item()
    claim_assert(set(out) == {"mean_diversity", "most_similar_heads", "most_different_heads"}
                 and abs(out["mean_diversity"] - mean) <= 1e-9 * max(1.0, mean)
                 and _shape(out["most_similar_heads"].indices) == _shape(out["most_different_heads"].indices) == (8,),
                 "the result is not the mean pairwise spectral distance with one similar/different head per head",
                 mean_diversity=out.get("mean_diversity"), expected=mean)


@pytest.mark.claim("spectral.snippet-spectral-design-check")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "% architecture.num_heads != 0", "% architecture.num_heads == 0", "the divisibility condition inverted")])
def test_printed_spectral_design_check_passes_a_gpt3_shape_and_lists_the_issues_of_a_bad_one(mutation):
    check = _code("spectral.snippet-spectral-design-check", "spectral_design_check", mutation)
    good = reader_call("spectral_design_check(96 layers, 12288, 96 heads)",
                       lambda: check(SimpleNamespace(num_layers=96, d_model=12288, num_heads=96)))
    bad = reader_call("spectral_design_check(300 layers, 500, 32 heads)",
                      lambda: check(SimpleNamespace(num_layers=300, d_model=500, num_heads=32)))
    wide = check(SimpleNamespace(num_layers=12, d_model=4096, num_heads=8))
    claim_assert(good == ["架构谱性质良好"], "a GPT-3-shaped model (d_k = 128) is not reported healthy", issues=good)
    claim_assert(bad == ["深度过大可能导致谱爆炸", "d_model 应能被 num_heads 整除", "d_k 过小可能限制注意力表达"]
                 and wide == ["d_k 过大可能导致优化困难"], "the depth, divisibility and d_k rules are not applied",
                 bad=bad, wide=wide)


@pytest.mark.claim("spectral.snippet-spectral-preserving-quantize")
@refutes(reason="one 64 x 64 weight with the default bits = 8: quantize (line 507) is defined nowhere in the "
                "document, so every call raises")
def test_printed_spectral_preserving_quantize_returns_a_weight_of_the_same_shape():
    w = gaussian((64, 64), 19)
    out = reader_call("spectral_preserving_quantize(W)",
                      lambda: _code("spectral.snippet-spectral-preserving-quantize", "spectral_preserving_quantize")(w))
    claim_assert(_shape(out) == (64, 64), "the quantised weight does not have W's shape", shape=_shape(out))


def _uniform_quantize(x: torch.Tensor, bits: int) -> torch.Tensor:
    """A reader's quantize (line 507): round to the 2^bits - 1 steps of [0, max x]."""
    step = x.max() / (2**bits - 1)
    return torch.round(x / step) * step


@pytest.mark.claim("spectral.snippet-spectral-preserving-quantize")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "s_full[:k] = s_quantized", "s_full[:k] = s_important", "the quantised values computed, then not used")])
def test_spectral_preserving_quantize_with_a_readers_quantizer_returns_a_weight_of_quantised_spectrum(mutation):
    claim = "spectral.snippet-spectral-preserving-quantize"
    run = readers_code(claim, mutation, quantize=_uniform_quantize)
    w = gaussian((64, 64), 19)
    out = reader_call("spectral_preserving_quantize(W)", lambda: run.namespace["spectral_preserving_quantize"](w))
    s, k = torch.linalg.svdvals(w), int(0.8 * 64)
    expected = torch.cat([_uniform_quantize(s[:k], 8), torch.zeros(64 - k, dtype=s.dtype)])
    got = torch.linalg.svdvals(out)
    # two backward-stable SVDs of 64 x 64 float64 matrices, and the rebuild U diag V^T: 16 n eps s_1 each (as in
    # pruning); the 8-bit steps (s_1 / 255) are ~10^11 times larger
    tol = 3 * 16 * 64 * EPS64 * s[0].item()
    claim_assert(_shape(out) == (64, 64) and (got - expected).abs().max().item() <= tol, "the output is not a 64 x 64 "
                 "weight whose singular values are the 8-bit quantised top 80% of W's", shape=_shape(out),
                 max_error=(got - expected).abs().max().item())


class _OneAttentionLayer(torch.nn.Module):
    """One nn.MultiheadAttention layer, called with its defaults or with per-head weights."""

    def __init__(self, per_head: bool, d_model: int = 8):
        super().__init__()
        torch.manual_seed(20)
        self.mha, self.per_head = torch.nn.MultiheadAttention(d_model, 2, batch_first=True), per_head

    def forward(self, x):
        if self.per_head:
            return self.mha(x, x, x, need_weights=True, average_attn_weights=False)[0]
        return self.mha(x, x, x)[0]


def _analyze(model: torch.nn.Module, x: torch.Tensor) -> dict:
    analyzer = _code("spectral.snippet-transformer-spectral-analyzer", "TransformerSpectralAnalyzer")(model)
    return analyzer.analyze_all_layers(x)


@pytest.mark.claim("spectral.snippet-transformer-spectral-analyzer")
@refutes(reason="one nn.MultiheadAttention layer called with its defaults on one (1, 5, 8) input: its weights are "
                "head-averaged [B, L, S], so attn[0, 0] (line 583) is one row and svdvals needs a matrix")
def test_printed_analyzer_analyses_a_model_with_default_attention_modules():
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(21))
    results = reader_call("analyze_all_layers(x) on a default nn.MultiheadAttention", lambda: _analyze(_OneAttentionLayer(False), x))
    claim_assert(set(results) == {"layer_0"}, "the layer is not analysed", results=results)


@pytest.mark.claim("spectral.snippet-transformer-spectral-analyzer")
@pytest.mark.parametrize("per_head", [pytest.param(True, id="per-head-weights"), pytest.param(
    False, id="default-attention-modules", marks=control(
        "line 552's unqualified model with nn.MultiheadAttention layers, called with their defaults (head-averaged "
        "weights): the check that the printed analyzer runs layer by layer must reject it",
        models=["spectral.snippet-transformer-spectral-analyzer"]))])
def test_printed_analyzer_runs_on_per_head_weights_and_raises_inside_transformer_encoder_layers(per_head):
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(21))
    model = torch.nn.Sequential(_OneAttentionLayer(per_head), _OneAttentionLayer(per_head))
    results = reader_call(f"analyze_all_layers(x) with {'per-head' if per_head else 'head-averaged'} weights",
                          lambda: _analyze(model, x))
    claim_assert(set(results) == {"layer_0", "layer_1"} and all(
        set(r) == {"effective_rank", "spectral_gap", "max_eigenvalue"} and 1 <= r["effective_rank"] <= 5
        and abs(r["max_eigenvalue"] - 1) <= 1e-5 for r in results.values()),
        "per-head weights are not analysed layer by layer (row-stochastic: max |lambda| = 1)", results=results)
    encoder = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)  # calls need_weights=False
    try:
        _analyze(encoder, x)
        error = None
    except AttributeError as exc:  # output[1] is None: None.detach()
        error = str(exc)
    claim_assert(error is not None and "detach" in error, "inside nn.TransformerEncoderLayer the hook does not fail",
                 error=error)


@pytest.mark.claim("spectral.snippet-plot-spectrum")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "np.cumsum(s) / np.sum(s)", "np.cumsum(s) / np.max(s)", "the cumulative curve normalised by s_1, not by sum s"), mutant(
    "np.cumsum(s) / np.sum(s)", "np.cumsum(s**2) / np.sum(s**2)", "the cumulative share of the squared values"), mutant(
    "torch.linalg.svdvals(attn_matrix)", "torch.linalg.eigvals(attn_matrix).abs()", "eigenvalue moduli for the "
    "singular values"), mutant(
    "axes[1].axhline(y=0.99, color='k', linestyle='--', alpha=0.5)", "None", "no 0.99 reference line")])
def test_printed_plot_spectrum_draws_two_panels_of_the_n_singular_values(mutation):
    """Each object the statement names: a figure, two panels, the n singular values, their normalised cumulative
    sum ending at 1, a horizontal reference line at 0.99."""
    a = _attention(16, 22)
    fig = reader_call("plot_spectrum(A) for A (16, 16)", lambda: _code("spectral.snippet-plot-spectrum", "plot_spectrum", mutation)(a))
    lines = [[torch.tensor(line.get_ydata(), dtype=torch.float64) for line in ax.lines] for ax in fig.axes]
    is_figure = isinstance(fig, matplotlib.figure.Figure)
    matplotlib.pyplot.close(fig)
    s = torch.linalg.svdvals(a)
    claim_assert(is_figure and len(lines) == 2 and len(lines[0]) >= 1 and len(lines[1]) >= 1, "not a figure of two "
                 "panels", panels=len(lines))
    # the printed code makes this same LAPACK call on the same matrix: equal values; 1e-12 s_1 leaves room for another
    # backward-stable SVD (errors ~ n eps s_1)
    claim_assert(len(lines[0][0]) == 16 and (lines[0][0] - s).abs().max() <= 1e-12 * s[0], "panel 1 is not the 16 "
                 "singular values of A", plotted=lines[0][0], singular_values=s)
    # a 16-term cumulative sum and one division: 16 + 1 roundings of values <= 1
    claim_assert((lines[1][0] - s.cumsum(0) / s.sum()).abs().max() <= 17 * EPS64 and abs(lines[1][0][-1] - 1) <= 17 * EPS64,
                 "panel 2 is not cumsum(s) / sum(s) ending at 1", plotted=lines[1][0])
    claim_assert(any(len(y) == 2 and bool((y == 0.99).all()) for y in lines[1][1:]), "panel 2 has no horizontal line at "
                 "0.99", other_lines=[y.tolist() for y in lines[1][1:]])


@pytest.mark.claim("spectral.snippet-training-monitor")
@refutes(reason="one batch {'input': x} on a one-layer model: train_step (line 685) is defined nowhere in the document, "
                "so the first step already raises")
def test_printed_training_monitor_trains_and_logs():
    model = _OneAttentionLayer(True)
    batch = {"input": torch.randn(1, 5, 8)}
    fn = _code("spectral.snippet-training-monitor", "training_monitor")
    _quietly(lambda: reader_call("training_monitor(model, [batch])", lambda: fn(model, [batch], log_every=1)))


@pytest.mark.claim("spectral.snippet-evaluate-architecture-spectral")
@refutes(reason="one call with an empty config: build_transformer (line 704) is defined nowhere in the document")
def test_printed_evaluate_architecture_spectral_scores_a_config():
    fn = _code("spectral.snippet-evaluate-architecture-spectral", "evaluate_architecture_spectral")
    score = reader_call("evaluate_architecture_spectral({}, x)", lambda: fn({}, torch.randn(1, 5, 8)))
    claim_assert(0 <= score <= 1, "the score is not a fraction of layers", score=score)


def _head_zero_weights_by_layer(model: torch.nn.Sequential, x: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's head-0 attention weights on its own input, in float64 (the oracle's matrices)."""
    out = []
    with torch.no_grad():
        for layer in model:
            out.append(layer.mha(x, x, x, need_weights=True, average_attn_weights=False)[1][0, 0].double())
            x = layer(x)
    return out


def _share_margin(a: torch.Tensor, q: float = 0.99) -> float:
    """How far the cumulative singular-value shares of ``a`` stay from q: a float32 SVD moves them by ~n 2^-24."""
    s = torch.linalg.svdvals(a)
    return (s.cumsum(0) / s.sum() - q).abs().min().item()


@pytest.mark.claim("spectral.snippet-training-monitor")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "if step % log_every == 0:", "if step % log_every == 1:", "the logging steps shifted by one")])
def test_training_monitor_with_a_readers_train_step_trains_on_every_batch_and_warns_every_log_every_steps(mutation):
    steps = []
    train_step = lambda model, batch: steps.append(batch) or 0.0  # noqa: E731  the reader's step; records its batch
    claim = "spectral.snippet-training-monitor"
    run = readers_code(claim, mutation, train_step=train_step)
    model = torch.nn.Sequential(_OneAttentionLayer(True), _OneAttentionLayer(True))
    batches = [{"input": torch.randn(1, 8, 8, generator=torch.Generator().manual_seed(30 + i))} for i in range(3)]
    _, printed = _quietly(lambda: reader_call("training_monitor(model, batches, log_every=2)",
                                              lambda: run.namespace["training_monitor"](model, batches, log_every=2)))
    expected = []
    for b in batches[::2]:  # steps 0 and 2
        for i, a in enumerate(_head_zero_weights_by_layer(model, b["input"])):
            premise(_share_margin(a) > 1e-4, "a share lies too close to 0.99 for float32 to decide", layer=i)
            if mass_rank(a, 0.99).item() < 5:
                expected.append(f"layer_{i} 有效秩过低")
            if eigenvalues(a).abs().max().item() > 0.95:
                expected.append(f"layer_{i} 主导特征值过高")
    warned = [" ".join(line.split()[1:3]).split(" (")[0] for line in printed.splitlines() if line.startswith("警告")]
    claim_assert(len(steps) == 3 and all(s is b for s, b in zip(steps, batches)), "train_step is not called once per "
                 "batch, in order", steps=len(steps))
    claim_assert(warned == expected, "the warnings are not those of the layers at steps 0 and 2 with effective rank "
                 "< 5 or dominant eigenvalue > 0.95", warned=warned, expected=expected)


def _readers_builder(config) -> torch.nn.Sequential:
    """A reader's build_transformer (line 704): config['n_layers'] attention layers of width 16 returning per-head
    weights, as the analyzer it feeds needs."""
    return torch.nn.Sequential(*[_OneAttentionLayer(True, 16) for _ in range(config["n_layers"])])


@pytest.mark.claim("spectral.snippet-evaluate-architecture-spectral")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "return score / len(spectra)", "return score / (len(spectra) + 1)", "one layer too many in the denominator")])
def test_evaluate_architecture_spectral_with_a_readers_builder_returns_the_healthy_share_of_layers(mutation):
    claim = "spectral.snippet-evaluate-architecture-spectral"
    run = readers_code(claim, mutation, build_transformer=_readers_builder)
    # 64 tokens, two layers without residuals: the first is healthy (99%-mass rank 37, gap 0.63), the second sees
    # the first's averaged tokens and collapses (rank 1), so the share 1/2 shows the count
    config, x = {"n_layers": 2}, torch.randn(1, 64, 16, generator=torch.Generator().manual_seed(38))
    score = reader_call("evaluate_architecture_spectral(config, x)",
                        lambda: run.namespace["evaluate_architecture_spectral"](config, x))
    healthy = []
    for i, a in enumerate(_head_zero_weights_by_layer(_readers_builder(config), x)):
        er, sg = mass_rank(a, 0.99).item(), singular_value_gap(a).item()
        # float32 SVDs move the shares and s_1 - s_2 by ~n 2^-24 = 4e-6: 1e-4 and 1e-3 keep every decision exact
        premise(_share_margin(a) > 1e-4 and min(abs(sg - 0.3), abs(sg - 0.7)) > 1e-3,
                "a layer lies too close to a threshold for float32 to decide", layer=i, gap=sg)
        healthy.append(30 < er < 100 and 0.3 < sg < 0.7)
    premise(0 < sum(healthy) < len(healthy), "the layers are all healthy or all not: the share would not show the "
            "count", healthy=healthy)
    claim_assert(score == sum(healthy) / len(healthy), "the score is not the share of layers with 30 < er < 100 and "
                 "0.3 < sg < 0.7", score=score, healthy=healthy)


# ---- rope.snippet-rope-circuit: the labelled pseudocode read as the algorithm it describes ------------------------

_CIRCUIT_HELPERS = {  # the pseudocode's helpers, exact: identity, block_diag and the "rational approximations"
    "identity": lambda n: torch.eye(n, dtype=torch.float64),
    "block_diag": lambda a, b: torch.block_diag(a, torch.as_tensor(b, dtype=torch.float64)),
    "rational_approx_cos": lambda angle, bits: math.cos(angle),
    "rational_approx_sin": lambda angle, bits: math.sin(angle),
}
def _rope_circuit(start: str = "R = identity(d_k)") -> Callable:
    """``rope_circuit`` of the pseudocode with its helpers supplied, ``bits=O(log m)`` (notation: the precision a
    gate count is stated in) read as no argument, and R started as ``start``."""
    run = edited_code("rope.snippet-rope-circuit", [
        ("rational_approx_cos(angle, bits=O(log m))", "rational_approx_cos(angle, bits=None)"),
        ("rational_approx_sin(angle, bits=O(log m))", "rational_approx_sin(angle, bits=None)"),
        ("R = identity(d_k)", start)], **_CIRCUIT_HELPERS)
    premise("rope_circuit" in run.namespace, "the pseudocode with its helpers does not define rope_circuit",
            snippet=run.describe())
    return run.namespace["rope_circuit"]


@pytest.mark.claim("rope.snippet-rope-circuit")
@refutes(reason="read as the algorithm it describes (helpers exact, bits= notation): m = 3, d_k = 4, the RoPE "
                "frequencies 10000^(-2i/d_k); R starts as identity(d_k) and every block is appended after it")
def test_rope_circuit_read_as_an_algorithm_returns_the_d_k_by_d_k_rotation_matrix():
    d_k, m = 4, 3
    theta = rope_frequencies(d_k)
    r = reader_call("rope_circuit(3, theta, 4)", lambda: _rope_circuit()(m, theta.tolist(), d_k))
    claim_assert(tuple(r.shape) == (d_k, d_k) and torch.allclose(r, rotation_matrix(m, theta)),
                 "the circuit's matrix is not R_Theta(m), the d_k x d_k block-diagonal rotation", shape=tuple(r.shape),
                 expected=(d_k, d_k))


@pytest.mark.claim("rope.snippet-rope-circuit")
@pytest.mark.parametrize("start", [pytest.param("R = identity(0)", id="empty-start"), pytest.param(
    "R = identity(d_k)", id="printed-start", marks=control(
        "the printed start identity(d_k): its matrix is 2 d_k x 2 d_k", models=["rope.snippet-rope-circuit"]))])
@given(m=st.integers(0, 4096), half=st.integers(1, 8))
def test_rope_circuit_started_from_an_empty_matrix_is_the_rope_rotation_matrix(start, m, half):
    d_k = 2 * half
    theta = rope_frequencies(d_k)
    r = _rope_circuit(start)(m, theta.tolist(), d_k)
    # the same float64 angles; math.cos and torch.cos are two libms, each within an ulp of the true value: 4 eps
    claim_assert(tuple(r.shape) == (d_k, d_k) and (r - rotation_matrix(m, theta)).abs().max().item() <= 4 * EPS64,
                 "the circuit started from an empty matrix is not R_Theta(m)", shape=tuple(r.shape), d_k=d_k, m=m)
