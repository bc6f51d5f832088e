"""A tiny Transformer for the experiments, built from the ``impl/`` blocks.

``TinyTransformer`` = token embedding (+ learned or sinusoidal positions), ``layers`` blocks, an optional
final norm, an untied LM head. Each block is self-attention then (optionally) a GELU FFN, each sublayer
wrapped by :func:`impl.blocks.pre_norm` or :func:`impl.blocks.post_norm` (foundations.txt lines 372-373),
or by a bare residual ``x + f(x)`` / no residual at all (the rank-collapse stacks of Dong et al. 2021).

Attention (:class:`Attention`) is the multi-head map of ``impl.multihead`` (``split_heads``,
``merge_heads``) with three hooks the experiments need:

* ``positional="rope"`` rotates queries and keys with ``impl.rope.rope_half_split`` and frequencies
  ``theta`` (a buffer: :func:`set_rope_frequencies` swaps them at evaluation, e.g. NTK-aware bases);
* ``score_scale(positions, d_head) -> (n_q, 1)`` multiplies the logits row-wise (default
  ``1/sqrt(d_head)``; :func:`log_n_scale` is the log-n scaling);
* ``head_mask`` (``(h,)`` ones; zero a head to prune it) and ``keep_weights`` (the last attention
  weights ``(B, h, n_q, n_k)`` are kept in ``weights``).

Shapes: ids ``(B, n)``, activations ``(B, n, d_model)``, logits ``(B, n, vocab)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from impl.blocks import post_norm, pre_norm
from impl.ffn import FeedForward
from impl.multihead import merge_heads, split_heads
from impl.norms import LayerNorm, RMSNorm
from impl.rope import rope_frequencies, rope_half_split
from impl.sinusoidal import sinusoidal_encoding
from impl.softmax import stable_softmax

ScoreScale = Callable[[torch.Tensor, int], torch.Tensor]
NORMS = ("pre", "post", "residual", "none")  # pre-LN, post-LN, x + f(x) without a norm, f(x) alone
POSITIONAL = ("learned", "sinusoidal", "rope", "none")


def default_scale(positions: torch.Tensor, d_head: int) -> torch.Tensor:
    """``1/sqrt(d_head)`` for every query row: (n_q, 1)."""
    return torch.full((positions.shape[-1], 1), 1.0 / math.sqrt(d_head))


def log_n_scale(train_len: int) -> ScoreScale:
    """Log-n scaling: row ``i`` (keys ``0..i`` visible) scaled by ``max(1, log(i+1) / log(train_len)) / sqrt(d)``."""
    def scale(positions: torch.Tensor, d_head: int) -> torch.Tensor:
        ratio = torch.log(positions.to(torch.float64) + 1.0) / math.log(train_len)
        return (ratio.clamp(min=1.0) / math.sqrt(d_head)).to(torch.float32)[:, None]  # (n_q, 1)
    return scale


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    d_model: int = 32
    layers: int = 2
    heads: int = 4
    max_len: int = 64
    norm: str = "pre"  # one of NORMS
    norm_kind: str = "layer"  # "layer" | "rms"
    positional: str = "learned"  # one of POSITIONAL
    rope_base: float = 10000.0
    causal: bool = True
    ffn: bool = True  # False: an attention-only stack
    final_norm: bool = True
    d_ff: int | None = None  # default 4 d_model

    def __post_init__(self) -> None:
        if self.norm not in NORMS or self.positional not in POSITIONAL:
            raise ValueError(f"norm {self.norm!r} not in {NORMS} or positional {self.positional!r} not in {POSITIONAL}")


class Attention(nn.Module):
    """Multi-head self-attention (bias-free) with RoPE, a row-wise score scale, a head mask."""

    def __init__(self, cfg: ModelConfig, score_scale: ScoreScale = default_scale):
        super().__init__()
        self.heads, self.d_head, self.causal = cfg.heads, cfg.d_model // cfg.heads, cfg.causal
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(cfg.d_model, cfg.d_model, bias=False) for _ in range(4))
        self.rope = cfg.positional == "rope"
        self.register_buffer("theta", rope_frequencies(self.d_head, cfg.rope_base, torch.float32), persistent=False)
        self.register_buffer("head_mask", torch.ones(cfg.heads), persistent=False)
        self.score_scale = score_scale
        self.keep_weights = False
        self.weights: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-2]
        positions = torch.arange(n)
        q, k, v = (split_heads(w(x), self.heads) for w in (self.w_q, self.w_k, self.w_v))  # (B, h, n, d_head)
        if self.rope:
            q, k = rope_half_split(q, positions, self.theta), rope_half_split(k, positions, self.theta)
        s = (q @ k.transpose(-2, -1)) * self.score_scale(positions, self.d_head)  # (B, h, n, n)
        if self.causal:
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        a = stable_softmax(s)
        if self.keep_weights:
            self.weights = a.detach()
        heads = (a @ v) * self.head_mask[:, None, None]  # (B, h, n, d_head)
        return self.w_o(merge_heads(heads))


def _wrap(norm: str, x: torch.Tensor, sublayer: Callable, norm_layer: nn.Module) -> torch.Tensor:
    if norm == "pre":
        return pre_norm(x, sublayer, norm_layer)
    if norm == "post":
        return post_norm(x, sublayer, norm_layer)
    return x + sublayer(x) if norm == "residual" else sublayer(x)


class Block(nn.Module):
    """Attention then (optionally) a GELU FFN, each wrapped as ``cfg.norm`` says."""

    def __init__(self, cfg: ModelConfig, score_scale: ScoreScale = default_scale):
        super().__init__()
        make_norm = LayerNorm if cfg.norm_kind == "layer" else RMSNorm
        self.norm, self.attn, self.norm1 = cfg.norm, Attention(cfg, score_scale), make_norm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff or 4 * cfg.d_model, bias=True) if cfg.ffn else None
        self.norm2 = make_norm(cfg.d_model) if cfg.ffn else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _wrap(self.norm, x, self.attn, self.norm1)
        return x if self.ffn is None else _wrap(self.norm, x, self.ffn, self.norm2)


class TinyTransformer(nn.Module):
    """Embedding (+ positions), ``cfg.layers`` :class:`Block`, final norm, LM head: ids (B, n) -> logits."""

    def __init__(self, cfg: ModelConfig, score_scale: ScoreScale = default_scale):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model) if cfg.positional == "learned" else None
        if cfg.positional == "sinusoidal":
            self.register_buffer("sin_pos", sinusoidal_encoding(torch.arange(cfg.max_len), cfg.d_model).float(), persistent=False)
        self.blocks = nn.ModuleList(Block(cfg, score_scale) for _ in range(cfg.layers))
        make_norm = LayerNorm if cfg.norm_kind == "layer" else RMSNorm
        self.final = make_norm(cfg.d_model) if cfg.final_norm else nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def hidden(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """The residual stream after the embedding and after each block: ``layers + 1`` tensors (B, n, d)."""
        n = ids.shape[-1]
        x = self.embed(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(n))
        elif self.cfg.positional == "sinusoidal":
            x = x + self.sin_pos[:n]
        states = [x]
        for block in self.blocks:
            states.append(block(states[-1]))
        return states

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.final(self.hidden(ids)[-1]))


def attention_layers(model: TinyTransformer) -> list[Attention]:
    return [b.attn for b in model.blocks]


def set_rope_frequencies(model: TinyTransformer, theta: torch.Tensor) -> None:
    """Replace every layer's RoPE frequencies ``theta (d_head/2,)`` (e.g. an NTK-aware base at evaluation)."""
    for attn in attention_layers(model):
        attn.theta = theta.to(attn.theta.dtype).clone()


def keep_attention_weights(model: TinyTransformer, keep: bool = True) -> None:
    for attn in attention_layers(model):
        attn.keep_weights, attn.weights = keep, None
