"""Scaled dot-product attention: definitions, shapes, masks, the graph and consensus views.

foundations.txt lines 3-58 and the multi-head class (133-176); linear-algebra.txt lines 20-78
(the block and its code) and 386-407 (graphs); index.txt lines 80-108 and its bibliography.
"""
import functools
import math
import re
from collections import Counter

import numpy as np
import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from claimcheck import claim_assert, control, record, refutes
from claimcheck.snippets import SnippetRun, load_snippet, run_snippet
from impl.attention import attention, attention_weights, repeat_kv, scores
from impl.backends import _sdpa_mask
from properties.assertions import relative_error
from properties.strategies import logit_matrices
from properties.strategies.attention import MASK_KINDS, attention_problems

# what SDPA's attn_mask can carry (a softcap or a sink has no SDPA spelling: tests/test_kernel_oracle.py checks those)
SDPA_MASK_KINDS = tuple(k for k in MASK_KINDS if k not in ("softcap", "sink"))

EPS64 = 2.0**-52


@st.composite
def qkv_triples(draw, max_n: int = 10, max_d: int = 8):
    """float64 (q, k, v) with q (n_q, d_k), k (n_k, d_k), v (n_k, d_v)."""
    n_q, n_k, d_k, d_v = (draw(st.integers(1, m)) for m in (max_n, max_n, max_d, max_d))
    elements = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
    q, k, v = (draw(hnp.arrays(np.float64, s, elements=elements)) for s in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)


def _query_normalised_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) over the queries (dim=-2): columns, not rows, sum to 1."""
    return torch.softmax(scores(q, k), dim=-2)


@pytest.mark.claim("attention.output-convex-combination")
@pytest.mark.parametrize("attend", [pytest.param(lambda q, k, v: (attention_weights(q, k), attention(q, k, v)),
                                                   id="over-keys"), pytest.param(
    lambda q, k, v: (_query_normalised_weights(q, k), _query_normalised_weights(q, k) @ v), id="over-queries",
    marks=control("softmax over the queries (dim=-2): Y = A V with a column-stochastic A"))])
@given(qkv=qkv_triples())
def test_each_output_row_is_a_convex_combination_of_value_rows(attend, qkv):
    q, k, v = qkv
    a, y = attend(q, k, v)
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


# ---- the definition (foundations.txt lines 9-58; index.txt line 80) ---------------------------------------


@pytest.mark.claim("attention.scaled-dot-product-definition", "attention.index-sdpa-formula")
@pytest.mark.parametrize("scale_of", [pytest.param(lambda d_k: None, id="sqrt-d_k"), pytest.param(
    lambda d_k: 1.0 / d_k, id="d_k", marks=control("softmax(Q K^T / d_k) V: the scale 1/d_k, not 1/sqrt(d_k)",
        models=["attention.scaled-dot-product-definition", "attention.index-sdpa-formula"]))])
@given(problem=attention_problems(mask_kinds=SDPA_MASK_KINDS))
def test_reference_attention_equals_torch_scaled_dot_product_attention(scale_of, problem):
    """softmax(Q K^T / sqrt(d_k)) V row-wise, against PyTorch's independent math kernel, float64."""
    q, k, v, mask = problem.cast(torch.float64)
    ours = attention(q, k, v, scale=scale_of(q.shape[-1]), mask=mask)
    attn_mask, is_causal = _sdpa_mask(q, k, mask)
    with sdpa_kernel(SDPBackend.MATH):
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                                enable_gqa=problem.gqa)
    # two float64 evaluations of the same formula: sums of <= 40 terms, a few hundred eps at most
    claim_assert(relative_error(ours, theirs) <= 1e-12, "the reference differs from torch's SDPA", problem=problem,
                 relative_error=relative_error(ours, theirs))


@pytest.mark.claim("attention.scaled-scores-divide-sqrt-dk")
@pytest.mark.parametrize("scale_of", [pytest.param(lambda d_k: None, id="default"), pytest.param(
    math.sqrt, id="times-sqrt-d_k", marks=control("scores multiplied by sqrt(d_k) instead of divided"))])
@given(problem=attention_problems(mask_kinds=("none",)))
def test_scores_are_divided_by_sqrt_d_k_and_sdpa_defaults_to_that_scale(scale_of, problem):
    q, k, v, _ = problem.cast(torch.float64)
    d_k = q.shape[-1]
    s = scores(q, k, scale=scale_of(d_k))
    by_division = q @ repeat_kv(k, q.shape[1] // k.shape[1]).transpose(-2, -1) / math.sqrt(d_k)
    # multiplying by the rounded 1/sqrt(d_k) instead of dividing: two roundings apart at most
    claim_assert((s - by_division).abs().max().item() <= 4 * EPS64 * max(1.0, s.abs().max().item()),
                 "scores are not Q K^T / sqrt(d_k)", problem=problem)
    default = F.scaled_dot_product_attention(q, k, v, enable_gqa=problem.gqa)
    explicit = F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(d_k), enable_gqa=problem.gqa)
    claim_assert(torch.equal(default, explicit), "SDPA's default scale is not 1/sqrt(d_k)", problem=problem)


@pytest.mark.claim("attention.score-entry-meaning-i-attends-j", "attention.la-graph-nodes-tokens-edge-weights")
@pytest.mark.parametrize("weights_of", [pytest.param(attention_weights, id="row-is-query"), pytest.param(
    _query_normalised_weights, id="column-normalised", marks=control(
        "A normalised over the queries: A_ij is then the share of key j given to query i, not how much i attends to j"))])
@given(qkv=qkv_triples(), j=st.integers(0, 9), delta=st.floats(0.5, 3.0))
def test_row_i_column_j_is_query_i_on_key_j(weights_of, qkv, j, delta):
    """S_ij = q_i . k_j; changing key j moves column j of S only; y_i = sum_j A_ij v_j."""
    q, k, v = qkv
    j = j % k.shape[0]
    s = q @ k.T
    for i in range(q.shape[0]):
        # a d_k-term dot product summed in another order: d_k eps of sum |q_ik k_jk| apart at most
        bound = 2 * q.shape[1] * EPS64 * (q[i].abs() * k[j].abs()).sum().item()
        claim_assert(abs(s[i, j].item() - torch.dot(q[i], k[j]).item()) <= bound, "S_ij is not q_i . k_j", i=i, j=j)
    moved = k.clone()
    moved[j] += delta
    changed = ((q @ moved.T) != s).any(dim=0)
    claim_assert(not bool(changed[torch.arange(k.shape[0]) != j].any()), "changing key j moved another column",
                 j=j, changed_columns=changed)
    a, y = weights_of(q, k), attention(q, k, v)
    weighted = sum(a[:, jj, None] * v[jj] for jj in range(k.shape[0]))
    claim_assert((y - weighted).abs().max().item() <= 2 * k.shape[0] * EPS64 * max(1.0, v.abs().max().item()),
                 "row i of A does not weight the value rows of output i", q=q, k=k, v=v)


def _flow(n: int, d: int, d_k: int, d_v: int, seed: int) -> dict[str, torch.Tensor]:
    """The matrix flow: X, W_Q, W_K, W_V, W_O and every intermediate (float64)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, d), generator=gen, dtype=torch.float64)
    w_q, w_k = (torch.randn((d, d_k), generator=gen, dtype=torch.float64) for _ in range(2))
    w_v, w_o = torch.randn((d, d_v), generator=gen, dtype=torch.float64), torch.randn((d_v, d), generator=gen,
                                                                                      dtype=torch.float64)
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    s = q @ k.T
    a = torch.softmax(s / math.sqrt(d_k), dim=-1)
    y = a @ v
    return dict(X=x, W_Q=w_q, W_K=w_k, W_V=w_v, W_O=w_o, Q=q, K=k, V=v, S=s, A=a, Y=y, X1=x + y @ w_o)


def _flow_linear_layout(n: int, d: int, d_k: int, d_v: int, seed: int) -> dict[str, torch.Tensor]:
    """The flow with W_Q stored as nn.Linear stores it, d_k x d (Q = X W_Q^T): Q is the same, W_Q transposed."""
    f = _flow(n, d, d_k, d_v, seed)
    return f | dict(W_Q=f["W_Q"].T)


def _flow_projected_output(n: int, d: int, d_k: int, d_v: int, seed: int) -> dict[str, torch.Tensor]:
    """The flow with Y taken after the output projection, Y = A V W_O: n x d."""
    f = _flow(n, d, d_k, d_v, seed)
    return f | dict(Y=f["Y"] @ f["W_O"])


@pytest.mark.claim("attention.input-shape-n-by-d", "attention.qkv-projection-formula",
                   "attention.projection-matrix-shape-d-by-dk", "attention.qkv-shape-n-by-dk",
                   "attention.score-matrix-shape-n-by-n", "attention.attention-matrix-shape-n-by-n",
                   "attention.output-shape-n-by-dk")
@pytest.mark.parametrize("flow", [pytest.param(_flow, id="as-printed"), pytest.param(
    _flow_linear_layout, id="w-q-transposed", marks=control("W_Q in nn.Linear's layout, d_k x d, with Q = X W_Q^T",
        models=["attention.projection-matrix-shape-d-by-dk", "attention.qkv-projection-formula"])),
    pytest.param(_flow_projected_output, id="y-projected", marks=control("Y = A V W_O, projected back to n x d",
                                                                         models="attention.output-shape-n-by-dk"))])
@given(n=st.integers(1, 12), d=st.integers(1, 12), d_k=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_foundations_matrix_flow_has_the_stated_shapes(flow, n, d, d_k, seed):
    """foundations.txt lines 17-56, where W_V is d x d_k (so d_v = d_k)."""
    f = flow(n, d, d_k, d_k, seed)
    shapes = {name: tuple(t.shape) for name, t in f.items()}
    expected = dict(X=(n, d), W_Q=(d, d_k), W_K=(d, d_k), W_V=(d, d_k), Q=(n, d_k), K=(n, d_k), V=(n, d_k), S=(n, n),
                    A=(n, n), Y=(n, d_k))
    claim_assert(all(shapes[name] == shape for name, shape in expected.items()), "a shape differs from the text",
                 shapes=shapes, expected=expected)
    # Q = X W_Q projects each token on its own: row i of Q is x_i W_Q
    rows = torch.stack([f["X"][i] @ f["W_Q"] for i in range(n)])
    claim_assert((rows - f["Q"]).abs().max().item() <= 2 * d * EPS64 * max(1.0, f["Q"].abs().max().item()),
                 "Q is not X W_Q row by row", n=n, d=d, d_k=d_k)


@pytest.mark.claim("attention.la-block-x0-shape", "attention.la-block-qkv-projections",
                   "attention.la-block-attention-matrix-n-by-n", "attention.la-block-output-y-shape",
                   "attention.la-block-wo-shape", "attention.la-block-weight-shapes-wv-dk")
@pytest.mark.parametrize("flow", [pytest.param(_flow, id="w-v-d-by-d_v"), pytest.param(
    lambda n, d, d_k, d_v, seed: _flow(n, d, d_v, d_k, seed), id="d_k-d_v-swapped",
    marks=control("d_k and d_v interchanged: W^Q, W^K of width d_v, W^V and W^O of d_k",
        models=["attention.la-block-output-y-shape", "attention.la-block-wo-shape",
                "attention.la-block-weight-shapes-wv-dk"]))])
@given(n=st.integers(1, 12), d=st.integers(1, 12), d_k=st.integers(1, 12), d_v=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_linear_algebra_block_flow_type_checks_with_w_v_of_width_d_v(flow, n, d, d_k, d_v, seed):
    """linear-algebra.txt line 24 with W^V in R^{d x d_v}: A is n x n, Y = A V is n x d_v, X_1 is n x d."""
    f = flow(n, d, d_k, d_v, seed)
    shapes = {name: tuple(t.shape) for name, t in f.items()}
    expected = dict(X=(n, d), Q=(n, d_k), K=(n, d_k), V=(n, d_v), A=(n, n), Y=(n, d_v), W_O=(d_v, d), X1=(n, d))
    claim_assert(all(shapes[name] == shape for name, shape in expected.items()), "a shape differs from the text",
                 shapes=shapes, expected=expected)


@pytest.mark.claim("attention.la-block-weight-shapes-wv-dk")
@refutes(reason="d_k = 1, d_v = 2 is the smallest pair with d_v != d_k; n = d = 1 are the smallest sizes")
def test_w_v_of_width_d_k_fits_the_block_of_line_24():
    n, d, d_k, d_v = 1, 1, 1, 2
    x = torch.ones((n, d), dtype=torch.float64)
    w_v = torch.ones((d, d_k), dtype=torch.float64)  # line 26: W^V in R^{d x d_k}
    w_o = torch.ones((d_v, d), dtype=torch.float64)  # line 26: W^O in R^{d_v x d}
    y = torch.softmax(torch.zeros((n, n)), -1).double() @ (x @ w_v)  # Y = A V: n x d_k, not n x d_v (line 24)
    try:
        x1 = x + y @ w_o
    except RuntimeError as exc:
        claim_assert(False, "with W^V in R^{d x d_k}, Y is n x d_k and Y W^O (W^O in R^{d_v x d}) does not type-check",
                     d_k=d_k, d_v=d_v, y_shape=tuple(y.shape), w_o_shape=tuple(w_o.shape), error=str(exc))
    claim_assert(x1.shape == (n, d), "X_1 has the wrong shape", shape=tuple(x1.shape))


# ---- parallelism (foundations.txt line 3) ---------------------------------------------------------------


class _OpCount(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _op_calls(fn) -> int:
    mode = _OpCount()
    with mode:
        fn()
    return mode.calls


def _elman_rnn(x: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor) -> torch.Tensor:
    """h_t = tanh(x_t W_x + h_{t-1} W_h): one step per position, each needing the previous one."""
    h = torch.zeros(w_h.shape[0], dtype=x.dtype)
    for x_t in x:
        h = torch.tanh(x_t @ w_x + h @ w_h)
    return h


def _attention_query_by_query(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The same output, one query position at a time: n sequential steps, as in step-by-step decoding."""
    return torch.cat([attention(q[i:i + 1], k, v) for i in range(q.shape[0])])


@pytest.mark.claim("attention.self-attention-parallel-no-sequential-dependency")
@pytest.mark.parametrize("attend", [pytest.param(attention, id="batched"), pytest.param(
    _attention_query_by_query, id="query-by-query", marks=control("attention as a loop over the query positions"))])
def test_attention_takes_the_same_operations_for_every_length_while_an_rnn_takes_one_step_per_token(attend):
    d = 8
    attention_ops, rnn_ops = {}, {}
    for n in (4, 64, 512):
        x = torch.randn((n, d), generator=torch.Generator().manual_seed(n), dtype=torch.float64)
        w = torch.randn((d, d), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        attention_ops[n] = _op_calls(lambda: attend(x @ w, x @ w, x @ w))
        rnn_ops[n] = _op_calls(lambda: _elman_rnn(x, w, w))
    record("tensor operations dispatched by attention, by n", attention_ops)
    record("tensor operations dispatched by an Elman RNN, by n", rnn_ops)
    claim_assert(len(set(attention_ops.values())) == 1, "attention's operation count depends on n", counts=attention_ops)
    claim_assert(all(rnn_ops[n] >= n for n in rnn_ops), "the RNN did not take a step per token", counts=rnn_ops)


# ---- masking with -1e9 (linear-algebra.txt line 68; the multi-head class of foundations.txt 133-176) --------


@functools.cache
def _sources():
    from claimcheck.snippets import project_root
    from claimcheck.sources import load_sources

    return load_sources(project_root())


def _printed_masking(scores_: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Lines 68 and 69 of linear-algebra.txt, executed as printed: masked_fill(mask == 0, -1e9), softmax."""
    seed = SnippetRun("linear-algebra", 0, 0, "", namespace={"scores": scores_, "mask": mask})
    filled = load_snippet("linear-algebra", 68, 68, requires=(seed,), sources=_sources())
    run = load_snippet("linear-algebra", 69, 69, requires=(filled,), sources=_sources())
    if not run.ran or not filled.ran:
        raise RuntimeError((filled if not filled.ran else run).describe())
    return run.namespace["A"]


def _row_masks(n_q: int, n_k: int, seed: int) -> torch.Tensor:
    """A 0/1 mask (1 = keep) with at least one kept key per row."""
    keep = torch.rand((n_q, n_k), generator=torch.Generator().manual_seed(seed)) < 0.5
    keep[torch.arange(n_q), torch.randint(0, n_k, (n_q,), generator=torch.Generator().manual_seed(seed + 1))] = True
    return keep.long()


@pytest.mark.claim("attention.transformerblock-mask-neg1e9")
@pytest.mark.parametrize("every_key_masked_in_row_0", [pytest.param(False, id="a-key-kept-per-row"), pytest.param(
    True, id="row-0-fully-masked", marks=control("every masked key taken to get weight 0, as the claim says, in a row "
                                                 "that keeps no key", models="attention.transformerblock-mask-neg1e9"))])
@given(s=logit_matrices(bound=50.0), seed=st.integers(0, 2**16), dtype=st.sampled_from([torch.float64, torch.float32]))
def test_neg1e9_fill_gives_masked_keys_exactly_zero_weight_when_a_row_keeps_a_key(every_key_masked_in_row_0, s, seed,
                                                                                  dtype):
    mask = _row_masks(*s.shape, seed)
    if every_key_masked_in_row_0:
        mask[0] = 0
    a = _printed_masking(s.to(dtype), mask)
    expected = torch.softmax(s.masked_fill(mask == 0, -math.inf), dim=-1)
    eps = torch.finfo(dtype).eps
    claim_assert(bool((a[mask == 0] == 0).all()), "a masked key got weight", s=s, mask=mask, weights=a)
    claim_assert((a.double() - expected).abs().max().item() <= 2 * (s.shape[-1] + 2) * eps,
                 "kept keys' weights differ from softmax over the kept keys", s=s, mask=mask)


def _masking_facts() -> dict[str, str]:
    """What -1e9 and -inf fills do to a fully masked row, per dtype (recorded as fact)."""
    facts = {}
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        s = torch.zeros((1, 3), dtype=dtype)
        zero = torch.zeros((1, 3), dtype=torch.long)
        try:
            facts[f"-1e9 fill, fully masked row, {dtype}"] = str(_printed_masking(s, zero).tolist())
        except RuntimeError as exc:
            facts[f"-1e9 fill, fully masked row, {dtype}"] = f"error: {str(exc).splitlines()[0][:120]}"
        facts[f"-inf fill, fully masked row, {dtype}"] = str(torch.softmax(s.masked_fill(zero == 0, -math.inf), -1).tolist())
    return facts


@pytest.mark.claim("attention.transformerblock-mask-neg1e9")
@refutes(reason="one query and one key, masked: the smallest fully masked row; its only key gets weight 1")
def test_neg1e9_fill_gives_every_masked_key_zero_weight():
    for name, fact in _masking_facts().items():
        record(name, fact)
    a = _printed_masking(torch.zeros((1, 1), dtype=torch.float32), torch.zeros((1, 1), dtype=torch.long))
    claim_assert(bool((a == 0).all()), "a fully masked row spreads its weight uniformly over the masked keys",
                 weights=a)


@functools.cache
def _printed_mha_class():
    run = run_snippet("multi-head.snippet-multi-head-attention")
    assert "MultiHeadAttention" in run.namespace, run.describe()  # a crash of the evidence
    return run.namespace["MultiHeadAttention"]


def _mha_with_weights(d_model: int, heads: int, seed: int):
    """The printed MultiHeadAttention in eval mode, with a hook catching its attention weights."""
    torch.manual_seed(seed)
    module = _printed_mha_class()(d_model, heads).double().eval()
    caught = {}
    module.dropout.register_forward_hook(lambda mod, inputs, output: caught.__setitem__("weights", inputs[0]))
    return module, caught


@pytest.mark.claim("multi-head.snippet-mask-zero-means-masked")
@pytest.mark.parametrize("diagonal", [pytest.param(0, id="causal"), pytest.param(
    -1, id="first-row-fully-masked", marks=control(
        "every mask == 0 position taken to get weight 0, as the claim says, on a strictly lower-triangular mask whose "
        "first query keeps no key", models="multi-head.snippet-mask-zero-means-masked"))])
@given(n=st.integers(1, 10), heads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16), j=st.integers(0, 9))
def test_printed_multi_head_mask_zeroes_masked_weights_and_causal_mask_hides_the_future(diagonal, n, heads, seed, j):
    module, caught = _mha_with_weights(4, heads, seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((1, n, 4), generator=gen, dtype=torch.float64)
    causal = torch.tril(torch.ones((n, n), dtype=torch.long), diagonal)  # (n, n) broadcasts over (B, h, n, n)
    out = module(x, x, x, causal)
    weights = caught["weights"]
    claim_assert(bool((weights[..., causal == 0] == 0).all()), "a masked (future) key got weight", n=n, weights=weights)
    j = j % n  # perturb token j: outputs at positions < j must not move
    moved = x.clone()
    moved[0, j] += 1.0
    claim_assert(torch.equal(module(moved, moved, moved, causal)[0, :j], out[0, :j]),
                 "an output depends on a later position", n=n, j=j)


@pytest.mark.claim("multi-head.snippet-mask-zero-means-masked")
@refutes(reason="one token whose only key is masked (d_model = 1, one head): the smallest fully masked row")
def test_printed_multi_head_mask_gives_every_masked_position_zero_weight():
    module, caught = _mha_with_weights(1, 1, 0)
    x = torch.ones((1, 1, 1), dtype=torch.float64)
    module(x, x, x, torch.zeros((1, 1), dtype=torch.long))
    weights = caught["weights"]
    claim_assert(bool((weights == 0).all()), "a fully masked row puts weight 1/n_k on masked positions", weights=weights)


# ---- the TransformerBlock of linear-algebra.txt lines 28-78 ------------------------------------------------


@functools.cache  # one execution per variant and process
def _printed_block(bypass_line_67: bool):
    """A fresh TransformerBlock class; with ``bypass_line_67`` its module namespace binds ``not_mask = None``,
    which makes line 67's ``mask is not_mask is not None`` false for mask=None, as ``mask is not None`` is."""
    run = run_snippet("architecture.snippet-la-transformer-block")
    assert "TransformerBlock" in run.namespace, run.describe()
    if bypass_line_67:
        run.namespace["not_mask"] = None
    return run.namespace["TransformerBlock"]


@pytest.mark.claim("attention.transformerblock-comment-scores-qr")
@refutes(reason="the document's block on the smallest input (B = n = 1, d_model = 2, one head): line 67 "
                "raises for every input, so one call is minimal")
def test_transformer_block_step_2_computes_the_attention_matrix():
    block = _printed_block(bypass_line_67=False)(2, 1, 4).eval()
    try:
        block(torch.ones((1, 1, 2)))
    except NameError as exc:
        claim_assert(False, "step 2 never completes: line 67 `if mask is not_mask is not None` raises NameError",
                     error=str(exc))


def _split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, n, d) -> (B, h, n, d_k): view(B, n, h, d_k), then transpose(1, 2)."""
    b, n, d = t.shape
    return t.view(b, n, heads, d // heads).transpose(1, 2)


def _split_heads_without_transpose(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, n, d) viewed directly as (B, h, n, d_k): each "head" mixes tokens and feature slices."""
    b, n, d = t.shape
    return t.view(b, heads, n, d // heads)


@pytest.mark.claim("attention.transformerblock-comment-qkv-three-matmuls", "attention.transformerblock-comment-scores-qr",
                   "attention.transformerblock-comment-output-projection-residual")
@pytest.mark.parametrize("split, residual", [
    pytest.param(_split_heads, True, id="as-stated"),
    pytest.param(_split_heads_without_transpose, True, id="heads-unsplit",
                 marks=control("heads taken as view(B, h, n, d_k) without the transpose of (B, n, h, d_k)",
                               models="attention.transformerblock-comment-qkv-three-matmuls")),
    pytest.param(_split_heads, False, id="no-residual",
                 marks=control("step 4 without its residual: W_o(Y), not x + W_o(Y)",
                               models="attention.transformerblock-comment-output-projection-residual")),
    pytest.param(None, True, id="line-67-as-printed",
                 marks=control("step 2 taken to compute the attention as printed: line 67 left as `if mask is not_mask "
                               "is not None:`", models="attention.transformerblock-comment-scores-qr"))])
@given(n=st.integers(1, 6), heads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_transformer_block_steps_compute_projections_attention_and_residuals(split, residual, n, heads, seed):
    d_model = 8
    torch.manual_seed(seed)
    # split None: the block as printed, line 67 not bypassed (the standard head split otherwise)
    block = _printed_block(bypass_line_67=split is not None)(d_model, heads, 16).double().eval()  # eval: dropout off
    split = split or _split_heads
    calls = Counter()
    for name in ("W_q", "W_k", "W_v", "W_o"):
        getattr(block, name).register_forward_hook(lambda mod, i, o, name=name: calls.update([name]))
    x = torch.randn((2, n, d_model), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    try:
        out = block(x)
    except NameError as exc:  # the printed line 67 evaluates the undefined name not_mask
        claim_assert(False, "step 2 never completes: the block's forward raises", error=str(exc))
    counted = dict(calls)
    q, k, v = (split(x @ getattr(block, name).weight.T, heads) for name in ("W_q", "W_k", "W_v"))  # (B, h, n, d_k)
    y = attention(q, k, v).transpose(1, 2).reshape(2, n, d_model)  # softmax(Q K^T / sqrt(d_k)) V, heads concatenated
    x1 = x + block.W_o(y) if residual else block.W_o(y)
    expected = x1 + block.ffn(block.ln2(x1))
    err = (out - expected).abs().max().item()
    claim_assert(counted == {"W_q": 1, "W_k": 1, "W_v": 1, "W_o": 1}, "the projections are not one product each",
                 calls=counted)
    # float64, the same products in another order: a few hundred eps of values of size ~10
    claim_assert(err <= 1e-12, "the block is not x + W_o(softmax(Q K^T / sqrt(d_k)) V) then + FFN(LN(.))",
                 n=n, heads=heads, error=err)


# ---- the graph view (linear-algebra.txt lines 386-407, 577, 593) --------------------------------------------


def _causal_attention_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Decoder attention: query i sees keys j <= i only (an edge to every later token removed)."""
    keep = torch.ones((q.shape[0], k.shape[0]), dtype=torch.bool).tril()
    return torch.softmax(scores(q, k).masked_fill(~keep, -math.inf), dim=-1)


@pytest.mark.claim("attention.la-attention-adjacency-fully-connected-graph")
@pytest.mark.parametrize("weights_of", [pytest.param(attention_weights, id="unmasked"), pytest.param(
    _causal_attention_weights, id="causal", marks=control("a causal mask: no edge from a token to a later one"))])
@given(qkv=qkv_triples())
def test_unmasked_attention_weights_are_positive_row_stochastic_and_directed(weights_of, qkv):
    q, k, _ = qkv
    s = scores(q, k)
    # exp underflows to 0 in float64 only for a gap below -745 between a logit and its row maximum
    assume((s.max(-1, keepdim=True).values - s).max().item() < 700)
    a = weights_of(q, k)
    claim_assert(bool((a > 0).all()), "an unmasked weight is 0: the graph is not complete", q=q, k=k, weights=a)
    claim_assert((a.sum(-1) - 1).abs().max().item() <= 2 * k.shape[0] * EPS64, "rows do not sum to 1", weights=a)
    if q.shape[0] == k.shape[0] and q.shape[0] > 1 and not torch.equal(q, k):
        # recorded only, not asserted: allclose's default 1e-5 relative reads "symmetric up to rounding"
        record("attention matrix symmetric (undirected graph)", bool(torch.allclose(a, a.T)))


def _gnn_update(h: torch.Tensor, alpha: torch.Tensor, w_1: torch.Tensor, w_2: torch.Tensor, sigma=lambda t: t):
    """h_i' = sigma(W_1 h_i + sum_j alpha_ij W_2 h_j) over the neighbours j with alpha_ij != 0 (line 398)."""
    return torch.stack([sigma(w_1 @ h[i] + sum(alpha[i, j] * (w_2 @ h[j]) for j in range(h.shape[0]) if alpha[i, j] != 0))
                        for i in range(h.shape[0])])


@pytest.mark.claim("attention.la-transformer-as-gnn-formula", "attention.la-gnn-message-passing-formula")
@pytest.mark.parametrize("w_2_of", [pytest.param(lambda w_v, w_o: (w_v @ w_o).T, id="transposed"), pytest.param(
    lambda w_v, w_o: w_v @ w_o, id="untransposed", marks=control("W_2 = W_V W^O without the transpose"))])
@given(n=st.integers(1, 6), heads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_attention_sublayer_is_message_passing_on_the_complete_graph(w_2_of, n, heads, seed):
    """h + sum_heads A^(h) H W_V^(h) W_O^(h) is the GNN update with W_1 = I, W_2 = (W_V W_O)^T, sigma = id."""
    d, d_k = 4, 2
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn((n, d), generator=gen, dtype=torch.float64)
    params = [[torch.randn(shape, generator=gen, dtype=torch.float64) for shape in ((d, d_k),) * 3 + ((d_k, d),)]
              for _ in range(heads)]
    sublayer = h + sum(attention(h @ w_q, h @ w_k, h @ w_v) @ w_o for w_q, w_k, w_v, w_o in params)
    eye, zero = torch.eye(d, dtype=torch.float64), torch.zeros((d, d), dtype=torch.float64)
    gnn = h.clone()  # one GNN term per head (one graph per head), the residual as W_1 = I
    for w_q, w_k, w_v, w_o in params:
        gnn = gnn + _gnn_update(h, attention_weights(h @ w_q, h @ w_k), zero, w_2_of(w_v, w_o))
    single = _gnn_update(h, attention_weights(h @ params[0][0], h @ params[0][1]), eye, w_2_of(params[0][2], params[0][3]))
    # (A (H W_V)) W_O vs A (H (W_V W_O)): d-, d_k-, n- and heads-term sums and the residual, each rounding u of the
    # terms |A| |H| |W_V| |W_O| + |H|
    scale = (h.abs() + sum(attention_weights(h @ w_q, h @ w_k) @ h.abs() @ w_v.abs() @ w_o.abs()
                           for w_q, w_k, w_v, w_o in params)).max().item()
    tol = (d + d_k + n + heads + 1) * EPS64 * scale
    claim_assert((sublayer - gnn).abs().max().item() <= tol, "the attention sublayer is not the GNN update", n=n)
    if heads == 1:
        claim_assert((sublayer - single).abs().max().item() <= tol, "one head is not one GNN layer with W_1 = I", n=n)
    perm = torch.randperm(n, generator=gen)  # message passing is permutation-equivariant
    permuted = _gnn_update(h[perm], attention_weights(h[perm] @ params[0][0], h[perm] @ params[0][1]), eye,
                           w_2_of(params[0][2], params[0][3]))
    # the same arithmetic on permuted rows, up to the order of the n-term sums (softmax and A H): within tol
    claim_assert((permuted - single[perm]).abs().max().item() <= tol, "relabelling tokens does not relabel outputs")


@pytest.mark.claim("attention.la-gnn-static-vs-transformer-dynamic-graph")
@given(n=st.integers(2, 6), seed=st.integers(0, 2**16), token=st.integers(0, 5))
def test_attention_reweights_every_edge_when_an_input_changes_but_a_fixed_graph_does_not(n, seed, token):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn((n, 4), generator=gen, dtype=torch.float64)
    w_q, w_k = torch.randn((4, 4), generator=gen, dtype=torch.float64), torch.randn((4, 4), generator=gen, dtype=torch.float64)
    moved = h.clone()
    moved[token % n] += 1.0
    a, a_moved = attention_weights(h @ w_q, h @ w_k), attention_weights(moved @ w_q, moved @ w_k)
    others = torch.arange(n) != token % n
    claim_assert(bool((a[others] != a_moved[others]).any(dim=-1).all()),
                 "changing one token left another token's edge weights unchanged", n=n, token=token % n)


# ---- consensus (index.txt lines 98-108) ------------------------------------------------------------------


@pytest.mark.claim("attention.index-consensus-propagation-update")
@refutes(reason="two scalar tokens, W_V W_O = 1 and FFN(z) = z^2: the smallest sequential block with a "
                "nonlinear FFN; the proof is symbolic for every attention weight alpha")
def test_a_sequential_block_is_a_weighted_average_plus_a_function_of_the_own_state():
    """x_2 = x_1 + FFN(x_1) with x_1 = x + A x: is x_2,1 - (alpha a + (1 - alpha) b) a function of a alone?"""
    a, b, alpha = sp.symbols("a b alpha", real=True)
    x1_first = a + (a + b) / 2  # uniform attention over the two tokens (zero queries and keys)
    x2_first = x1_first + x1_first**2
    rest = x2_first - (alpha * a + (1 - alpha) * b)
    claim_assert(sp.simplify(sp.diff(rest, b, 2)) == 0, "the block's update depends on the other token beyond a "
                 "weighted average: F_l would need b", second_derivative_in_b=str(sp.diff(rest, b, 2)))


@pytest.mark.claim("attention.index-consensus-propagation-update")
@pytest.mark.parametrize("sequential", [pytest.param(False, id="parallel"), pytest.param(
    True, id="sequential", marks=control("the sequential block of linear-algebra.txt line 24, x_1 = x + A x, "
                                         "x_2 = x_1 + FFN(x_1), which the claim's 'a layer' includes",
                                         models="attention.index-consensus-propagation-update"))])
@given(n=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_a_parallel_block_without_value_projection_is_consensus_propagation(sequential, n, seed):
    """x' = x + A x + FFN(x) = sum_j A_ij x_j + F(x_i) with F = identity + FFN (GPT-J style block, W_V W_O = I)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, 4), generator=gen, dtype=torch.float64)
    w_q, w_k = torch.randn((4, 4), generator=gen, dtype=torch.float64), torch.randn((4, 4), generator=gen, dtype=torch.float64)
    ffn = lambda t: torch.tanh(t) * 2  # noqa: E731  any token-wise map
    a = attention_weights(x @ w_q, x @ w_k)
    block = x + attention(x @ w_q, x @ w_k, x) + ffn(x)
    if sequential:
        x1 = x + attention(x @ w_q, x @ w_k, x)
        block = x1 + ffn(x1)
    consensus = torch.stack([sum(a[i, j] * x[j] for j in range(n)) + (x[i] + ffn(x[i])) for i in range(n)])
    # n-term sums sum_j A_ij x_j in two orders and two additions, on terms of size A |x| + |x| + |FFN(x)|
    tol = (n + 2) * EPS64 * (a @ x.abs() + x.abs() + ffn(x).abs()).max().item()
    claim_assert((block - consensus).abs().max().item() <= tol, "the parallel block is not of the form", n=n)


@pytest.mark.claim("attention.index-attention-heads-are-consensus-protocols")
@given(n=st.integers(2, 8), layers=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_repeated_attention_averaging_contracts_tokens_to_consensus(n, layers, seed):
    """With F_l = 0, each layer is x <- A x, A row-stochastic with entries >= delta > 0: every coordinate's
    spread shrinks by the Dobrushin coefficient tau(A) = 1 - min_{i,i'} sum_j min(A_ij, A_i'j) < 1."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, 3), generator=gen, dtype=torch.float64)
    spread = lambda t: (t.max(0).values - t.min(0).values).max().item()  # noqa: E731
    bound = spread(x)
    for _ in range(layers):
        w_q, w_k = (torch.randn((3, 3), generator=gen, dtype=torch.float64) for _ in range(2))
        a = attention_weights(x @ w_q, x @ w_k)
        tau = 1 - min(torch.minimum(a[i], a[i2]).sum().item() for i in range(n) for i2 in range(n))
        x = a @ x
        bound *= tau
        # rounding: each layer adds a few eps of the values' size
        claim_assert(spread(x) <= bound + 8 * layers * EPS64 * max(1.0, x.abs().max().item()),
                     "a layer of attention averaging did not contract the tokens", n=n, tau=tau, spread=spread(x),
                     bound=bound)
        claim_assert(tau < 1, "strictly positive weights gave no contraction", tau=tau)


# ---- the index's bibliography (index.txt lines 150-171) ----------------------------------------------------


def _heading_year(doc, line: int) -> int | None:
    """The year of the nearest 'NNNN 关键论文' heading above ``line``."""
    for number in range(line, 0, -1):
        match = re.match(r"\s*(\d{4}) 关键论文", doc.lines[number - 1])
        if match:
            return int(match.group(1))
    return None


def _pmlr_267_years(sources) -> dict[str, set[int]]:
    """Years the corpus attaches to PMLR volume 267, outside the index's year headings."""
    found = {}
    for key, doc in sources.documents.items():
        for number, text in enumerate(doc.lines, start=1):
            if "PMLR 267" in text:
                years = {int(y) for y in re.findall(r"\((\d{4})\)", text)}
                if years:
                    found[f"{key}:{number}"] = years
    return found


@pytest.mark.claim("attention.index-cite-abella-consensus-pmlr267-listed-2026")
@refutes(reason="the corpus's own datings of PMLR volume 267 (spectral.txt) against the index's heading; "
                "an internal inconsistency needs no outside source")
def test_abella_pmlr_267_is_a_2026_paper():
    sources = _sources()
    listed = _heading_year(sources["index"], 164)
    datings = _pmlr_267_years(sources)
    claim_assert(all(years == {listed} for years in datings.values()),
                 "the index files a PMLR 267 paper under 2026, but the corpus dates PMLR 267 to 2025",
                 heading_year=listed, corpus_datings={k: sorted(v) for k, v in datings.items()})


@pytest.mark.claim("attention.index-cite-abella-consensus-pmlr267-listed-2026")
@pytest.mark.parametrize("year", [pytest.param(2025, id="2025"), pytest.param(
    2026, id="2026", marks=control("the index's heading year, 2026, for PMLR 267",
                                   models="attention.index-cite-abella-consensus-pmlr267-listed-2026"))])
def test_every_dated_mention_of_pmlr_267_in_the_corpus_says_2025(year):
    datings = _pmlr_267_years(_sources())
    record("corpus datings of PMLR 267", {k: sorted(v) for k, v in datings.items()})
    claim_assert(datings and all(years == {year} for years in datings.values()),
                 "the corpus does not consistently date PMLR 267 to 2025", datings={k: sorted(v) for k, v in datings.items()})
