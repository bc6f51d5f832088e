"""Multi-head attention and its key/value-sharing variants: MHA, GQA, MQA.

``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)``
(foundations.txt lines 108-112; index.txt line 84; Vaswani et al. 2017, section 3.2.2).

Grouped-query attention (GQA, Ainslie et al. 2023) has ``h`` query heads and ``g`` key/value heads,
``g`` dividing ``h``: query head ``i`` reads key/value head ``i // (h / g)``. ``g = h`` is MHA and
``g = 1`` is multi-query attention (MQA, Shazeer 2019).

Two forms of the same map, kept side by side so each documents the other:

* :func:`multi_head_attention_by_heads` is the definition as printed: a list of per-head matrices,
  one attention per head, then Concat and ``W^O``;
* :func:`multi_head_attention` is the implementation: one large projection per role (``W_Q`` of shape
  ``(d_model, h d_k)``, the per-head ``W_Q^i`` being its column blocks), reshaped into heads.

Convention: the paper's, ``X W`` with ``W`` of shape ``(d_in, d_out)``; ``nn.Linear`` stores ``W^T``.
Masks are boolean, ``True`` where a query may attend to a key, broadcastable to ``(..., h, n_q, n_k)``.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from impl.softmax import stable_softmax


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., n, n_heads * d_head) -> (..., n_heads, n, d_head)."""
    *lead, n, width = x.shape
    if width % n_heads:
        raise ValueError(f"feature width {width} of x {tuple(x.shape)} is not divisible by n_heads={n_heads}")
    return x.reshape(*lead, n, n_heads, width // n_heads).transpose(-3, -2)  # (..., h, n, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., h, n, d_head) -> (..., n, h * d_head): Concat(head_1, ..., head_h) along features."""
    *lead, h, n, d_head = x.shape
    return x.transpose(-3, -2).reshape(*lead, n, h * d_head)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(..., g, n, d) -> (..., g * n_rep, n, d): each key/value head repeated for its n_rep query heads."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def causal_mask(n_q: int, n_k: int | None = None) -> torch.Tensor:
    """Boolean (n_q, n_k) mask, True where key j <= query i (the lower triangle)."""
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril()


def scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None = None) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d_k) masked) v``: (..., n_q, d_k), (..., n_k, d_k), (..., n_k, d_v) -> (..., n_q, d_v).

    Masked scores are -inf, so a masked key gets weight exactly 0; a row with every key masked is nan.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return stable_softmax(scores) @ v


def attend_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_heads: int, n_kv_heads: int | None = None,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """Per-head attention on projected inputs, heads concatenated.

    ``q (..., n_q, h d_k)``, ``k (..., n_k, g d_k)``, ``v (..., n_k, g d_v)`` -> ``(..., n_q, h d_v)``.
    """
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
    n_rep = n_heads // n_kv_heads
    q_h = split_heads(q, n_heads)  # (..., h, n_q, d_k)
    k_h = repeat_kv(split_heads(k, n_kv_heads), n_rep)  # (..., h, n_k, d_k)
    v_h = repeat_kv(split_heads(v, n_kv_heads), n_rep)  # (..., h, n_k, d_v)
    return merge_heads(scaled_dot_product(q_h, k_h, v_h, mask))  # (..., n_q, h d_v)


def multi_head_attention(x_q: torch.Tensor, x_kv: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                         w_v: torch.Tensor, w_o: torch.Tensor, n_heads: int, n_kv_heads: int | None = None,
                         mask: torch.Tensor | None = None) -> torch.Tensor:
    """``Concat_i(head_i) W^O`` with one large projection per role.

    ``x_q (..., n_q, d)``, ``x_kv (..., n_k, d)``, ``w_q (d, h d_k)``, ``w_k (d, g d_k)``,
    ``w_v (d, g d_v)``, ``w_o (h d_v, d_out)`` -> ``(..., n_q, d_out)``.
    """
    return attend_heads(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, n_heads, n_kv_heads, mask) @ w_o


def multi_head_attention_by_heads(x_q: torch.Tensor, x_kv: torch.Tensor, w_q_heads: list[torch.Tensor],
                                  w_k_heads: list[torch.Tensor], w_v_heads: list[torch.Tensor],
                                  w_o: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The definition, foundations.txt lines 108-112: ``Concat(head_1..head_h) W^O``.

    ``head_i = Attention(x_q W_Q^i, x_kv W_K^i, x_kv W_V^i)``; each ``W_Q^i, W_K^i (d, d_k)``,
    ``W_V^i (d, d_v)``, ``w_o (h d_v, d_out)``. Key/value lists may repeat a matrix (GQA).
    """
    if not len(w_q_heads) == len(w_k_heads) == len(w_v_heads):
        raise ValueError(f"expected one W_Q^i, W_K^i, W_V^i per head, got {len(w_q_heads)}, "
                         f"{len(w_k_heads)}, {len(w_v_heads)}")
    heads = [scaled_dot_product(x_q @ wq, x_kv @ wk, x_kv @ wv, mask)
             for wq, wk, wv in zip(w_q_heads, w_k_heads, w_v_heads)]  # h x (..., n_q, d_v)
    return torch.cat(heads, dim=-1) @ w_o


def column_blocks(w: torch.Tensor, n_blocks: int) -> list[torch.Tensor]:
    """(d, n_blocks * d_head) -> n_blocks matrices (d, d_head): the per-head W^i of one large projection."""
    if w.shape[-1] % n_blocks:
        raise ValueError(f"{w.shape[-1]} columns of W {tuple(w.shape)} do not split into {n_blocks} heads")
    return list(w.split(w.shape[-1] // n_blocks, dim=-1))


class MultiHeadAttention(nn.Module):
    """GQA with ``n_heads`` query heads and ``n_kv_heads`` key/value heads (default: MHA).

    Projections ``W_Q (d, h d_head)``, ``W_K, W_V (d, g d_head)``, ``W_O (h d_head, d)``, each an
    ``nn.Linear`` with or without bias. ``d_head`` defaults to ``d_model // n_heads``.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, d_head: int | None = None,
                 bias: bool = True):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pass d_head")
            d_head = d_model // n_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        self.w_q = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * d_head, bias=bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * d_head, bias=bias)
        self.w_o = nn.Linear(n_heads * d_head, d_model, bias=bias)

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Self-attention when ``x_kv`` is None: (B, n_q, d), (B, n_k, d) -> (B, n_q, d)."""
        x_kv = x_q if x_kv is None else x_kv
        heads = attend_heads(self.w_q(x_q), self.w_k(x_kv), self.w_v(x_kv), self.n_heads, self.n_kv_heads, mask)
        return self.w_o(heads)
