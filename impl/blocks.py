"""Residual blocks: post-norm and pre-norm sublayers, encoder and decoder layers, a decoder-only model.

* Post-norm (original Transformer): ``x_{l+1} = Norm(x_l + SubLayer(x_l))`` (foundations.txt line 372);
* Pre-norm (modern): ``x_{l+1} = x_l + SubLayer(Norm(x_l))`` (foundations.txt line 373;
  linear-algebra.txt line 374).

Encoder layer: self-attention then FFN; decoder layer: masked self-attention, cross-attention to the
encoder output (queries from the decoder, keys and values from the encoder), then FFN
(foundations.txt lines 325-367; Vaswani et al. 2017, section 3.1). How each sublayer is wrapped is a
function argument (``pre_norm`` or ``post_norm``). Dropout is left out: these are the eval-mode maps.

:class:`DecoderOnlyBlock` is the "modern stack" of index.txt lines 128-136 (pre-norm, RMSNorm, SwiGLU,
GQA, no biases) and :class:`DecoderOnlyModel` stacks it as LLaMA does (token embedding, blocks, final
RMSNorm, LM head tied or not). RoPE has no parameters and is left out (it changes no count).
Shapes: ``x (B, n, d_model)``.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from impl.ffn import FeedForward, SwiGLUFeedForward
from impl.multihead import MultiHeadAttention
from impl.norms import LayerNorm, RMSNorm

Sublayer = Callable[[torch.Tensor], torch.Tensor]
Residual = Callable[[torch.Tensor, Sublayer, Sublayer], torch.Tensor]


def post_norm(x: torch.Tensor, sublayer: Sublayer, norm: Sublayer) -> torch.Tensor:
    """``Norm(x + SubLayer(x))`` (foundations.txt line 372)."""
    return norm(x + sublayer(x))


def pre_norm(x: torch.Tensor, sublayer: Sublayer, norm: Sublayer) -> torch.Tensor:
    """``x + SubLayer(Norm(x))`` (foundations.txt line 373)."""
    return x + sublayer(norm(x))


class EncoderLayer(nn.Module):
    """Self-attention and a GELU FFN, each wrapped by ``residual`` with its own LayerNorm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, residual: Residual = pre_norm, bias: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias)
        self.ffn = FeedForward(d_model, d_ff, bias=bias)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.residual = residual

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.residual(x, lambda h: self.self_attn(h, h, mask), self.norm1)
        return self.residual(x, self.ffn, self.norm2)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to ``memory``, a GELU FFN; each wrapped by ``residual``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, residual: Residual = pre_norm, bias: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, bias=bias)
        self.ffn = FeedForward(d_model, d_ff, bias=bias)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.residual = residual

    def forward(self, x: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, n_t, d)``, ``memory (B, n_s, d)``; ``tgt_mask (n_t, n_t)``, ``src_mask (n_t, n_s)``."""
        x = self.residual(x, lambda h: self.self_attn(h, h, tgt_mask), self.norm1)
        x = self.residual(x, lambda h: self.cross_attn(h, memory, src_mask), self.norm2)
        return self.residual(x, self.ffn, self.norm3)


class DecoderOnlyBlock(nn.Module):
    """Pre-norm RMSNorm, GQA self-attention and a SwiGLU FFN, bias-free (LLaMA's block without RoPE)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5):
        super().__init__()
        self.attn_norm, self.ffn_norm = RMSNorm(d_model, eps), RMSNorm(d_model, eps)
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=False)
        self.ffn = SwiGLUFeedForward(d_model, d_ff, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = pre_norm(x, lambda h: self.attn(h, h, mask), self.attn_norm)
        return pre_norm(x, self.ffn, self.ffn_norm)


class DecoderOnlyModel(nn.Module):
    """Token embedding, ``n_layers`` :class:`DecoderOnlyBlock`, final RMSNorm, LM head (tied or untied).

    Build on the meta device (``with torch.device("meta"):``) to count a large model's parameters
    without allocating them.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, n_kv_heads: int, d_ff: int,
                 tie_embeddings: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(DecoderOnlyBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``ids (B, n)`` -> logits ``(B, n, vocab_size)``."""
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))
