"""Axial N-dimensional RoPE: positions with N axes (text: 1, image: height and width, video: time,
height and width) -- foundations.txt lines 431-445 and the code of lines 504-560.

The head dimension ``d`` is split into N contiguous blocks of ``d/N`` coordinates, block ``a``
rotated by 1-D RoPE at the axis-``a`` coordinate ``m_a`` of the position vector
``m = (m_1, ..., m_N)``. The rotation is therefore the DIRECT SUM (block diagonal) of the per-axis
rotations, ``R(m) = R^(1)(m_1) (+) ... (+) R^(N)(m_N)`` in SO(d), and the logit
``<R(m) q, R(n) k> = <q, R(n - m) k>`` depends on each axis only through ``n_a - m_a``.
Each block is rotated by interleaved pairs, so ``d/N`` must be even: ``d % (2N) == 0``.

:func:`kronecker_rotation` builds the Kronecker (tensor) product that foundations.txt line 435
writes (``R^(N)(m) = (x)_a R^(a)(m_a)``) for comparison: it acts on ``(d/N)^N`` coordinates, not d.

Shapes: ``x (..., T, d)``; ``positions (T, N)`` or ``x.shape[:-1] + (N,)``; ``thetas (N, d/(2N))``.
"""
from __future__ import annotations

import functools

import torch

from impl.rope import rope_frequencies, rope_interleaved, rotation_matrix

__all__ = ["axial_frequencies", "axial_rope", "axial_rotation_matrix", "kronecker_rotation"]


def axial_frequencies(head_dim: int, n_axes: int, base: float = 10000.0) -> torch.Tensor:
    """1-D RoPE frequencies of a ``d/N``-dimensional block for every axis: (N, d/(2N)), float64."""
    _check_split(head_dim, n_axes)
    return rope_frequencies(head_dim // n_axes, base).expand(n_axes, -1).clone()


def axial_rope(x: torch.Tensor, positions: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Rotate block ``a`` of the last dimension of ``x`` by 1-D RoPE at ``positions[..., a]``: (..., T, d)."""
    n_axes = thetas.shape[0]
    d = x.shape[-1]
    _check_split(d, n_axes)
    if thetas.shape != (n_axes, d // (2 * n_axes)):
        raise ValueError(f"thetas must have shape (N, d/(2N)) = ({n_axes}, {d // (2 * n_axes)}) for x of shape "
                         f"{tuple(x.shape)}, got {tuple(thetas.shape)}")
    positions = torch.as_tensor(positions)
    if positions.ndim < 1 or positions.shape[-1] != n_axes or positions.shape[:-1] not in (
            (x.shape[-2],), tuple(x.shape[:-1])):
        raise ValueError(f"positions must have shape (T, N) = ({x.shape[-2]}, {n_axes}) or x.shape[:-1] + (N,) = "
                         f"{tuple(x.shape[:-1]) + (n_axes,)}, got {tuple(positions.shape)}")
    blocks = x.chunk(n_axes, dim=-1)  # N blocks of (..., T, d/N)
    return torch.cat([rope_interleaved(b, positions[..., a], thetas[a]) for a, b in enumerate(blocks)], dim=-1)


def axial_rotation_matrix(position: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """``R^(1)(m_1) (+) ... (+) R^(N)(m_N)``: (d, d) with d = 2 N thetas.shape[1]."""
    position = torch.as_tensor(position, dtype=thetas.dtype)
    if position.shape != (thetas.shape[0],):
        raise ValueError(f"a position vector must have shape (N,) = ({thetas.shape[0]},), got {tuple(position.shape)}")
    return torch.block_diag(*(rotation_matrix(m, th) for m, th in zip(position, thetas)))


def kronecker_rotation(position: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """The literal Kronecker product ``R^(1)(m_1) (x) ... (x) R^(N)(m_N)``: ((d/N)^N, (d/N)^N)."""
    position = torch.as_tensor(position, dtype=thetas.dtype)
    return functools.reduce(torch.kron, (rotation_matrix(m, th) for m, th in zip(position, thetas)))


def _check_split(head_dim: int, n_axes: int) -> None:
    if n_axes < 1:
        raise ValueError(f"the number of position axes must be >= 1, got {n_axes}")
    if head_dim < 2 * n_axes or head_dim % (2 * n_axes):
        raise ValueError(f"axial RoPE splits the head dimension into {n_axes} blocks of an even number of "
                         f"coordinates: head_dim must be a positive multiple of 2 * n_axes = {2 * n_axes}, "
                         f"got {head_dim}")
