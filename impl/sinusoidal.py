"""The sinusoidal positional encoding of the original Transformer (float64-capable).

Vaswani et al. 2017, section 3.5 (foundations.txt line 188)::

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

with ``i = 0 .. ceil(d_model / 2) - 1`` (0-based columns). For an odd ``d_model`` the formula defines
the last column ``d_model - 1 = 2i`` as a sine with no cosine partner; the relative-shift map
:func:`shift_matrix` needs the (sin, cos) pairs and therefore an even ``d_model``.

Shapes: ``positions (...,)`` (any real numbers), encoding ``(..., d_model)``.
"""
from __future__ import annotations

import math

import torch

__all__ = ["sinusoidal_frequencies", "sinusoidal_encoding", "shift_matrix"]


def sinusoidal_frequencies(d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``omega_i = base^(-2i / d_model)`` for ``i = 0 .. ceil(d_model/2) - 1``: shape (ceil(d_model/2),)."""
    if d_model < 1:
        raise ValueError(f"d_model must be a positive integer, got {d_model}")
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return torch.exp(-math.log(base) * two_i / d_model).to(dtype)


def sinusoidal_encoding(positions: torch.Tensor | float | int, d_model: int, base: float = 10000.0,
                        dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The table ``PE(pos, :)`` for every entry of ``positions`` (..., ) -> (..., d_model).

    Everything (the positions included) is computed in ``dtype``: float32 reproduces what a float32
    implementation stores, including positions that float32 cannot represent exactly (above 2^24).
    """
    pos = torch.as_tensor(positions).to(dtype)
    omega = sinusoidal_frequencies(d_model, base, dtype)
    angles = pos[..., None] * omega  # (..., ceil(d/2))
    pe = torch.empty(*pos.shape, d_model, dtype=dtype)
    pe[..., 0::2] = torch.sin(angles)
    pe[..., 1::2] = torch.cos(angles[..., : d_model // 2])
    return pe


def shift_matrix(k: float, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed map ``M_k`` with ``PE_{pos+k} = M_k PE_pos`` for every pos: (d_model, d_model), float64.

    On each (sin, cos) pair of frequency omega, the angle-addition formulas give
    ``[sin(w(p+k)), cos(w(p+k))] = [[cos wk, sin wk], [-sin wk, cos wk]] [sin wp, cos wp]``:
    a rotation by ``-omega k`` in (sin, cos) coordinates, independent of ``pos``.
    """
    if d_model % 2:
        raise ValueError(f"the shift map pairs sin and cos columns and needs an even d_model, got {d_model}")
    wk = sinusoidal_frequencies(d_model, base) * k  # (d/2,)
    c, s = torch.cos(wk), torch.sin(wk)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(s)
    m[1::2, 0::2] = torch.diag(-s)
    m[1::2, 1::2] = torch.diag(c)
    return m
