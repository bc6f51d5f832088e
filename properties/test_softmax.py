"""Softmax: the stability passage of the foundations document (lines 71-101)."""
import functools
import math
import textwrap

import pytest
import sympy as sp
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, refutes
from claimcheck.snippets import SnippetRun, base_namespace, execute, project_root, run_snippet
from claimcheck.sources import load_sources
from impl.softmax import naive_softmax, shifted_exponents, stable_softmax
from properties.strategies import finite_floats, logit_matrices, logit_vectors

EPS64 = 2.0**-52


def _softmax_plus_one(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x_i) / (1 + sum_j exp(x_j))`` ("softmax_1", an implicit zero logit), computed shifted by max(max x, 0)."""
    m = x.amax(dim=dim, keepdim=True).clamp(min=0)
    e = torch.exp(x - m)
    return e / (torch.exp(-m) + e.sum(dim=dim, keepdim=True))


def _flipped_shift_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x_i + max x) / sum_j exp(x_j + max x)``: the stable form with the shift's sign flipped."""
    e = torch.exp(x + x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@pytest.mark.claim("softmax.shift-invariance")
@pytest.mark.parametrize("extra", [pytest.param(0, id="softmax"), pytest.param(
    1, id="plus-one",
    marks=control("softmax_1, exp(x_i) / (1 + sum_j exp(x_j)): the implicit zero logit is not shifted"))])
def test_softmax_shift_invariance_symbolically(extra):
    n = 4
    x = sp.symbols(f"x0:{n}", real=True)
    c = sp.Symbol("c", real=True)
    for i in range(n):
        lhs = sp.exp(x[i] + c) / (extra + sum(sp.exp(xj + c) for xj in x))
        rhs = sp.exp(x[i]) / (extra + sum(sp.exp(xj) for xj in x))
        claim_assert(sp.simplify(lhs - rhs) == 0, "softmax(x + c) != softmax(x) symbolically", i=i)


@pytest.mark.claim("softmax.shift-invariance")
@pytest.mark.parametrize("softmax", [pytest.param(stable_softmax, id="stable"), pytest.param(
    _softmax_plus_one, id="plus-one", marks=control("softmax_1, exp(x_i) / (1 + sum_j exp(x_j)): not shift-invariant"))])
@given(x=logit_vectors(bound=300.0), c=finite_floats(300.0))
# a witness where softmax_1 moves (1/3 against e / (1 + 2e)): random logits far above 0 make its extra zero
# logit negligible, so without it the control rejects its variant only by luck
@example(x=torch.zeros(2, dtype=torch.float64), c=1.0)
def test_softmax_is_invariant_to_adding_a_constant(softmax, x, c):
    # Rounding x + c moves each logit by at most ulp(600) ~ 600*eps; exp turns that into the same
    # relative error, so probabilities (<= 1) may differ by at most ~2 * 600 * eps: bound 4 * 600 * eps.
    diff = (softmax(x + c) - softmax(x)).abs().max().item()
    claim_assert(diff <= 4 * 600 * EPS64, "softmax(x + c) differs from softmax(x)", x=x, c=c, diff=diff)


@pytest.mark.claim("softmax.exponents-in-unit-interval")
@refutes()
@given(x=logit_vectors(min_len=2, bound=1e3))
def test_shifted_exponents_lie_in_open_closed_unit_interval(x):
    e = shifted_exponents(x)
    claim_assert(bool(((e > 0) & (e <= 1)).all()), "some exp(x_i - max x) is not in (0, 1]", x=x, exponents=e)


@pytest.mark.claim("softmax.exponents-in-unit-interval")
@given(x=logit_vectors(min_len=1, bound=1e30), dtype=st.sampled_from([torch.float64, torch.float32]))
def test_shifted_exponents_lie_in_closed_unit_interval_with_max_exactly_one(x, dtype):
    x = x.to(dtype)
    assume(torch.isfinite(x).all() and torch.isfinite(x - x.max()).all())
    e = shifted_exponents(x)
    claim_assert(bool(((e >= 0) & (e <= 1)).all()), "exp(x - max x) left [0, 1]", x=x, exponents=e)
    claim_assert(e.max().item() == 1.0, "the maximal logit's exponent is not exactly 1", x=x)
    claim_assert(bool(torch.isfinite(stable_softmax(x)).all()), "stable softmax is not finite", x=x)


def _exponents_kept_in_open_unit_interval(x: torch.Tensor) -> torch.Tensor:
    """``exp(x - max x)`` held in (0, 1] as line 87 states: never below the smallest positive subnormal."""
    return shifted_exponents(x).clamp(min=torch.finfo(x.dtype).smallest_normal * torch.finfo(x.dtype).eps)


@pytest.mark.claim("softmax.exponents-in-unit-interval")
@pytest.mark.parametrize("exponents", [pytest.param(shifted_exponents, id="computed"), pytest.param(
    _exponents_kept_in_open_unit_interval, id="open-interval",
    marks=control("exponents that stay in (0, 1] as line 87 says, never underflowing to 0",
                  models="softmax.exponents-in-unit-interval"))])
@pytest.mark.parametrize("dtype, smallest_subnormal_exponent", [(torch.float64, -1074), (torch.float32, -149)])
def test_shifted_exponents_underflow_to_zero_exactly_below_ln_of_half_the_smallest_subnormal(
        exponents, dtype, smallest_subnormal_exponent):
    # exp(t) rounds to 0 exactly when it falls below half the smallest subnormal 2^e, i.e. t < (e - 1) ln 2:
    # -745.13 in float64, -103.97 in float32. Probe 1e-3 on either side of that edge.
    edge = (smallest_subnormal_exponent - 1) * math.log(2.0)
    above, below = (exponents(torch.tensor([0.0, t], dtype=dtype))[1].item() for t in (edge + 1e-3, edge - 1e-3))
    claim_assert(above > 0 and below == 0.0, "exp(x_i - max x) does not underflow to 0 at (e - 1) ln 2",
                 dtype=str(dtype), edge=edge, just_above=above, just_below=below)


@pytest.mark.claim("softmax.naive-overflow")
@pytest.mark.parametrize("stable_form", [pytest.param(stable_softmax, id="max-subtracted"), pytest.param(
    _flipped_shift_softmax, id="max-added",
    marks=control("the shift's sign flipped: exp(x_i + max x) / sum_j exp(x_j + max x)"))])
@given(x=logit_vectors(min_len=1, bound=1e4), big=st.floats(710.0, 1e4))
def test_naive_softmax_overflows_where_the_stable_form_does_not(stable_form, x, big):
    # exp overflows float64 above ln(DBL_MAX) = 709.78: the naive quotient becomes inf/inf = nan.
    x = torch.cat([x, torch.tensor([big], dtype=torch.float64)])
    naive, stable = naive_softmax(x), stable_form(x)
    claim_assert(not torch.isfinite(naive).all(), "the naive form did not overflow", x=x)
    # n probabilities sum to 1 within (2 n - 1) u: the normalising sum, the divisions, the final sum
    claim_assert(bool(torch.isfinite(stable).all()) and abs(stable.sum().item() - 1) <= 2 * len(x) * EPS64,
                 "the stable form is not a finite distribution", x=x, stable=stable)


@pytest.mark.claim("softmax.naive-underflow")
@pytest.mark.parametrize("stable_form", [pytest.param(stable_softmax, id="max-subtracted"), pytest.param(
    naive_softmax, id="no-shift", marks=control("the max-subtraction dropped: the naive form taken for the stable one"))])
@given(x=logit_vectors(min_len=1, bound=1e4).map(lambda t: t.abs() * -1 - 746.0))
def test_naive_softmax_underflows_to_nan_when_every_logit_is_very_negative(stable_form, x):
    # exp(t) rounds to 0 in float64 for t < -745.13, so the naive form divides 0 by 0.
    claim_assert(bool(torch.isnan(naive_softmax(x)).all()), "the naive form did not underflow", x=x)
    stable = stable_form(x)
    # as above: (2 n - 1) u
    claim_assert(abs(stable.sum().item() - 1) <= 2 * len(x) * EPS64, "the stable form failed", x=x)


@pytest.mark.claim("softmax.row-stochastic")
@pytest.mark.parametrize("softmax", [pytest.param(stable_softmax, id="rows"), pytest.param(
    functools.partial(stable_softmax, dim=-2), id="columns", marks=control("normalised over the other axis (dim=-2): "
                                                                           "columns, not rows, sum to 1"))])
@given(s=logit_matrices())
def test_softmax_rows_are_nonnegative_and_sum_to_one(softmax, s):
    a = softmax(s)
    n = s.shape[-1]
    # summing n terms in [0, 1] errs by at most (n - 1) eps; the division adds one more rounding.
    row_err = (a.sum(-1) - 1).abs().max().item()
    claim_assert(bool((a >= 0).all()), "a softmax entry is negative", s=s)
    claim_assert(row_err <= 2 * n * EPS64, "a softmax row does not sum to 1", s=s, row_error=row_err)


# ---- the definition and the printed helper (foundations.txt lines 48-52, 75-102) --------------------


def _base_two_softmax(x: torch.Tensor) -> torch.Tensor:
    """``2^x_i / sum_j 2^x_j``: the exp2 form without the rescaling of x by 1 / ln 2."""
    e = torch.exp2(x)
    return e / e.sum(dim=-1, keepdim=True)


@pytest.mark.claim("softmax.definition-vector")
@pytest.mark.parametrize("formula_of", [pytest.param(naive_softmax, id="exp"), pytest.param(
    _base_two_softmax, id="exp2", marks=control("base 2 for base e: 2^x_i / sum_j 2^x_j without the 1 / ln 2 rescaling"))])
@given(x=logit_vectors(bound=50.0))
def test_softmax_formula_agrees_with_torch_and_the_stable_form(formula_of, x):
    # |x| <= 50: no overflow or underflow in float64; n terms of the denominator, one division and exp's
    # own rounding give at most (n + 2) eps relative error per probability
    formula, builtin = formula_of(x), torch.softmax(x, dim=-1)
    err = max((formula - builtin).abs().max().item(), (formula - stable_softmax(x)).abs().max().item())
    claim_assert(err <= 2 * (len(x) + 2) * EPS64, "exp(x_i) / sum_j exp(x_j) differs from softmax", x=x, error=err)


@pytest.mark.claim("softmax.row-wise-normalization-formula")
@refutes()
@given(s=logit_matrices(max_rows=3, max_cols=3, bound=8.0), d_k=st.integers(2, 64))
def test_row_formula_on_unscaled_scores_gives_the_attention_matrix(s, d_k):
    """Line 52 exponentiates S_ij although line 48 defines A = softmax(S_scaled), S_scaled = S / sqrt(d_k)."""
    printed = torch.exp(s) / torch.exp(s).sum(dim=-1, keepdim=True)
    a = torch.softmax(s / math.sqrt(d_k), dim=-1)
    # equal matrices would agree to (n + 2) eps (as below); rtol 1e-9 is generous, the shrunk example differs by 0.06
    claim_assert(torch.allclose(printed, a, rtol=1e-9, atol=1e-12),
                 "exp(S_ij) / sum_k exp(S_ik) is not softmax(S / sqrt(d_k))", s=s, d_k=d_k, printed=printed, attention=a)


@pytest.mark.claim("softmax.row-wise-normalization-formula")
@pytest.mark.parametrize("exponent_of", [pytest.param(lambda s, d_k: s / math.sqrt(d_k), id="scaled"), pytest.param(
    lambda s, d_k: s, id="unscaled-line-52",
    marks=control("line 52 as printed: exp(S_ij) / sum_k exp(S_ik), the 1 / sqrt(d_k) dropped",
                  models="softmax.row-wise-normalization-formula"))])
@given(s=logit_matrices(bound=50.0), d_k=st.integers(1, 64))
@example(s=torch.tensor([[0.0, 1.0]], dtype=torch.float64), d_k=2)  # the correction's example: 0.269 against 0.330
def test_row_formula_on_scaled_scores_is_row_stochastic_and_gives_the_attention_matrix(exponent_of, s, d_k):
    scaled = s / math.sqrt(d_k)
    e = torch.exp(exponent_of(s, d_k))
    a = e / e.sum(dim=-1, keepdim=True)  # A_ij = exp(S_ij/sqrt d_k) / sum_k ...
    n = s.shape[-1]
    # (n + 2) roundings per entry, as above
    err = (a - stable_softmax(scaled)).abs().max().item()
    claim_assert(err <= 2 * (n + 2) * EPS64 and bool((a >= 0).all()) and (a.sum(-1) - 1).abs().max() <= 2 * n * EPS64,
                 "the scaled row formula is not the row-stochastic attention matrix", s=s, d_k=d_k, error=err)


@functools.cache  # one execution of the snippet per process
def _printed_stable_softmax():
    """``stable_softmax`` as defined by foundations.txt lines 94-99 (line 102, after it, raises NameError)."""
    run = run_snippet("softmax.snippet-stable-softmax")
    assert "stable_softmax" in run.namespace, run.describe()  # a crash of the evidence, not a counterexample
    return run.namespace["stable_softmax"]


@pytest.mark.claim("softmax.stable-softmax-matches-torch-and-no-overflow")
@pytest.mark.parametrize("printed_of", [pytest.param(_printed_stable_softmax, id="printed"), pytest.param(
    lambda: naive_softmax, id="no-shift",
    marks=control("the printed function without its max-subtraction: exp(x) / sum exp(x)"))])
@given(x=logit_matrices(bound=1e4), dim=st.sampled_from([0, -1]), dtype=st.sampled_from([torch.float64, torch.float32]))
def test_printed_stable_softmax_matches_torch_softmax_even_where_exp_overflows(printed_of, x, dim, dtype):
    printed = printed_of()(x.to(dtype), dim=dim)
    builtin = torch.softmax(x.to(dtype), dim=dim)
    eps = torch.finfo(dtype).eps
    # the same algorithm as torch's: differences come from summation order, (n + 2) eps per probability
    err = (printed.double() - builtin.double()).abs().max().item()
    claim_assert(bool(torch.isfinite(printed).all()) and err <= 2 * (x.shape[dim] + 2) * eps,
                 "the printed stable_softmax is not finite or differs from torch.softmax", x=x, dim=dim,
                 dtype=str(dtype), error=err, naive_finite=bool(torch.isfinite(naive_softmax(x.to(dtype), dim)).all()))


@pytest.mark.claim("softmax.torch-builtin-softmax-is-stable")
@pytest.mark.parametrize("softmax", [pytest.param(torch.softmax, id="torch"), pytest.param(
    naive_softmax, id="naive", marks=control("an unshifted exp(x) / sum exp(x) in place of torch.softmax"))])
@given(x=logit_vectors(bound=1e30), dtype=st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16]))
def test_torch_softmax_is_finite_and_exact_for_huge_and_tiny_logits(softmax, x, dtype):
    x = x.to(dtype)
    assume(bool(torch.isfinite(x).all()))
    probs = softmax(x, dim=-1)
    exact = stable_softmax(x.double())  # float64 oracle of the rounded inputs (itself max-subtracted)
    # float16/bfloat16 softmax on CPU computes in float32 and rounds once; float32/64: (n + 2) eps
    eps = torch.finfo(dtype).eps
    err = (probs.double() - exact).abs().max().item()
    claim_assert(bool(torch.isfinite(probs).all()) and err <= 2 * (len(x) + 2) * eps,
                 "torch.softmax overflowed or lost accuracy", x=x, dtype=str(dtype), error=err)


@pytest.mark.claim("softmax.snippet-stable-softmax")
@pytest.mark.parametrize("edit", [
    pytest.param(None, id="printed"),
    pytest.param(("exp_logits.sum(dim=dim, keepdim=True)", "exp_logits.sum(dim=0, keepdim=True)"), id="mutant",
                 marks=control("the printed code normalising by column sums instead of along dim",
                                 models="softmax.snippet-stable-softmax")),
])
@given(logits=logit_matrices())
@example(logits=torch.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=torch.float64))
def test_printed_snippet_runs_once_the_reader_supplies_logits(edit, logits):
    # the correction: with the reader's `logits` bound, lines 91-102 run; stable_softmax (lines 94-99) is softmax
    # along dim and line 102 computes probs = F.softmax(logits, dim=-1)
    doc = load_sources(project_root())["foundations"]
    code = textwrap.dedent(doc.line_range(91, 102))
    if edit:
        premise(code.count(edit[0]) == 1, "the text the mutant replaces does not occur once", old=edit[0])
        code = code.replace(*edit)
    run = execute(SnippetRun("foundations", 91, 102, code, namespace={**base_namespace(), "logits": logits}),
                  filename="sources/foundations.txt")
    claim_assert(run.ran, "the snippet does not run with logits defined", snippet=run.describe())
    reference = torch.softmax(logits, dim=-1)  # float64, an implementation sharing no code with the snippet
    out = run.namespace["stable_softmax"](logits)
    # float64: a max, n exponentials and a sum of n terms, then a division: (n + 2) roundings; twice that
    tol = 2 * (logits.shape[-1] + 2) * 2.0**-52
    claim_assert(out.shape == logits.shape and (out - reference).abs().max().item() <= tol,
                 "the printed stable_softmax is not softmax along dim", logits=logits, out=out, reference=reference)
    claim_assert(torch.equal(run.namespace["probs"], reference), "line 102 does not compute F.softmax(logits, dim=-1)",
                 probs=run.namespace["probs"])
