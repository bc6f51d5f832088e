"""Claims of linear-algebra.txt about cited papers that a computation decides (issue 12, slice Eu).

linear-algebra.txt line 123 (bulk of the attention spectrum near Marchenko-Pastur), line 152 (effective rank as the
"true information dimension"), line 218 (DoRA at the same parameter count as LoRA) and lines 341-342 (nuclear norm
as LoRA's theoretical basis). The bibliographic side of these claims is decided by references.yaml records and the
generic tests of properties/test_records.py.
"""
import math

import pytest
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes
from impl.lowrank import dora_weight, lora_delta, lora_parameter_count
from impl.softmax import stable_softmax
from impl.spectral import (effective_rank, marchenko_pastur_density, marchenko_pastur_edges, nuclear_norm,
                           singular_values)
from properties.strategies.spectral import gaussian, low_rank_factors, real_matrices

EPS64 = 2.0**-52


# --- line 123: the bulk of the attention spectrum and the Marchenko-Pastur law ------------------------------------

N_TOK, D_WIDE = 300, 3000  # n tokens; d_k = 10 n, the document's regime n, d -> infinity with d >> n
LOGNORMAL_MEAN, LOGNORMAL_VAR = math.exp(0.5), math.e**2 - math.e  # of exp(s), s ~ N(0, 1): the unnormalised weights


def _random_attention(n: int, d: int, seed: int) -> torch.Tensor:
    q, k = gaussian((n, d), seed), gaussian((n, d), seed + 1)
    return stable_softmax(q @ k.T / math.sqrt(d))


def _ks_to_mp_ratio_one(values: torch.Tensor, n: int) -> float:
    """Kolmogorov distance of ``values`` to the MP law of W W^T for W (n, n) with entry variance 1/n (support [0, 4])."""
    a, b = marchenko_pastur_edges(n, n, 1.0 / n)
    grid = torch.linspace(a, b, 4001, dtype=torch.float64)
    cdf = torch.cumulative_trapezoid(marchenko_pastur_density(grid, n, n, 1.0 / n), grid)
    emp = torch.searchsorted(values.sort().values.contiguous(), grid[1:].contiguous(), right=True).double() / len(values)
    return (emp - cdf).abs().max().item()


@pytest.mark.claim("spectral.la-nait-saada-bulk-marchenko-pastur")
@pytest.mark.parametrize("rescale", [pytest.param(N_TOK * LOGNORMAL_MEAN**2 / LOGNORMAL_VAR, id="sqrt-n-mu-over-sigma"),
                                     pytest.param(1.0, id="unscaled", marks=control(
    "the spectrum of A itself, as the line states it, without the sqrt(n) mu / sigma rescaling: the Kolmogorov check "
    "must reject it", models=["spectral.la-nait-saada-bulk-marchenko-pastur"]))])
def test_rescaled_bulk_of_random_attention_follows_marchenko_pastur(rescale):
    # A ~ X / (n mu) with X_ij = exp(s_ij) i.i.d. (mean mu, variance v), so after removing the outlier s_1 ~ 1 the
    # singular values of sqrt(n) (mu / sqrt v) A are those of the centred (X - mu) / sqrt(n v): quarter-circle, and
    # their squares follow MP with ratio 1 on [0, 4]
    s = singular_values(_random_attention(N_TOK, D_WIDE, 7))
    lam = rescale * s[1:] ** 2
    ks = _ks_to_mp_ratio_one(lam, N_TOK)
    s_eq = singular_values(_random_attention(N_TOK, N_TOK, 7))
    ks_eq = _ks_to_mp_ratio_one(N_TOK * (LOGNORMAL_MEAN**2 / LOGNORMAL_VAR) * s_eq[1:] ** 2, N_TOK)
    record("Kolmogorov distance of the rescaled squared bulk to MP(1), n=300: d=3000, d=300", [ks, ks_eq])
    record("sigma_1, sqrt(n) sigma_2", [s[0].item(), math.sqrt(N_TOK) * s[1].item()])
    # 0.08: the i.i.d. log-normal random Markov matrix itself (the d -> infinity limit) sits at 0.04 for n = 300 (heavy
    # log-normal tail, slow convergence); a wrong scale or law gives distances above 0.3
    claim_assert(ks <= 0.08 and abs(s[0].item() - 1) <= 0.05, "the rescaled bulk is not Marchenko-Pastur, or sigma_1 is "
                 "not the outlier at 1", ks=ks, sigma_1=s[0])


@pytest.mark.claim("spectral.la-nait-saada-bulk-marchenko-pastur")
@refutes(reason="one seeded softmax(Q K^T / sqrt d) with n = 300, d = 3000, Q, K i.i.d. N(0, 1): the bulk singular "
                "values of A itself are O(1 / sqrt n), so its spectral distribution is near a point mass at 0")
def test_unscaled_spectrum_of_random_attention_follows_marchenko_pastur():
    s = singular_values(_random_attention(N_TOK, D_WIDE, 7))
    ks = _ks_to_mp_ratio_one(s[1:] ** 2, N_TOK)
    record("Kolmogorov distance of A's own squared bulk to MP(1)", ks)
    record("largest bulk singular value of A times sqrt(n)", math.sqrt(N_TOK) * s[1].item())
    claim_assert(ks <= 0.08, "without the sqrt(n) mu / sigma rescaling the spectrum of A is not near Marchenko-Pastur: "
                 "its bulk collapses towards 0 as n grows", ks=ks)


# --- line 152: effective rank as the "true information dimension" --------------------------------------------------

def _numerical_rank(w: torch.Tensor) -> int:
    s = singular_values(w)
    return int((s > 16 * max(w.shape) * EPS64 * max(s[0].item(), 1e-300)).sum()) if s.numel() else 0


@pytest.mark.claim("spectral.analyze-comment-effective-rank-information-dimension")
@pytest.mark.parametrize("measure", [pytest.param(lambda w: effective_rank(w).item(), id="effective-rank"), pytest.param(
    lambda w: float(_numerical_rank(w)), id="rank", marks=control(
        "the number of dimensions the matrix uses, its rank, as the 'information dimension' the comment names: the "
        "check that equal ranks get different values must reject it",
        models=["spectral.analyze-comment-effective-rank-information-dimension"]))])
@given(w=real_matrices(1, 8, 10.0), k=st.integers(1, 8))
def test_effective_rank_lies_between_one_and_rank_and_counts_a_flat_spectrum(measure, w, k):
    assume(singular_values(w)[0] > 1e-6)
    er = measure(w)
    rank = _numerical_rank(w)
    # singular values below the SVD's error floor contribute p log p of at most ~1e-13: a slack of 1e-9 covers them
    claim_assert(1 - 1e-9 <= er <= rank + 1e-9, "effective rank outside [1, rank]", erank=er, rank=rank, w=w)
    q, _ = torch.linalg.qr(gaussian((8, 8), k))
    flat = q[:, :k] @ q[:, :k].T  # k equal nonzero singular values
    claim_assert(abs(measure(flat) - k) <= 1e-9, "k equal singular values do not give effective rank k",
                 k=k, erank=measure(flat))
    # a surrogate, not a count: the same rank k >= 2 with one singular value halved has effective rank
    # exp(H((1/2, 1, ..., 1) / (k - 1/2))), at most k - 0.11 (k = 2: 1.89; k = 8: 7.86)
    tilted = flat - 0.5 * torch.outer(q[:, 0], q[:, 0])
    claim_assert(k == 1 or measure(tilted) <= k - 0.1, "equal rank k, unequal singular values, yet effective rank k",
                 k=k, erank=measure(tilted))


@pytest.mark.claim("spectral.analyze-comment-effective-rank-information-dimension")
@refutes(reason="diag(1, 0.1, ..., 0.1) of size 8: every one of the 8 directions carries signal (rank 8, condition "
                "number 10), yet the effective rank is about 4.4; the same rank with another spread gives another value")
def test_effective_rank_is_the_number_of_informative_dimensions():
    w = torch.diag(torch.tensor([1.0] + [0.1] * 7, dtype=torch.float64))
    er, rank = effective_rank(w).item(), _numerical_rank(w)
    record("effective rank, rank of diag(1, 0.1 x 7)", [er, rank])
    claim_assert(abs(er - rank) < 0.5, "the effective rank is a continuous entropy surrogate, not the dimension (rank)",
                 erank=er, rank=rank)


# --- line 218: DoRA 'at the same parameter count' as LoRA ----------------------------------------------------------

@pytest.mark.claim("linear-algebra.la-dora-closer-to-full-ft-than-lora")
@pytest.mark.parametrize("trained", [pytest.param(lambda b, a, m: (b, a, m), id="b-a-m"), pytest.param(
    lambda b, a, m: (b, a), id="same-as-lora", marks=control(
        "line 218's equal parameter count: DoRA's trainable tensors counted as LoRA's B and A alone, the magnitude m "
        "left out: the parameter-count check must reject it", models=["linear-algebra.la-dora-closer-to-full-ft-than-lora"]))])
@given(factors=low_rank_factors(), seed=st.integers(0, 2**16))
def test_dora_trains_k_more_parameters_than_lora_at_equal_rank(trained, factors, seed):
    b, a = factors
    (d, r), k = b.shape, a.shape[1]
    w0 = gaussian((d, k), seed)
    assume(bool((torch.linalg.vector_norm(w0 + b @ a, dim=0) > 1e-6).all()))
    m = gaussian((1, k), seed + 1).abs() + 0.5
    # the magnitude m (1, k) is a free parameter of W' = m (W0 + BA) / ||W0 + BA||_c: doubling it doubles W'
    w1, w2 = dora_weight(w0, b, a, m), dora_weight(w0, b, a, 2 * m)
    claim_assert(torch.allclose(w2, 2 * w1, rtol=1e-12, atol=0), "m is not a free scale of DoRA's weight", d=d, k=k, r=r)
    dora = sum(t.numel() for t in trained(b, a, m))
    claim_assert(dora == lora_parameter_count(d, k, r) + k and dora > lora_parameter_count(d, k, r),
                 "DoRA's trainable parameters are not LoRA's plus k magnitudes", dora=dora,
                 lora=lora_parameter_count(d, k, r), k=k)


# --- lines 341-342: the nuclear norm and LoRA ----------------------------------------------------------------------

def _balanced_factors(w: torch.Tensor, b: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """U_r S_r^(1/2), S_r^(1/2) V_r^T: the balanced factorisation of W = B A (r = B's width)."""
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    r = b.shape[1]
    return u[:, :r] * s[:r].sqrt(), s[:r].sqrt()[:, None] * vh[:r]


@pytest.mark.claim("linear-algebra.la-nuclear-norm-uses-compression-lora")
@pytest.mark.parametrize("factorise", [pytest.param(_balanced_factors, id="balanced"), pytest.param(
    lambda w, b, a: (b, a), id="lora-factors-as-drawn", marks=control(
        "line 342's nuclear norm as the basis of LoRA itself: LoRA's factors B, A as they are, unbalanced, taken to "
        "realise ||BA||_*; the tightness check must reject them",
        models=["linear-algebra.la-nuclear-norm-uses-compression-lora"]))])
@example(factors=(torch.tensor([[2.0], [0.0]], dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64)))
@given(factors=low_rank_factors())
def test_weight_decay_on_lora_factors_bounds_the_nuclear_norm_and_is_tight_when_balanced(factorise, factors):
    b, a = factors
    w = b @ a
    decay = ((b**2).sum() + (a**2).sum()).item() / 2
    nuc = nuclear_norm(w).item()
    tol = 64 * max(w.shape) * EPS64 * max(decay, 1.0)
    claim_assert(decay >= nuc - tol, "(||B||_F^2 + ||A||_F^2) / 2 < ||BA||_*", decay=decay, nuclear=nuc)
    b_bal, a_bal = factorise(w, b, a)
    balanced = ((b_bal**2).sum() + (a_bal**2).sum()).item() / 2
    claim_assert(abs(balanced - nuc) <= tol and torch.allclose(b_bal @ a_bal, w, atol=tol, rtol=0),
                 "the balanced factorisation does not attain ||W||_*", balanced=balanced, nuclear=nuc)


@pytest.mark.claim("linear-algebra.la-nuclear-norm-uses-compression-lora")
@refutes(reason="r = 1 on 2 x 2 matrices: 1000 e1 e1^T (nuclear norm 1000) is a LoRA update, diag(1, 1e-3) (nuclear "
                "norm 1.001) is not; LoRA's admissible set is the rank bound of line 199, not a nuclear-norm ball")
def test_lora_constrains_the_nuclear_norm():
    big = lora_delta(torch.tensor([[1000.0], [0.0]], dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                     alpha=1.0)  # alpha / r = 1
    small = torch.diag(torch.tensor([1.0, 1e-3], dtype=torch.float64))
    best_rank_one_error = singular_values(small)[1].item()  # Eckart-Young: the distance of diag(1, 1e-3) to rank <= 1
    nuc_big, nuc_small = nuclear_norm(big).item(), nuclear_norm(small).item()
    record("nuclear norms of the admissible and the inadmissible update", [nuc_big, nuc_small])
    claim_assert(not (nuc_small < nuc_big and best_rank_one_error > 0), "a rank-1 LoRA admits an update of nuclear "
                 "norm 1000 but cannot represent one of nuclear norm 1.001: it bounds the rank, not the nuclear norm",
                 nuclear_admissible=nuc_big, nuclear_inadmissible=nuc_small, rank_one_error=best_rank_one_error)
