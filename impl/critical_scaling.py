"""Length-dependent attention scalings and what they do to attention as the context length n grows.

Attention with a length-dependent logit multiplier ``beta(n)``::

    A = softmax(beta(n) * Q K^T / sqrt(d_k))

The documents print four schedules, in two opposite conventions:

* :func:`document_divisor` ``f(T) = 1 + c (ln T)^p`` with the logits DIVIDED by ``sqrt(f(T))``
  (foundations.txt lines 662, 670 and the code at 727-735), so ``beta = f(T)^(-1/2)`` decreases with T;
  :func:`document_loglog_divisor` ``f(T) = 1 + c ln ln T`` (line 666) in the same convention;
* :func:`polylog_multiplier` ``beta = s (ln n)^alpha`` MULTIPLYING the logits (spectral.txt lines 341, 360;
  linear-algebra.txt line 173), which increases with n;
* :func:`rem_critical_multiplier` ``beta = gamma sqrt(2 ln n)``: for n i.i.d. standard Gaussian logits this
  is the critical inverse temperature of Derrida's random energy model (Derrida 1981, Phys. Rev. B 24,
  eq. 9): below it the row entropy is ``ln n - beta^2/2 + o(1)``, above it the softmax mass condenses on
  O(1) keys.

:func:`random_attention` draws the matrices at random initialisation (Q, K with i.i.d. N(0, 1) entries)
and :func:`row_entropy` measures how uniform each row is (``ln n`` = uniform). :func:`loglog_fit` fits
``y ~ C n^e`` by least squares on logs and returns e with a 95% confidence interval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from impl.softmax import stable_softmax
from impl.spectral import eig


def document_divisor(n: int, c: float = 1.0, power: float = 1.5) -> float:
    """``f(T) = 1 + c (ln T)^power`` (foundations.txt line 670, code line 731); logits are divided by sqrt(f)."""
    return 1.0 + c * math.log(n) ** power


def document_loglog_divisor(n: int, c: float = 1.0) -> float:
    """``f(T) = 1 + c ln ln T`` (foundations.txt line 666); logits are divided by sqrt(f). Needs n >= 2."""
    return 1.0 + c * math.log(math.log(n))


def polylog_multiplier(n: int, alpha: float, base_scale: float = 1.0) -> float:
    """``base_scale (ln n)^alpha`` (spectral.txt lines 341, 360); logits are multiplied by it."""
    return base_scale * math.log(n) ** alpha


def rem_critical_multiplier(n: int, gamma: float = 1.0) -> float:
    """``gamma sqrt(2 ln n)``: gamma = 1 is the random-energy-model critical point for Gaussian logits."""
    return gamma * math.sqrt(2 * math.log(n))


def random_attention(n: int, d_k: int, multiplier: float = 1.0, *, n_keys: int | None = None,
                     generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``softmax(multiplier Q K^T / sqrt(d_k))`` with Q (n, d_k), K (n_keys, d_k) i.i.d. N(0, 1): (n, n_keys)."""
    n_keys = n if n_keys is None else n_keys
    q = torch.randn(n, d_k, generator=generator, dtype=dtype)
    k = torch.randn(n_keys, d_k, generator=generator, dtype=dtype)
    return stable_softmax(multiplier * (q @ k.T) / math.sqrt(d_k))


def row_entropy(a: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats of each row of a row-stochastic (..., n, m) matrix: (..., n). 0 log 0 = 0."""
    safe = torch.where(a > 0, a, torch.ones_like(a))
    return -(a * torch.log(safe)).sum(dim=-1)


def scaled_softmax_entropy_derivative(z: torch.Tensor, beta: float) -> torch.Tensor:
    """``d/d beta H(softmax(beta z)) = -beta Var_p(z)`` with p = softmax(beta z) (each row of z)."""
    p = stable_softmax(beta * z)
    mean = (p * z).sum(dim=-1, keepdim=True)
    return -beta * (p * (z - mean) ** 2).sum(dim=-1)


@dataclass(frozen=True)
class PowerLawFit:
    """``y ~ C x^exponent`` fitted by ordinary least squares of log y on log x."""

    exponent: float
    ci95: tuple[float, float]
    intercept: float
    points: int

    def as_figure(self) -> dict:
        return {"exponent": self.exponent, "ci95": list(self.ci95), "points": self.points}


def loglog_fit(x: torch.Tensor, y: torch.Tensor) -> PowerLawFit:
    """Least-squares slope of log y against log x with a Student-t 95% interval (x, y > 0, >= 3 points)."""
    from scipy import stats

    lx, ly = torch.log(torch.as_tensor(x, dtype=torch.float64)), torch.log(torch.as_tensor(y, dtype=torch.float64))
    if lx.shape != ly.shape or lx.numel() < 3:
        raise ValueError(f"loglog_fit needs matching x, y with at least 3 points, got {tuple(lx.shape)}, {tuple(ly.shape)}")
    res = stats.linregress(lx.numpy(), ly.numpy())
    half = stats.t.ppf(0.975, lx.numel() - 2) * res.stderr
    return PowerLawFit(float(res.slope), (float(res.slope - half), float(res.slope + half)), float(res.intercept),
                       int(lx.numel()))


def attention_statistics(a: torch.Tensor, spectral: bool = True) -> dict[str, float]:
    """Entropy statistics of one attention matrix (n, n), and its spectral statistics when asked.

    One SVD and one eigendecomposition serve every spectral figure.
    """
    n = a.shape[-1]
    h = row_entropy(a).mean().item()
    stats = {"row_entropy": h, "normalized_entropy": h / math.log(n), "max_weight": a.max(dim=-1).values.mean().item(),
             "trace": a.trace().item()}
    if spectral:
        ev = eig(a).abs().sort(descending=True).values
        s = torch.linalg.svdvals(a)
        p = s / s.sum()
        stats.update({
            "lambda2_modulus": ev[1].item(),
            "eigenvalue_gap": (ev[0] - ev[1]).item(),
            "sigma1": s[0].item(),
            "sigma2": s[1].item(),
            "sigma_ratio": (s[1] / s[0]).item(),
            "stable_rank": ((s**2).sum() / s[0] ** 2).item(),
            "effective_rank": torch.exp(-(p[p > 0] * p[p > 0].log()).sum()).item(),
        })
    return stats


def sweep(ns: list[int], d_k: int | Callable[[int], int], multiplier: Callable[[int], float] = lambda n: 1.0,
          samples: int = 6, seed: int = 0, spectral: bool = True) -> dict[str, torch.Tensor]:
    """Statistics of ``samples`` random attention matrices at each n: each entry is (len(ns), samples).

    ``d_k`` is a constant or a function of n; ``multiplier(n)`` scales the logits. Seeded: the same call
    always returns the same numbers. ``out["n"]`` holds the matching n of every entry.
    """
    gen = torch.Generator().manual_seed(seed)
    rows: dict[str, list[list[float]]] = {}
    for n in ns:
        dk = d_k(n) if callable(d_k) else d_k
        per_n = [attention_statistics(random_attention(n, dk, multiplier(n), generator=gen), spectral)
                 for _ in range(samples)]
        for key in per_n[0]:
            rows.setdefault(key, []).append([stat[key] for stat in per_n])
    out = {k: torch.tensor(v, dtype=torch.float64) for k, v in rows.items()}
    out["n"] = torch.tensor(ns, dtype=torch.float64)[:, None].expand(-1, samples).clone()
    return out
