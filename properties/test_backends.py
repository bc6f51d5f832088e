"""Every attention backend against the float64 reference, in every precision, mask and head layout.

The rule (DESIGN.md; FlashAttention's tests/test_flash_attn.py): a backend computing in precision
p errs, against the float64 reference, by at most ``c`` times the error of the naive reference
computed in the same precision p, plus a floor of a few units of p's epsilon
(``properties/assertions.py``). Each observed ratio is recorded as
``error_ratio[backend=...,dtype=...,mask=...,out|dq|dk|dv]``.

Backends that cannot run here (CUDA-only kernels, a missing package) and mask features a backend
does not declare are skipped with their reason. Behaviour that differs between backends (fully
masked rows) is asserted against each backend's declaration and recorded.
"""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, record
from impl.attention import Mask, attention
from impl.backends import BACKENDS, available, supports
from properties.assertions import EPS, assert_within_reference_error, attention_term_scales, relative_error
from properties.strategies.attention import MASK_KINDS, attention_problems, fixed_problem

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
C_OUT = 2.0  # FlashAttention's tests: output error <= 2 x the same-precision PyTorch reference's error
C_GRAD = 3.0  # ... and 3 x for gradients: the backward recomputes P from L, adding a few roundings
FLOOR_ULPS = 2.0  # floor: 2 ulps of the size of the summed terms (one rounding of the result, one of a term)
# Hypothesis examples per (backend, dtype, mask) case, as a fraction of the profile's: 135 cases share
# the budget, and the interpreter runs Triton kernels in numpy (~0.1 s a call), so it gets fewer
EXAMPLE_SHARE = {"triton": 16}
DEFAULT_SHARE = 6
DEVICE = "cpu"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _outputs(fn, q, k, v, mask, d_out, backward: bool) -> tuple[torch.Tensor, ...]:
    """``(out,)`` or ``(out, dq, dk, dv)`` for the loss ``sum(out * d_out)``."""
    if not backward:
        with torch.no_grad():
            return (fn(q, k, v, None, mask),)
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, None, mask)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), (q, k, v)))


def _reference(q, k, v, scale, mask):
    return attention(q, k, v, scale, mask)


def check_against_reference(backend_name: str, dtype: torch.dtype, problem, backward: bool) -> None:
    """Assert the c-times-naive rule for the output (and gradients) of one backend on one problem."""
    fn = BACKENDS[backend_name].fn
    q64, k64, v64, mask64 = problem.cast(torch.float64)
    q, k, v, mask = problem.cast(dtype)
    d_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(problem.seed + 1),
                        dtype=torch.float64).to(dtype)
    oracle = _outputs(_reference, q64, k64, v64, mask64, d_out.double(), backward)
    naive = _outputs(_reference, q, k, v, mask, d_out, backward)
    actual = _outputs(fn, q, k, v, mask, d_out, backward)
    # floors scale with the size of the summed terms, not of the result (dK = 0 for one key)
    terms = attention_term_scales(q64, k64, v64, mask64, d_out.double())
    parts = zip(("out", "dq", "dk", "dv"), actual, oracle, naive, (C_OUT, C_GRAD, C_GRAD, C_GRAD))
    for part, a, o, n, c in parts:
        what = f"backend={backend_name},dtype={_name(dtype)},mask={problem.mask_kind},{part}"
        claim_assert(a.shape == o.shape and a.dtype == dtype, f"{what}: wrong shape or dtype", problem=problem,
                     shape=tuple(a.shape), expected=tuple(o.shape), dtype=str(a.dtype))
        # every backend rounds S to (at least) float32, moving P by up to |S| eps32 relative and the result
        # by that times its terms; the naive reference suffers it too but may be luckier on one example.
        # FlashAttention-style backwards also recompute P = exp(S - L), adding |L| eps32 (terms["logits"]
        # is max |S| + max |L|). Against 16-bit naive errors this floor is negligible.
        recompute = EPS[torch.float32] * terms["logits"] * terms[part]
        assert_within_reference_error(a, o, n, c, what, floor_ulps=FLOOR_ULPS, scale=terms[part],
                                      extra_floor=recompute)


def _skip_unless_runs(backend_name: str, dtype: torch.dtype, mask_features=frozenset()) -> None:
    ok, reason = available(BACKENDS[backend_name], DEVICE, dtype)
    if not ok:
        pytest.skip(reason)
    ok, reason = supports(BACKENDS[backend_name], DEVICE, mask_features)
    if not ok:
        pytest.skip(reason)


def _problems_for(backend_name: str, mask_kind: str):
    backend = BACKENDS[backend_name]
    lo, hi = backend.head_dims
    small = backend_name == "triton"  # one interpreted program per 16 rows and head: keep the grid small
    return attention_problems(mask_kinds=(mask_kind,), gqa=backend.gqa, min_d=max(1, lo), max_d=min(max(16, lo) + 8, hi),
                              same_dv=backend.equal_head_dims, max_batch=1 if small else 2,
                              max_heads=2 if small else 4, max_n=33 if small else 40)


MATRIX = [(b, d, m) for b in BACKENDS if b != "flex" for d in DTYPES for m in MASK_KINDS]


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("backend_name,dtype,mask_kind", MATRIX,
                         ids=[f"{b}-{_name(d)}-{m}" for b, d, m in MATRIX])
def test_backend_error_is_within_c_times_the_naive_same_precision_error(backend_name, dtype, mask_kind):
    features = frozenset() if mask_kind == "none" else frozenset({mask_kind})
    _skip_unless_runs(backend_name, dtype, features)
    backward = BACKENDS[backend_name].devices[DEVICE].backward

    @settings(max_examples=max(1, settings().max_examples // EXAMPLE_SHARE.get(backend_name, DEFAULT_SHARE)))
    @given(problem=_problems_for(backend_name, mask_kind))
    def check(problem):
        check_against_reference(backend_name, dtype, problem, backward)

    check()


@pytest.mark.claim("flash-attention.exact-no-approximation")
@settings(max_examples=2)  # each new (dtype, mask structure) is a ~4 s CPU compile: one fixed shape, few seeds
@given(seed=st.integers(0, 2**31 - 1))
def test_flex_attention_error_is_within_c_times_the_naive_same_precision_error(seed):
    """FlexAttention in one test: one pytest node runs in one process, so torch.compile's first, slow
    compile happens once; every dtype and mask in one GQA shape, then its fully masked rows."""
    for dtype in DTYPES:
        _skip_unless_runs("flex", dtype)
        for kind in MASK_KINDS:
            check_against_reference("flex", dtype, fixed_problem(kind, seed), BACKENDS["flex"].devices[DEVICE].backward)
    check_fully_masked_rows("flex")


def _fully_masked_cases():
    """(mask kind, q, k, v, mask, hidden rows): every key hidden from some query rows.

    Key padding and the -inf bias use the shape of ``fixed_problem`` (q 24 x 16 over 4 heads, k and
    v 40 x 16 over 2), so a compiled backend reuses its graphs; bottom-right causal alignment needs
    n_q > n_k (20 queries, 12 keys: the first 8 see nothing).
    """
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, h, n, 16), generator=gen) for h, n in ((4, 24), (2, 40), (2, 40)))
    bias = torch.zeros((1, 4, 24, 40))
    bias[..., :8, :] = -math.inf
    q2, k2, v2 = (torch.randn((1, 2, n, 16), generator=gen) for n in (20, 12, 12))
    return [("key-padding", q, k, v, Mask(key_padding=torch.zeros(1, 40, dtype=torch.bool)), slice(None)),
            ("additive", q, k, v, Mask(bias=bias), slice(0, 8)),
            ("causal-bottom-right", q2, k2, v2, Mask(causal="bottom-right"), slice(0, 8))]


COMPILED_SHAPES_ONLY = {"flex": "one more CPU compile for one more shape (~4 s); the convention is checked with "
                                "key padding and a -inf bias in the shapes already compiled"}


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("backend_name", [b for b in BACKENDS if b != "flex"])  # flex: in its own test above
def test_fully_masked_rows_follow_the_backends_declared_convention(backend_name):
    """A row with no allowed key has no softmax (0/0): the reference gives NaN, fused kernels 0.

    The rows that do see keys must still be right (float32 against float64).
    """
    check_fully_masked_rows(backend_name)


def check_fully_masked_rows(backend_name: str) -> None:
    backend = BACKENDS[backend_name]
    _skip_unless_runs(backend_name, torch.float32)
    for kind, q, k, v, mask, hidden in _fully_masked_cases():
        name = f"fully_masked_row[backend={backend_name},mask={kind}]"
        ok, reason = supports(backend, DEVICE, mask.features)
        if not ok:
            record(name, f"not supported: {reason}")
            continue
        if backend_name in COMPILED_SHAPES_ONLY and kind == "causal-bottom-right":
            record(name, f"not run: {COMPILED_SHAPES_ONLY[backend_name]}")
            continue
        out = backend.fn(q, k, v, None, mask)
        rows = out[..., hidden, :]
        seen = "nan" if torch.isnan(rows).all() else "zero" if (rows == 0).all() else "other"
        record(name, seen)
        if backend.fully_masked is not None:
            claim_assert(seen == backend.fully_masked, "a fully masked row differs from the declared convention",
                         backend=backend_name, mask=kind, declared=backend.fully_masked, seen=seen)
        if hidden != slice(None):  # the rows that see keys agree with the reference
            m64 = mask if mask.bias is None else Mask(bias=mask.bias.double())
            ref = attention(q.double(), k.double(), v.double(), mask=m64)
            err = relative_error(out[..., 8:, :], ref[..., 8:, :])
            # float32 over <= 40 keys and 16 dims: a few dozen roundings of 6e-8 each; 1e-5 is ~80 float32 epsilons
            claim_assert(err <= 1e-5, "rows with allowed keys are wrong next to fully masked rows",
                         backend=backend_name, mask=kind, relative_error=err)


@pytest.mark.claim("flash-attention.snippet-flash-attn-func-causal-attention")
@pytest.mark.parametrize("n_q,n_k", [(7, 7), (5, 9), (9, 5)])
def test_causal_alignments_agree_exactly_when_query_and_key_lengths_match(n_q, n_k):
    """flash_attn_func(causal=True) aligns the mask bottom-right (flash-attn >= 2.1), SDPA's is_causal
    top-left: the same mask for self-attention (n_q = n_k), different ones otherwise (recorded)."""
    gen = torch.Generator().manual_seed(n_q * 16 + n_k)
    q, k, v = (torch.randn((1, 2, n, 8), generator=gen, dtype=torch.float64) for n in (n_q, n_k, n_k))
    top_left = attention(q, k, v, mask=Mask(causal="top-left"))
    bottom_right = attention(q, k, v, mask=Mask(causal="bottom-right"))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    same = torch.equal(top_left.nan_to_num(), bottom_right.nan_to_num())
    record(f"causal alignments agree [n_q={n_q}, n_k={n_k}]", same)
    # two float64 evaluations of the same masked formula: sums of <= 9 keys and 8 dims, a few dozen eps at most
    claim_assert(relative_error(sdpa, top_left) <= 1e-12, "SDPA's is_causal is not top-left aligned", n_q=n_q, n_k=n_k)
    claim_assert(same == (n_q == n_k), "top-left and bottom-right alignment agree exactly when n_q = n_k",
                 n_q=n_q, n_k=n_k, agree=same)
