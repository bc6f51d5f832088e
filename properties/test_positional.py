"""Positional encodings: why they are needed, the sinusoidal encoding, the printed PositionalEncoding,
the RoPE-vs-sinusoidal table and learned absolute positions.

foundations.txt lines 180-224 and 272-278; linear-algebra.txt line 455.
"""
from __future__ import annotations

import copy
import functools
import math

import pytest
import sympy as sp
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, refutes
from claimcheck.snippets import run_snippet
from impl.rope import rope_frequencies, rope_interleaved
from impl.sinusoidal import shift_matrix, sinusoidal_encoding
from impl.softmax import stable_softmax
from properties.assertions import assert_within_reference_error
from properties.strategies.positional import even_head_dims, integer_positions, vectors

EPS64 = 2.0**-52


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- permutation (foundations:182) ----------------------------------------------------------------------------

def _self_attention(x: torch.Tensor, w: tuple[torch.Tensor, ...], causal: bool = False) -> torch.Tensor:
    """softmax(X W_q (X W_k)^T / sqrt(d)) X W_v, without positional information: (n, d)."""
    q, k, v = (x @ wi for wi in w)
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return stable_softmax(scores) @ v


@st.composite
def sequences_with_permutations(draw, max_n: int = 6, d: int = 4):
    n = draw(st.integers(2, max_n), label="n")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    perm = torch.tensor(draw(st.permutations(range(n)), label="perm"))
    g = _generator(seed)
    x = torch.randn(n, d, dtype=torch.float64, generator=g)
    w = tuple(torch.randn(d, d, dtype=torch.float64, generator=g) / math.sqrt(d) for _ in range(3))
    return x, w, perm


@pytest.mark.claim("positional.self-attention-permutation-invariant")
@refutes()
@given(case=sequences_with_permutations())
def test_self_attention_output_is_unchanged_by_shuffling_the_input(case):
    x, w, perm = case
    y = _self_attention(x, w)
    diff = (_self_attention(x[perm], w) - y).abs().max().item()
    # the rounding band of the equivariance property below: a difference beyond it is not rounding.
    tol = 8 * x.shape[0] * EPS64 * max(y.abs().max().item(), 1.0)
    claim_assert(diff <= tol, "shuffling the tokens changed the output", perm=perm, max_difference=diff)


def _swap_two_tokens() -> tuple[torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor]:
    """Three tokens, the first two swapped: the smallest shuffle that moves a token between two others."""
    g = _generator(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=g)
    return x, tuple(torch.randn(4, 4, dtype=torch.float64, generator=g) / 2.0 for _ in range(3)), torch.tensor([1, 0, 2])


def _no_positions(x: torch.Tensor) -> torch.Tensor:
    return x


def _sinusoidal_positions_added(x: torch.Tensor) -> torch.Tensor:
    """The tokens with the sinusoidal code of their (new) positions added: position information injected."""
    return x + sinusoidal_encoding(torch.arange(x.shape[0]), x.shape[1])


@pytest.mark.claim("positional.self-attention-permutation-invariant")
@pytest.mark.parametrize("encode", [
    pytest.param(_no_positions, id="no-positions"),
    pytest.param(_sinusoidal_positions_added, id="positions-added", marks=control(
        "self-attention with the positions' sinusoidal codes added, which tells orders apart: neither equivariant "
        "nor with an order-independent pooled output")),
])
@given(case=sequences_with_permutations())
@example(case=_swap_two_tokens())
def test_self_attention_is_permutation_equivariant(encode, case):
    x, w, perm = case
    y, y_perm = _self_attention(encode(x), w), _self_attention(encode(x[perm]), w)
    # both sides compute the same sums in a different order: n-term softmax and mixing roundings, times max|y|.
    tol = 8 * x.shape[0] * EPS64 * max(y.abs().max().item(), 1.0)
    claim_assert((y_perm - y[perm]).abs().max().item() <= tol, "Attn(P X) != P Attn(X)", perm=perm)
    # a pooled readout, the mean over tokens, is invariant: n more additions in another order
    claim_assert((y_perm.mean(0) - y.mean(0)).abs().max().item() <= 2 * tol, "the pooled output changed", perm=perm)


# --- the sinusoidal encoding (foundations:188-203) ------------------------------------------------------------

# wrong variants for the negative controls: the encoding with one plausible bug each

def _cos_on_even_sin_on_odd(positions, d_model: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Line 188 with sin and cos swapped: cos(pos / 10000^{2i/d}) in column 2i, sin in column 2i+1."""
    j = torch.arange(d_model)
    angles = torch.as_tensor(positions).to(dtype)[..., None] / 10000.0 ** ((j - j % 2) / d_model).to(dtype)
    return torch.where(j % 2 == 0, torch.cos(angles), torch.sin(angles))


def _scaled_by_sqrt_d_model(positions, d_model: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The code multiplied by sqrt(d_model), the token embeddings' scale in the original Transformer."""
    return math.sqrt(d_model) * sinusoidal_encoding(positions, d_model, dtype=dtype)


MAX_LEN = 5000  # the printed PositionalEncoding's default table length (foundations.txt line 208)


def _table_clamped_at_max_len(positions, d_model: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A table of MAX_LEN rows, one per trained position, read with the position clamped to the last row."""
    return sinusoidal_encoding(torch.as_tensor(positions).clamp(max=MAX_LEN - 1), d_model, dtype=dtype)


@pytest.mark.claim("positional.sinusoidal-formula-sin-even-cos-odd")
@pytest.mark.parametrize("encoding", [
    pytest.param(sinusoidal_encoding, id="impl"),
    pytest.param(_cos_on_even_sin_on_odd, id="sin-cos-swapped", marks=control(
        "cos in the even columns and sin in the odd ones")),
])
@given(d_model=st.integers(1, 32), pos=st.integers(0, 10_000))
@example(d_model=4, pos=3)
def test_encoding_is_sin_on_even_and_cos_on_odd_columns(encoding, d_model, pos):
    pe = encoding(torch.tensor(pos), d_model)
    formula = [math.sin(pos / 10000 ** (j / d_model)) if j % 2 == 0 else math.cos(pos / 10000 ** ((j - 1) / d_model))
               for j in range(d_model)]  # column 2i: sin(pos / 10000^{2i/d}), column 2i+1: cos(same)
    # both are float64 evaluations of pos * 10000^{-2i/d}: the angle (<= 10^4) may differ by a few ulps.
    diff = max(abs(a - b) for a, b in zip(pe.tolist(), formula))
    claim_assert(diff <= 16 * 1e4 * EPS64, "the encoding differs from line 188", d_model=d_model, pos=pos, diff=diff)


@pytest.mark.claim("positional.sinusoidal-bounded")
@pytest.mark.parametrize("encoding", [
    pytest.param(sinusoidal_encoding, id="impl"),
    pytest.param(_scaled_by_sqrt_d_model, id="scaled", marks=control(
        "the code scaled by sqrt(d_model), the embedding scale of the original Transformer")),
])
@given(d_model=st.integers(1, 64), pos=st.floats(-1e30, 1e30), dtype=st.sampled_from([torch.float64, torch.float32]))
@example(d_model=4, pos=0.0, dtype=torch.float64)  # cos(0) = 1: the bound is attained
def test_every_entry_lies_in_minus_one_one(encoding, d_model, pos, dtype):
    pe = encoding(torch.tensor(pos), d_model, dtype=dtype)
    claim_assert(bool(torch.isfinite(pe).all()) and pe.abs().max().item() <= 1.0, "an entry left [-1, 1]",
                 pos=pos, d_model=d_model, dtype=str(dtype), max_abs=pe.abs().max().item())


def _angle_addition(a, b, sin, cos):
    """The right-hand sides of sin(a + b) and cos(a + b) as stated (line 201), for sympy or math."""
    return sin(a) * cos(b) + cos(a) * sin(b), cos(a) * cos(b) - sin(a) * sin(b)


def _angle_addition_cos_sign_flipped(a, b, sin, cos):
    return sin(a) * cos(b) + cos(a) * sin(b), cos(a) * cos(b) + sin(a) * sin(b)


ANGLE_ADDITION = [
    pytest.param(_angle_addition, id="stated"),
    pytest.param(_angle_addition_cos_sign_flipped, id="cos-sign-flipped", marks=control(
        "cos(a + b) = cos a cos b + sin a sin b: the other sign (the difference formula)")),
]


@pytest.mark.claim("positional.trig-addition-identities")
@pytest.mark.parametrize("addition", ANGLE_ADDITION)
def test_angle_addition_identities_symbolically(addition):
    a, b = sp.symbols("alpha beta", real=True)
    sin_ab, cos_ab = addition(a, b, sp.sin, sp.cos)
    claim_assert(sp.expand_trig(sp.sin(a + b)) == sin_ab, "sin(a + b)")
    claim_assert(sp.expand_trig(sp.cos(a + b)) == cos_ab, "cos(a + b)")


@pytest.mark.claim("positional.trig-addition-identities")
@pytest.mark.parametrize("addition", ANGLE_ADDITION)
@given(a=st.floats(-1e3, 1e3), b=st.floats(-1e3, 1e3))
@example(a=1.0, b=1.0)
def test_angle_addition_identities_numerically(addition, a, b):
    # sin/cos of an argument of size <= 2000 are correct to about |argument| ulp: bound 8 * 2000 * eps.
    tol = 8 * 2e3 * EPS64
    sin_ab, cos_ab = addition(a, b, math.sin, math.cos)
    claim_assert(abs(math.sin(a + b) - sin_ab) <= tol, "sin", a=a, b=b)
    claim_assert(abs(math.cos(a + b) - cos_ab) <= tol, "cos", a=a, b=b)


def _shift_block(wk):
    """M_k on one (sin, cos) pair: [[cos wk, sin wk], [-sin wk, cos wk]]."""
    return sp.Matrix([[sp.cos(wk), sp.sin(wk)], [-sp.sin(wk), sp.cos(wk)]])


def _shift_block_transposed(wk):
    return sp.Matrix([[sp.cos(wk), -sp.sin(wk)], [sp.sin(wk), sp.cos(wk)]])


@pytest.mark.claim("positional.sinusoidal-shift-is-rotation")
@pytest.mark.parametrize("shift_block", [
    pytest.param(_shift_block, id="stated"),
    pytest.param(_shift_block_transposed, id="transposed", marks=control(
        "the block transposed, [[cos, -sin], [sin, cos]]: it shifts by -k")),
])
def test_shift_of_one_sin_cos_pair_is_a_rotation_symbolically(shift_block):
    p, k, w = sp.symbols("pos k omega", real=True)
    block = shift_block(w * k)
    shifted = block * sp.Matrix([sp.sin(w * p), sp.cos(w * p)])
    target = sp.Matrix([sp.sin(w * (p + k)), sp.cos(w * (p + k))])
    claim_assert(all(sp.simplify(sp.expand_trig(e)) == 0 for e in shifted - target), "M_k PE_pos != PE_{pos+k}")
    claim_assert(sp.simplify(block.det()) == 1 and sp.simplify(block.T * block) == sp.eye(2),
                 "the block is not a rotation")
    claim_assert(p not in block.free_symbols, "the block depends on pos")


@pytest.mark.claim("positional.sinusoidal-shift-is-rotation")
@pytest.mark.parametrize("shift", [
    pytest.param(shift_matrix, id="impl"),
    pytest.param(lambda k, d_model: shift_matrix(-k, d_model), id="transposed", marks=control(
        "M_{-k} = M_k^T: the rotation the other way")),
])
@given(d_model=even_head_dims(2, 64), pos=integer_positions(), k=integer_positions())
@example(d_model=2, pos=0, k=1)
def test_pe_at_pos_plus_k_is_a_fixed_rotation_of_pe_at_pos(shift, d_model, pos, k):
    m = shift(k, d_model)  # built from k and the frequencies only
    eye = torch.eye(d_model, dtype=torch.float64)
    # angles up to |pos| + |k| <= 2e4 rad are rounded to ~(|pos| + |k|) ulp; M_k PE adds 2 products per entry.
    tol = 8 * EPS64 * (abs(pos) + abs(k) + d_model)
    diff = (m @ sinusoidal_encoding(torch.tensor(pos), d_model) - sinusoidal_encoding(torch.tensor(pos + k), d_model))
    claim_assert(diff.abs().max().item() <= tol, "PE_{pos+k} != M_k PE_pos", d_model=d_model, pos=pos, k=k)
    claim_assert((m.T @ m - eye).abs().max().item() <= tol and abs(torch.linalg.det(m).item() - 1) <= tol,
                 "M_k is not a rotation", d_model=d_model, k=k)


@pytest.mark.claim("positional.sinusoidal-uniqueness")
@pytest.mark.parametrize("omega", [
    pytest.param(sp.Integer(1), id="stated"),
    pytest.param(2 * sp.pi, id="whole-turn", marks=control(
        "angles 2 pi pos / 10000^{2i/d} (the Fourier-feature convention): the i = 0 pair turns once per position")),
])
def test_codes_of_distinct_integers_differ_in_exact_arithmetic(omega):
    # The i = 0 pair is (sin omega pos, cos omega pos), omega = 10000^0 = 1: equal for pos != pos' only if
    # omega (pos - pos') = 2 pi j, j != 0, i.e. only if the period 2 pi / omega were rational; and
    # |PE_p - PE_p'| >= 2 |sin(omega (p - p')/2)|.
    claim_assert(bool((2 * sp.pi / omega).is_irrational), "the i = 0 pair's period 2 pi / omega is rational: "
                 "it repeats on integer positions", period=str(2 * sp.pi / omega))
    p, pp = sp.symbols("p p_prime", real=True)
    gap2 = (sp.sin(omega * p) - sp.sin(omega * pp)) ** 2 + (sp.cos(omega * p) - sp.cos(omega * pp)) ** 2
    claim_assert(sp.simplify(sp.expand_trig(gap2 - 4 * sp.sin(omega * (p - pp) / 2) ** 2)) == 0,
                 "the i = 0 pair's squared gap is not 4 sin^2(omega (p - p')/2)")


@pytest.mark.claim("positional.sinusoidal-uniqueness")
@pytest.mark.parametrize("encoding", [
    pytest.param(sinusoidal_encoding, id="impl"),
    pytest.param(_table_clamped_at_max_len, id="clamped-table", marks=control(
        f"a table of max_len = {MAX_LEN} rows read with the position clamped to the last row")),
])
@given(p=st.integers(0, 2**24), gap=st.integers(1, 2**24))
@example(p=MAX_LEN, gap=1)
def test_codes_of_distinct_positions_differ_in_float64_and_in_float32_below_2_24(encoding, p, gap):
    pp = p + gap
    exact_gap = 2 * abs(math.sin(gap / 2))  # lower bound on |PE_p - PE_p'| from the i = 0 pair
    d64 = (encoding(torch.tensor(p), 64) - encoding(torch.tensor(pp), 64)).norm().item()
    # float64 angles below 2^25 carry < 2^25 eps ~ 7e-9 rounding: the pair gap is resolved when it exceeds that.
    claim_assert(d64 > 0 and d64 >= exact_gap - 8 * 2**25 * EPS64, "float64 codes of distinct positions coincide",
                 p=p, p_prime=pp, distance=d64)
    if pp < 2**24:  # float32 positions are still exact integers
        a = encoding(torch.tensor(p), 64, dtype=torch.float32)
        b = encoding(torch.tensor(pp), 64, dtype=torch.float32)
        claim_assert(not torch.equal(a, b), "float32 codes of distinct exactly represented positions coincide",
                     p=p, p_prime=pp)


@pytest.mark.claim("positional.sinusoidal-no-learned-position-parameters")
@pytest.mark.parametrize("encoding", [
    pytest.param(sinusoidal_encoding, id="impl"),
    pytest.param(_table_clamped_at_max_len, id="clamped-table", marks=control(
        f"a table of max_len = {MAX_LEN} rows, one per trained position, clamped beyond it")),
])
@given(d_model=even_head_dims(2, 64), pos=st.integers(10**5, 10**9), k=st.integers(-100, 100))
@example(d_model=2, pos=10**5, k=1)
def test_encoding_beyond_any_training_length_is_finite_bounded_and_shift_equivariant(encoding, d_model, pos, k):
    pe = encoding(torch.tensor(pos), d_model)
    shifted = encoding(torch.tensor(pos + k), d_model)
    # float64 angles of size <= 1e9 carry ~1e9 ulp of rounding; the shift map adds 2 products per entry.
    tol = 8 * EPS64 * (abs(pos) + abs(k) + d_model)
    claim_assert(bool(torch.isfinite(pe).all()) and pe.abs().max().item() <= 1, "not a bounded code", pos=pos)
    claim_assert((shift_matrix(k, d_model) @ pe - shifted).abs().max().item() <= tol,
                 "the relative-shift map fails beyond the training range", pos=pos, k=k)


# --- the printed PositionalEncoding (foundations:207-224) -----------------------------------------------------

@functools.lru_cache(maxsize=1)
def _positional_encoding_class():
    run = run_snippet("positional.snippet-positional-encoding")
    assert run.ran, run.describe()
    return run.namespace["PositionalEncoding"]


@pytest.mark.claim("positional.snippet-pe-table-matches-formula")
@pytest.mark.parametrize("widths", [
    pytest.param(st.integers(1, 64).map(lambda half: 2 * half) | st.just(1), id="even-or-1"),
    pytest.param(st.integers(1, 31).map(lambda half: 2 * half + 1), id="odd-from-3", marks=control(
        "every d_model, as the claim has it: odd widths >= 3 included", models="positional.snippet-pe-table-matches-formula")),
])
@given(data=st.data(), max_len=st.integers(1, 600))
def test_printed_table_is_the_sinusoidal_encoding_for_even_d_model_and_d_model_1(widths, data, max_len):
    # even widths, and d_model = 1, which the correction says also works (the cosine fills an empty slice)
    d_model = data.draw(widths, label="d_model")
    try:
        pe = _positional_encoding_class()(d_model, max_len=max_len).pe[0]  # float32, as printed
    except RuntimeError as exc:
        claim_assert(False, "PositionalEncoding(d_model) raises", d_model=d_model, error=f"{type(exc).__name__}: {exc}")
    pos = torch.arange(max_len)
    oracle = sinusoidal_encoding(pos, d_model)
    naive32 = sinusoidal_encoding(pos, d_model, dtype=torch.float32)
    # exp(2i * (-ln 10^4 / d)) and 10^4^(-2i/d) round differently in float32; the angle error grows with pos,
    # so the printed table is held to 4x the error of the direct float32 formula (plus the rounding floor).
    assert_within_reference_error(pe, oracle, naive32, c=4.0, what="printed PE table (float32)")


@pytest.mark.claim("positional.snippet-pe-table-matches-formula")
@refutes(reason="d_model = 3 is the smallest width that fails: the cosine of width ceil(d/2) = 2 does not fit "
                "the floor(d/2) = 1 odd column (at d_model = 1 it broadcasts into an empty slice and the table is right)")
def test_printed_positional_encoding_accepts_odd_d_model():
    try:
        _positional_encoding_class()(3, max_len=4)
    except RuntimeError as exc:
        claim_assert(False, "PositionalEncoding(d_model) raises for odd d_model", d_model=3,
                     error=f"{type(exc).__name__}: {exc}")


def _printed_pe_buffer(d_model: int, max_len: int) -> torch.Tensor:
    return _positional_encoding_class()(d_model, max_len=max_len).pe


def _sequence_first_pe_buffer(d_model: int, max_len: int) -> torch.Tensor:
    """The sequence-first buffer of PyTorch's tutorial, pe.unsqueeze(0).transpose(0, 1): (max_len, 1, d_model)."""
    return _printed_pe_buffer(d_model, max_len).transpose(0, 1)


@pytest.mark.claim("positional.snippet-pe-buffer-shape-comment")
@pytest.mark.parametrize("pe_buffer", [
    pytest.param(_printed_pe_buffer, id="printed"),
    pytest.param(_sequence_first_pe_buffer, id="sequence-first", marks=control(
        "the sequence-first buffer (max_len, 1, d_model) of pe.unsqueeze(0).transpose(0, 1)")),
])
@given(half=st.integers(1, 32), max_len=st.integers(1, 300))
@example(half=1, max_len=2)
def test_printed_pe_buffer_has_shape_1_max_len_d_model(pe_buffer, half, max_len):
    pe = pe_buffer(2 * half, max_len)
    claim_assert(tuple(pe.shape) == (1, max_len, 2 * half), "pe is not (1, max_len, d_model)", shape=list(pe.shape))


def _printed_forward(module, x: torch.Tensor) -> torch.Tensor:
    return module(x)


def _adds_rows_of_the_batch_index(module, x: torch.Tensor) -> torch.Tensor:
    """The sequence-first reading of x: row b of the table added to batch entry b (x + pe[0, :x.size(0)])."""
    return x + module.pe[0, :x.size(0)].unsqueeze(1)


def _multiplies_by_the_table(module, x: torch.Tensor) -> torch.Tensor:
    """x * pe[:, :seq_len]: the code multiplies the embedding instead of being added to it."""
    return x * module.pe[:, :x.size(1)]


@pytest.mark.claim("positional.snippet-pe-input-batch-first", "positional.sinusoidal-added-to-embedding")
@pytest.mark.parametrize("forward", [
    pytest.param(_printed_forward, id="printed"),
    pytest.param(_adds_rows_of_the_batch_index, id="sequence-first", marks=control(
        "x read as (seq_len, batch, d_model): table row b added to batch entry b")),
    pytest.param(_multiplies_by_the_table, id="multiplied", marks=control(
        "the table multiplies the embedding (x * pe) instead of being added")),
])
@given(half=st.integers(1, 16), batch=st.integers(1, 4), seq=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
@example(half=2, batch=2, seq=3, seed=0)
def test_printed_forward_adds_the_table_to_batch_first_input(forward, half, batch, seq, seed):
    d_model = 2 * half
    module = _positional_encoding_class()(d_model, max_len=32).eval()  # eval: dropout is the identity
    x = torch.randn(batch, seq, d_model, generator=_generator(seed))
    out = forward(module, x)
    claim_assert(tuple(out.shape) == (batch, seq, d_model), "output shape differs from (batch, seq_len, d_model)")
    # one float32 addition x + pe (|pe| <= 1) rounds by half an ulp of |x| + 1, and out - x by another: 4 eps32
    claim_assert(torch.equal(out - x, (module.pe[0, :seq]).expand(batch, -1, -1)) or
                 (out - x - module.pe[0, :seq]).abs().max().item() <= 4 * 2.0**-23 * (x.abs().max().item() + 1),
                 "forward(x) is not x + pe[:, :seq_len] broadcast over the batch", batch=batch, seq=seq)


def _adds_the_code_of_position_m(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """A "RoPE" that adds the sinusoidal code of its position, x + PE_m, instead of rotating x."""
    return x + sinusoidal_encoding(positions, x.shape[-1])


@pytest.mark.claim("positional.sinusoidal-added-to-embedding")
@pytest.mark.parametrize("rope_impl", [
    pytest.param(rope_interleaved, id="impl"),
    pytest.param(_adds_the_code_of_position_m, id="additive", marks=control(
        "the query gets the sinusoidal code of its position added (x + PE_m) instead of a rotation")),
])
@given(d=even_head_dims(), m=integer_positions(), data=st.data())
def test_rope_multiplies_queries_by_a_rotation_instead_of_adding_a_code(rope_impl, d, m, data):
    x = data.draw(vectors(d), label="x")
    y = data.draw(vectors(d), label="y")
    theta = rope_frequencies(d)
    rope = functools.partial(rope_impl, positions=torch.tensor([float(m)]), theta=theta)
    zero = torch.zeros(1, d, dtype=torch.float64)
    # the three calls use the same cos, sin: each output entry c v_a - s v_b rounds by 3 u (|v_a| + |v_b|) <= 3 eps
    # max|v|; with x + y's own rounding and the two subtractions ~8 eps (|x| + |y|); 16 eps, and a subnormal floor
    tol = 16 * EPS64 * (x.abs().max().item() + y.abs().max().item()) + 8 * 2.0**-1074
    claim_assert(torch.equal(rope(zero), zero), "RoPE of the zero vector is not zero (it adds something)", m=m)
    claim_assert((rope((x + y)[None]) - rope(x[None]) - rope(y[None])).abs().max().item() <= tol,
                 "RoPE is not linear in the vector it rotates", m=m)


# --- relative position and the KV cache (foundations:276-277) -------------------------------------------------

@pytest.mark.claim("rope.relative-position-explicit-vs-sinusoidal-implicit")
@pytest.mark.parametrize("rope_key", [
    pytest.param(rope_interleaved, id="impl"),
    pytest.param(lambda x, positions, theta: rope_interleaved(x, -positions, theta), id="key-sign", marks=control(
        "the keys rotated by -n (the opposite sense of the queries'): the logit then depends on m + n")),
])
@given(d=even_head_dims(4, 16), m=integer_positions(1000), n=integer_positions(1000), shift=st.integers(1, 1000),
       seed=st.integers(0, 2**31 - 1))
@example(d=4, m=2, n=5, shift=3, seed=0)
def test_rope_logits_are_shift_invariant_and_additive_pe_logits_are_not(rope_key, d, m, n, shift, seed):
    g = _generator(seed)
    xq, xk = torch.randn(d, dtype=torch.float64, generator=g), torch.randn(d, dtype=torch.float64, generator=g)
    wq, wk = torch.randn(d, d, dtype=torch.float64, generator=g), torch.randn(d, d, dtype=torch.float64, generator=g)
    theta = rope_frequencies(d)

    def rope_logit(a, b):
        return (rope_interleaved((wq @ xq)[None], torch.tensor([float(a)]), theta)
                @ rope_key((wk @ xk)[None], torch.tensor([float(b)]), theta).T).item()

    def additive_logit(a, b):
        return ((wq @ (xq + sinusoidal_encoding(torch.tensor(a), d))) @ (wk @ (xk + sinusoidal_encoding(torch.tensor(b), d)))).item()

    scale = (wq.abs().sum() * wk.abs().sum()).item() * (xq.abs().max().item() + 1) * (xk.abs().max().item() + 1)
    tol = 16 * EPS64 * scale * (d + 2000)  # angles up to 2000 rad; d-term products of bounded entries
    rope_change = abs(rope_logit(m + shift, n + shift) - rope_logit(m, n))
    additive_change = abs(additive_logit(m + shift, n + shift) - additive_logit(m, n))
    claim_assert(rope_change <= tol, "the RoPE logit depends on absolute positions", m=m, n=n, shift=shift)
    claim_assert(additive_change > 1e3 * tol, "the additive-PE logit is shift invariant for generic projections",
                 m=m, n=n, shift=shift, seed=seed)


def _two_layer_decoder(seed: int, d: int):
    g = _generator(seed)
    return [tuple(torch.randn(d, d, dtype=torch.float64, generator=g) / math.sqrt(d) for _ in range(3))
            for _ in range(2)]


def _qkv(h: torch.Tensor, w, positions: torch.Tensor, rope: bool):
    q, k, v = (h @ wi for wi in w)
    if rope:
        theta = rope_frequencies(h.shape[-1])
        q, k = rope_interleaved(q, positions, theta), rope_interleaved(k, positions, theta)
    return q, k, v


def _full_forward(x: torch.Tensor, layers, rope: bool, from_newest: bool = False) -> torch.Tensor:
    """Recompute everything: causal attention over the whole prefix, layer by layer (residual). ``from_newest``
    counts positions back from the last token (n - 1 - i), so that every new token moves the others."""
    n = x.shape[0]
    pos = torch.arange(n, dtype=torch.float64)
    pos = n - 1 - pos if from_newest else pos
    h = x if rope else x + sinusoidal_encoding(pos, x.shape[-1])
    for w in layers:
        q, k, v = _qkv(h, w, pos, rope)
        scores = (q @ k.T / math.sqrt(h.shape[-1])).masked_fill(torch.ones(len(h), len(h), dtype=torch.bool).triu(1),
                                                                float("-inf"))
        h = h + stable_softmax(scores) @ v
    return h


def _cached_decode(x: torch.Tensor, layers, rope: bool, from_newest: bool = False) -> torch.Tensor:
    """Token by token: each layer's key/value of position t is computed (rotated) once and cached; ``from_newest``
    gives each new token position 0, as positions counted back from the last token do when it arrives."""
    cache = [([], []) for _ in layers]
    outputs = []
    for t in range(x.shape[0]):
        pos = torch.tensor([0.0 if from_newest else float(t)])
        h = x[t:t + 1] if rope else x[t:t + 1] + sinusoidal_encoding(pos, x.shape[-1])
        for (keys, values), w in zip(cache, layers):
            q, k, v = _qkv(h, w, pos, rope)
            keys.append(k)
            values.append(v)
            scores = q @ torch.cat(keys).T / math.sqrt(h.shape[-1])
            h = h + stable_softmax(scores) @ torch.cat(values)
        outputs.append(h)
    return torch.cat(outputs)


@st.composite
def decoder_inputs(draw):
    n = draw(st.integers(2, 12), label="n")
    d = draw(even_head_dims(2, 8), label="d")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    return torch.randn(n, d, dtype=torch.float64, generator=_generator(seed)), _two_layer_decoder(seed + 1, d)


def _cache_error(x, layers, rope: bool, from_newest: bool = False) -> tuple[float, float]:
    full, cached = _full_forward(x, layers, rope, from_newest), _cached_decode(x, layers, rope, from_newest)
    # the same sums in the same order up to the masked -inf terms: a few ulps of max|h| per layer.
    return (full - cached).abs().max().item(), 64 * EPS64 * x.shape[0] * max(full.abs().max().item(), 1.0)


@pytest.mark.claim("positional.sinusoidal-kv-cache-needs-recompute")
@refutes()
@given(case=decoder_inputs())
def test_additive_sinusoidal_kv_cache_goes_stale(case):
    x, layers = case
    err, tol = _cache_error(x, layers, rope=False)
    claim_assert(err > tol, "reusing the cached keys/values of an additive-PE decoder gives the recomputed output",
                 n=x.shape[0], d=x.shape[1], max_difference=err)


@pytest.mark.claim("positional.sinusoidal-kv-cache-needs-recompute")
@pytest.mark.parametrize("from_newest", [pytest.param(False, id="absolute-positions"), pytest.param(
    True, id="positions-from-newest", marks=control(
        "a cache that does go stale: positions counted back from the newest token, so each step moves the cached "
        "tokens, the condition under which the claim's recomputation is needed",
        models="positional.sinusoidal-kv-cache-needs-recompute"))])
@given(case=decoder_inputs(), rope=st.booleans())
def test_cached_decoding_equals_recomputation_for_additive_pe_and_rope(from_newest, case, rope):
    x, layers = case
    err, tol = _cache_error(x, layers, rope, from_newest)
    claim_assert(err <= tol, "cached decoding differs from recomputation", rope=rope, n=x.shape[0], max_difference=err)


# --- learned absolute positions (linear-algebra:455) ----------------------------------------------------------

class _Captured(Exception):
    pass


@pytest.mark.claim("positional.la-transformer-learned-absolute-positions")
@pytest.mark.parametrize("build", [
    pytest.param(lambda: _la_transformer(), id="printed"),
    pytest.param(lambda: _la_transformer_with_a_fixed_sinusoidal_table(), id="fixed-table", marks=control(
        "the position embedding replaced by a fixed (frozen) sinusoidal table")),
])
@given(n=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
@example(n=3, seed=0)
def test_printed_model_input_is_token_plus_learned_position_embedding(build, n, seed):
    model = build()
    seen = {}

    def capture(module, args):
        seen["x"] = args[0]
        raise _Captured

    hook = model.blocks[0].register_forward_pre_hook(capture)
    ids = torch.randint(0, 11, (2, n), generator=_generator(seed))
    try:
        with pytest.raises(_Captured):
            model(ids)
    finally:
        hook.remove()
    expected = model.token_emb(ids) + model.pos_emb(torch.arange(n))[None]
    claim_assert(torch.equal(seen["x"], expected), "the first block's input is not token_emb(ids) + pos_emb(pos)", n=n)
    claim_assert(isinstance(model.pos_emb, torch.nn.Embedding) and model.pos_emb.weight.requires_grad,
                 "the position embedding is not a learned table")


@functools.lru_cache(maxsize=1)
def _la_transformer():
    torch.manual_seed(0)
    return _la_transformer_snippet().namespace["LinearAlgebraicTransformer"](
        vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_seq_len=8).eval()


@functools.lru_cache(maxsize=1)
def _la_transformer_with_a_fixed_sinusoidal_table():
    model = copy.deepcopy(_la_transformer())
    table = sinusoidal_encoding(torch.arange(model.pos_emb.num_embeddings), model.pos_emb.embedding_dim,
                                dtype=model.pos_emb.weight.dtype)
    model.pos_emb = torch.nn.Embedding.from_pretrained(table, freeze=True)
    return model


@functools.lru_cache(maxsize=1)
def _la_transformer_snippet():
    run = run_snippet("architecture.snippet-la-linear-algebraic-transformer")
    assert run.ran, run.describe()
    return run


# --- convolution and local attention (linear-algebra:591) ------------------------------------------------------

def _conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y_i = sum_o w_o x_{i-o} with zero padding: a causal K-tap convolution of a scalar sequence (n,)."""
    padded = torch.cat([torch.zeros(len(w) - 1, dtype=x.dtype), x])
    windows = padded.unfold(0, len(w), 1)  # (n, K): window i holds x_{i-K+1} .. x_i
    return windows @ w.flip(0)


def _relative_position_heads(x: torch.Tensor, w: torch.Tensor, beta: float) -> torch.Tensor:
    """K heads of local attention over the window x_{i-K+1} .. x_i: head o has logit beta on offset o and 0
    elsewhere (a relative-position logit, no content), value weight w_o; outputs summed (n,)."""
    k = len(w)
    padded = torch.cat([torch.zeros(k - 1, dtype=x.dtype), x])
    windows = padded.unfold(0, k, 1)  # (n, K), column K-1-o is offset o
    out = torch.zeros_like(x)
    for o in range(k):
        logits = torch.zeros(k, dtype=x.dtype)
        logits[k - 1 - o] = beta
        out = out + w[o] * (windows @ stable_softmax(logits))
    return out


@pytest.mark.claim("expressivity.la-connection-conv-equals-local-attention")
@refutes(reason="the 2-tap difference kernel [1, -1] on length-2 inputs: on any constant input a softmax head "
                "returns its value vector whatever its logits (a convex combination of equal rows), so matching the "
                "kernel's zero output forces W_v = 0, and then the head returns 0 on (0, 1) where the kernel gives 1")
def test_a_local_softmax_attention_head_equals_the_difference_convolution():
    w = torch.tensor([1.0, -1.0], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):  # any logits: the head's output on a constant input is W_v c
        c, wv = torch.randn(1, dtype=torch.float64, generator=g), torch.randn(1, dtype=torch.float64, generator=g)
        logits = torch.randn(2, 2, dtype=torch.float64, generator=g).masked_fill(torch.eye(2).flip(0).triu(1).bool(), 0)
        head = stable_softmax(logits) @ (c.expand(2) * wv)
        # a premise: a 2-key softmax row sums to 1 within 3 u, the 2-term product adds 2 u: 2.5 eps |c w_v|; 8 eps keeps
        # rounding from ever being read as the counterexample
        premise((head - c * wv).abs().max().item() <= 8 * EPS64 * abs((c * wv).item()),
                "a head's output on a constant input depends on its logits", head=head, expected=c * wv)
    step = torch.tensor([0.0, 1.0], dtype=torch.float64)
    claim_assert(torch.equal(_conv(torch.ones(2, dtype=torch.float64), w)[1:], torch.zeros(1, dtype=torch.float64))
                 and _conv(step, w)[1].item() == 0.0,
                 "convolution with [1, -1] is a local attention head: it would need W_v = 0, yet it maps (0, 1) to "
                 "a non-zero output", conv_on_constant=_conv(torch.ones(2, dtype=torch.float64), w),
                 conv_on_step=_conv(step, w), head_with_zero_values=0.0)


def _one_local_head(x: torch.Tensor, w: torch.Tensor, beta: float) -> torch.Tensor:
    """Negative control: one local attention head over the same window, attention |w_o| / sum |w| on offset o (logits
    log |w_o|), value weight sum_o w_o: it equals the convolution for kernels of one sign, as "convolution is local
    attention" would need for every kernel (``beta`` unused)."""
    k = len(w)
    windows = torch.cat([torch.zeros(k - 1, dtype=x.dtype), x]).unfold(0, k, 1)  # (n, K), column K-1-o is offset o
    return w.sum() * (windows @ stable_softmax(w.abs().log().flip(0)))


@pytest.mark.claim("expressivity.la-connection-conv-equals-local-attention")
@pytest.mark.parametrize("attention", [pytest.param(_relative_position_heads, id="k-heads"), pytest.param(
    _one_local_head, id="one-head", marks=control("convolution as one local attention head, as the claim has it",
                                                  models="expressivity.la-connection-conv-equals-local-attention"))])
@given(n=st.integers(1, 16), k=st.integers(1, 4), shift=st.integers(0, 8), seed=st.integers(0, 2**31 - 1),
       beta=st.floats(5.0, 40.0))
@example(n=2, k=2, shift=0, seed=0, beta=10.0)  # seed 0 draws w = (-2.18, 0.57): mixed signs
def test_convolution_is_translation_equivariant_and_relative_position_heads_approach_it(attention, n, k, shift, seed,
                                                                                          beta):
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(n, dtype=torch.float64, generator=g), torch.randn(k, dtype=torch.float64, generator=g)
    shifted = torch.cat([torch.zeros(shift, dtype=torch.float64), x])  # translate the sequence right by `shift`
    # the same K-term window dot products on both sides (zero padding is exact), summed in possibly other orders
    tol = k * EPS64 * w.abs().sum().item() * x.abs().max().item()
    claim_assert((_conv(shifted, w)[shift:] - _conv(x, w)).abs().max().item() <= tol,
                 "convolution is not translation equivariant", shift=shift)
    # every head puts e^beta / (e^beta + K - 1) on its offset: error <= sum_o |w_o| 2 (K-1) e^-beta max|x|; rounding:
    # per head a K-term product with softmax weights ((2 K + 3) u of |w_o| max|x|), plus the convolution's K u
    bound = w.abs().sum().item() * (2 * (k - 1) * math.exp(-beta) + 2 * (k + 1) * EPS64) * x.abs().max().item()
    err = (attention(x, w, beta) - _conv(x, w)).abs().max().item()
    claim_assert(err <= bound, "K relative-position heads do not approach the K-tap convolution", beta=beta, err=err,
                 bound=bound)
