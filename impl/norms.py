"""Normalisation layers: LayerNorm and RMSNorm over the last (feature) dimension.

* LayerNorm (Ba et al. 2016): ``gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta``, ``var`` the
  biased (1/d) variance; the norm of foundations.txt lines 334-335 and linear-algebra.txt line 54.
* RMSNorm (Zhang & Sennrich 2019): ``gamma * x / sqrt(mean(x^2) + eps)``, no mean subtraction and no
  shift (index.txt line 96).

Shapes: ``x (..., d)``, ``gamma`` and ``beta (d,)``. The functions keep the input dtype, so float64
gives a reference. The modules hold ``gamma`` (``weight``) and ``beta`` (``bias``) as parameters and
call the functions.
"""
from __future__ import annotations

import torch
from torch import nn


def _check_affine(x: torch.Tensor, *params: torch.Tensor | None) -> None:
    for p in params:
        if p is not None and p.shape != x.shape[-1:]:
            raise ValueError(f"expected an affine parameter of shape ({x.shape[-1]},) for x of shape "
                             f"{tuple(x.shape)}, got {tuple(p.shape)}")


def layer_norm(x: torch.Tensor, gamma: torch.Tensor | None = None, beta: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """``gamma * (x - mean) / sqrt(var + eps) + beta`` over the last dimension: (..., d)."""
    _check_affine(x, gamma, beta)
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, 1/d
    y = (x - mean) / torch.sqrt(var + eps)
    y = y if gamma is None else y * gamma
    return y if beta is None else y + beta


def rms(x: torch.Tensor) -> torch.Tensor:
    """Root mean square over the last dimension, ``sqrt((1/d) sum_i x_i^2)``: (..., 1)."""
    return torch.sqrt((x * x).mean(dim=-1, keepdim=True))


def rms_norm(x: torch.Tensor, gamma: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """``gamma * x / sqrt((1/d) sum_i x_i^2 + eps)`` over the last dimension: (..., d). index.txt line 96."""
    _check_affine(x, gamma)
    y = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    return y if gamma is None else y * gamma


class LayerNorm(nn.Module):
    """LayerNorm with a gain ``weight`` (gamma, ones) and a shift ``bias`` (beta, zeros): 2 d parameters."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """RMSNorm with a gain ``weight`` (gamma, ones): d parameters."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
