"""Rotary position embedding (RoPE) in plain torch (float64-capable), in its three equivalent forms.

Su et al., "RoFormer" (arXiv 2104.09864), eqs. (13)-(15) and (34); foundations.txt lines 240-270, 403-487.
A head vector ``x`` of even dimension ``d`` at position ``m`` is rotated plane by plane, plane ``i``
(``i = 0 .. d/2 - 1``, 0-based) by the angle ``m * theta_i`` with ``theta_i = base^(-2i/d)``
(RoFormer eq. 15 writes ``10000^(-2(i-1)/d)`` with 1-based ``i``). The planes are either

* interleaved pairs ``(x_{2i}, x_{2i+1})`` -- RoFormer, the block-diagonal ``R_{Theta,m}`` of
  foundations.txt line 252 (:func:`rope_interleaved`, :func:`rotation_matrix`), or
* half-split pairs ``(x_i, x_{i+d/2})`` -- GPT-NeoX / LLaMA's ``rotate_half`` form, the code of
  foundations.txt lines 258-270 (:func:`rope_half_split`).

The two differ by the fixed permutation :func:`interleaved_to_half_split`:
``rope_half_split(x[..., P]) == rope_interleaved(x)[..., P]``. :func:`rope_complex` is the complex form
``x~_i = x_{2i} + i x_{2i+1}  ->  x~_i e^{i m theta_i}`` (RoFormer eq. 34).

Shapes: ``x (..., T, d)``; ``positions (T,)`` or ``x.shape[:-1]`` (real numbers: PI uses fractional
positions); ``theta (d/2,)``.
"""
from __future__ import annotations

import torch

__all__ = ["rope_frequencies", "rotation_angles", "plane_rotation", "rotation_matrix", "rope_interleaved",
           "rotate_half", "rope_half_split", "rope_complex", "interleaved_to_half_split"]


def rope_frequencies(head_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``theta_i = base^(-2i/d)`` for ``i = 0 .. d/2 - 1``: shape (d/2,) (RoFormer eq. 15)."""
    _check_head_dim(head_dim)
    return (base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)).to(dtype)


def rotation_angles(positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``positions[..., None] * theta``: (..., d/2)."""
    return torch.as_tensor(positions, dtype=theta.dtype)[..., None] * theta


def plane_rotation(angle: torch.Tensor) -> torch.Tensor:
    """``[[cos a, -sin a], [sin a, cos a]]`` for every angle: (..., 2, 2) (foundations.txt line 240)."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def rotation_matrix(position: float | torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """The block-diagonal ``R_{Theta,m}`` of foundations.txt line 252: (d, d), blocks on pairs (2i, 2i+1)."""
    blocks = plane_rotation(torch.as_tensor(position, dtype=theta.dtype) * theta)  # (d/2, 2, 2)
    return torch.block_diag(*blocks)


def rope_interleaved(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate each interleaved pair ``(x_{2i}, x_{2i+1})`` by ``m theta_i``: equals ``R_{Theta,m} x``."""
    cos, sin = _cos_sin(x, positions, theta)  # (..., T, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``cat([-x2, x1])`` where ``x1, x2`` are the first and second halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def rope_half_split(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate each half-split pair ``(x_i, x_{i+d/2})`` by ``m theta_i``: ``x cos + rotate_half(x) sin``."""
    cos, sin = _cos_sin(x, positions, theta)
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)  # (..., T, d)
    return x * cos + rotate_half(x) * sin


def rope_complex(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """RoFormer eq. (34): ``x~_i = x_{2i} + i x_{2i+1}`` multiplied by ``e^{i m theta_i}``, back to real pairs."""
    _check(x, positions, theta)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())  # (..., T, d/2)
    angle = rotation_angles(positions, theta)
    rotated = z * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(rotated).reshape(x.shape)


def interleaved_to_half_split(head_dim: int) -> torch.Tensor:
    """The permutation ``P = [0, 2, 4, ..., 1, 3, 5, ...]``: coordinate j of the half-split layout is
    coordinate ``P[j]`` of the interleaved one, so pair (2i, 2i+1) lands on (i, i + d/2)."""
    _check_head_dim(head_dim)
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def _cos_sin(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check(x, positions, theta)
    angle = rotation_angles(positions, theta).to(x.dtype)  # (..., T, d/2)
    return torch.cos(angle), torch.sin(angle)


def _check_head_dim(head_dim: int) -> None:
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"RoPE rotates coordinate pairs and needs an even head dimension >= 2, got {head_dim}")


def _check(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> None:
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, d), got {tuple(x.shape)}")
    d = x.shape[-1]
    _check_head_dim(d)
    if theta.shape != (d // 2,):
        raise ValueError(f"theta must have shape (d/2,) = ({d // 2},) for x of shape {tuple(x.shape)}, "
                         f"got {tuple(theta.shape)}")
    pos_shape = tuple(torch.as_tensor(positions).shape)
    if pos_shape not in ((x.shape[-2],), tuple(x.shape[:-1])):
        raise ValueError(f"positions must have shape (T,) = ({x.shape[-2]},) or x.shape[:-1] = "
                         f"{tuple(x.shape[:-1])} for x of shape {tuple(x.shape)}, got {pos_shape}")
