"""Eigenvalues of softmax attention matrices: Perron-Frobenius and the spectral gap.

spectral.txt lines 30-57 and 89-93, 637-638; linear-algebra.txt lines 82-112; index.txt line 112.
A softmax attention matrix is strictly positive and row-stochastic, so (Perron-Frobenius; Horn &
Johnson, *Matrix Analysis*, Thm. 8.2.8 and 8.4.4) 1 is a simple eigenvalue with RIGHT eigenvector
the all-ones vector, every other eigenvalue has modulus < 1, and the LEFT eigenvector is the
stationary distribution pi, which is not uniform unless A is doubly stochastic.
"""
import functools
import math

import pytest
import sympy as sp
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes
from impl.critical_scaling import row_entropy
from impl.softmax import stable_softmax
from impl.spectral import (effective_rank, eigenvalue_gap, eigenvalues, marchenko_pastur_edges, stable_rank,
                           stationary_distribution)
from properties.strategies.spectral import attention_matrices, gaussian, real_matrices

EPS64 = 2.0**-52
# Eigenvalues of a non-normal matrix are computed with error up to O(sqrt(eps)) ~ 1.5e-8 near a
# (nearly) defective eigenvalue (Wilkinson, The Algebraic Eigenvalue Problem, ch. 2): allow 1e-6.
EIG_TOL = 1e-6


def _plain(ev: torch.Tensor) -> torch.Tensor:
    """Complex eigenvalues as (re, im) rows, for the JSON record of a counterexample."""
    return torch.view_as_real(ev.resolve_conj())


def _causal_softmax(s: torch.Tensor, softmax=stable_softmax) -> torch.Tensor:
    n = s.shape[-1]
    return softmax(s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf")))


def _unnormalised_softmax(s: torch.Tensor) -> torch.Tensor:
    """``exp(s_ij - max_j s_ij)``: softmax with its normalisation dropped (negative controls)."""
    return torch.exp(s - s.amax(-1, keepdim=True))


# negative controls shared by several tests: each a plausible bug in the object the claim is about
_COLUMN_SOFTMAX = pytest.param(functools.partial(stable_softmax, dim=-2), id="columns", marks=control(
    "normalised over the other axis (dim=-2): columns, not rows, sum to 1"))
_UNNORMALISED = pytest.param(_unnormalised_softmax, id="unnormalised", marks=control(
    "the normalisation dropped: exp(s_ij - max_j s_ij), not divided by its row sum"))


@pytest.mark.claim("spectral.la-obs1-attention-row-stochastic", "spectral.la-obs1-rowsum-one-nonneg-formula",
                   "spectral.index-softmax-attention-is-row-stochastic", "spectral.la-obs1-attention-is-markov-transition",
                   "spectral.la-summary-three-structures-row-stochastic", "spectral.la-pf-attention-row-stochastic-premise")
@pytest.mark.parametrize("softmax", [pytest.param(stable_softmax, id="rows"), _COLUMN_SOFTMAX])
@given(s=real_matrices(1, 10, 30.0, square=True))
def test_softmax_attention_is_a_positive_row_stochastic_matrix(softmax, s):
    a, causal = softmax(s), _causal_softmax(s, softmax)
    n = s.shape[0]
    # n probabilities, each rounded once, sum with error at most ~ n eps
    claim_assert((a.sum(-1) - 1).abs().max() <= 2 * n * EPS64 and (causal.sum(-1) - 1).abs().max() <= 2 * n * EPS64,
                 "a row does not sum to 1", s=s)
    claim_assert(bool((causal >= 0).all()), "a causal attention weight is negative", s=s)
    # logit differences of at most 60 keep every weight >= e^-60 / n, far above float64 underflow:
    # the unmasked matrix is strictly positive, hence irreducible and primitive (Perron-Frobenius applies)
    claim_assert(bool((a > 0).all()), "an unmasked softmax weight is not strictly positive", s=s)


@pytest.mark.claim("spectral.la-obs1-attention-row-stochastic", "spectral.row-stochastic-eigenvalue-one",
                   "spectral.la-pf-attention-approximates-stochastic-matrix")
@pytest.mark.parametrize("extra", [pytest.param(0, id="softmax"), pytest.param(1, id="plus-one", marks=control(
    "softmax_1, exp(x_i) / (1 + sum_j exp(x_j)): an implicit zero logit takes part of each row's mass, leaving a "
    "matrix that only approximates a stochastic one; the row-sum check must reject it",
    models=["spectral.la-pf-attention-approximates-stochastic-matrix"]))])
def test_softmax_rows_sum_to_one_symbolically(extra):
    x = sp.symbols("x0:4", real=True)
    row = [sp.exp(xi) / (extra + sum(sp.exp(xj) for xj in x)) for xi in x]
    claim_assert(sp.simplify(sum(row) - 1) == 0, "a symbolic softmax row does not sum to 1: A 1 != 1")


@pytest.mark.claim("spectral.la-pf-attention-approximates-stochastic-matrix")
@refutes(reason="a symbolic softmax row over four real logits; 'an approximation of a stochastic matrix' read as a "
                "matrix that is close to, but not itself, stochastic")
def test_attention_is_only_an_approximation_of_a_stochastic_matrix():
    x = sp.symbols("x0:4", real=True)
    gap = sp.simplify(sum(sp.exp(xi) / sum(sp.exp(xj) for xj in x) for xi in x) - 1)
    claim_assert(gap != 0, "softmax rows are positive and sum to exactly 1: attention is a stochastic matrix, not an "
                 "approximation of one", row_sum_minus_one=str(gap))


@pytest.mark.claim("spectral.row-stochastic-eigenvalue-one", "spectral.la-pf-row-stochastic-top-eigenvalue-one",
                   "spectral.row-stochastic-perron-vector-all-ones", "spectral.principal-direction-is-uniform",
                   "spectral.la-pf-left-eigenvector-all-ones")
@pytest.mark.parametrize("side", [pytest.param("right", id="right"), pytest.param("left", id="left", marks=control(
    "the transpose: 1 taken as a LEFT eigenvector, 1^T A = 1^T (column sums), which needs A doubly stochastic",
        models=["spectral.row-stochastic-perron-vector-all-ones", "spectral.la-pf-left-eigenvector-all-ones",
                "spectral.principal-direction-is-uniform"]))])
@given(a=attention_matrices(1, 10))
def test_all_ones_is_a_right_eigenvector_for_eigenvalue_one(side, a):
    n = a.shape[0]
    v1 = torch.ones(n, dtype=torch.float64) / math.sqrt(n)
    residual = ((a if side == "right" else a.T) @ v1 - v1).abs().max().item()
    # rows sum to 1 within (2 n - 1) u (normalisation, then the n-term product sum), times 1/sqrt(n), and v_1's rounding
    claim_assert(residual <= 2 * n * EPS64, "A v_1 != v_1 for v_1 = 1/sqrt(n)", a=a, residual=residual)


@pytest.mark.claim("spectral.row-stochastic-eigenvalue-one", "spectral.la-pf-row-stochastic-top-eigenvalue-one",
                   "spectral.row-stochastic-eigenvalue-modulus-le-one", "spectral.la-pf-other-eigenvalues-modulus-le-one",
                   "spectral.attention-eigenvalues-nonnegative-real-part", "spectral.training-early-lambda1-about-1-over-n",
                   "spectral.training-mid-lambda1-half", "spectral.training-late-lambda1-0-9",
                   "spectral.principal-direction-is-uniform")
@pytest.mark.parametrize("softmax, lambda1", [
    pytest.param(stable_softmax, None, id="softmax"), pytest.param(_unnormalised_softmax, None, id="unnormalised",
                                                                   marks=_UNNORMALISED.marks),
    pytest.param(stable_softmax, lambda n: 1 / n, id="printed-early", marks=control(
        "line 91's early-training lambda_1 ~ 1/n in place of the computed one: the lambda_1 = 1 check must reject it",
        models=["spectral.training-early-lambda1-about-1-over-n"])),
    pytest.param(stable_softmax, lambda n: 0.5, id="printed-mid", marks=control(
        "line 92's mid-training lambda_1 ~ 0.5 in place of the computed one: the lambda_1 = 1 check must reject it",
        models=["spectral.training-mid-lambda1-half"])),
    pytest.param(stable_softmax, lambda n: 0.9, id="printed-late", marks=control(
        "line 93's late-training lambda_1 ~ 0.9 in place of the computed one: the lambda_1 = 1 check must reject it",
        models=["spectral.training-late-lambda1-0-9"]))])
@given(s=real_matrices(1, 10, 8.0, square=True), causal=st.booleans())
def test_spectral_radius_of_attention_is_exactly_one(softmax, lambda1, s, causal):
    a = _causal_softmax(s, softmax) if causal else softmax(s)
    ev = eigenvalues(a)
    if lambda1 is not None:  # a control: the document's lambda_1 for this stage put first
        ev = torch.cat([torch.tensor([lambda1(a.shape[0])], dtype=ev.dtype), ev[1:]])
    claim_assert(abs(ev[0].abs().item() - 1) <= EIG_TOL, "the largest |eigenvalue| is not 1", a=a, eigenvalues=_plain(ev))
    claim_assert(bool((ev.abs() <= 1 + EIG_TOL).all()), "an eigenvalue lies outside the unit disk", a=a, eigenvalues=_plain(ev))
    # the infinity norm (max row sum of |A|) bounds the spectral radius and equals 1 exactly here (up to the rows'
    # (2 n - 1) u: normalisation and the n-term sum)
    claim_assert(abs(a.abs().sum(-1).max().item() - 1) <= 2 * a.shape[0] * EPS64, "||A||_inf != 1", a=a)


@pytest.mark.claim("spectral.la-pf-left-eigenvector-all-ones")
@refutes()
@given(a=attention_matrices(2, 6))
def test_all_ones_is_a_left_eigenvector(a):
    col = a.sum(0)
    # 1e-9 is far above the n eps rounding of a column sum: a loose tolerance can only favour the claim
    claim_assert((col - 1).abs().max() <= 1e-9, "1^T A != 1^T: the column sums are not all 1", a=a, column_sums=col)


@pytest.mark.claim("spectral.la-pf-left-eigenvector-all-ones")
@given(a=attention_matrices(1, 8, bound=4.0))
def test_left_perron_vector_is_the_stationary_distribution(a):
    pi = stationary_distribution(a)
    n = a.shape[0]
    # LAPACK's eigenvector is backward stable: with sum(pi) = 1 the residual of pi^T A = pi^T is O(n eps); allow 64 n eps
    tol = 64 * n * EPS64
    claim_assert(bool((pi >= -tol).all()) and (pi @ a - pi).abs().max() <= tol,
                 "pi is not a nonnegative left eigenvector for eigenvalue 1", a=a, pi=pi)


@pytest.mark.claim("spectral.attention-eigenvalues-nonnegative-real-part")
@refutes()
@given(a=attention_matrices(1, 6))
def test_attention_eigenvalues_have_nonnegative_real_part(a):
    ev = eigenvalues(a)
    claim_assert(bool((ev.real >= -EIG_TOL).all()), "an eigenvalue has negative real part", a=a, eigenvalues=_plain(ev))


@pytest.mark.claim("spectral.attention-eigenvalues-nonnegative-real-part")
@pytest.mark.parametrize("spectrum_of", [pytest.param(eigenvalues, id="eigenvalues"), pytest.param(
    lambda a: eigenvalues(a).real.clamp(min=0).to(torch.complex128), id="nonnegative-real-part", marks=control(
        "line 35's spectrum, real parts >= 0 (negative real parts clipped to 0): the check of the eigenvalue 1 - 2p "
        "must reject it for p > 1/2", models=["spectral.attention-eigenvalues-nonnegative-real-part"]))])
@example(p=0.9)  # the correction's A = [[0.1, 0.9], [0.9, 0.1]]: eigenvalues 1 and -0.8
@given(p=st.floats(1e-3, 1 - 1e-3))
def test_two_token_attention_has_eigenvalues_one_and_one_minus_two_p(spectrum_of, p):
    # A = [[1 - p, p], [p, 1 - p]] = softmax([[0, l], [l, 0]]), l = ln(p / (1 - p)): eigenvectors (1, 1), (1, -1)
    a = torch.tensor([[1 - p, p], [p, 1 - p]], dtype=torch.float64)
    ev = spectrum_of(a)
    got = sorted(ev.real.tolist(), reverse=True)
    # a symmetric 2 x 2 matrix: eigenvalues to a few eps; EIG_TOL is far wider
    claim_assert(ev.imag.abs().max().item() <= EIG_TOL and abs(got[0] - 1) <= EIG_TOL and abs(got[1] - (1 - 2 * p))
                 <= EIG_TOL, "the eigenvalues of [[1 - p, p], [p, 1 - p]] are not 1 and 1 - 2p", p=p,
                 eigenvalues=_plain(ev))


@pytest.mark.claim("spectral.attention-eigenvalue-sum-equals-trace")
@pytest.mark.parametrize("sign", [pytest.param(-1, id="minus"), pytest.param(1, id="plus", marks=control(
    "the other sign: the lam^(n-1) coefficient of det(lam I - A) itself, -tr A, taken for the eigenvalue sum"))])
def test_sum_of_eigenvalues_is_the_trace_symbolically(sign):
    entries = sp.Matrix(3, 3, sp.symbols("a0:9"))
    lam = sp.Symbol("lam")
    poly = sp.Poly(entries.charpoly(lam).as_expr(), lam)
    # det(lam I - A) = prod (lam - lambda_i): minus the lam^2 coefficient is sum_i lambda_i
    claim_assert(sp.expand(sign * poly.coeff_monomial(lam**2) - entries.trace()) == 0, "sum of eigenvalues != tr A")


@pytest.mark.claim("spectral.attention-eigenvalue-sum-equals-trace", "spectral.attention-eigenvalue-sum-equals-n")
@pytest.mark.parametrize("spectrum", [pytest.param(eigenvalues, id="eigenvalues"), pytest.param(
    lambda a: torch.linalg.svdvals(a).to(torch.complex128), id="singular-values", marks=control(
        "singular values summed for eigenvalues (the nuclear norm, >= |tr A|, equal only for a PSD A)",
            models="spectral.attention-eigenvalue-sum-equals-trace")), pytest.param(
    lambda a: torch.ones(a.shape[0], dtype=torch.complex128), id="sum-n", marks=control(
        "the line's eigenvalue sum n (n eigenvalues 1) in place of the computed spectrum: the trace check must reject it, "
        "tr A < n for n >= 2", models="spectral.attention-eigenvalue-sum-equals-n"))])
@example(a=stable_softmax(torch.zeros(2, 2, dtype=torch.float64)))  # n = 2, tr A = 1: the smallest case below n
@given(a=attention_matrices(1, 10))
def test_eigenvalues_sum_to_the_trace_which_is_below_n(spectrum, a):
    n = a.shape[0]
    total = spectrum(a).sum()
    # computed eigenvalues are exact for some A + E with ||E||_2 <= c n eps ||A||_2 (||A||_2 <= sqrt n here), and
    # |tr E| <= n ||E||_2: allow 16 n^2 eps
    tol = 16 * n * n * EPS64
    claim_assert(abs(total.real.item() - a.trace().item()) <= tol and abs(total.imag.item()) <= tol,
                 "sum of eigenvalues != trace", a=a, eigenvalue_sum=_plain(total), trace=a.trace())
    claim_assert(0 < a.trace().item() <= n and (n == 1 or a.trace().item() < n),
                 "tr A is not in (0, n) for n >= 2", a=a, trace=a.trace())


@pytest.mark.claim("spectral.attention-eigenvalue-sum-equals-n")
@refutes()
@given(a=attention_matrices(1, 8))
def test_eigenvalues_of_attention_sum_to_n(a):
    total = eigenvalues(a).sum().real.item()
    # a loose tolerance (1e-9, far above rounding) can only favour the claim
    claim_assert(abs(total - a.shape[0]) <= 1e-9, "the eigenvalues do not sum to n", a=a, eigenvalue_sum=total,
                 n=a.shape[0])


_STAGES = {  # n = 4: a representative attention matrix of each printed stage
    "uniform (early training, rank collapse)": lambda: stable_softmax(torch.zeros(4, 4, dtype=torch.float64)),
    "random logits (mid training)": lambda: stable_softmax(gaussian((4, 4), 46)),
    "sparse: every row on one key (late training)": lambda: _sink(4, 20.0),
}


@pytest.mark.parametrize("stage, printed", [
    pytest.param("uniform (early training, rank collapse)", 1 / 4, marks=pytest.mark.claim(
        "spectral.training-early-lambda1-about-1-over-n", "spectral.rank-collapse-eigenvalues-tend-to-1-over-n",
        "spectral.theorem-7-1-all-eigenvalues-to-1-over-n")),
    pytest.param("random logits (mid training)", 0.5, marks=pytest.mark.claim("spectral.training-mid-lambda1-half")),
    pytest.param("sparse: every row on one key (late training)", 0.9, marks=pytest.mark.claim(
        "spectral.training-late-lambda1-0-9")),
])
@refutes(reason="n = 4, one matrix of the state each printed value describes (uniform attention early and under "
                "rank collapse, random logits mid-training, every row on one key late); lambda_1 = 1 for every "
                "row-stochastic matrix, so one matrix per stage decides")
def test_largest_attention_eigenvalue_takes_the_printed_values(stage, printed):
    a = _STAGES[stage]()
    lam1 = eigenvalues(a)[0]
    record(f"lambda_1 ({stage})", [lam1.real.item(), lam1.imag.item()])
    # '~' read as within 0.05: lambda_1 = 1 misses each printed value (1/4, 0.5, 0.9) by at least 0.1
    claim_assert(abs(lam1.item() - printed) <= 0.05, "lambda_1 is not the printed value", stage=stage, printed=printed,
                 lambda_1=_plain(lam1))


@pytest.mark.claim("spectral.spectral-gap-definition")
@refutes()
@given(a=attention_matrices(3, 6))
def test_spectral_gap_one_minus_lambda2_is_a_real_number(a):
    ev = eigenvalues(a)
    # a real lambda_2 next to another real eigenvalue can come back as a complex pair with imaginary part up to
    # O(sqrt eps) (nearly defective): only an imaginary part beyond EIG_TOL counts (0.18 in the shrunk example)
    claim_assert(abs(ev[1].imag.item()) <= EIG_TOL, "lambda_2 (second largest modulus) is not real, so 1 - lambda_2 "
                 "is not a real gap", a=a, eigenvalues=_plain(ev))


@pytest.mark.claim("spectral.spectral-gap-definition")
@pytest.mark.parametrize("gap_of", [pytest.param(eigenvalue_gap, id="absolute"), pytest.param(
    lambda a: 1 - eigenvalues(a)[1], id="one-minus-lambda2", marks=control(
        "Definition 2.1 as printed, 1 - lambda_2 with lambda_2 complex or negative: the real-gap check must reject it",
        models=["spectral.spectral-gap-definition"]))])
@example(a=torch.tensor([[0.1, 0.9], [0.9, 0.1]], dtype=torch.float64))  # lambda_2 = -0.8: 1 - lambda_2 = 1.8
@given(a=attention_matrices(2, 10))
def test_absolute_spectral_gap_is_one_minus_modulus_of_lambda2(gap_of, a):
    ev = eigenvalues(a)
    gap = complex(gap_of(a).item())
    claim_assert(abs(gap.imag) <= EIG_TOL and -EIG_TOL <= gap.real <= 1 + EIG_TOL
                 and abs(gap - (1 - ev[1].abs().item())) <= EIG_TOL,
                 "the gap is not the real number 1 - |lambda_2| in [0, 1]", a=a, gap=gap, eigenvalues=_plain(ev))


def _self_attention(n: int, beta: float) -> torch.Tensor:
    """softmax(beta I): each token attends to itself with weight e^beta / (e^beta + n - 1)."""
    return stable_softmax(beta * torch.eye(n, dtype=torch.float64))


@pytest.mark.claim("spectral.large-gap-near-rank-one", "spectral.small-gap-uniform-attention")
@pytest.mark.parametrize("gap_of", [pytest.param(eigenvalue_gap, id="gap"), pytest.param(
    lambda a: 1 - eigenvalue_gap(a), id="document-order", marks=control(
        "the gap as lines 56-57 order it, small for uniform and large for concentrated attention (1 minus the computed "
        "gap): the gap and uniform-attention checks must reject it",
        models=["spectral.large-gap-near-rank-one", "spectral.small-gap-uniform-attention"]))])
@example(n=2, beta=0.0)  # uniform attention: gap 1, the document's small gap
@given(n=st.integers(2, 12), beta=st.floats(0.0, 30.0))
def test_gap_of_self_attention_is_n_over_exp_beta_plus_n_minus_1(gap_of, n, beta):
    # softmax(beta I) = c I + b J with eigenvalues 1 and c = (e^beta - 1) / (e^beta + n - 1) (n - 1 times),
    # so the gap is n / (e^beta + n - 1): 1 for uniform attention (beta = 0), -> 0 as rows become one-hot
    a = _self_attention(n, beta)
    gap = gap_of(a).item()
    exact = n / (math.exp(beta) + n - 1)
    claim_assert(abs(gap - exact) <= EIG_TOL, "gap differs from n / (e^beta + n - 1)", n=n, beta=beta, gap=gap)
    entropy = row_entropy(a).mean().item()
    # at beta = 0 the rows are 1/n (one rounding): n terms -p log p, each a few roundings, summed: (n + 3) u log n
    claim_assert(beta > 0 or (abs(gap - 1) <= EIG_TOL and abs(entropy - math.log(n)) <= (n + 3) * EPS64 * math.log(n)),
                 "uniform attention should have the largest gap and maximal entropy", gap=gap, entropy=entropy)


@pytest.mark.claim("spectral.large-gap-near-rank-one")
@refutes(reason="uniform attention (all logits 0) on n = 2 tokens: the smallest case with a gap; its gap is the "
                "largest possible (1) and its rows are maximally spread")
def test_large_gap_means_highly_concentrated_attention():
    a = _self_attention(2, 0.0)
    gap, entropy = eigenvalue_gap(a).item(), row_entropy(a).mean().item()
    # "concentrated" read as at most half the maximal entropy; uniform rows have all of it
    claim_assert(entropy <= 0.5 * math.log(2), "the gap is maximal (1) yet attention is uniform, not concentrated",
                 gap=gap, row_entropy=entropy, max_entropy=math.log(2))


@pytest.mark.claim("spectral.small-gap-uniform-attention")
@refutes(reason="self-attention softmax(20 I) on n = 2 tokens, the smallest case: gap n / (e^20 + 1) ~ 4e-9 "
                "while every row is almost one-hot")
def test_small_gap_means_uniform_attention():
    a = _self_attention(2, 20.0)
    gap, entropy = eigenvalue_gap(a).item(), row_entropy(a).mean().item()
    # "uniform" read as at least half the maximal entropy, a gap that is not small as > 0.1: gap 4e-9, entropy 4e-8
    claim_assert(gap > 0.1 or entropy >= 0.5 * math.log(2),
                 "the gap is ~0 yet attention is one-hot, not uniform", gap=gap, row_entropy=entropy)


def _sink(n: int, beta: float) -> torch.Tensor:
    """Every query puts logit beta on key 0 (an attention sink)."""
    s = torch.zeros(n, n, dtype=torch.float64)
    s[:, 0] = beta
    return stable_softmax(s)


@pytest.mark.claim("spectral.attention-sink-lambda1-to-one")
@refutes(reason="n = 3: an attention sink (logit 10 on token 0) and self-attention softmax(10 I), the two "
                "opposite patterns, have the same lambda_1 = 1, so lambda_1 cannot mark a sink")
def test_attention_sink_is_marked_by_lambda1_tending_to_one():
    sink, no_sink = _sink(3, 10.0), _self_attention(3, 10.0)
    l_sink, l_other = eigenvalues(sink)[0].real.item(), eigenvalues(no_sink)[0].real.item()
    # both are exactly 1; a difference within the eigensolver's error EIG_TOL carries no information
    record("|lambda_1(sink) - lambda_1(self-attention)| / EIG_TOL", abs(l_sink - l_other) / EIG_TOL)
    claim_assert(abs(l_sink - l_other) > EIG_TOL, "lambda_1 is the same (1) with and without a sink",
                 lambda1_sink=l_sink, lambda1_self_attention=l_other)


def _sink_weight_first(n: int, beta: float) -> torch.Tensor:
    """The sink's spectrum with lambda_1 replaced by its top weight e^beta / (e^beta + n - 1), which -> 1 (control)."""
    ev = eigenvalues(_sink(n, beta))
    return torch.cat([torch.tensor([math.exp(beta) / (math.exp(beta) + n - 1)], dtype=ev.dtype), ev[1:]])


@pytest.mark.claim("spectral.attention-sink-lambda1-to-one", "spectral.rank-collapse-normalized-eigenvalues-limit")
@pytest.mark.parametrize("spectrum_of", [pytest.param(lambda n, beta: eigenvalues(_sink(n, beta)), id="sink"), pytest.param(
    _sink_weight_first, id="lambda1-tends-to-one", marks=control(
        "line 637's sink: lambda_1 tending to 1 as the sink forms (the top weight e^beta / (e^beta + n - 1) as lambda_1): "
        "the lambda_1 = 1 check must reject it", models=["spectral.attention-sink-lambda1-to-one"])), pytest.param(
    lambda n, beta: eigenvalues(torch.eye(n, dtype=torch.float64)), id="equal-normalised-eigenvalues", marks=control(
        "line 109's collapsed spectrum, every lambda_i / sum_j lambda_j = 1/n (the spectrum of I): the check that the "
        "non-leading eigenvalues vanish must reject it", models=["spectral.rank-collapse-normalized-eigenvalues-limit"]))])
@given(n=st.integers(2, 10), beta=st.floats(0.0, 30.0))
def test_a_sink_drives_the_non_leading_eigenvalues_to_zero(spectrum_of, n, beta):
    # every row of a sink matrix is the same distribution: A = 1 p^T is rank one, eigenvalues {1, 0, ..., 0}
    ev = spectrum_of(n, beta)
    claim_assert(abs(ev[0].abs().item() - 1) <= EIG_TOL and ev[1:].abs().max().item() <= EIG_TOL,
                 "a sink matrix is not rank one with eigenvalues {1, 0, ...}", n=n, beta=beta, eigenvalues=_plain(ev))


def _consensus_error(a: torch.Tensor, k: int, limit=stationary_distribution) -> float:
    pi = limit(a)
    return (torch.linalg.matrix_power(a, k) - torch.ones(a.shape[0], 1, dtype=a.dtype) * pi).abs().max().item()


def _second_modulus(a: torch.Tensor) -> float:
    return eigenvalues(a)[1].abs().item()


@pytest.mark.claim("spectral.la-pf-pagerank-iteration-view", "spectral.consensus-driven-by-dominant-eigenvalue")
@pytest.mark.parametrize("limit, rate_of", [pytest.param(stationary_distribution, _second_modulus, id="pi"), pytest.param(
    lambda a: torch.full((a.shape[0],), 1.0 / a.shape[0], dtype=a.dtype), _second_modulus, id="uniform", marks=control(
        "the limit taken as 1 1^T / n (uniform pi), which holds only for a doubly stochastic A")), pytest.param(
    stationary_distribution, lambda a: eigenvalues(a)[0].abs().item(), id="rate-lambda1", marks=control(
        "line 638's speed: consensus driven by the dominant eigenvalue, |lambda_1| = 1, as the rate: the two-sided rate "
        "check must reject it", models=["spectral.consensus-driven-by-dominant-eigenvalue"]))])
@given(a=attention_matrices(2, 8, bound=2.0))
def test_repeated_attention_converges_to_one_pi_transpose_at_rate_lambda2(limit, rate_of, a):
    # A^k = 1 pi^T + R^k with spectral radius(R) = |lambda_2|; Gelfand: ||R^k||^(1/k) -> |lambda_2|
    lam2 = rate_of(a)
    err = _consensus_error(a, 64, limit)
    # with logits in [-2, 2] every weight is >= e^-4 / n, so |lambda_2| <= 1 - n e^-4 / n < 0.99 and
    # 0.99^64 ~ 0.53; the bound allows the non-normal transient factor n, and 1e-3 is the delta > 0 of Gelfand's
    # ||R^k|| <= C (|lambda_2| + delta)^k (covering lambda_2's eig error too); the floor: pi within 64 n eps (as in
    # the Perron-vector test) and A^64's 6 squarings and 1 product, n eps each
    n = a.shape[0]
    floor = (64 + 8) * n * EPS64
    claim_assert(err <= n * (lam2 + 1e-3) ** 64 + floor, "A^64 is far from 1 pi^T", a=a, error=err, lambda2=lam2)
    # and no faster: R^64 has spectral radius |lambda_2|^64 <= ||R^64||_2 <= n max |entry|
    claim_assert(err >= max(lam2 - 1e-3, 0.0) ** 64 / n - floor, "A^64 approaches 1 pi^T faster than |lambda_2|^64",
                 a=a, error=err, lambda2=lam2)


@pytest.mark.claim("spectral.consensus-driven-by-dominant-eigenvalue")
@refutes(reason="n = 3 uniform attention and softmax(5 I) share the dominant eigenvalue 1 yet reach consensus "
                "at different speeds (exactly vs. slowly): the speed is |lambda_2|, not lambda_1")
def test_consensus_speed_is_set_by_the_dominant_eigenvalue():
    fast, slow = _self_attention(3, 0.0), _self_attention(3, 5.0)
    e_fast, e_slow = _consensus_error(fast, 8), _consensus_error(slow, 8)
    record("consensus error after 8 steps", {"uniform": e_fast, "softmax(5 I)": e_slow})
    # 1e-3 reads "the same speed" generously (the errors are 6e-17 and 0.57)
    claim_assert(abs(e_fast - e_slow) <= 1e-3, "equal dominant eigenvalues but different consensus errors",
                 lambda1=[eigenvalues(fast)[0].real.item(), eigenvalues(slow)[0].real.item()],
                 lambda2_modulus=[eigenvalues(fast)[1].abs().item(), eigenvalues(slow)[1].abs().item()],
                 error_uniform=e_fast, error_sharp=e_slow)


@pytest.mark.claim("spectral.index-row-stochastic-must-have-dominant-token")
@refutes(reason="uniform attention on n = 2 tokens (all logits equal) is a softmax output; no column receives "
                "more attention than another")
def test_a_row_stochastic_matrix_must_have_a_dominant_column():
    a = stable_softmax(torch.zeros(2, 2, dtype=torch.float64))
    col = a.sum(0)
    # the column sums are 0.5 + 0.5 = 1 exactly; 1e-12 only absorbs rounding (~n eps) of a sum
    claim_assert(col.max().item() > 1 + 1e-12, "no token receives more than average attention", column_sums=col)


@pytest.mark.claim("spectral.index-row-stochastic-must-have-dominant-token")
@pytest.mark.parametrize("received", [pytest.param(lambda a: a.sum(0), id="column-sums"), pytest.param(
    lambda a: a.sum(0) + torch.nn.functional.one_hot(torch.tensor(0), a.shape[0]), id="forced-dominant", marks=control(
        "a dominant token forced on top of the attention every token receives (column 0 given one row's worth more): "
        "the check that the column sums average exactly 1 must reject it",
        models=["spectral.index-row-stochastic-must-have-dominant-token"]))])
@given(a=attention_matrices(1, 10))
def test_column_sums_of_attention_average_exactly_one(received, a):
    n = a.shape[0]
    # n rows, each 1 within (2 n - 1) u, and the n^2-term sum's rounding: ~1.5 n^2 eps
    claim_assert(abs(received(a).sum().item() - n) <= 2 * n * n * EPS64, "the total attention received is not n "
                 "(column sums do not average 1)", a=a)


@pytest.mark.claim("spectral.rank-collapse-normalized-eigenvalues-limit")
@refutes(reason="uniform attention on n = 4 tokens, the fully collapsed matrix 1 1^T / n: its normalised spectrum is "
                "exact, so one matrix decides")
def test_collapsed_attention_has_every_normalised_eigenvalue_equal_to_one_over_n():
    n = 4
    ev = eigenvalues(stable_softmax(torch.zeros(n, n, dtype=torch.float64))).real
    share = ev / ev.sum()
    # "equal to 1/n" read within 0.05; the spectrum (1, 0, 0, 0) misses 1/4 by 0.75
    claim_assert((share - 1 / n).abs().max() <= 0.05, "collapsed attention puts the whole normalised spectrum on "
                 "lambda_1: (1, 0, 0, 0), not (1/n, ..., 1/n)", normalised_eigenvalues=share)


@pytest.mark.claim("spectral.index-spectral-doc-covers-rank-collapse-signal-propagation")
@pytest.mark.parametrize("document", [pytest.param("spectral.txt", id="spectral"), pytest.param(
    "linear-algebra.txt", id="linear-algebra", marks=control(
        "the sections looked for in the other spectral document, linear-algebra.txt, which the index does not name"))])
def test_spectral_document_has_sections_on_the_listed_topics(document):
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "sources" / document).read_text(encoding="utf-8")
    headings = {"attention-matrix spectra": "2. 注意力矩阵的谱性质", "rank collapse": "3. Rank Collapse 现象",
                "signal propagation / Jacobian": "4. 信号传播的谱分析", "spectral stability": "4.3 谱稳定性条件"}
    missing = [topic for topic, heading in headings.items() if heading not in text]
    claim_assert(not missing, f"{document} lacks a section the index attributes to spectral.txt", missing=missing)


def _gap_one_far_from_rank_one(n: int, c: sp.Rational) -> sp.Matrix:
    """A = J / n + (c / n) u w^T with u = (+1, -1, ...), w = (+1, +1, -1, -1, ...), n divisible by 4.

    u and w are orthogonal to each other and to the all-ones vector, so N = (c / n) u w^T has N 1 = 0,
    1^T N = 0 and N^2 = 0: A is row-stochastic, its entries (1 -+ c) / n are positive for c < 1 (a softmax
    output: logits log A_ij), its eigenvalues are 1 and 0 (n - 1 times), so the gap is the largest possible,
    and A^T A = J / n + N^T N gives singular values 1 and c ||u|| ||w|| / n = c.
    """
    u = sp.Matrix([1 if i % 2 == 0 else -1 for i in range(n)])
    w = sp.Matrix([1 if (i // 2) % 2 == 0 else -1 for i in range(n)])
    return sp.ones(n, n) / n + (c / n) * u * w.T


@pytest.mark.claim("spectral.large-gap-near-rank-one")
@refutes(reason="n = 4, the smallest size with u, w = (+-1) vectors orthogonal to each other and to 1; exact "
                "rational arithmetic: A = J/4 + (0.9/4) u w^T is strictly positive, has the maximal gap 1 and "
                "second singular value 0.9")
def test_a_maximal_spectral_gap_means_the_attention_matrix_is_close_to_rank_one():
    c = sp.Rational(9, 10)
    a = _gap_one_far_from_rank_one(4, c)
    lam = sp.symbols("lam")
    # exact: characteristic polynomial lam^3 (lam - 1), so every non-leading eigenvalue is 0 and the gap is 1
    charpoly = sp.factor(a.charpoly(lam).as_expr())
    positive = all(x > 0 for x in a) and all(sum(a.row(i)) == 1 for i in range(4))
    sq = sorted((a.T * a).eigenvals(multiple=True), reverse=True)  # squared singular values, exact
    record("characteristic polynomial of A", str(charpoly))
    record("singular values of A", [str(sp.sqrt(x)) for x in sq])
    claim_assert(not (positive and sp.expand(charpoly - lam**3 * (lam - 1)) == 0) or sp.sqrt(sq[1]) <= sp.Rational(1, 10),
                 "the gap is maximal (1) yet sigma_2 / sigma_1 = 0.9: A is far from rank one (it has rank 2)",
                 matrix=str(a), singular_values=[str(sp.sqrt(x)) for x in sq])


@pytest.mark.claim("spectral.large-gap-near-rank-one")
@given(m=st.integers(1, 16), c=st.floats(0.0, 0.99))
def test_the_maximal_gap_leaves_the_second_singular_value_free(m, c):
    # the same construction at n = 4m in float64: gap 1 (all other eigenvalues 0) and sigma_2 = c for every n
    n = 4 * m
    u = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(n)], dtype=torch.float64)
    w = torch.tensor([1.0 if (i // 2) % 2 == 0 else -1.0 for i in range(n)], dtype=torch.float64)
    a = torch.full((n, n), 1.0 / n, dtype=torch.float64) + (c / n) * torch.outer(u, w)
    s = torch.linalg.svdvals(a)
    # entries (1 +- c) / n, one rounding each; sums of n of them; svd backward-stable: error ~ n eps ||A|| (||A|| = 1)
    tol = 8 * n * EPS64
    claim_assert(bool((a > 0).all()) and (a.sum(-1) - 1).abs().max().item() <= tol, "A is not a positive "
                 "row-stochastic matrix", n=n, c=c)
    # A^2 = J / n in exact arithmetic (N^2 = 0, J N = N J = 0): A^2 has eigenvalues 1, 0, ..., so A's non-leading
    # eigenvalues are all 0 (gap 1)
    claim_assert((a @ a - 1.0 / n).abs().max().item() <= tol, "A^2 is not J / n: its other eigenvalues are not 0",
                 n=n, c=c)
    claim_assert(abs(s[0].item() - 1) <= tol and abs(s[1].item() - c) <= tol, "singular values differ from 1 and c",
                 n=n, c=c, singular_values=s[:3])


# --- the rank and edge formulas of impl/spectral.py: each by a value and by a law -----------------------------------

EPS64 = 2.0**-52


def _erank_in_bits(a: torch.Tensor) -> torch.Tensor:
    """2^H with H the entropy of p = s / sum s in nats: the base of the exponential mixed up (negative control)."""
    return 2.0 ** torch.log(effective_rank(a))


def _unnormalised_stable_rank(a: torch.Tensor) -> torch.Tensor:
    """``sum_i s_i^2 = ||A||_F^2``: the stable rank without its division by s_1^2 (negative control)."""
    return (torch.linalg.svdvals(a) ** 2).sum(-1)


_RANKS = [pytest.param(effective_rank, stable_rank, id="impl"), pytest.param(
    _erank_in_bits, _unnormalised_stable_rank, id="bits-and-unnormalised", marks=control(
        "erank as 2^H instead of e^H and stable rank as ||A||_F^2 without the division by s_1^2"))]


@pytest.mark.claim("spectral.analyze-effective-rank-spectral-entropy", "spectral.snippet-analyze-effective-rank-is-stable-rank")
@pytest.mark.parametrize("effective_rank, stable_rank", _RANKS)
def test_effective_and_stable_rank_of_diagonal_matrices_take_their_hand_computed_values(effective_rank, stable_rank):
    """diag(2, 1, 1): p = (1/2, 1/4, 1/4), H = (3/2) ln 2, erank = 2^(3/2); stable rank (4 + 1 + 1) / 4 = 3/2.
    diag(4, 3): stable rank (16 + 9) / 16 = 25/16; erank exp(-(4/7) ln(4/7) - (3/7) ln(3/7))."""
    a, b = torch.diag(torch.tensor([2.0, 1.0, 1.0], dtype=torch.float64)), torch.diag(torch.tensor([4.0, 3.0], dtype=torch.float64))
    values = {"erank(diag(2,1,1))": (effective_rank(a).item(), 2**1.5), "srank(diag(2,1,1))": (stable_rank(a).item(), 1.5),
              "srank(diag(4,3))": (stable_rank(b).item(), 25 / 16),
              "erank(diag(4,3))": (effective_rank(b).item(), math.exp(-(4 / 7) * math.log(4 / 7) - (3 / 7) * math.log(3 / 7)))}
    # an SVD of a diagonal matrix is exact up to a few ulps; sums, logs and an exp of 3 terms: 32 ulps of the value
    claim_assert(all(abs(got - want) <= 32 * EPS64 * want for got, want in values.values()),
                 "effective or stable rank differs from its hand-computed value", **{k: list(v) for k, v in values.items()})


@pytest.mark.claim("spectral.analyze-effective-rank-spectral-entropy", "spectral.snippet-analyze-effective-rank-is-stable-rank")
@pytest.mark.parametrize("effective_rank, stable_rank", _RANKS)
@given(a=real_matrices(min_side=1, max_side=5, bound=5.0), k=st.integers(1, 4), c=st.floats(0.1, 10.0))
def test_effective_and_stable_rank_multiply_by_k_under_kron_with_identity_and_ignore_scale(effective_rank, stable_rank,
                                                                                           a, k, c):
    """A (x) I_k repeats every singular value k times: p is spread over k copies (H + ln k), so erank * k and
    sum s^2 * k with s_1 unchanged, so stable rank * k; c A changes neither."""
    assume(torch.linalg.matrix_norm(a, ord=2) > 1e-3)
    big = torch.kron(a, torch.eye(k, dtype=a.dtype))
    er, sr = effective_rank(a).item(), stable_rank(a).item()
    # SVD backward-stable: singular values within ~n eps s_1 (n <= 20); the ratios inherit that relative to s_1
    # through p (erank) or s^2 / s_1^2 (stable rank), times a rank of <= 20: 1e-10 leaves a wide margin
    tol = 1e-10
    claim_assert(abs(effective_rank(big).item() - k * er) <= tol * k * er and abs(stable_rank(big).item() - k * sr) <= tol * k * sr,
                 "erank or stable rank of A (x) I_k is not k times that of A", k=k, erank=er, srank=sr,
                 erank_big=effective_rank(big).item(), srank_big=stable_rank(big).item())
    claim_assert(abs(effective_rank(c * a).item() - er) <= tol * er and abs(stable_rank(c * a).item() - sr) <= tol * sr,
                 "erank or stable rank depends on the scale of A", c=c, erank=er, srank=sr)


@pytest.mark.claim("spectral.mp-density-explicit")
@pytest.mark.parametrize("m,n,variance,edges", [(256, 256, 1 / 256, (0.0, 4.0)), (64, 256, 1 / 256, (0.25, 2.25)),
                                                (1, 4, 2.0, (2.0, 18.0))])
def test_marchenko_pastur_edges_take_their_hand_computed_values(m, n, variance, edges):
    """v n (1 -+ sqrt(m/n))^2: square, v = 1/n: (0, 4); m/n = 1/4: (1/4, 9/4); m/n = 1/4, v n = 8: (2, 18)."""
    got = marchenko_pastur_edges(m, n, variance)
    # a square root of an exact quarter and two products: exact or 2 ulps of the upper edge
    claim_assert(all(abs(g - e) <= 4 * EPS64 * edges[1] for g, e in zip(got, edges)),
                 "Marchenko-Pastur edges differ from v n (1 -+ sqrt(m/n))^2", m=m, n=n, variance=variance, got=list(got),
                 expected=list(edges))


@pytest.mark.claim("spectral.mp-density-explicit")
@given(m=st.integers(1, 500), extra=st.integers(0, 500), variance=st.floats(1e-3, 1e3))
def test_marchenko_pastur_edges_straddle_v_n_and_their_roots_differ_by_2_sqrt_v_m(m, extra, variance):
    """sqrt(b) + sqrt(a) = 2 sqrt(v n) and sqrt(b) - sqrt(a) = 2 sqrt(v m): the support is centred on v (n + m)."""
    n = m + extra
    a, b = marchenko_pastur_edges(m, n, variance)
    ra, rb = math.sqrt(a), math.sqrt(b)
    # each edge rounds ~4 times; its root halves that; sums of values <= 2 sqrt(v n): 16 ulps of that size
    tol = 16 * EPS64 * 2 * math.sqrt(variance * n)
    claim_assert(abs(rb + ra - 2 * math.sqrt(variance * n)) <= tol and abs(rb - ra - 2 * math.sqrt(variance * m)) <= tol
                 and abs((a + b) / 2 - variance * (n + m)) <= 8 * EPS64 * b,
                 "the Marchenko-Pastur edges are not v (sqrt n -+ sqrt m)^2", m=m, n=n, variance=variance, a=a, b=b)
