"""Softmax over the last dimension, in the two forms the foundations document prints.

* :func:`naive_softmax`: ``exp(x_i) / sum_j exp(x_j)`` as written (foundations.txt line 75);
* :func:`stable_softmax`: the log-sum-exp form ``exp(x_i - max x) / sum_j exp(x_j - max x)``
  (foundations.txt line 85).

Both keep the input dtype, so float64 gives a reference and float32/16 show rounding.
"""
from __future__ import annotations

import torch


def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x) / exp(x).sum(dim)``: overflows to inf (then nan) for large logits."""
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def shifted_exponents(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x - max x)``: the numerators of the stable form."""
    return torch.exp(x - x.amax(dim=dim, keepdim=True))


def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``exp(x - max x) / sum exp(x - max x)``."""
    e = shifted_exponents(x, dim)
    return e / e.sum(dim=dim, keepdim=True)


def logsumexp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log sum_j exp(x_j)`` computed as ``max + log sum exp(x - max)``."""
    m = x.amax(dim=dim, keepdim=True)
    return (m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))).squeeze(dim)
