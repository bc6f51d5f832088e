"""Strategies for scalars, vectors and matrices of logits."""
from __future__ import annotations

import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np


def finite_floats(bound: float = 1e3) -> st.SearchStrategy[float]:
    """Finite float64 values in [-bound, bound]."""
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False)


def dims(min_value: int = 1, max_value: int = 64) -> st.SearchStrategy[int]:
    return st.integers(min_value, max_value)


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**31 - 1)


def logit_vectors(min_len: int = 1, max_len: int = 32, bound: float = 1e3) -> st.SearchStrategy[torch.Tensor]:
    """float64 vectors of finite logits."""
    return hnp.arrays(np.float64, st.integers(min_len, max_len), elements=finite_floats(bound)).map(torch.from_numpy)


def logit_matrices(max_rows: int = 12, max_cols: int = 12, bound: float = 50.0) -> st.SearchStrategy[torch.Tensor]:
    """float64 matrices of finite logits (rows are softmax inputs)."""
    shape = st.tuples(st.integers(1, max_rows), st.integers(1, max_cols))
    return hnp.arrays(np.float64, shape, elements=finite_floats(bound)).map(torch.from_numpy)
