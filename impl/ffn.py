"""Position-wise feed-forward networks: the two-matrix FFN (GELU or ReLU) and the gated SwiGLU FFN.

* ``FFN(x) = act(x W_1 + b_1) W_2 + b_2`` with ``W_1 (d, d_ff)``, ``W_2 (d_ff, d)``: two matrix products,
  up-projection, activation, down-projection (Vaswani et al. 2017, eq. 2 with ReLU; the documents'
  code uses GELU: foundations.txt lines 329-333, linear-algebra.txt lines 48-52 and 483-487).
* ``SwiGLU(x) = SiLU(x W_1) * (x W_2)`` (index.txt line 92; Shazeer 2020, eq. 6 with Swish_1 = SiLU):
  the gated hidden activation of width d_ff. The SwiGLU *FFN* of LLaMA adds a third, down projection:
  ``FFN_SwiGLU(x) = (SiLU(x W_1) * (x W_2)) W_3`` with ``W_3 (d_ff, d)``.

Convention: the paper's, ``x W`` with ``W`` of shape ``(d_in, d_out)``; ``nn.Linear`` stores ``W^T``.
Shapes: ``x (..., d)``.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn


def gelu(x: torch.Tensor) -> torch.Tensor:
    """``x * Phi(x)``, Phi the standard normal CDF (the exact, erf form; Hendrycks & Gimpel 2016)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, min=0)


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(x)`` (Swish with beta = 1)."""
    return x * torch.sigmoid(x)


def swiglu(x: torch.Tensor, w_1: torch.Tensor, w_2: torch.Tensor) -> torch.Tensor:
    """``SiLU(x W_1) * (x W_2)``: (..., d) x (d, d_ff) x (d, d_ff) -> (..., d_ff). index.txt line 92."""
    if w_1.shape != w_2.shape or w_1.shape[0] != x.shape[-1]:
        raise ValueError(f"expected W_1 and W_2 of the same shape ({x.shape[-1]}, d_ff), "
                         f"got {tuple(w_1.shape)} and {tuple(w_2.shape)}")
    return silu(x @ w_1) * (x @ w_2)


def ffn(x: torch.Tensor, w_1: torch.Tensor, w_2: torch.Tensor, b_1: torch.Tensor | None = None,
        b_2: torch.Tensor | None = None, act: Callable[[torch.Tensor], torch.Tensor] = gelu) -> torch.Tensor:
    """``act(x W_1 + b_1) W_2 + b_2``: (..., d) -> (..., d)."""
    h = x @ w_1 if b_1 is None else x @ w_1 + b_1  # (..., d_ff)
    y = act(h) @ w_2
    return y if b_2 is None else y + b_2


class FeedForward(nn.Module):
    """``Linear(d, d_ff) -> act -> Linear(d_ff, d)``: 2 d d_ff weights (+ d_ff + d biases)."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = True,
                 act: Callable[[torch.Tensor], torch.Tensor] = gelu):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class SwiGLUFeedForward(nn.Module):
    """``W_3(SiLU(x W_1) * x W_2)`` (LLaMA's gate, up, down projections): 3 d d_ff weights, no biases by default."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=bias)  # W_1
        self.up = nn.Linear(d_model, d_ff, bias=bias)  # W_2
        self.down = nn.Linear(d_ff, d_model, bias=bias)  # W_3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(silu(self.gate(x)) * self.up(x))
