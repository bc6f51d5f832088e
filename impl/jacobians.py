"""Jacobians of attention, normalisation and residual blocks, by automatic differentiation (torch.func).

Formula-level maps (float64-capable, one token vector x (d,) or a sequence X (n, d)):

* :func:`layer_norm` ``gamma * (x - mean x) / sqrt(var x + eps) + beta`` with the biased variance
  (Ba, Kiros & Hinton 2016, eq. 4); :func:`layer_norm_jacobian` its closed form
  ``diag(gamma) (1/s) (I - 1 1^T / d - y y^T / d)``, ``s = sqrt(var x + eps)``, ``y = (x - mean x) / s``;
* :func:`rms_norm` ``gamma * x / sqrt(mean(x^2) + eps)`` (Zhang & Sennrich 2019, eq. 4; index.txt line 96);
  :func:`rms_norm_jacobian` ``diag(gamma) (1/r) (I - x x^T / (d r^2))``, ``r = sqrt(mean(x^2) + eps)``;
* :func:`self_attention` ``softmax(X W_Q (X W_K)^T / sqrt(d_k)) X W_V`` on a sequence;
* :func:`residual` ``x + F(x)``, :func:`pre_norm_block` ``x + F(N(x))`` and :func:`post_norm_block`
  ``N(x + F(x))`` (Xiong et al. 2020, eqs. of Table 1).

:func:`jacobian` differentiates any such map with ``torch.func.jacrev`` and returns the Jacobian of the
flattened output with respect to the flattened input, a (out, in) matrix. :func:`chain` composes layers
and returns the per-layer Jacobians at the points the forward pass visits.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch.func import jacrev

from impl.softmax import stable_softmax

Map = Callable[[torch.Tensor], torch.Tensor]


def layer_norm(x: torch.Tensor, gamma: torch.Tensor | None = None, beta: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension (biased variance, as ``torch.nn.LayerNorm``)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def layer_norm_jacobian(x: torch.Tensor, gamma: torch.Tensor | None = None, eps: float = 1e-5) -> torch.Tensor:
    """Closed form ``diag(gamma) (1/s) (I - 1 1^T/d - y y^T/d)`` for one vector x (d,): (d, d)."""
    if x.ndim != 1:
        raise ValueError(f"layer_norm_jacobian takes one vector (d,), got shape {tuple(x.shape)}")
    d = x.shape[0]
    s = torch.sqrt(((x - x.mean()) ** 2).mean() + eps)
    y = (x - x.mean()) / s
    p = torch.eye(d, dtype=x.dtype) - torch.ones(d, d, dtype=x.dtype) / d - torch.outer(y, y) / d
    g = torch.ones(d, dtype=x.dtype) if gamma is None else gamma
    return g[:, None] * p / s


def rms_norm(x: torch.Tensor, gamma: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """``gamma * x / sqrt(mean(x^2) + eps)`` over the last dimension."""
    y = x / torch.sqrt((x**2).mean(dim=-1, keepdim=True) + eps)
    return y if gamma is None else y * gamma


def rms_norm_jacobian(x: torch.Tensor, gamma: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """Closed form ``diag(gamma) (1/r) (I - x x^T / (d r^2))`` for one vector x (d,): (d, d)."""
    if x.ndim != 1:
        raise ValueError(f"rms_norm_jacobian takes one vector (d,), got shape {tuple(x.shape)}")
    d = x.shape[0]
    r2 = (x**2).mean() + eps
    p = torch.eye(d, dtype=x.dtype) - torch.outer(x, x) / (d * r2)
    g = torch.ones(d, dtype=x.dtype) if gamma is None else gamma
    return g[:, None] * p / torch.sqrt(r2)


def self_attention(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor) -> torch.Tensor:
    """``softmax(X W_Q (X W_K)^T / sqrt(d_k)) X W_V`` for X (n, d), W_Q, W_K (d, d_k), W_V (d, d_v): (n, d_v)."""
    q, k = x @ w_q, x @ w_k  # (n, d_k)
    return stable_softmax(q @ k.T / math.sqrt(w_q.shape[1])) @ (x @ w_v)


def residual(f: Map) -> Map:
    """``x -> x + F(x)``."""
    return lambda x: x + f(x)


def pre_norm_block(f: Map, norm: Map) -> Map:
    """``x -> x + F(N(x))``."""
    return lambda x: x + f(norm(x))


def post_norm_block(f: Map, norm: Map) -> Map:
    """``x -> N(x + F(x))``."""
    return lambda x: norm(x + f(x))


def jacobian(f: Map, x: torch.Tensor) -> torch.Tensor:
    """Jacobian of ``vec(f(x))`` with respect to ``vec(x)`` (row-major): (f(x).numel(), x.numel())."""
    j = jacrev(f)(x)
    return j.reshape(f(x).numel(), x.numel())


def chain(layers: Sequence[Map], x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run ``x_l = f_l(x_{l-1})``; return the output and ``[J_1, ..., J_L]``, J_l taken at x_{l-1}."""
    jacs = []
    for f in layers:
        jacs.append(jacobian(f, x))
        x = f(x)
    return x, jacs
