"""Spectral metrics of attention and weight matrices, each defined by its formula.

The documents use one name for several quantities ("spectral_gap" is 1 - lambda_2, 1 - s_2/s_1,
s_1 - s_2 and s_2/s_1 in different places; "effective_rank" is a stable rank, an entropy rank and
a 99%-mass count). Here every quantity has its own name and formula:

* eigenvalues / singular values: :func:`eigenvalues` (complex, by decreasing modulus),
  :func:`singular_values` (decreasing);
* gaps: :func:`eigenvalue_gap` ``|lambda_1| - |lambda_2|`` (for a row-stochastic matrix the absolute
  spectral gap ``1 - |lambda_2|``, Levin & Peres, *Markov Chains and Mixing Times*, sec. 12.2),
  :func:`singular_value_gap` ``s_1 - s_2``, :func:`relative_singular_value_gap` ``1 - s_2/s_1`` and
  :func:`singular_value_ratio` ``s_2/s_1``;
* ranks: :func:`effective_rank` ``exp(H(s / sum s))`` (Roy & Vetterli 2007, eq. 2-3),
  :func:`stable_rank` ``||A||_F^2 / ||A||_2^2`` (Rudelson & Vershynin 2007), and
  :func:`mass_rank` the least k with ``sum_{i<=k} s_i >= q sum_i s_i``;
* :func:`spectral_concentration` ``kappa(W) = lambda_1 / sum_i lambda_i`` of a general (non-symmetric)
  square matrix, from :func:`eig`: ``sum_i lambda_i = tr W`` is real, lambda_1 is the
  eigenvalue of largest real part;
* :func:`stationary_distribution` the left Perron vector ``pi^T A = pi^T`` of a row-stochastic matrix;
* norms: :func:`frobenius_norm` ``sqrt(sum W_ij^2)``, :func:`nuclear_norm` ``sum s_i``,
  :func:`spectral_norm` ``s_1``, and :func:`spectral_normalize` ``W / s_1`` (Miyato et al. 2018, eq. 8);
* :func:`marchenko_pastur_edges` / :func:`marchenko_pastur_density`: the limiting eigenvalue law of
  ``W W^T`` for an m x n matrix of i.i.d. entries of variance v (Marchenko & Pastur 1967;
  Bai & Silverstein, *Spectral Analysis of Large Dimensional Random Matrices*, Thm. 3.6).

Matrices are (..., m, n) tensors; metrics reduce the last two dimensions.
"""
from __future__ import annotations

import math

import torch


def _square(a: torch.Tensor, what: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{what} needs square matrices (..., n, n), got shape {tuple(a.shape)}")


def _matrix(a: torch.Tensor, what: str) -> None:
    if a.ndim < 2:
        raise ValueError(f"{what} needs matrices (..., m, n), got shape {tuple(a.shape)}")


def eig(a: torch.Tensor, vectors: bool = False):
    """Eigenvalues (and with ``vectors`` eigenvectors) of a general square matrix (..., n, n), complex.

    On the CPU they come from numpy's LAPACK ``geev`` (OpenBLAS), not torch's: torch's CPU build takes
    ``geev`` from MKL, which reports "failed to converge" for some exactly rank-one matrices of identical
    rows (the attention-sink matrix 1 p^T, n = 8, p = softmax(1.78, 0, ..., 0), for one), and
    ``torch.linalg.eig`` corrupts the heap on that failure (torch 2.13: "double free or corruption" a few
    allocations later). numpy returns their eigenvalues {1, 0, ..., 0}. Tensors that need a gradient, or
    live on another device, use torch.
    """
    if a.device.type != "cpu" or a.requires_grad:
        return torch.linalg.eig(a) if vectors else torch.linalg.eigvals(a)
    import numpy as np

    m = a.detach().numpy()
    out = np.linalg.eig(m) if vectors else (np.linalg.eigvals(m),)
    complex_dtype = np.complex128 if m.dtype == np.float64 or m.dtype == np.complex128 else np.complex64
    out = tuple(torch.from_numpy(np.ascontiguousarray(x, dtype=complex_dtype)) for x in out)
    return out if vectors else out[0]


def eigenvalues(a: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of a square matrix (..., n, n), complex, sorted by decreasing modulus: (..., n)."""
    _square(a, "eigenvalues")
    ev = eig(a)
    order = ev.abs().argsort(dim=-1, descending=True)
    return ev.gather(-1, order)


def singular_values(a: torch.Tensor) -> torch.Tensor:
    """Singular values s_1 >= s_2 >= ... of (..., m, n): (..., min(m, n))."""
    _matrix(a, "singular_values")
    return torch.linalg.svdvals(a)


def eigenvalue_gap(a: torch.Tensor) -> torch.Tensor:
    """``|lambda_1| - |lambda_2|`` (moduli in decreasing order); ``1 - |lambda_2|`` for row-stochastic A."""
    ev = eigenvalues(a).abs()
    if ev.shape[-1] < 2:
        raise ValueError("eigenvalue_gap needs n >= 2")
    return ev[..., 0] - ev[..., 1]


def singular_value_gap(a: torch.Tensor) -> torch.Tensor:
    """``s_1 - s_2``."""
    s = singular_values(a)
    if s.shape[-1] < 2:
        raise ValueError("singular_value_gap needs min(m, n) >= 2")
    return s[..., 0] - s[..., 1]


def singular_value_ratio(a: torch.Tensor) -> torch.Tensor:
    """``s_2 / s_1`` (0 for an exactly rank-one matrix, 1 when the top two are equal)."""
    s = singular_values(a)
    if s.shape[-1] < 2:
        raise ValueError("singular_value_ratio needs min(m, n) >= 2")
    return s[..., 1] / s[..., 0]


def relative_singular_value_gap(a: torch.Tensor) -> torch.Tensor:
    """``1 - s_2 / s_1``."""
    return 1 - singular_value_ratio(a)


def effective_rank(a: torch.Tensor) -> torch.Tensor:
    """Roy & Vetterli (2007) effective rank ``exp(-sum_i p_i log p_i)``, ``p = s / sum s`` (0 log 0 = 0).

    Lies in [1, rank(a)]: 1 for rank one, k for k equal nonzero singular values.
    """
    s = singular_values(a)
    p = s / s.sum(dim=-1, keepdim=True)
    plogp = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, torch.ones_like(p))), torch.zeros_like(p))
    return torch.exp(-plogp.sum(dim=-1))


def stable_rank(a: torch.Tensor) -> torch.Tensor:
    """``||A||_F^2 / ||A||_2^2 = sum_i s_i^2 / s_1^2``, in [1, rank(a)]."""
    s = singular_values(a)
    return (s**2).sum(dim=-1) / s[..., 0] ** 2


def mass_rank(a: torch.Tensor, q: float = 0.99) -> torch.Tensor:
    """The least k such that the top k singular values carry at least a fraction q of ``sum_i s_i``."""
    if not 0 < q <= 1:
        raise ValueError(f"mass_rank needs 0 < q <= 1, got {q}")
    s = singular_values(a)
    share = s.cumsum(dim=-1) / s.sum(dim=-1, keepdim=True)
    return (share < q).sum(dim=-1) + 1


def spectral_concentration(w: torch.Tensor) -> torch.Tensor:
    """``kappa(W) = lambda_1 / sum_i lambda_i`` for a general square W (..., d, d), as a complex tensor.

    Eigenvalues come from :func:`eig` (no symmetry assumed); ``sum_i lambda_i = tr W``;
    lambda_1 is the eigenvalue of largest real part (the largest eigenvalue when all are real).
    kappa is real and in (0, 1] exactly when the eigenvalues are real and nonnegative with tr W > 0
    (e.g. W positive semidefinite); for a general W_Q W_K^T it can be complex, negative, above 1,
    or undefined (tr W = 0).
    """
    _square(w, "spectral_concentration")
    ev = eig(w)
    lam1 = ev.gather(-1, ev.real.argmax(dim=-1, keepdim=True)).squeeze(-1)
    return lam1 / ev.sum(dim=-1)


def stationary_distribution(a: torch.Tensor) -> torch.Tensor:
    """Left Perron vector of a row-stochastic matrix (n, n): pi >= 0, sum pi = 1, pi^T A = pi^T.

    Solved as the eigenvector of A^T for the eigenvalue closest to 1 (unique when A > 0).
    """
    _square(a, "stationary_distribution")
    if a.ndim != 2:
        raise ValueError(f"stationary_distribution takes one matrix (n, n), got shape {tuple(a.shape)}")
    ev, vec = eig(a.T, vectors=True)
    pi = vec[:, (ev - 1).abs().argmin()].real
    return pi / pi.sum()


def frobenius_norm(w: torch.Tensor) -> torch.Tensor:
    """``sqrt(sum_ij W_ij^2)``."""
    _matrix(w, "frobenius_norm")
    return (w**2).sum(dim=(-2, -1)).sqrt()


def nuclear_norm(w: torch.Tensor) -> torch.Tensor:
    """``||W||_* = sum_i s_i``."""
    return singular_values(w).sum(dim=-1)


def spectral_norm(w: torch.Tensor) -> torch.Tensor:
    """``||W||_2 = s_1``, the operator norm induced by the Euclidean norm."""
    return singular_values(w)[..., 0]


def spectral_normalize(w: torch.Tensor) -> torch.Tensor:
    """``W / s_1(W)`` (Miyato et al. 2018, eq. 8, with the exact s_1 instead of power iteration)."""
    s1 = spectral_norm(w)
    if bool((s1 == 0).any()):
        raise ValueError("spectral_normalize is undefined for the zero matrix")
    return w / s1[..., None, None]


def marchenko_pastur_edges(m: int, n: int, variance: float = 1.0) -> tuple[float, float]:
    """Support [a, b] of the limiting eigenvalue law of ``W W^T`` for W (m, n) with i.i.d. entries.

    With ratio c = m / n <= 1 and entry variance v: ``a = v n (1 - sqrt c)^2``, ``b = v n (1 + sqrt c)^2``.
    With v = 1/n (the normalisation of spectral.txt line 283) these are ``(1 -+ sqrt(m/n))^2``; they
    bound the squared singular values ``s_i^2``, so the singular values lie in ``sqrt(v n) (1 -+ sqrt c)``.
    """
    if not 0 < m <= n:
        raise ValueError(f"marchenko_pastur_edges takes m <= n (transpose W otherwise), got m={m}, n={n}")
    c = m / n
    scale = variance * n
    return scale * (1 - math.sqrt(c)) ** 2, scale * (1 + math.sqrt(c)) ** 2


def marchenko_pastur_density(x: torch.Tensor, m: int, n: int, variance: float = 1.0) -> torch.Tensor:
    """Density of the limiting eigenvalue law of ``W W^T`` (m <= n): ``sqrt((b-x)(x-a)) / (2 pi c s x)``.

    ``s = v n`` is the scale and ``c = m / n``; zero outside [a, b] (no atom at 0 since m <= n).
    """
    a, b = marchenko_pastur_edges(m, n, variance)
    c, s = m / n, variance * n
    inside = (x > a) & (x < b)
    root = torch.sqrt(torch.clamp((b - x) * (x - a), min=0))
    return torch.where(inside, root / (2 * math.pi * c * s * torch.clamp(x, min=1e-300)), torch.zeros_like(x))
