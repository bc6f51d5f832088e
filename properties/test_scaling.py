"""The scaling factor 1/sqrt(d_k): the variance argument of foundations.txt lines 36-44.

Statistical claims are tested on a fixed seed with a stated sample size and a 6-sigma bound: the
test is deterministic, and a true claim would fail for a random seed with probability < 1e-8.
"""
import math

import pytest
import torch

from claimcheck import claim_assert, record

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


@pytest.mark.claim("attention.dot-product-variance")
@pytest.mark.parametrize("kind", sorted(FOURTH_MOMENT))
def test_dot_product_of_unit_variance_components_has_variance_d_k(kind):
    for d in DIMS:
        s = _dot_products(kind, d, seed=1000 + d)
        var = (s**2).mean().item()  # E[q.k] = 0 under the claim's assumptions, so Var = E[(q.k)^2]
        record(f"var(q.k)/d_k [{kind}, d_k={d}]", var / d)
        claim_assert(abs(var - d) <= _variance_bound(kind, d), "sample Var[q.k] is not d_k within 6 sigma",
                     distribution=kind, d_k=d, sample_variance=var, n=N)


@pytest.mark.claim("attention.scaled-logit-unit-variance")
@pytest.mark.parametrize("kind", sorted(FOURTH_MOMENT))
def test_scaling_by_sqrt_d_k_gives_unit_variance_logits(kind):
    for d in DIMS:
        s = _dot_products(kind, d, seed=2000 + d) / math.sqrt(d)
        var = (s**2).mean().item()
        record(f"var(q.k/sqrt d_k) [{kind}, d_k={d}]", var)
        claim_assert(abs(var - 1) <= _variance_bound(kind, d, scale2=1 / d), "scaled logits do not have unit variance",
                     distribution=kind, d_k=d, sample_variance=var, n=N)
