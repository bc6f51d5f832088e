"""Reference scaled dot-product attention in plain torch (float64-capable).

``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (foundations.txt line 11; Vaswani et al.
2017, eq. 1). Shapes: ``q (..., n_q, d_k)``, ``k (..., n_k, d_k)``, ``v (..., n_k, d_v)``.
"""
from __future__ import annotations

import math

import torch

from impl.softmax import stable_softmax


def attention_weights(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """``A = softmax(q k^T * scale)``, scale defaulting to ``1/sqrt(d_k)``: (..., n_q, n_k)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return stable_softmax(q @ k.transpose(-2, -1) * scale)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """``softmax(q k^T * scale) v``: (..., n_q, d_v)."""
    return attention_weights(q, k, scale) @ v
