"""Strategies for multi-head attention, FFNs, norms and blocks: head layouts and seeded float64 tensors.

Tensors are drawn from a seed (``torch.Generator``) rather than element by element: the properties
are about linear-algebraic identities that hold for every input, so a generic Gaussian input with
Hypothesis choosing the shapes (which shrink) and the seed is the useful search space.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from claimcheck import claim_assert
from claimcheck.registry import Registry, load_registry
from claimcheck.snippets import SnippetRun, load_snippet, project_root, run_snippet
from properties.strategies.core import seeds

EPS64 = 2.0**-52
# Two float64 evaluations of one identity differ by rounding only: a chain of at most ~6 products and
# sums of length <= 64 on O(1) operands (weights scaled by 1/sqrt(fan-in)) errs by <= 6 * 64 eps
# relative to max(1, |result|); 2^12 eps bounds that with margin, and a wrong formula errs by O(0.1).
IDENTITY_RTOL = 2.0**12 * EPS64


@dataclass(frozen=True)
class HeadLayout:
    """``n_heads`` query heads of width ``d_head`` sharing ``n_kv_heads`` key/value heads; ``d_model``."""

    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int

    @property
    def group(self) -> int:
        return self.n_heads // self.n_kv_heads


@st.composite
def head_layouts(draw, max_heads: int = 6, max_d_head: int = 5, kv_sharing: bool = True,
                 d_head_is_d_over_h: bool = True, min_heads: int = 1) -> HeadLayout:
    """A head layout: MHA, or with ``kv_sharing`` any GQA (MQA included) with g dividing h."""
    h = draw(st.integers(min_heads, max(min_heads, max_heads)), label="n_heads")
    g = draw(st.sampled_from([k for k in range(1, h + 1) if h % k == 0]), label="n_kv_heads") if kv_sharing else h
    d_head = draw(st.integers(1, max_d_head), label="d_head")
    d_model = h * d_head if d_head_is_d_over_h else draw(st.integers(1, 12), label="d_model")
    return HeadLayout(d_model, h, g, d_head)


def gaussian(seed: int, *shape: int) -> torch.Tensor:
    """A float64 standard Gaussian tensor of ``shape``, reproducible from ``seed``."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def mha_weights(layout: HeadLayout, seed: int) -> dict[str, torch.Tensor]:
    """Gaussian ``w_q (d, h d_head)``, ``w_k, w_v (d, g d_head)``, ``w_o (h d_head, d)``, scaled by 1/sqrt(fan-in)."""
    d, hd, gd = layout.d_model, layout.n_heads * layout.d_head, layout.n_kv_heads * layout.d_head
    shapes = {"w_q": (d, hd), "w_k": (d, gd), "w_v": (d, gd), "w_o": (hd, d)}
    return {name: gaussian(seed + i, *shape) / shape[0] ** 0.5 for i, (name, shape) in enumerate(shapes.items())}


def seeded_module(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """``module`` in float64 with every parameter redrawn as a Gaussian from ``seed`` (gains and biases too)."""
    gen = torch.Generator().manual_seed(seed)
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / max(1, p.shape[-1]) ** 0.5)
    return module


def assert_equal_up_to_rounding(actual: torch.Tensor, expected: torch.Tensor, what: str, **example) -> float:
    """Assert two float64 evaluations of one identity agree to :data:`IDENTITY_RTOL`; return the gap."""
    claim_assert(actual.shape == expected.shape, f"{what}: shapes differ", actual_shape=tuple(actual.shape),
                 expected_shape=tuple(expected.shape), **example)
    gap = (actual - expected).abs().max().item() if actual.numel() else 0.0
    scale = max(1.0, expected.abs().max().item() if expected.numel() else 0.0)
    claim_assert(gap <= IDENTITY_RTOL * scale, what, gap=gap, bound=IDENTITY_RTOL * scale, **example)
    return gap


def batch_lengths(max_batch: int = 2, max_len: int = 6) -> st.SearchStrategy[tuple[int, int]]:
    """(B, n)."""
    return st.tuples(st.integers(1, max_batch), st.integers(1, max_len))


@functools.cache
def _registry() -> Registry:
    return load_registry(project_root() / "claims.yaml")


def printed(claim_id: str, bindings: dict[str, Any] | None = None) -> SnippetRun:
    """A fresh run of the snippet of ``claim_id`` (its ``requires`` first); the registry is parsed once.

    ``bindings`` supplies names the snippet uses but never defines (stated by the test that needs them).
    """
    if not bindings:
        return run_snippet(claim_id, registry=_registry())
    claim = _registry().get(claim_id)
    requires = tuple(printed(r) for r in claim.snippet.requires)
    return load_snippet(claim.source, claim.snippet.start, claim.snippet.end, requires=requires, bindings=bindings)


def locals_at_return(function: Callable, call: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``call()`` and return its result and the local variables of ``function`` when it last returned.

    Lets a test read the intermediate tensors of a printed ``forward`` (their shapes) without copying its code.
    """
    code, seen = function.__code__, {}

    def watch(frame, event, arg):
        if event == "return" and frame.f_code is code:
            seen.clear()
            seen.update(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        result = call()
    finally:
        sys.setprofile(previous)
    return result, seen


__all__ = ["IDENTITY_RTOL", "HeadLayout", "assert_equal_up_to_rounding", "batch_lengths", "gaussian", "head_layouts",
           "locals_at_return", "mha_weights", "printed", "seeded_module", "seeds"]
