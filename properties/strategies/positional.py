"""Strategies for positional encodings: head dimensions, positions, frequency vectors, head vectors."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from properties.strategies.core import finite_floats


def even_head_dims(min_value: int = 2, max_value: int = 16) -> st.SearchStrategy[int]:
    """Even head dimensions d in [min_value, max_value]."""
    return st.integers(min_value // 2 + min_value % 2, max_value // 2).map(lambda h: 2 * h)


def odd_head_dims(max_value: int = 15) -> st.SearchStrategy[int]:
    return st.integers(0, (max_value - 1) // 2).map(lambda h: 2 * h + 1)


def integer_positions(bound: int = 10_000) -> st.SearchStrategy[int]:
    return st.integers(-bound, bound)


def real_positions(bound: float = 1e4) -> st.SearchStrategy[float]:
    """Real positions (position interpolation uses fractional ones)."""
    return finite_floats(bound)


def vectors(dim: int, bound: float = 10.0) -> st.SearchStrategy[torch.Tensor]:
    """float64 vectors of length ``dim`` with entries in [-bound, bound]."""
    return hnp.arrays(np.float64, dim, elements=finite_floats(bound)).map(torch.from_numpy)


def frequency_vectors(n: int, max_value: float = 2.0) -> st.SearchStrategy[torch.Tensor]:
    """Angular frequencies theta_i in [0, max_value] (any schedule, not only geometric ones)."""
    return hnp.arrays(np.float64, n, elements=st.floats(0.0, max_value)).map(torch.from_numpy)


@st.composite
def head_vectors_and_frequencies(draw, min_dim: int = 2, max_dim: int = 16, bound: float = 10.0):
    """``(d, q, k, theta)``: an even head dimension, two head vectors and d/2 frequencies."""
    d = draw(even_head_dims(min_dim, max_dim), label="d")
    q = draw(vectors(d, bound), label="q")
    k = draw(vectors(d, bound), label="k")
    theta = draw(frequency_vectors(d // 2), label="theta")
    return d, q, k, theta


def rope_bases() -> st.SearchStrategy[float]:
    """RoPE bases b, from below the original 10^4 to past LLaMA 3's 5 x 10^5."""
    return st.floats(100.0, 1e6)


def extension_scales() -> st.SearchStrategy[float]:
    """Context-extension factors s = L'/L."""
    return st.floats(1.0, 64.0)


@st.composite
def axial_configurations(draw, max_axes: int = 3, max_pairs_per_axis: int = 3):
    """``(n_axes, head_dim)`` with head_dim a multiple of 2 * n_axes."""
    n_axes = draw(st.integers(1, max_axes), label="n_axes")
    pairs = draw(st.integers(1, max_pairs_per_axis), label="pairs_per_axis")
    return n_axes, 2 * n_axes * pairs
