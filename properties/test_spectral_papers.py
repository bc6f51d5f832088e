"""spectral.txt: informal spectral heuristics decided by small exact constructions (issue 12, slice Fu).

Each test builds the smallest object that decides one sentence of the document: a two-block
row-stochastic matrix (line 22 vs Definition 2.1), RoPE on adversarial, identical and i.i.d.
Gaussian tokens (line 156), linear maps with full and deficient rank (lines 523, 525), kernel
regression in a fixed eigenbasis (lines 268, 644), one fixed attention layer on two inputs
(line 651) and a Kaiming-uniform weight matrix (line 290 vs line 278). All randomness is seeded.
"""
import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record, refutes
from impl.rope import rope_frequencies, rope_interleaved, rotation_matrix
from impl.softmax import stable_softmax
from impl.spectral import eigenvalues, singular_values, stable_rank

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- line 22 vs Definition 2.1 (line 52): "spectral gap = the first few eigenvalues dominate" ---------------------

@pytest.mark.claim("spectral.spectral-gap-top-few-dominate")
@refutes(reason="n = 4, two uniform 2 x 2 blocks: the smallest row-stochastic matrix whose top two eigenvalues "
                "(1, 1) dominate the rest (0, 0)")
def test_two_dominant_eigenvalues_give_a_zero_definition_2_1_gap():
    block = torch.full((2, 2), 0.5, dtype=F64)
    a = torch.block_diag(block, block)
    ev = eigenvalues(a).abs()
    gap = (ev[0] - ev[1]).item()
    record("moduli", ev.tolist())
    claim_assert(gap > 0.5, "the first two eigenvalues are far above the others (1, 1 vs 0, 0), yet the gap of "
                 "Definition 2.1, lambda_1 - lambda_2, is 0: the document reads a small gap as near-uniform attention",
                 eigenvalue_moduli=ev.tolist(), gap=gap)


def _two_uniform_blocks(n: int) -> torch.Tensor:
    """blockdiag(1 1^T / k, 1 1^T / (n - k)), k = n // 2: row-stochastic with two dominant eigenvalues 1, 1."""
    k = n // 2
    return torch.block_diag(torch.full((k, k), 1.0 / k, dtype=F64), torch.full((n - k, n - k), 1.0 / (n - k), dtype=F64))


@pytest.mark.claim("spectral.spectral-gap-top-few-dominate")
@pytest.mark.parametrize("leading", [pytest.param(lambda n: torch.full((n, n), 1.0 / n, dtype=F64), id="one-dominant"),
                                     pytest.param(_two_uniform_blocks, id="two-dominant", marks=control(
    "a few (two) dominant eigenvalues, the line's reading of the gap: two uniform blocks in place of 1 1^T / n; the "
    "gap check must reject it", models=["spectral.spectral-gap-top-few-dominate"]))])
@example(n=4, t=0.0, seed=0)  # the refutation's two 2 x 2 blocks
@given(n=st.integers(2, 12), t=st.floats(0.0, 0.9), seed=st.integers(0, 2**16))
def test_definition_2_1_gap_is_large_when_the_single_top_eigenvalue_dominates(leading, n, t, seed):
    # A = (1 - t) 11^T / n + t B with B row-stochastic: lambda_1 = 1, every other eigenvalue is t lambda_i(B), |.| <= t
    b = stable_softmax(torch.randn(n, n, generator=_gen(seed), dtype=F64) * 3)
    a = (1 - t) * leading(n) + t * b
    ev = eigenvalues(a).abs()
    claim_assert(abs(ev[0].item() - 1) < 1e-9, "lambda_1 of a row-stochastic matrix is not 1", n=n, t=t, seed=seed)
    claim_assert((ev[0] - ev[1]).item() >= 1 - t - 1e-7, "only lambda_1 dominates (others <= t) but the gap is < 1 - t",
                 n=n, t=t, seed=seed, moduli=ev.tolist())


# --- line 156: "RoPE and other relative encodings mitigate rank collapse" ----------------------------------------

def _attention(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return stable_softmax(q @ k.T / math.sqrt(q.shape[-1]))


def _rope(x: torch.Tensor) -> torch.Tensor:
    n, d = x.shape
    return rope_interleaved(x, torch.arange(n, dtype=F64), rope_frequencies(d))


@pytest.mark.claim("spectral.rope-mitigates-rank-collapse")
@refutes(reason="n = 16 tokens, d = 8: queries/keys q_i = R_i^T u, k_j = R_j^T v (u, v fixed), the simplest inputs "
                "on which RoPE's rotations cancel the positional variation")
def test_rope_can_create_rank_collapse():
    n, d = 16, 8
    theta = rope_frequencies(d)
    u, v = torch.randn(d, generator=_gen(1), dtype=F64) * 3, torch.randn(d, generator=_gen(2), dtype=F64) * 3
    rot = torch.stack([rotation_matrix(float(m), theta) for m in range(n)])  # (n, d, d)
    q = torch.einsum("mji,j->mi", rot, u)  # R_m^T u
    k = torch.einsum("mji,j->mi", rot, v)
    plain, rope = stable_rank(_attention(q, k)).item(), stable_rank(_attention(_rope(q), _rope(k))).item()
    record("stable_rank", {"plain": plain, "rope": rope})
    claim_assert(rope >= plain, "with RoPE the attention matrix is exactly uniform (stable rank 1) while without it "
                 "it is not: RoPE made rank collapse worse", plain_stable_rank=plain, rope_stable_rank=rope)


@pytest.mark.claim("spectral.rope-mitigates-rank-collapse")
@given(d=st.sampled_from([4, 8, 16]), n=st.integers(3, 24), seed=st.integers(0, 2**16))
def test_rope_breaks_the_collapse_of_identical_tokens(d, n, seed):
    g = _gen(seed)
    q, k = torch.randn(d, generator=g, dtype=F64).expand(n, d), torch.randn(d, generator=g, dtype=F64).expand(n, d)
    plain = _attention(q, k)
    claim_assert(torch.allclose(plain, torch.full((n, n), 1.0 / n, dtype=F64)), "identical tokens without positions "
                 "do not give uniform attention", d=d, n=n, seed=seed)
    s = singular_values(_attention(_rope(q.clone()), _rope(k.clone())))
    claim_assert((s[1] / s[0]).item() > 1e-6, "RoPE left the attention of identical tokens rank one", d=d, n=n,
                 seed=seed, sigma=s[:3].tolist())


def _alibi_attention(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) - |i - j|): a relative encoding (ALiBi, slope 1) that does change the law of A."""
    pos = torch.arange(q.shape[0], dtype=F64)
    return stable_softmax(q @ k.T / math.sqrt(q.shape[-1]) - (pos[:, None] - pos[None, :]).abs())


@pytest.mark.claim("spectral.rope-mitigates-rank-collapse")
@pytest.mark.parametrize("encoded", [pytest.param(lambda q, k: _attention(_rope(q), _rope(k)), id="rope"), pytest.param(
    _alibi_attention, id="alibi", marks=control(
        "a relative encoding that does mitigate collapse in the random model (an ALiBi distance penalty, which raises "
        "the stable rank), as the line has RoPE do: the statistical-equality check must reject it",
        models=["spectral.rope-mitigates-rank-collapse"]))])
def test_rope_leaves_gaussian_random_attention_statistically_unchanged(encoded):
    # i.i.d. N(0, I) rows stay i.i.d. N(0, I) after the orthogonal per-position rotations: the law of A is unchanged
    n, d, samples = 128, 16, 24
    theta = rope_frequencies(d)
    for m in (1, 7, 100):
        r = rotation_matrix(float(m), theta)
        claim_assert(torch.allclose(r.T @ r, torch.eye(d, dtype=F64), atol=1e-12), "a RoPE rotation is not orthogonal",
                     position=m)
    g = _gen(2026)
    plain, rope = [], []
    for _ in range(samples):
        q, k = torch.randn(n, d, generator=g, dtype=F64), torch.randn(n, d, generator=g, dtype=F64)
        plain.append(stable_rank(_attention(q, k)).item())
        rope.append(stable_rank(encoded(q, k)).item())
    p, r = torch.tensor(plain), torch.tensor(rope)
    se = math.sqrt((p.var() + r.var()).item() / samples)
    record("mean_stable_rank", {"plain": p.mean().item(), "rope": r.mean().item(), "se": se, "n": n, "d": d})
    claim_assert(abs(p.mean().item() - r.mean().item()) <= 4 * se, "RoPE changed the mean stable rank of Gaussian "
                 "random attention by more than 4 standard errors", plain=p.mean().item(), rope=r.mean().item(), se=se)


# --- lines 523 / 525: full-rank and low-rank input Jacobians -----------------------------------------------------

@pytest.mark.claim("spectral.full-rank-jacobian-overfit")
@refutes(reason="f(x) = 1e-6 x in two dimensions: the smallest full-rank Jacobian, with negligible sensitivity")
def test_a_full_rank_jacobian_can_be_arbitrarily_insensitive():
    x = torch.tensor([0.3, -0.2], dtype=F64)
    jac = torch.autograd.functional.jacobian(lambda z: 1e-6 * z, x)
    rank, norm = int(torch.linalg.matrix_rank(jac)), torch.linalg.matrix_norm(jac, 2).item()
    claim_assert(rank < 2 or norm > 1e-3, "the Jacobian is full rank yet a unit input change moves the output by "
                 "at most 1e-6: rank says nothing about the size of the sensitivity", rank=rank, spectral_norm=norm)


def _numerical_rank(jac: torch.Tensor) -> float:
    s = singular_values(jac)
    return float((s > 16 * max(jac.shape) * 2.0**-52 * s[0]).sum())


@pytest.mark.claim("spectral.full-rank-jacobian-overfit")
@pytest.mark.parametrize("sensitivity", [pytest.param(lambda jac: singular_values(jac)[0].item(), id="spectral-norm"),
                                         pytest.param(_numerical_rank, id="rank", marks=control(
    "the sensitivity read from the rank, as the line reads it: the check that 1e-6 J is 1e-6 times as sensitive must "
    "reject it", models=["spectral.full-rank-jacobian-overfit"]))])
@given(m=st.integers(1, 6), extra=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_a_full_rank_jacobian_responds_to_every_input_direction(sensitivity, m, extra, seed):
    g = _gen(seed)
    jac = torch.randn(m + extra, m, generator=g, dtype=F64)  # full column rank almost surely
    s = singular_values(jac)
    if s[-1].item() < 1e-8:
        return
    v = torch.randn(m, generator=g, dtype=F64)
    claim_assert(torch.linalg.vector_norm(jac @ v).item() >= s[-1].item() * torch.linalg.vector_norm(v).item() * (1 - 1e-9),
                 "a direction is mapped below sigma_min |v|", m=m, seed=seed)
    # the size of the response is not the rank's: 1e-6 J keeps full rank with 1e-6 times the sensitivity (the SVD of
    # a scaled matrix scales exactly up to ~ m eps relative, 1e-9 is a margin)
    claim_assert(sensitivity(1e-6 * jac) <= 1e-6 * sensitivity(jac) * (1 + 1e-9), "the sensitivity of 1e-6 J is not "
                 "1e-6 times that of J", m=m, seed=seed, sensitivity=sensitivity(jac), scaled=sensitivity(1e-6 * jac))


@pytest.mark.claim("spectral.low-rank-jacobian-underfit")
@refutes(reason="f(x1, x2) = (x1, x2^2) at the origin: the smallest map whose Jacobian is rank deficient (rank 1 of 2)")
def test_a_rank_deficient_jacobian_does_not_mean_the_direction_is_ignored():
    f = lambda z: torch.stack([z[0], z[1] ** 2])  # noqa: E731
    x = torch.zeros(2, dtype=F64)
    jac = torch.autograd.functional.jacobian(f, x)
    e2 = torch.tensor([0.0, 1.0], dtype=F64)
    moved = torch.linalg.vector_norm(f(x + 0.5 * e2) - f(x)).item()
    record("jacobian_and_change", {"rank": int(torch.linalg.matrix_rank(jac)), "change_along_null_direction": moved})
    claim_assert(int(torch.linalg.matrix_rank(jac)) == 2 or moved == 0.0, "the Jacobian annihilates e2, yet moving "
                 "the input along e2 changes the output (at second order): the direction is ignored only to first "
                 "order at this point", rank=int(torch.linalg.matrix_rank(jac)), change=moved)


@pytest.mark.claim("spectral.low-rank-jacobian-underfit")
@pytest.mark.parametrize("curvature", [pytest.param(1.0, id="quadratic-along-null"), pytest.param(0.0, id="linear", marks=control(
    "the model that truly ignores the null direction (f = J x, no higher-order term), as the line reads a low-rank "
    "Jacobian: the check that f still moves along it must reject it", models=["spectral.low-rank-jacobian-underfit"]))])
@given(d=st.integers(2, 8), r=st.integers(0, 7), seed=st.integers(0, 2**16))
def test_a_rank_deficient_jacobian_has_directions_it_ignores_to_first_order(curvature, d, r, seed):
    r = min(r, d - 1)
    g = _gen(seed)
    jac = torch.randn(d, r, generator=g, dtype=F64) @ torch.randn(r, d, generator=g, dtype=F64)  # rank <= r < d
    _, s, vh = torch.linalg.svd(jac)
    v = vh[-1]  # a right singular vector of a zero singular value
    claim_assert(torch.linalg.vector_norm(jac @ v).item() <= 1e-9 * max(1.0, s[0].item()),
                 "no input direction is annihilated by a rank-deficient Jacobian", d=d, r=r, seed=seed)
    # ignored to first order only: f(x) = J x + c (v . x)^2 e_1 has Jacobian J at 0, yet f(v / 2) - f(0) = J v / 2 +
    # c e_1 / 4, of norm >= c / 4 - |J v| / 2 (|J v| <= 1e-9 ||J||, from the check above)
    f = lambda x: jac @ x + curvature * (v @ x) ** 2 * torch.eye(d, dtype=F64)[0]  # noqa: E731
    x0 = torch.zeros(d, dtype=F64)
    premise(torch.allclose(torch.autograd.functional.jacobian(f, x0), jac, atol=0.0), "the Jacobian of f at 0 is not J")
    claim_assert(torch.linalg.vector_norm(f(0.5 * v) - f(x0)).item() >= 0.2, "f does not move along the null direction "
                 "of its Jacobian", d=d, r=r, seed=seed)


# --- lines 268 and 644: the NTK spectrum, generalization and training dynamics ------------------------------------

def _ridge_test_error(lam: torch.Tensor, w_star: torch.Tensor, n: int, seed: int, ridge: float = 1e-4) -> float:
    """Kernel (ridge) regression in the eigenbasis of a fixed kernel with eigenvalues lam: test error on fresh data."""
    g = _gen(seed)
    x = torch.randn(n, lam.numel(), generator=g, dtype=F64) * lam.sqrt()
    y = x @ w_star
    w = torch.linalg.solve(x.T @ x + ridge * torch.eye(lam.numel(), dtype=F64), x.T @ y)
    diff = w - w_star
    return (diff * lam * diff).sum().item()  # E[(x^T (w - w*))^2] for x ~ N(0, diag(lam))


@pytest.mark.claim("spectral.ntk-tail-sets-generalization")
@refutes(reason="one kernel with eigenvalues i^-2 (i = 1..40), 20 samples, two unit-variance targets: the smallest "
                "setting where a target on the top and one on the tail eigenfunction are both representable")
def test_the_same_spectrum_gives_very_different_generalization():
    d, n = 40, 20
    lam = torch.arange(1, d + 1, dtype=F64) ** -2.0
    top, tail = torch.zeros(d, dtype=F64), torch.zeros(d, dtype=F64)
    top[0], tail[-1] = 1 / lam[0].sqrt(), 1 / lam[-1].sqrt()  # both targets have variance 1
    e_top, e_tail = _ridge_test_error(lam, top, n, 5), _ridge_test_error(lam, tail, n, 5)
    record("test_error", {"target_on_top_eigenfunction": e_top, "target_on_tail_eigenfunction": e_tail})
    claim_assert(max(e_top, e_tail) <= 2 * min(e_top, e_tail), "the kernel (hence its spectrum and its tail) is the "
                 "same, yet the test errors differ by far more than a factor 2: the target's alignment decides",
                 error_top=e_top, error_tail=e_tail)


@pytest.mark.claim("spectral.ntk-tail-sets-generalization")
@pytest.mark.parametrize("target", [pytest.param(-1, id="on-the-tail"), pytest.param(0, id="on-the-top", marks=control(
    "a target on the top eigenfunction, for which the line has the tail decide generalization too: the check that "
    "shrinking the tail worsens the error must reject it", models=["spectral.ntk-tail-sets-generalization"]))])
def test_a_smaller_tail_eigenvalue_hurts_a_target_on_the_tail(target):
    d, n = 40, 20
    errors = []
    for tail_value in (1.0, 1e-2, 1e-4):
        lam = torch.arange(1, d + 1, dtype=F64) ** -2.0
        lam[-1] = tail_value
        w = torch.zeros(d, dtype=F64)
        w[target] = 1 / math.sqrt(lam[target].item())  # a unit-variance target
        errors.append(_ridge_test_error(lam, w, n, 5))
    record("test_error_vs_tail_eigenvalue", {"tail": [1.0, 1e-2, 1e-4], "error": errors})
    claim_assert(errors[0] < errors[1] < errors[2], "shrinking the tail eigenvalue did not worsen the error of a target "
                 "on the tail eigenfunction", errors=errors)


def _gd_residuals(kernel: torch.Tensor, r0: torch.Tensor, eta: float, steps: int) -> torch.Tensor:
    r = r0.clone()
    out = [r.clone()]
    for _ in range(steps):
        r = r - eta * kernel @ r
        out.append(r.clone())
    return torch.stack(out)


@pytest.mark.claim("spectral.ntk-spectrum-governs-training")
@pytest.mark.parametrize("components", [pytest.param(lambda u, r0: u.T @ r0, id="residual-in-eigenbasis"), pytest.param(
    lambda u, r0: r0.norm() / math.sqrt(r0.numel()) * torch.ones_like(r0), id="spectrum-alone", marks=control(
        "the prediction from the eigenvalues alone, the residual spread evenly over the eigenvectors whatever its "
        "alignment: the training-curve check must reject it", models=["spectral.ntk-spectrum-governs-training"]))])
@example(n=2, p=2, seed=0)
@given(n=st.integers(2, 8), p=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_in_the_kernel_regime_the_ntk_eigendecomposition_gives_the_training_curve(components, n, p, seed):
    g = _gen(seed)
    phi = torch.randn(n, p, generator=g, dtype=F64)  # a linear model f(x) = phi(x)^T theta: its NTK is phi phi^T
    y = torch.randn(n, generator=g, dtype=F64)
    kernel = phi @ phi.T
    eta = 0.5 / max(torch.linalg.eigvalsh(kernel)[-1].item(), 1e-12)
    theta = torch.zeros(p, dtype=F64)
    actual = []
    for _ in range(6):
        actual.append(phi @ theta - y)
        theta = theta - eta * phi.T @ (phi @ theta - y)  # gradient descent on (1/2)|phi theta - y|^2
    lam, u = torch.linalg.eigh(kernel)
    c0 = components(u, -y)
    predicted = torch.stack([u @ (c0 * (1 - eta * lam) ** t) for t in range(6)])
    claim_assert(torch.allclose(torch.stack(actual), predicted, atol=1e-9 * (1 + y.abs().max().item())),
                 "the residual of gradient descent is not (I - eta K)^t r_0 in the NTK eigenbasis", n=n, p=p, seed=seed)


@pytest.mark.claim("spectral.ntk-spectrum-governs-training")
@refutes(reason="n = 2 training points, two kernels with the same eigenvalues (1, 0.01) and swapped eigenvectors: "
                "the smallest case where eigenvalues alone leave the loss curve undetermined")
def test_equal_ntk_spectra_can_give_different_training_curves():
    k1 = torch.diag(torch.tensor([1.0, 0.01], dtype=F64))
    k2 = torch.diag(torch.tensor([0.01, 1.0], dtype=F64))
    r0 = torch.tensor([1.0, 0.0], dtype=F64)
    l1 = (_gd_residuals(k1, r0, 0.5, 20) ** 2).sum(-1)
    l2 = (_gd_residuals(k2, r0, 0.5, 20) ** 2).sum(-1)
    record("loss_after_20_steps", {"kernel_1": l1[-1].item(), "kernel_2": l2[-1].item()})
    claim_assert(torch.allclose(l1, l2, rtol=0.1), "same NTK eigenvalues, same targets, different loss curves: the "
                 "eigenvectors (alignment with the residual) matter too", loss1=l1[-1].item(), loss2=l2[-1].item())


# --- line 651: "stable rank of the attention matrix is proportional to knowledge capacity" -----------------------

@pytest.mark.claim("spectral.stable-rank-proportional-knowledge-capacity")
def test_the_stable_rank_of_one_layer_depends_on_its_input():
    """What can be decided offline: one fixed random attention layer (d = 16, n = 32) gives stable rank 1 on a
    repeated token and more on distinct tokens, so the line can only relate a data-averaged stable rank of trained
    models to their capacity, a relation no computation here decides."""
    d, n = 16, 32
    g = _gen(651)
    wq, wk = torch.randn(d, d, generator=g, dtype=F64), torch.randn(d, d, generator=g, dtype=F64)
    repeated = torch.randn(d, generator=g, dtype=F64).expand(n, d)
    distinct = torch.randn(n, d, generator=g, dtype=F64)
    ranks = [stable_rank(_attention(x @ wq, x @ wk)).item() for x in (repeated, distinct)]
    record("stable_rank", {"repeated_token": ranks[0], "distinct_tokens": ranks[1]})
    # a repeated token gives the rank-one uniform matrix, stable rank 1 up to an SVD's few ulps; 1e-6 is far above them
    claim_assert(abs(ranks[0] - 1) <= 1e-6 and ranks[1] > 1 + 1e-6, "the stable rank of a fixed layer does not "
                 "change with the input", repeated=ranks[0], distinct=ranks[1])


# --- line 290 vs line 278: the weight spectrum at initialisation -------------------------------------------------

def _kaiming_uniform_singular_values(m: int, seed: int) -> torch.Tensor:
    w = torch.empty(m, m, dtype=F64)
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=_gen(seed))
    return singular_values(w)


@pytest.mark.claim("spectral.weight-spectrum-uniform-at-init")
@refutes(reason="one 256 x 256 Kaiming-uniform matrix (PyTorch's nn.Linear default): large enough for its singular "
                "values to follow the quarter-circle law")
def test_kaiming_uniform_singular_values_are_not_uniformly_distributed():
    m = 256
    s = _kaiming_uniform_singular_values(m, 0).flip(0)  # ascending
    x = s / math.sqrt(m * (1.0 / m) / 3)  # in units of sqrt(m v): the quarter-circle law lives on [0, 2]
    ecdf = torch.arange(1, m + 1, dtype=F64) / m
    xc = x.clamp(0, 2)
    quarter_circle = (xc * torch.sqrt(4 - xc**2) / 2 + 2 * torch.asin(xc / 2)) / math.pi
    uniform = (x - x.min()) / (x.max() - x.min())
    ks_uniform = (ecdf - uniform).abs().max().item()
    ks_quarter_circle = (ecdf - quarter_circle).abs().max().item()
    record("ks_distance", {"uniform_on_range": ks_uniform, "quarter_circle": ks_quarter_circle})
    claim_assert(ks_uniform <= 2 * ks_quarter_circle, "the singular values follow the quarter-circle (Marchenko-"
                 "Pastur) law far more closely than a uniform law on their range", ks_uniform=ks_uniform,
                 ks_quarter_circle=ks_quarter_circle)


def _ks_to_quarter_circle(s: torch.Tensor, m: int) -> float:
    """Kolmogorov distance of m singular values (any order) to the quarter-circle law on [0, 2 sqrt(m v)], v = 1 / (3 m)."""
    x = s.sort().values / math.sqrt(m * (1.0 / m) / 3)  # in units of sqrt(m v): the law lives on [0, 2]
    xc = x.clamp(0, 2)
    cdf = (xc * torch.sqrt(4 - xc**2) / 2 + 2 * torch.asin(xc / 2)) / math.pi
    return (torch.arange(1, m + 1, dtype=F64) / m - cdf).abs().max().item()


@pytest.mark.claim("spectral.weight-spectrum-uniform-at-init")
@pytest.mark.parametrize("spectrum", [pytest.param(_kaiming_uniform_singular_values, id="kaiming-uniform"), pytest.param(
    lambda m, seed: torch.linspace(2 * math.sqrt(1 / 3), 0, m, dtype=F64), id="uniform-on-range", marks=control(
        "singular values uniform on the same range [0, 2 sqrt(m v)], the line's uniform spectrum: the quarter-circle "
        "check must reject it", models=["spectral.weight-spectrum-uniform-at-init"]))])
def test_kaiming_uniform_spectrum_has_no_dominant_singular_value(spectrum):
    s = spectrum(256, 0)
    # square matrix, entries of variance v: the singular values fill [0, 2 sqrt(m v)] (quarter circle), no outlier
    v = (1.0 / 256) / 3  # U(-b, b) with b = 1 / sqrt(fan_in) has variance b^2 / 3
    edge = 2 * math.sqrt(256 * v)
    record("sigma", {"max": s[0].item(), "second": s[1].item(), "edge": edge})
    claim_assert(s[0].item() <= 1.1 * edge and (s[0] / s[1]).item() < 1.1, "the top singular value sticks out of "
                 "the Marchenko-Pastur bulk", sigma_max=s[0].item(), edge=edge)
    # the measured distance is 0.008 (seed 0; 0.011 at seed 1), about 2-3 steps 1/m of the empirical CDF; a uniform law
    # on the same range is at 0.11: 0.05 separates them
    ks = _ks_to_quarter_circle(s, 256)
    claim_assert(ks <= 0.05, "the singular values do not follow the quarter-circle law", ks_quarter_circle=ks)
