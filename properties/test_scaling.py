"""The scaling factor 1/sqrt(d_k): the variance argument of foundations.txt lines 36-44.

Statistical claims are tested on a fixed seed with a stated sample size and a 6-sigma bound: the
test is deterministic, and a true claim would fail for a random seed with probability < 1e-8.
"""
import math

import pytest
import sympy as sp
import torch

from claimcheck import claim_assert, control, record

N = 20_000  # samples of q . k per case
DIMS = (1, 16, 64, 256)
SIGMAS = 6.0


def _components(kind: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Zero-mean, unit-variance components of the named distribution (float64); (E x^4)."""
    if kind == "gaussian":
        return torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "rademacher":
        return torch.randint(0, 2, shape, generator=gen).double() * 2 - 1
    if kind == "uniform":  # U(-sqrt 3, sqrt 3) has variance 1
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * math.sqrt(3)
    raise ValueError(kind)


FOURTH_MOMENT = {"gaussian": 3.0, "rademacher": 1.0, "uniform": 9.0 / 5.0}


def _dot_products(kind: str, d: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    q, k = _components(kind, (N, d), gen), _components(kind, (N, d), gen)
    return (q * k).sum(-1)


def _variance_bound(kind: str, d: int, scale2: float = 1.0) -> float:
    """6 standard deviations of the estimator mean(S^2) of Var S, S = q . k (times scale^2).

    With X = q_i k_i (E X^2 = 1, E X^4 = m4^2) the fourth moment of S is d m4^2 + 3 d (d - 1), so
    Var(S^2) = d m4^2 + 3d(d - 1) - d^2 and the sample variance has std sqrt(Var(S^2) / N).
    """
    m4 = FOURTH_MOMENT[kind] ** 2
    var_s2 = d * m4 + 3 * d * (d - 1) - d * d
    return SIGMAS * math.sqrt(var_s2 / N) * scale2


@pytest.mark.claim("attention.dot-product-variance", "attention.dot-product-variance-proportional-dk",
                   "attention.la-scaling-iid-entries-assumption", "attention.la-scaling-var-qk-equals-dk",
                   "attention.la-scaling-std-qk-sqrt-dk", "softmax.la-unscaled-input-variance-grows-with-dk")
@pytest.mark.parametrize("kind, variance", [pytest.param(kind, lambda d: d, id=kind) for kind in sorted(FOURTH_MOMENT)] + [
    pytest.param("gaussian", lambda d: 1, id="var=1", marks=control("Var[q.k] = 1 for every d_k: no growth with d_k")),
    pytest.param("gaussian", lambda d: d * d, id="var=d_k^2", marks=control("Var[q.k] = d_k^2, i.e. Std = d_k"))])
def test_dot_product_of_unit_variance_components_has_variance_d_k(kind, variance):
    """Var = d_k for every d_k, so proportional to d_k; Std = sqrt(Var) = sqrt(d_k) (linear-algebra.txt
    lines 159-164 assume i.i.d. N(0, 1) entries: the gaussian case; the others show the argument needs
    only zero mean, unit variance and independence)."""
    for d in DIMS:
        s = _dot_products(kind, d, seed=1000 + d)
        var = (s**2).mean().item()  # E[q.k] = 0 under the claim's assumptions, so Var = E[(q.k)^2]
        record(f"var(q.k)/d_k [{kind}, d_k={d}]", var / d)
        record(f"std(q.k)/sqrt(d_k) [{kind}, d_k={d}]", math.sqrt(var / d))
        claim_assert(abs(var - variance(d)) <= _variance_bound(kind, d), "sample Var[q.k] is not d_k within 6 sigma",
                     distribution=kind, d_k=d, sample_variance=var, n=N)


@pytest.mark.claim("attention.scaled-logit-unit-variance", "attention.la-scaled-std-equals-one")
@pytest.mark.parametrize("kind, scale", [pytest.param(kind, math.sqrt, id=kind) for kind in sorted(FOURTH_MOMENT)] + [
    pytest.param("gaussian", float, id="divide-by-d_k", marks=control("q.k divided by d_k, not sqrt(d_k)"))])
def test_scaling_by_sqrt_d_k_gives_unit_variance_logits(kind, scale):
    for d in DIMS:
        s = _dot_products(kind, d, seed=2000 + d) / scale(d)
        var = (s**2).mean().item()
        record(f"var(q.k/sqrt d_k) [{kind}, d_k={d}]", var)
        claim_assert(abs(var - 1) <= _variance_bound(kind, d, scale2=1 / d), "scaled logits do not have unit variance",
                     distribution=kind, d_k=d, sample_variance=var, n=N)


def _independent_keys(q: sp.Matrix) -> sp.Matrix:
    return sp.Matrix(*q.shape, lambda j, k: sp.Symbol(f"K_{j}{k}"))


def _keys_from_queries(q: sp.Matrix) -> sp.Matrix:
    """K = Q W: keys a linear function of the queries (W symbolic, d_k x d_k)."""
    return q * sp.Matrix(q.shape[1], q.shape[1], lambda l, k: sp.Symbol(f"W_{l}{k}"))


@pytest.mark.claim("attention.la-scaling-dot-product-sum-of-dk-terms")
@pytest.mark.parametrize("d_k, keys", [pytest.param(d_k, _independent_keys, id=str(d_k)) for d_k in (1, 3, 8)] + [
    pytest.param(3, _keys_from_queries, id="keys-from-queries",
                 marks=control("K = Q W, keys computed from the queries: the terms share entries"))])
def test_score_entry_is_a_sum_of_d_k_products_of_disjoint_independent_entries(d_k, keys):
    """(Q K^T)_ij = sum_k Q_ik K_jk: d_k terms, each a function of its own pair of entries, so the
    terms are independent when the entries are (also for i = j: Q and K are different matrices)."""
    n = 2
    q = sp.Matrix(n, d_k, lambda i, k: sp.Symbol(f"Q_{i}{k}"))
    k_ = keys(q)
    s = q * k_.T
    for i in range(n):
        for j in range(n):
            terms = sp.Add.make_args(sp.expand(s[i, j]))
            variables = [t.free_symbols for t in terms]
            disjoint = all(a.isdisjoint(b) for x, a in enumerate(variables) for b in variables[x + 1:])
            claim_assert(len(terms) == d_k and disjoint and all(v == {q[i, m], k_[j, m]} for m, v in enumerate(
                sorted(variables, key=lambda v: sorted(map(str, v))))),
                "(Q K^T)_ij is not a sum of d_k products Q_ik K_jk of disjoint entries", i=i, j=j, entry=str(s[i, j]))


# ---- saturation without scaling (foundations.txt line 42; linear-algebra.txt lines 164-167) -------------

KEYS = 32  # keys per query
SAMPLES = 4000  # queries per d_k


def _softmax_jacobian(p: torch.Tensor) -> torch.Tensor:
    """d softmax / d logits = diag(p) - p p^T: (..., n) -> (..., n, n)."""
    return torch.diag_embed(p) - p[..., :, None] * p[..., None, :]


def _softmax_statistics(d: int, scaled: bool, seed: int,
                        jacobian=_softmax_jacobian) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample: max probability and Frobenius norm of the softmax Jacobian (``jacobian(p)``, diag(p) - p p^T).

    Gaussian q, k in R^d: given q, the logits q . k_j are independent N(0, |q|^2) over the keys, with
    |q|^2 ~ chi^2_d; sampling |q| and the standard normals is exact and costs no d-sized vectors.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():  # Chi2.sample draws from the global generator: seed it here, leave it as it was
        torch.manual_seed(seed)
        norm_q = torch.distributions.Chi2(torch.tensor(float(d), dtype=torch.float64)).sample((SAMPLES, 1)).sqrt()
    z = torch.randn((SAMPLES, KEYS), generator=gen, dtype=torch.float64)
    logits = norm_q * z / (math.sqrt(d) if scaled else 1.0)  # (SAMPLES, KEYS), std sqrt(d) unscaled
    p = torch.softmax(logits, dim=-1)
    return p.max(-1).values, torch.linalg.matrix_norm(jacobian(p))


@pytest.mark.claim("attention.large-logits-saturate-softmax-vanishing-gradient", "softmax.la-unscaled-softmax-tends-one-hot",
                   "softmax.la-unscaled-gradient-vanishing-saturation")
@pytest.mark.parametrize("jacobian", [pytest.param(_softmax_jacobian, id="diag-minus-outer"), pytest.param(
    lambda p: torch.diag_embed(p) + p[..., :, None] * p[..., None, :], id="diag-plus-outer",
    marks=control("the Jacobian's sign flipped, diag(p) + p p^T: it does not vanish at a one-hot p"))])
def test_unscaled_logits_saturate_softmax_as_d_k_grows_while_scaled_ones_do_not(jacobian):
    """Fixed seeds, 4000 queries of 32 keys per d_k; differences compared with 6 standard errors."""
    dims = (1, 16, 256, 4096, 65536)
    mean, se = {}, {}

    def statistics(d: int, scaled: bool) -> None:  # computed when first needed: a failing check stops early
        m, j = _softmax_statistics(d, scaled, seed=7000 + d, jacobian=jacobian)
        mean[(d, scaled)] = (m.mean().item(), j.mean().item())
        se[(d, scaled)] = (m.std().item() / math.sqrt(SAMPLES), j.std().item() / math.sqrt(SAMPLES))
        record(f"{'scaled' if scaled else 'unscaled'}: mean max probability, mean ||J||_F [d_k={d}]", mean[(d, scaled)])

    # from d_k = 16 on (logit std 4 over 32 keys) saturation sets in; below, spreading logits first
    # concentrate p on a few keys, which raises ||J|| (it peaks at two keys of probability 1/2)
    for a, b in zip(dims[1:], dims[2:]):
        for d in (a, b):
            if (d, False) not in mean:
                statistics(d, False)
        (pa, ja), (pb, jb) = mean[(a, False)], mean[(b, False)]
        margin_p = SIGMAS * math.hypot(se[(a, False)][0], se[(b, False)][0])
        margin_j = SIGMAS * math.hypot(se[(a, False)][1], se[(b, False)][1])
        claim_assert(pb > pa + margin_p and jb < ja - margin_j, "unscaled softmax does not saturate further as d_k grows",
                     d_k=(a, b), max_probability=(pa, pb), jacobian_norm=(ja, jb))
    top_p, top_j = mean[(dims[-1], False)]
    claim_assert(top_p > 0.99 and top_j < 0.01, "at d_k = 65536 unscaled softmax is not near one-hot with a vanishing "
                 "Jacobian", max_probability=top_p, jacobian_norm=top_j)
    statistics(dims[0], False)  # recorded: below d_k = 16 the unscaled softmax is not yet saturating
    for d in dims:
        statistics(d, True)
    # with 1/sqrt(d_k) the logits are ~N(0, 1) for every d_k (exactly so only as d_k grows: at d_k = 1
    # |q|^2 ~ chi^2_1 spreads them): the Jacobian norm stays within 15% while the unscaled one falls 20-fold
    scaled_j = [mean[(d, True)][1] for d in dims]
    claim_assert(max(scaled_j) <= 1.15 * min(scaled_j) and max(scaled_j) > 20 * top_j,
                 "scaled logits' Jacobian norm changes with d_k", jacobian_norms=scaled_j, unscaled_at_65536=top_j)
