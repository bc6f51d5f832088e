"""Strategies for attention problems: (q, k, v, mask) with odd sizes, GQA and every mask kind.

Sizes are drawn small and deliberately odd so that tiles of 16 (and any drawn block size) miss
the sequence boundaries. Values come from a drawn seed (``torch.randn``), so an example prints as
its shapes, mask and seed and shrinks towards small shapes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

from impl.attention import Mask

MASK_KINDS = ("none", "causal-top-left", "causal-bottom-right", "key-padding", "additive")


@dataclass
class AttentionProblem:
    """One attention input in float64: q (B, H_q, n_q, d_k), k (B, H_kv, n_k, d_k), v (B, H_kv, n_k, d_v)."""

    q: torch.Tensor = field(repr=False)
    k: torch.Tensor = field(repr=False)
    v: torch.Tensor = field(repr=False)
    mask_kind: str
    mask: Mask = field(repr=False)
    seed: int
    shape: str = ""

    def __post_init__(self) -> None:
        b, hq, nq, dk = self.q.shape
        self.shape = f"B={b} H_q={hq} H_kv={self.k.shape[1]} n_q={nq} n_k={self.k.shape[2]} d_k={dk} d_v={self.v.shape[-1]}"

    @property
    def gqa(self) -> bool:
        return self.k.shape[1] != self.q.shape[1]

    def cast(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Mask]:
        """q, k, v and the mask in ``dtype`` (the float bias too; boolean padding unchanged)."""
        m = self.mask
        mask = Mask(m.causal, m.key_padding, None if m.bias is None else m.bias.to(dtype))
        return self.q.to(dtype), self.k.to(dtype), self.v.to(dtype), mask


def make_mask(kind: str, b: int, h_q: int, n_q: int, n_k: int, gen: torch.Generator) -> Mask:
    """A mask of ``kind`` that leaves every query at least one key (no fully masked row)."""
    if kind == "none":
        return Mask()
    if kind in ("causal-top-left", "causal-bottom-right"):
        return Mask(causal=kind.removeprefix("causal-"))
    if kind == "key-padding":
        keep = torch.rand((b, n_k), generator=gen) < 0.7
        keep[:, 0] = True  # at least one real key per sequence
        return Mask(key_padding=keep)
    if kind == "additive":
        bias = torch.randn((b, h_q, n_q, n_k), generator=gen, dtype=torch.float64)
        hidden = torch.rand((b, h_q, n_q, n_k), generator=gen) < 0.2
        hidden[..., 0] = False  # every row keeps a finite entry
        return Mask(bias=bias.masked_fill(hidden, -math.inf))
    raise ValueError(f"unknown mask kind {kind!r}; expected one of {MASK_KINDS}")


@st.composite
def attention_problems(draw, mask_kinds=MASK_KINDS, gqa: bool = True, max_batch: int = 2, max_heads: int = 4,
                       min_n: int = 1, max_n: int = 40, min_d: int = 1, max_d: int = 16, same_dv: bool = False,
                       logit_scale: tuple[float, ...] = (1.0, 4.0)) -> AttentionProblem:
    """A float64 attention problem; ``logit_scale`` multiplies q to make the softmax peaked."""
    kind = draw(st.sampled_from(mask_kinds), label="mask")
    b = draw(st.integers(1, max_batch), label="B")
    h_kv = draw(st.integers(1, max_heads), label="H_kv")
    group = draw(st.sampled_from([g for g in (1, 2, 4) if h_kv * g <= max_heads] if gqa else [1]), label="group")
    n_q = draw(st.integers(min_n, max_n), label="n_q")
    # bottom-right causal with n_q > n_k hides whole rows: keep n_k >= n_q for that mask
    n_k = draw(st.integers(n_q if kind == "causal-bottom-right" else min_n, max(max_n, n_q)), label="n_k")
    d_k = draw(st.integers(min_d, max_d), label="d_k")
    d_v = d_k if same_dv else draw(st.integers(min_d, max_d), label="d_v")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    temperature = draw(st.sampled_from(logit_scale), label="logit_scale")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn((b, h_kv * group, n_q, d_k), generator=gen, dtype=torch.float64) * temperature
    k = torch.randn((b, h_kv, n_k, d_k), generator=gen, dtype=torch.float64)
    v = torch.randn((b, h_kv, n_k, d_v), generator=gen, dtype=torch.float64)
    return AttentionProblem(q, k, v, kind, make_mask(kind, b, h_kv * group, n_q, n_k, gen), seed)


def fixed_problem(kind: str, seed: int, b: int = 1, h_q: int = 4, h_kv: int = 2, n_q: int = 24, n_k: int = 40,
                  d: int = 16) -> AttentionProblem:
    """A problem of one fixed shape (for compiled backends: one shape, one compile)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn((b, h_q, n_q, d), generator=gen, dtype=torch.float64)
    k = torch.randn((b, h_kv, n_k, d), generator=gen, dtype=torch.float64)
    v = torch.randn((b, h_kv, n_k, d), generator=gen, dtype=torch.float64)
    return AttentionProblem(q, k, v, kind, make_mask(kind, b, h_q, n_q, n_k, gen), seed)
