"""Matrix norms, random-matrix spectra, low-rank updates and the matrix views of attention.

spectral.txt lines 272-315 (Marchenko-Pastur, spectral normalisation, pruning); linear-algebra.txt
lines 5, 88-92 (multi-head as block-diagonal), 179-187 and 409-419 (graph diffusion), 193-216 (LoRA,
DoRA), 291-342 (norms, spectral conditioning). Norms are checked against independent characterisations
(duality, power iteration, sums of squares); identities also symbolically where they are algebraic.
"""
import math

import pytest
import sympy as sp
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes
from impl.lowrank import (column_norm, dora_weight, lora_delta, lora_parameter_count, lora_weight,
                          singular_value_threshold)
from impl.softmax import stable_softmax
from impl.spectral import (eig, frobenius_norm, marchenko_pastur_density, marchenko_pastur_edges, nuclear_norm,
                           singular_values, spectral_norm, spectral_normalize)
from properties.strategies.architecture import assert_equal_up_to_rounding, locals_at_return
from properties.strategies.spectral import (attention_matrices, gaussian, low_rank_factors, printed_code, real_matrices,
                                            seeds)
from properties.test_snippets_called import AS_PRINTED, mutant, mutant_code

EPS64 = 2.0**-52


def _tol(w: torch.Tensor) -> float:
    """Backward-stable SVD: singular values carry absolute error ~ max(m, n) eps ||W||_2; allow 16x that."""
    return 16 * max(w.shape) * EPS64 * max(spectral_norm(w).item(), 1e-300)


def _numerical_rank(w: torch.Tensor) -> int:
    s = singular_values(w)
    # singular values below the SVD's absolute error 16 max(m, n) eps s_1 (_tol) are indistinguishable from 0
    return int((s > max(w.shape) * EPS64 * max(s[0].item(), 1e-300) * 16).sum()) if s.numel() else 0


def _diag(*values: float) -> torch.Tensor:
    return torch.diag(torch.tensor(values, dtype=torch.float64))


# ---- the claims' wrong variants, for the negative controls (claimcheck.control) -------------------------------


def _normalize_by_frobenius(w: torch.Tensor) -> torch.Tensor:
    return w / frobenius_norm(w)


def _sum_of_squares(s: torch.Tensor) -> torch.Tensor:
    return (s**2).sum()


def _square_of_sum(s: torch.Tensor) -> torch.Tensor:
    return s.sum() ** 2


def _shrink_without_clamp(w: torch.Tensor, tau: float) -> torch.Tensor:
    """``U (S - tau) V^T``: singular value thresholding without the ``max(., 0)``."""
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    return (u * (s - tau)) @ vh


def _merged_weight_as_delta(b: torch.Tensor, a: torch.Tensor, alpha: float) -> torch.Tensor:
    """``W + (alpha / r) B A`` returned for the update: the merged weight, W the test's own (seed 51)."""
    return lora_weight(gaussian((b.shape[0], a.shape[1]), 51), b, a, alpha)


def _conditioned_update(b: torch.Tensor, a: torch.Tensor, alpha: float) -> torch.Tensor:
    """The printed spectral conditioning of ``(alpha / r) B A``, taken for a low-rank update (negative control)."""
    return _printed_spectral_condition(lora_delta(b, a, alpha))


def _ffn_jacobian_as_update(b: torch.Tensor, a: torch.Tensor, alpha: float) -> torch.Tensor:
    """The Jacobian W_2 diag(GELU'(W_1 x)) W_1 (d, k) of a GELU FFN R^k -> R^d of width 4 max(d, k), seeded weights,
    taken for a low-rank update (negative control); GELU'(z) = Phi(z) + z phi(z)."""
    (d, _), k = b.shape, a.shape[1]
    w1, w2 = gaussian((4 * max(d, k), k), 72), gaussian((d, 4 * max(d, k)), 73)
    z = w1 @ gaussian((k,), 74)
    slope = 0.5 * (1 + torch.erf(z / math.sqrt(2))) + z * torch.exp(-z**2 / 2) / math.sqrt(2 * math.pi)
    return w2 @ (slope[:, None] * w1)


def _full_parameter_count(d: int, k: int, r: int) -> int:
    return d * k


def _row_norm(w: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(w, dim=1, keepdim=True)


def _dora_over_rows(w0, b, a, m):
    v = w0 + b @ a
    return m * v / _row_norm(v)


def _dora_unnormalised(w0, b, a, m):
    return m * (w0 + b @ a)


@pytest.mark.claim("linear-algebra.la-spectral-norm-equals-sigma-max", "spectral.spectral-normalization-definition",
                   "spectral.spectral-normalization-lipschitz")
@pytest.mark.parametrize("sigma_max,normalize", [
    pytest.param(spectral_norm, spectral_normalize, id="exact"),
    pytest.param(frobenius_norm, spectral_normalize, id="frobenius-for-sigma-max",
                 marks=control("||W||_F taken for sigma_max: no unit vector attains it once rank(W) >= 2",
                               models="linear-algebra.la-spectral-norm-equals-sigma-max")),
    pytest.param(spectral_norm, _normalize_by_frobenius, id="normalised-by-frobenius",
                 marks=control("W / ||W||_F for W / sigma_max: spectral norm s_1 / ||W||_F < 1 once rank(W) >= 2",
                     models=["spectral.spectral-normalization-definition", "spectral.spectral-normalization-lipschitz"])),
])
@given(w=real_matrices(1, 8, 10.0), seed=seeds())
@example(w=_diag(3.0, 1.0), seed=0)  # rank 2: the controls' variants differ from the claim here
def test_spectral_norm_is_the_largest_singular_value_and_normalisation_makes_it_one(w, seed, sigma_max, normalize):
    assume(spectral_norm(w) > 1e-6)  # W / s_1 needs s_1 far from underflow; 1e-6 is any such bound
    s1 = sigma_max(w).item()
    x = gaussian((w.shape[1], 64), seed)
    gains = torch.linalg.vector_norm(w @ x, dim=0) / torch.linalg.vector_norm(x, dim=0)
    v1 = torch.linalg.svd(w).Vh[0]
    # s_1 is within _tol(w); fl(W x) adds gamma_n |W||x|, a gain of at most n^1.5 eps s_1 <= _tol(w) (n <= 8)
    claim_assert(gains.max().item() <= s1 + 2 * _tol(w) and abs(torch.linalg.vector_norm(w @ v1).item() - s1) <= _tol(w),
                 "||W x|| / ||x|| exceeds s_1 or s_1 is not attained at v_1", w=w)
    w_bar = normalize(w)
    # Lipschitz constant of x -> W_bar x in l2 is ||W_bar||_2 = 1: attained at v_1, never exceeded
    # two SVDs (of W, of W / s_1), each within _tol = 16 max(m, n) eps relative, and the division's eps
    claim_assert(abs(spectral_norm(w_bar).item() - 1) <= 2 * 16 * max(w.shape) * EPS64 + EPS64, "||W / s_1||_2 != 1", w=w)


@pytest.mark.claim("linear-algebra.la-frobenius-penalty-sum-of-squares", "linear-algebra.la-frobenius-sq-equals-sum-sigma-sq")
@pytest.mark.parametrize("frobenius,sum_sigma_squared", [
    pytest.param(frobenius_norm, _sum_of_squares, id="exact"),
    pytest.param(spectral_norm, _sum_of_squares, id="spectral-for-frobenius",
                 marks=control("||W||_2 for ||W||_F: s_1^2 < sum W_ij^2 once rank(W) >= 2",
                               models="linear-algebra.la-frobenius-penalty-sum-of-squares")),
    pytest.param(frobenius_norm, _square_of_sum, id="square-of-sum",
                 marks=control("(sum s_i)^2, the squared nuclear norm, for sum s_i^2",
                               models="linear-algebra.la-frobenius-sq-equals-sum-sigma-sq")),
])
@given(w=real_matrices(1, 8, 10.0))
@example(w=_diag(3.0, 1.0))  # rank 2: the controls' variants differ from the claim here
def test_frobenius_norm_squared_is_sum_of_squares_and_of_squared_singular_values(w, frobenius, sum_sigma_squared):
    direct = (w**2).sum().item()
    # two n-term sums of squares (gamma_n each), a sqrt and a square; 1e-300 floors it far above subnormal rounding
    claim_assert(abs(frobenius(w).item() ** 2 - direct) <= (2 * w.numel() + 3) * EPS64 * max(direct, 1e-300),
                 "||W||_F^2 != sum W_ij^2", w=w)
    via_sigma = sum_sigma_squared(singular_values(w)).item()
    # min(m, n) squares s_i^2, each off by 2 s_1 _tol(w) (s_1 floored at 1 against underflow), and the two sums
    claim_assert(abs(via_sigma - direct) <= 2 * _tol(w) * max(spectral_norm(w).item(), 1.0) * min(w.shape)
                 + 2 * w.numel() * EPS64 * direct,
                 "||W||_F^2 != sum s_i^2", w=w, direct=direct, via_sigma=via_sigma)


@pytest.mark.claim("linear-algebra.la-frobenius-sq-equals-sum-sigma-sq")
def test_frobenius_norm_squared_is_the_trace_of_w_transpose_w_symbolically():
    w = sp.Matrix(2, 3, sp.symbols("w0:6", real=True))
    # tr(W^T W) = sum of the eigenvalues of W^T W = sum of s_i^2 (the trace identity of test_spectral.py)
    claim_assert(sp.expand((w.T * w).trace() - sum(x**2 for x in w)) == 0, "tr(W^T W) != sum W_ij^2")


@pytest.mark.claim("linear-algebra.la-nuclear-norm-sum-singular-values", "linear-algebra.la-nuclear-norm-convex-surrogate-of-rank")
@pytest.mark.parametrize("nuclear", [
    pytest.param(nuclear_norm, id="exact"),
    pytest.param(frobenius_norm, id="frobenius-for-nuclear",
                 marks=control("sqrt(sum s_i^2) (the Frobenius norm) for sum s_i: below it once rank(W) >= 2",
                               models="linear-algebra.la-nuclear-norm-sum-singular-values")),
])
@given(w=real_matrices(1, 6, 5.0), b=real_matrices(1, 6, 5.0), seed=seeds())
@example(w=_diag(3.0, 1.0), b=_diag(1.0, 2.0), seed=0)  # rank 2: the control's variant differs from the claim here
def test_nuclear_norm_is_the_dual_of_the_spectral_norm_and_bounds_rank(w, b, seed, nuclear):
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    nuc = nuclear(w).item()
    # both sides sum min(m, n) singular values (or diagonal terms of an orthogonal rotation), each within _tol(w)
    claim_assert(abs(torch.trace((u @ vh).T @ w).item() - nuc) <= _tol(w) * min(w.shape),
                 "tr((U V^T)^T W) != sum s_i", w=w)
    c = gaussian(tuple(w.shape), seed)
    c = c / spectral_norm(c)
    # the nuclear norm's error, min(m, n) _tol(w) (tr(C^T W) rounds by n eps |C||W|, far less)
    claim_assert(torch.trace(c.T @ w).item() <= nuc + _tol(w) * min(w.shape), "a contraction beats the nuclear norm "
                 "in the dual pairing", w=w)
    # on the spectral-norm unit ball the nuclear norm lies below the rank, and meets it at the partial isometries
    # U_r V_r^T (the extreme points of the ball): with convexity, what makes it the convex envelope of the rank there
    if spectral_norm(w) > 1e-6:  # W / s_1 needs s_1 far from underflow
        r = _numerical_rank(w)
        # r values <= 1 and min(m, n) - r values below the rank threshold, each within _tol(W / s_1) = 16 max(m, n) eps
        claim_assert(nuclear(w / spectral_norm(w)).item() <= r + min(w.shape) * _tol(w / spectral_norm(w)),
                     "||W||_* > rank(W) on "
                     "the unit spectral ball", w=w)
        partial_isometry = u[:, :r] @ vh[:r]
        # min(m, n) singular values of U_r V_r^T, each within _tol of 1 or 0
        claim_assert(abs(nuclear(partial_isometry).item() - r) <= _tol(partial_isometry) * min(w.shape)
                     and _numerical_rank(partial_isometry) == r, "||U_r V_r^T||_* != rank", w=w, rank=r)
    if b.shape == w.shape:  # convexity: the triangle inequality of a norm
        # three nuclear norms, each within min(m, n) _tol of its matrix
        claim_assert(nuclear(w + b) <= nuclear(w) + nuclear(b)
                     + (_tol(w) + _tol(b) + _tol(w + b)) * min(w.shape),
                     "||W + B||_* > ||W||_* + ||B||_*", w=w, b=b)


@pytest.mark.claim("linear-algebra.la-nuclear-norm-forces-zero-singular-values")
@pytest.mark.parametrize("threshold", [
    pytest.param(singular_value_threshold, id="exact"),
    pytest.param(_shrink_without_clamp, id="no-clamp-at-zero",
                 marks=control("U (S - tau) V^T without max(., 0): a value below tau comes back as tau - s_i > 0")),
])
@given(w=real_matrices(1, 8, 5.0), tau=st.floats(0.0, 10.0))
@example(w=_diag(3.0, 1.0), tau=2.0)  # one value on each side of tau
def test_singular_value_thresholding_zeroes_every_singular_value_below_tau(w, tau, threshold):
    out = threshold(w, tau)
    s = singular_values(w)
    expected = int((s > tau).sum())
    # U max(S - tau, 0) V^T is rebuilt and decomposed again: a zeroed value comes back within 2 _tol(w), a kept one
    # is within 2 _tol(w) of s_i - tau; ties within 4 _tol(w) of tau (the rounding of s_i itself included) are excluded
    got = int((singular_values(out) > 2 * _tol(w)).sum())
    assume(((s - tau).abs() > 4 * _tol(w)).all())
    claim_assert(got == expected, "SVT does not set the singular values <= tau to zero", w=w, tau=tau, rank=got)


def _nn_linear_weight(m: int, n: int, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.nn.Linear(n, m, bias=False).weight.detach().double()  # kaiming_uniform(a = sqrt 5): var 1 / (3 n)


def _mp_kolmogorov_distance(values: torch.Tensor, m: int, n: int, variance: float) -> float:
    """sup_x |F_emp(x) - F_MP(x)| for the eigenvalue law of W W^T (m <= n, entry variance v)."""
    a, b = marchenko_pastur_edges(m, n, variance)
    grid = torch.linspace(a, b, 4001, dtype=torch.float64)
    cdf = torch.cumulative_trapezoid(marchenko_pastur_density(grid, m, n, variance), grid)
    emp = torch.searchsorted(values.sort().values.contiguous(), grid[1:].contiguous(), right=True).double() / len(values)
    return (emp - cdf).abs().max().item()


def _mp_density_without_the_2(x, m, n, variance):
    return 2 * marchenko_pastur_density(x, m, n, variance)


M, N = 256, 512  # nn.Linear(512, 256): weight (256, 512), fan_in 512, entry variance 1 / (3 * 512)
V = 1 / (3 * N)


@pytest.mark.claim("spectral.init-weight-singular-values-marchenko-pastur", "spectral.mp-density-explicit",
                   "spectral.mp-support-edges")
@pytest.mark.parametrize("density, power, V", [
    pytest.param(marchenko_pastur_density, 2, V, id="exact"),
    pytest.param(_mp_density_without_the_2, 2, V, id="one-over-pi",
                 marks=control("1 / (pi c s x) for the density's 1 / (2 pi c s x): mass 2")),
    pytest.param(marchenko_pastur_density, 1, V, id="sigma", marks=control(
        "line 278's law of the singular values themselves: sigma in place of sigma^2; the MP checks must reject it",
        models=["spectral.init-weight-singular-values-marchenko-pastur"])),
    pytest.param(marchenko_pastur_density, 2, 1 / N, id="printed-edges", marks=control(
        "line 283's edges (1 -+ sqrt(m/n))^2, those of entry variance 1/n, for the default init's 1/(3n): the check "
        "that sigma^2 fills [a, b] must reject them", models=["spectral.mp-support-edges"])),
])
def test_squared_singular_values_of_an_initialised_layer_follow_marchenko_pastur(density, power, V):
    lam = singular_values(_nn_linear_weight(M, N, 50)) ** power
    a, b = marchenko_pastur_edges(M, N, variance=V)
    record("Marchenko-Pastur edges of sigma^2 for nn.Linear(512, 256)", [a, b])
    record("observed min/max sigma^2", [lam.min().item(), lam.max().item()])
    # finite-size edge fluctuations are O(n^-2/3) (Tracy-Widom): 5% of b covers them at n = 512 (observed: 2% at b)
    claim_assert(lam.max() <= b * 1.05 and lam.min() >= a - 0.05 * b, "sigma^2 leaves [a, b]", edges=[a, b],
                 observed=[lam.min(), lam.max()])
    claim_assert(lam.max() >= b * 0.95 and lam.min() <= a + 0.05 * b, "sigma^2 does not fill [a, b]", edges=[a, b],
                 observed=[lam.min(), lam.max()])
    x = torch.linspace(a, b, 20001, dtype=torch.float64)
    p = density(x, M, N, V)
    mass, mean = torch.trapezoid(p, x).item(), torch.trapezoid(p * x, x).item()
    # the trapezoid rule on f = C sqrt(x - edge) near each edge errs by -zeta(-1/2) h^1.5 C ~ 0.208 h^1.5 C (Navot
    # 1961), with C_a = sqrt(b - a) / (2 pi c s a), C_b the same at b (c s = m v, times x for the mean); twice that
    h, c_s = (b - a) / 20000, M * V
    tol_mass = 2 * 0.208 * h**1.5 * math.sqrt(b - a) / (2 * math.pi * c_s) * (1 / a + 1 / b)
    tol_mean = 2 * 0.208 * h**1.5 * math.sqrt(b - a) / (2 * math.pi * c_s) * 2
    record("quadrature error of the MP mass, mean / tolerance", [abs(mass - 1) / tol_mass, abs(mean - V * N) / tol_mean])
    claim_assert(abs(mass - 1) <= tol_mass and abs(mean - V * N) <= tol_mean, "the explicit density does not integrate "
                 "to 1 with mean v n", mass=mass, mean=mean, tol_mass=tol_mass, tol_mean=tol_mean)
    # the empirical law of 256 eigenvalues is within O(1/m) of its limit in Kolmogorov distance
    ks = _mp_kolmogorov_distance(lam, M, N, V)
    record("Kolmogorov distance of sigma^2 to MP", ks)
    claim_assert(ks <= 0.03, "the squared singular values do not follow the MP law", ks_distance=ks)


@pytest.mark.claim("spectral.init-weight-singular-values-marchenko-pastur")
@refutes(reason="one torch.nn.Linear(512, 256) at its default initialisation (Kaiming uniform, a = sqrt 5), the "
                "standard initialisation the document names")
def test_singular_values_of_an_initialised_layer_follow_marchenko_pastur():
    s = singular_values(_nn_linear_weight(M, N, 50))
    ks = _mp_kolmogorov_distance(s, M, N, V)
    # 0.03 is the property's bound above (~8 / m): the squared values meet it at 0.009, the values miss it by 13x
    record("Kolmogorov distance / 0.03", ks / 0.03)
    claim_assert(ks <= 0.03, "the singular values themselves are far from the MP law (which is the law of their "
                 "squares)", ks_distance_sigma=ks, ks_distance_sigma_squared=_mp_kolmogorov_distance(s**2, M, N, V))


@pytest.mark.claim("spectral.mp-support-edges")
@refutes(reason="one torch.nn.Linear(512, 256) at its default initialisation: the edges (1 -+ sqrt(m/n))^2 assume "
                "entry variance 1/n, the default init has 1/(3n)")
def test_spectrum_of_an_initialised_layer_fills_one_minus_to_one_plus_sqrt_ratio_squared():
    s = singular_values(_nn_linear_weight(M, N, 50))
    a, b = (1 - math.sqrt(M / N)) ** 2, (1 + math.sqrt(M / N)) ** 2
    # reaching 90% of the edge would be generous (Tracy-Widom fluctuations are ~1% at n = 512); the maximum is at 33%
    record("largest of sigma_max, sigma_max^2 / (0.9 b)", max(s.max().item(), (s**2).max().item()) / (0.9 * b))
    claim_assert(s.max() >= 0.9 * b or (s**2).max() >= 0.9 * b, "neither sigma nor sigma^2 reaches the printed upper "
                 "edge (1 + sqrt(m/n))^2", printed_edges=[a, b], sigma_range=[s.min(), s.max()],
                 sigma_squared_range=[(s**2).min(), (s**2).max()])


@pytest.mark.claim("linear-algebra.la-lora-update-alpha-over-r-ba", "linear-algebra.la-lora-shapes-and-rank-bound",
                   "linear-algebra.la-summary-low-rank-lora-qkv-ffn", "linear-algebra.la-intro-variants-are-matrix-factorizations")
@pytest.mark.parametrize("update,parameter_count", [
    pytest.param(lora_delta, lora_parameter_count, id="exact"),
    pytest.param(_merged_weight_as_delta, lora_parameter_count, id="merged-weight-as-update",
                 marks=control("the merged weight W + (alpha/r) B A taken for the update: rank min(d, k) > r",
                               models="linear-algebra.la-lora-shapes-and-rank-bound")),
    pytest.param(lora_delta, _full_parameter_count, id="d-k-parameters",
                 marks=control("d k trainable parameters (the full matrix) for r (d + k)",
                               models="linear-algebra.la-lora-shapes-and-rank-bound")),
    pytest.param(_conditioned_update, lora_parameter_count, id="spectral-conditioning", marks=control(
        "line 5's third factorisation: spectral conditioning (singular values clamped into [0.01, 1]) of the update "
        "taken for a rank-r factorisation: the rank check must reject it",
        models="linear-algebra.la-intro-variants-are-matrix-factorizations")),
    pytest.param(_ffn_jacobian_as_update, lora_parameter_count, id="ffn-jacobian", marks=control(
        "line 572's low-rank FFN: the Jacobian of a GELU FFN of width 4 max(d, k) taken for a rank-r factorisation: the "
        "rank check must reject it", models="linear-algebra.la-summary-low-rank-lora-qkv-ffn")),
])
@given(factors=low_rank_factors(), alpha=st.floats(0.5, 32.0))
@example(factors=(_diag(1.0, 2.0, 3.0)[:, :1], _diag(1.0, 2.0, 3.0)[:1]), alpha=1.0)  # d = k = 3, r = 1
def test_lora_update_has_rank_at_most_r_and_r_d_plus_k_parameters(factors, alpha, update, parameter_count):
    b, a = factors
    (d, r), k = b.shape, a.shape[1]
    delta = update(b, a, alpha)
    w = gaussian((d, k), 51)
    claim_assert(delta.shape == (d, k) and _numerical_rank(delta) <= r, "rank(alpha/r B A) > r", d=d, k=k, r=r)
    # both sides: r-term products (gamma_r |B||A|), a scaling and an addition to W, rounded in either order
    scale = (w.abs() + alpha / r * (b.abs() @ a.abs())).max().item()
    claim_assert((lora_weight(w, b, a, alpha) - w - alpha / r * (b @ a)).abs().max() <= 2 * (r + 3) * EPS64 * scale,
                 "W' != W + (alpha / r) B A", r=r)
    claim_assert(parameter_count(d, k, r) == b.numel() + a.numel() == r * (d + k), "parameters != r (d + k)")


@pytest.mark.claim("linear-algebra.la-dora-magnitude-direction-formula", "linear-algebra.la-dora-magnitude-shape-1xk",
                   "linear-algebra.la-dora-direction-unit-column-norm")
@pytest.mark.parametrize("norm_c,dora", [
    pytest.param(column_norm, dora_weight, id="exact"),
    pytest.param(_row_norm, _dora_over_rows, id="row-norm",
                 marks=control("||.||_c taken over rows (dim 1): m is (d, 1) and the rows, not the columns, "
                                   "get norm m",
                                       models=["linear-algebra.la-dora-magnitude-shape-1xk",
                                               "linear-algebra.la-dora-direction-unit-column-norm"])),
    pytest.param(column_norm, _dora_unnormalised, id="no-normalisation",
                 marks=control("m (W_0 + B A) without the division by ||W_0 + B A||_c",
                     models=["linear-algebra.la-dora-magnitude-direction-formula",
                             "linear-algebra.la-dora-direction-unit-column-norm"])),
])
@given(factors=low_rank_factors(), seed=seeds())
@example(factors=(_diag(1.0, 2.0, 3.0)[:, :1], _diag(1.0, 2.0)[:1]), seed=0)  # d = 3 != k = 2
def test_dora_columns_have_norm_m_and_reduce_to_w0_at_initialisation(factors, seed, norm_c, dora):
    b, a = factors
    d, k = b.shape[0], a.shape[1]
    w0 = gaussian((d, k), seed)
    v = w0 + b @ a
    assume(bool((column_norm(v) > 1e-6).all()))  # V / ||V||_c needs columns far from underflow
    m = norm_c(w0).abs() + 0.5  # any positive magnitudes, one per column: (1, k)
    w = dora(w0, b, a, m)
    # a d-term norm (gamma_d, then a sqrt), a division, and the d-term norm of the result: (2 d + 4) eps
    claim_assert(m.shape == (1, k) and (column_norm(v / norm_c(v)) - 1).abs().max() <= (2 * d + 4) * EPS64,
                 "V / ||V||_c does not have unit columns", seed=seed)
    # as above, and the scaling by m: (2 d + 5) eps m
    claim_assert((column_norm(w) - m).abs().max() <= (2 * d + 5) * EPS64 * m.max(), "||W'||_c != m", seed=seed)
    at_init = dora(w0, torch.zeros_like(b), a, column_norm(w0))
    # m / ||W0||_c = 1 within two d-term norms (2 d + 2 eps), a division and a product: (2 d + 4) eps |W0|
    claim_assert((at_init - w0).abs().max() <= (2 * d + 4) * EPS64 * w0.abs().max().item(), "m = ||W0||_c, B = 0 does not "
                 "give W' = W0", seed=seed)


def _mha(x, wq, wk, wv, wo, h):
    """Multi-head attention with head i using columns i*d_k:(i+1)*d_k of W_Q, W_K, W_V and rows of W_O."""
    d_k = wq.shape[1] // h
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        a = stable_softmax((x @ wq[:, cols]) @ (x @ wk[:, cols]).T / math.sqrt(d_k))
        heads.append((a, x @ wv[:, cols]))
    return heads, torch.cat([a @ v for a, v in heads], dim=1) @ wo


@pytest.mark.claim("spectral.multihead-as-block-diagonal-direct-sum", "multi-head.la-obs2-blockdiag-formula",
                   "multi-head.la-intro-mha-block-diagonal-low-rank", "multi-head.la-obs2-mha-block-diagonal-low-rank")
@given(seed=seeds(), n=st.integers(1, 5), h=st.integers(1, 3), d_k=st.integers(1, 3))
def test_multi_head_output_is_row_of_heads_times_block_diagonal_values(seed, n, h, d_k):
    d = h * d_k
    x, wq, wk, wv, wo = (gaussian(s, seed + i) for i, s in enumerate([(n, d), (d, d), (d, d), (d, d), (d, d)]))
    heads, y = _mha(x, wq, wk, wv, wo, h)
    row = torch.cat([a for a, _ in heads], dim=1)  # [A_1 ... A_h]: (n, h n)
    block = torch.block_diag(*[v for _, v in heads])  # blockdiag(X W_V^1, ..., X W_V^h): (h n, d)
    # both sides: n-term sums A V (the block's zeros add exactly), then d-term sums with W_O: 2 (n + d) eps |A||V||W_O|
    scale = (torch.cat([a @ v.abs() for a, v in heads], dim=1) @ wo.abs()).max().item()
    claim_assert((row @ block @ wo - y).abs().max() <= 2 * (n + d) * EPS64 * scale,
                 "MHA != [A_1 ... A_h] blockdiag(X W_V^i) W_O", seed=seed)
    # the per-head score forms are the full-width form split by block-diagonal projectors, each of rank <= d_k
    full = x @ wq @ (x @ wk).T
    per_head = [x @ wq[:, i * d_k:(i + 1) * d_k] @ (x @ wk[:, i * d_k:(i + 1) * d_k]).T for i in range(h)]
    # both sides: d-term projections, a d-term (or d_k-term, then h-term) product: 2 * 3 d eps |X||W_Q| (|X||W_K|)^T
    scale = ((x.abs() @ wq.abs()) @ (x.abs() @ wk.abs()).T).max().item()
    claim_assert((sum(per_head) - full).abs().max() <= 6 * d * EPS64 * scale
                 and all(_numerical_rank(wq[:, i * d_k:(i + 1) * d_k] @ wk[:, i * d_k:(i + 1) * d_k].T) <= d_k
                         for i in range(h)), "head score forms are not rank-d_k blocks summing to Q K^T", seed=seed)


@pytest.mark.claim("spectral.multihead-as-block-diagonal-direct-sum")
@refutes(reason="n = 3 tokens, h = 2 heads of width 2: the smallest case with two heads and n != d_k")
def test_multi_head_output_is_the_direct_sum_of_head_outputs():
    n, h, d_k = 3, 2, 2
    d = h * d_k
    heads, y = _mha(gaussian((n, d), 52), *(gaussian((d, d), 53 + i) for i in range(4)), h)
    direct_sum = torch.block_diag(*[a @ v for a, v in heads])
    claim_assert(direct_sum.shape == y.shape, "the direct sum of A_i V_i is (h n, h d_k), MHA outputs (n, d): heads "
                 "are concatenated side by side, not stacked on a diagonal", direct_sum=tuple(direct_sum.shape),
                 mha_output=tuple(y.shape))


@pytest.mark.claim("multi-head.la-obs2-blockdiag-formula")
@refutes(reason="n = 3 tokens, d = 4, h = 2: the smallest case with h n != d")
def test_x_wq_times_blockdiag_of_attention_matrices_is_defined():
    n, d, h = 3, 4, 2
    left = gaussian((n, d), 54) @ gaussian((d, d), 55)  # X W^Q: (n, d)
    blocks = torch.block_diag(*[stable_softmax(gaussian((n, n), 56 + i)) for i in range(h)])  # (h n, h n)
    claim_assert(left.shape[1] == blocks.shape[0], "X W^Q (n x d) cannot multiply BlockDiag(A_1..A_h) (hn x hn)",
                 x_wq=tuple(left.shape), blockdiag=tuple(blocks.shape))


@pytest.mark.claim("multi-head.la-obs2-rank-h-claim")
@refutes(reason="h = 2 heads on n = 3 tokens with random logits: the smallest case with more than one head")
def test_block_diagonal_of_attention_matrices_has_rank_h():
    blocks = torch.block_diag(*[stable_softmax(gaussian((3, 3), 57 + i)) for i in range(2)])
    record("smallest singular value / rank threshold", singular_values(blocks)[-1].item() / _tol(blocks))
    claim_assert(_numerical_rank(blocks) == 2, "BlockDiag(A_1, A_2) has rank 2 n = 6, not h = 2",
                 rank=_numerical_rank(blocks))


@pytest.mark.claim("multi-head.la-obs2-rank-h-claim")
@given(h=st.integers(1, 4), seed=seeds())
def test_block_diagonal_rank_is_the_sum_of_block_ranks(h, seed):
    blocks = [stable_softmax(gaussian((4, 4), seed + i) * 3) for i in range(h)]
    claim_assert(_numerical_rank(torch.block_diag(*blocks)) == sum(_numerical_rank(b) for b in blocks),
                 "rank of a block-diagonal matrix != sum of block ranks", h=h, seed=seed)


def _row_sums(a: torch.Tensor) -> torch.Tensor:
    return a.sum(-1)


def _column_sums(a: torch.Tensor) -> torch.Tensor:
    return a.sum(0)


@pytest.mark.claim("linear-algebra.la-laplacian-d-minus-a")
@pytest.mark.parametrize("degree", [
    pytest.param(_row_sums, id="exact"),
    pytest.param(_column_sums, id="column-sums",
                 marks=control("D_ii = sum_j A_ji (column sums, the in-degree) for sum_j A_ij: D != I")),
])
@given(a=attention_matrices(1, 8))
@example(a=stable_softmax(torch.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=torch.float64)))  # not doubly stochastic
def test_attention_laplacian_is_identity_minus_a_and_kills_constants(a, degree):
    n = a.shape[0]
    lap = torch.diag(degree(a)) - a
    # softmax rows sum to 1 within (2 n - 1) u (normalisation, then the n-term sum; u = eps / 2), and one subtraction;
    # L 1 sums n terms of size <= 1 after D - A: two more n-term roundings
    claim_assert((lap - (torch.eye(n, dtype=torch.float64) - a)).abs().max() <= 2 * n * EPS64
                 and (lap @ torch.ones(n, dtype=torch.float64)).abs().max() <= 4 * n * EPS64,
                 "D != I or L 1 != 0 for a row-stochastic A", a=a)


def _difference_quotient(new, old, eta):
    return (new - old) / eta


def _quotient_of_the_new_state(new, old, eta):
    return new / eta


@pytest.mark.claim("linear-algebra.la-diffusion-residual-attention-update", "linear-algebra.la-laplacian-diffusion-rewrite",
                   "linear-algebra.la-diffusion-divide-by-eta-equivalence")
@pytest.mark.parametrize("rate, laplacian_form", [
    pytest.param(_difference_quotient, lambda x, w, lap, eta: x + x * w - lap * x * w, id="exact"),
    pytest.param(_quotient_of_the_new_state, lambda x, w, lap, eta: x + x * w - lap * x * w, id="new-state-over-eta",
                 marks=control("X_{l+1} / eta for (X_{l+1} - X_l) / eta: the difference is not taken",
                               models="linear-algebra.la-diffusion-divide-by-eta-equivalence")),
    pytest.param(_difference_quotient, lambda x, w, lap, eta: x - lap * x * w, id="pure-diffusion", marks=control(
        "line 181's diffusion reading, X + A X W = X - L X W with no token-wise term: the symbolic identity check must "
        "reject it", models="linear-algebra.la-diffusion-residual-attention-update")),
    pytest.param(_difference_quotient, lambda x, w, lap, eta: x - eta * lap * x * w, id="line-417-rewrite", marks=control(
        "line 417's rewrite X - eta L X W for X + A X W: the symbolic identity check must reject it",
        models="linear-algebra.la-laplacian-diffusion-rewrite")),
])
def test_residual_attention_update_equals_laplacian_form_plus_a_tokenwise_term_symbolically(rate, laplacian_form):
    n, d = 2, 2
    a = sp.Matrix(n, n, sp.symbols("a0:4"))
    x, w = sp.Matrix(n, d, sp.symbols("x0:4")), sp.Matrix(d, d, sp.symbols("w0:4"))
    eta = sp.Symbol("eta", nonzero=True)
    lap = sp.eye(n) - a  # D = I for a row-stochastic A
    residual = x + a * x * w
    claim_assert(sp.expand(residual - laplacian_form(x, w, lap, eta)) == sp.zeros(n, d), "X + A X W != X + X W - L X W")
    claim_assert(sp.expand(rate(residual, x, eta) - a * x * w / eta) == sp.zeros(n, d), "dividing by eta changed the update")


@pytest.mark.claim("linear-algebra.la-diffusion-residual-attention-update")
@refutes(reason="n = 2 tokens carrying the same vector (a consensus state) with W = I: a diffusion step leaves such "
                "a state unchanged")
def test_residual_attention_update_is_a_diffusion():
    x = torch.ones(2, 2, dtype=torch.float64)
    a = stable_softmax(gaussian((2, 2), 58))
    step = x + a @ x @ torch.eye(2, dtype=torch.float64)
    # a diffusion would leave X exactly, up to a few roundings of size-2 entries (~1e-15); A X W moves it by 1
    record("violation margin (moved / tolerance)", (step - x).abs().max().item() / 1e-12)
    claim_assert((step - x).abs().max() <= 1e-12, "X + A X W moves a consensus state (it doubles it): A X W is an "
                 "averaging, not a diffusion (A - I) X W", x=x, updated=step)


@pytest.mark.claim("linear-algebra.la-laplacian-diffusion-rewrite")
@refutes(reason="n = 2 tokens, d = 2, eta = 1, one seeded A, X, W: any X W != 0 separates the two updates")
def test_laplacian_form_rewrites_the_residual_attention_update():
    a, x, w = stable_softmax(gaussian((2, 2), 59)), gaussian((2, 2), 60), gaussian((2, 2), 61)
    lap = torch.eye(2, dtype=torch.float64) - a
    # equal updates would differ by a few roundings of O(1) entries (~1e-15); the violation is X W, of size 1
    record("violation margin (difference / tolerance)", (x @ w).abs().max().item() / 1e-12)
    claim_assert((x + a @ x @ w - (x - lap @ x @ w)).abs().max() <= 1e-12, "X + A X W and X - L X W differ by exactly X W (eta = 1)",
                 line_181=x + a @ x @ w, line_417=x - lap @ x @ w)


@pytest.mark.claim("linear-algebra.la-diffusion-eta-to-zero-continuous-limit", "linear-algebra.la-summary-diffusion-view")
@refutes(reason="n = 2 tokens, fixed seeded A, X, W (as in the document, W does not depend on eta), eta = 1e-1, "
                "1e-3, 1e-6")
def test_divided_update_has_a_finite_limit_as_eta_goes_to_zero():
    a, x, w = stable_softmax(gaussian((2, 2), 62)), gaussian((2, 2), 63), gaussian((2, 2), 64)
    rates = [torch.linalg.matrix_norm(a @ x @ w / eta).item() for eta in (1e-1, 1e-3, 1e-6)]
    # a convergent (1/eta) A X W would stay within a bounded factor of its eta = 0.1 value; it grows like 1/eta (1e5)
    record("growth from eta = 0.1 to 1e-6 / allowed 10", rates[-1] / rates[0] / 10)
    claim_assert(rates[-1] <= 10 * rates[0], "(1/eta) A X W diverges as eta -> 0 with W fixed", norms=rates)


@pytest.mark.claim("linear-algebra.la-diffusion-eta-to-zero-continuous-limit", "linear-algebra.la-summary-diffusion-view",
                   "linear-algebra.la-laplacian-diffusion-neural-ode")
@pytest.mark.parametrize("layer_weight, heat_w", [
    pytest.param(lambda eta, w: eta * w, 1.0, id="w-scaled-by-eta"), pytest.param(
        lambda eta, w: w, 1.0, id="w-fixed", marks=control(
            "lines 187 and 578's limit with W fixed as eta -> 0 (1/eta layers of X + A X W): the Euler-convergence check "
            "must reject it", models=["linear-algebra.la-diffusion-eta-to-zero-continuous-limit",
                                      "linear-algebra.la-summary-diffusion-view"])),
    pytest.param(lambda eta, w: eta * w, -1.0, id="heat-w-minus-identity", marks=control(
        "line 419's heat equation for any W: X - eta L X W with W = -I in place of W = I; the consensus check must "
        "reject it", models=["linear-algebra.la-laplacian-diffusion-neural-ode"]))])
def test_euler_steps_with_weights_scaled_by_eta_converge_to_the_matrix_ode(layer_weight, heat_w):
    a, x0, w = stable_softmax(gaussian((3, 3), 65)), gaussian((3, 2), 66), gaussian((2, 2), 67)
    # dX/dt = A X W~ is linear in vec(X): d vec(X)/dt = (W~^T kron A) vec(X)
    vec_x0 = x0.T.contiguous().reshape(-1)  # column-major vec
    exact = (torch.linalg.matrix_exp(torch.kron(w.T.contiguous(), a)) @ vec_x0).reshape(2, 3).T
    errors = []
    for steps in (100, 1000):
        x, eta = x0.clone(), 1.0 / steps
        for _ in range(steps):
            x = x + a @ x @ layer_weight(eta, w)  # the residual update with W = eta W~
        errors.append((x - exact).abs().max().item())
    record("Euler error at eta = 1e-2, 1e-3", errors)
    # first order: 10x the steps divide the error by ~10; 5 leaves room for the O(eta^2) term of the error
    claim_assert(errors[1] < errors[0] / 5, "the Euler error does not fall like eta", errors=errors)
    # W = I, X_{l+1} = X_l - eta L X_l: explicit Euler of the heat equation; it converges to consensus 1 pi^T X_0
    x = x0.clone()
    for _ in range(2000):
        x = x - 0.05 * (torch.eye(3, dtype=torch.float64) - a) @ x * heat_w
    spread = (x - x.mean(0)).abs().max().item()
    # contraction 1 - 0.05 (1 - |lambda_2|) per step kills the initial spread (~e^-75 after 2000 steps); each step's
    # rounding, ~n eps |X|, is damped by it too, summing to n eps |X| / (0.05 (1 - |lambda_2|)); 4x that
    lam2 = eig(a).abs().sort(descending=True).values[1].item()
    tol = 4 * 3 * EPS64 * x0.abs().max().item() / (0.05 * (1 - lam2))
    record("consensus spread / tolerance", spread / tol)
    claim_assert(spread <= tol, "the graph heat equation does not reach consensus", spread=spread, tol=tol)


@pytest.mark.claim("linear-algebra.la-laplacian-diffusion-neural-ode")
@refutes(reason="n = 3 tokens, W = -I, eta = 0.05, 200 steps: the smallest sign flip of W; a heat equation damps "
                "differences between tokens")
def test_laplacian_update_is_a_diffusion_for_any_w():
    a, x = stable_softmax(gaussian((3, 3), 68)), gaussian((3, 2), 69)
    spread0 = (x - x.mean(0)).abs().max().item()
    for _ in range(200):
        x = x - 0.05 * (torch.eye(3, dtype=torch.float64) - a) @ x @ (-torch.eye(2, dtype=torch.float64))
    spread = (x - x.mean(0)).abs().max().item()
    record("spread after / before 200 steps", spread / spread0)
    claim_assert(spread <= spread0, "with W = -I the update is a backward heat equation: token differences grow",
                 spread_before=spread0, spread_after=spread)


def _spectral_condition():
    ns = printed_code("optimization.snippet-la-spectral-conditioned-attention").namespace
    return ns["SpectralConditionedAttention"](8, 2)


def _printed_spectral_condition(w: torch.Tensor) -> torch.Tensor:
    return _spectral_condition().spectral_condition(w).detach()


def _spectral_condition_min_sigma_1e3(w: torch.Tensor) -> torch.Tensor:
    layer = _spectral_condition()
    layer.min_sigma = 1e-3
    return layer.spectral_condition(w).detach()


@pytest.mark.claim("linear-algebra.spectral-condition-clamps-singular-values", "optimization.spectral-condition-kappa-bound-100")
@pytest.mark.parametrize("condition", [
    pytest.param(_printed_spectral_condition, id="printed"),
    pytest.param(_spectral_condition_min_sigma_1e3, id="min-sigma-1e-3",
                 marks=control("the printed method with min_sigma = 0.001 for the default 0.01: condition number "
                                   "1000",
                               models="optimization.spectral-condition-kappa-bound-100")),
])
@given(w=real_matrices(1, 8, 10.0))
@example(w=_diag(5.0, 1e-4))  # one value above max_sigma, one below min_sigma
def test_spectral_condition_clamps_singular_values_to_the_interval(w, condition):
    out = condition(w)
    s = singular_values(out)
    # out = U clamp(S) V^T has norm <= 1: rebuilding it and decomposing it again moves each value by <= 2 _tol(out)
    tol = 2 * _tol(out)
    claim_assert(bool((s >= 0.01 - tol).all()) and bool((s <= 1.0 + tol).all()),
                 "a singular value left [0.01, 1]", w=w, singular_values=s)
    # the same errors, relative to the smallest value 0.01
    claim_assert((s[0] / s[-1]).item() <= 100 * (1 + 2 * tol / 0.01), "condition number above 100", w=w)
    expected = torch.clamp(singular_values(w), 0.01, 1.0)
    # two SVDs of W (the snippet's, ours), each within _tol(w) absolute, and the rebuilt out's
    claim_assert((s - expected).abs().max() <= 2 * _tol(w) + tol, "the singular values are not clamp(s, 0.01, 1)", w=w)


@pytest.mark.claim("linear-algebra.la-intro-variants-are-matrix-factorizations")
@refutes(reason="a rank-one 4 x 4 weight: spectral conditioning lifts its three zero singular values to 0.01")
def test_spectral_conditioning_is_a_low_rank_factorisation():
    w = torch.outer(gaussian((4,), 70), gaussian((4,), 71))
    out = _spectral_condition().spectral_condition(w).detach()
    record("lifted singular value 0.01 / rank threshold", 0.01 / _tol(out))
    claim_assert(_numerical_rank(out) <= _numerical_rank(w), "clamping raises the rank from 1 to 4: it is a "
                 "spectral modification, not a factorisation or approximation", rank_before=_numerical_rank(w),
                 rank_after=_numerical_rank(out), singular_values=singular_values(out))


@pytest.mark.claim("optimization.spectral-conditioned-attention-forward-returns-none")
@refutes(reason="one call on a (1, 3, 8) input: the forward body ends at the placeholder comment")
def test_spectral_conditioned_attention_forward_returns_the_attention_output():
    out = _spectral_condition()(torch.randn(1, 3, 8))
    claim_assert(out is not None, "forward() returns None", returned=repr(out))


@pytest.mark.claim("optimization.spectral-conditioned-attention-forward-returns-none",
                   "optimization.snippet-la-spectral-conditioned-attention")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "qkv = F.linear(x, W_qkv)", "return F.linear(x, W_qkv)", "forward returning what it computes, as a layer "
    "returns its output", models=["optimization.spectral-conditioned-attention-forward-returns-none",
                                  "optimization.snippet-la-spectral-conditioned-attention"])])
def test_spectral_conditioned_attention_forward_projects_x_by_the_conditioned_w_qkv_and_returns_none(mutation):
    claim = "optimization.snippet-la-spectral-conditioned-attention"
    cls = (mutant_code(claim, *mutation) if mutation else printed_code(claim)).namespace["SpectralConditionedAttention"]
    layer = cls(64, 4).double()  # the document's call, SpectralConditionedAttention(d_model, n_heads)
    x = gaussian((2, 10, 64), 74)
    with torch.no_grad():
        out, local = locals_at_return(type(layer).forward, lambda: layer(x))
        # its clamping is decided by linear-algebra.spectral-condition-clamps-singular-values
        conditioned = layer.spectral_condition(layer.W_qkv.weight)
    claim_assert(out is None, "forward returns a value", returned=type(out).__name__)
    qkv = local.get("qkv")
    claim_assert(isinstance(qkv, torch.Tensor) and qkv.shape == (2, 10, 192), "forward computes no qkv of shape "
                 "(B, n, 3 d_model)", locals=sorted(local))
    assert_equal_up_to_rounding(qkv, x @ conditioned.T, "qkv is not x W_c^T, W_c = spectral_condition(W_qkv)")


@pytest.mark.claim("linear-algebra.la-summary-low-rank-lora-qkv-ffn")
@refutes(reason="a GELU FFN with d = 8, d_ff = 32 (the 4x width of the document's FFN) at one seeded input")
def test_ffn_is_a_low_rank_map():
    torch.manual_seed(72)
    ffn = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).double()
    jac = torch.func.jacrev(ffn)(gaussian((8,), 73))
    record("smallest singular value / rank threshold", singular_values(jac)[-1].item() / _tol(jac))
    claim_assert(_numerical_rank(jac) < 8, "the FFN's Jacobian has full rank d = 8: the FFN is not low rank",
                 rank=_numerical_rank(jac), d=8)


def _side_by_side(y: torch.Tensor, d_k: int):
    return y.split(d_k, dim=1)


def _interleaved(y: torch.Tensor, d_k: int):
    return y[:, 0::3], y[:, 1::3], y[:, 2::3]


@pytest.mark.claim("linear-algebra.la-intro-qkv-three-matmuls")
@pytest.mark.parametrize("split", [
    pytest.param(_side_by_side, id="exact"),
    pytest.param(_interleaved, id="interleaved",
                 marks=control("columns read interleaved (q1 k1 v1 q2 ...), not as [W^Q W^K W^V] side by side")),
])
@given(seed=seeds(), n=st.integers(1, 6), d=st.integers(1, 6), d_k=st.integers(1, 4))
@example(seed=0, n=2, d=2, d_k=2)  # d_k > 1: the two layouts differ
def test_fused_qkv_projection_is_three_matrix_products(seed, n, d, d_k, split):
    x, w = gaussian((n, d), seed), gaussian((d, 3 * d_k), seed + 1)  # [W^Q W^K W^V] side by side
    q, k, v = split(x @ w, d_k)
    for got, part in zip((q, k, v), w.split(d_k, dim=1)):
        # two d-term dot products per entry (gamma_d |X||W| each), summed in possibly different orders
        claim_assert((got - x @ part).abs().max() <= 2 * d * EPS64 * (x.abs() @ part.abs()).max().item(),
                     "a slice of X [W^Q W^K W^V] is not X W", seed=seed)
