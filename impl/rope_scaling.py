"""RoPE context-extension frequency schedules, as their papers define them (float64).

A model trained with context length ``L`` and frequencies ``theta_i = b^(-2i/d)`` is run at length
``L' = s L`` (scale ``s > 1``). Each schedule returns new frequencies ``theta'_i`` (shape (d/2,)):

* Position interpolation (PI; Chen, Wong, Chen, Tian 2023, arXiv 2306.15595): positions are
  squeezed, ``m -> m / s``, i.e. ``theta'_i = theta_i / s`` for every i.
* NTK-aware scaling (bloc97 2023; as written in YaRN, arXiv 2309.00071, section 3.1): the base is
  changed, ``b' = b s^(d/(d-2))``, ``theta'_i = b'^(-2i/d)``; ``theta'_0 = theta_0`` (no change at the
  highest frequency) and ``theta'_{d/2-1} = theta_{d/2-1} / s`` (PI at the lowest).
* YaRN's "NTK-by-parts" (arXiv 2309.00071, section 3.2): with wavelength
  ``lambda_i = 2 pi / theta_i`` and ``r_i = L / lambda_i`` (rotations within the original context),
  ``theta'_i = (1 - gamma(r_i)) theta_i / s + gamma(r_i) theta_i`` where the ramp
  ``gamma(r) = 0 (r < alpha), 1 (r > beta), (r - alpha)/(beta - alpha) otherwise``; alpha = 1, beta = 32
  for LLaMA. High-frequency planes (many rotations in L) are left alone; low-frequency planes (less
  than one rotation in L) are interpolated as in PI. YaRN also scales the logits by
  ``1/t`` with ``sqrt(1/t) = 0.1 ln s + 1`` (section 3.4): :func:`yarn_attention_factor`.
  The reference code (and transformers' ``_compute_yarn_parameters``) ramps linearly in the plane
  index between rounded correction dimensions instead of linearly in ``r``; both agree outside the ramp.
* LongRoPE (Ding et al. 2024, arXiv 2402.13753) rescales each plane by a factor found by search:
  ``theta'_i = theta_i / lambda_i`` (:func:`rescaled`); the factors are data, not a formula.
"""
from __future__ import annotations

import math

import torch

from impl.rope import rope_frequencies

__all__ = ["wavelengths", "position_interpolation", "ntk_aware_base", "ntk_aware", "yarn_ramp", "yarn",
           "yarn_attention_factor", "rescaled"]


def wavelengths(theta: torch.Tensor) -> torch.Tensor:
    """``lambda_i = 2 pi / theta_i``: the number of tokens for one full turn of plane i."""
    return 2 * math.pi / theta


def position_interpolation(theta: torch.Tensor, scale: float) -> torch.Tensor:
    """PI: ``theta_i / s`` (equivalently positions ``m / s``)."""
    _check_scale(scale)
    return theta / scale


def ntk_aware_base(base: float, scale: float, head_dim: int) -> float:
    """``b' = b s^(d/(d-2))``: the base whose lowest frequency is the original lowest divided by s."""
    _check_scale(scale)
    if head_dim < 4 or head_dim % 2:
        raise ValueError(f"NTK-aware scaling needs an even head dimension >= 4 (exponent d/(d-2)), got {head_dim}")
    return base * scale ** (head_dim / (head_dim - 2))


def ntk_aware(head_dim: int, base: float, scale: float) -> torch.Tensor:
    """``theta'_i = (b s^(d/(d-2)))^(-2i/d)``: (d/2,)."""
    return rope_frequencies(head_dim, ntk_aware_base(base, scale, head_dim))


def yarn_ramp(r: torch.Tensor, alpha: float = 1.0, beta: float = 32.0) -> torch.Tensor:
    """``gamma(r)``: 0 below alpha, 1 above beta, linear in between."""
    if not alpha < beta:
        raise ValueError(f"the YaRN ramp needs alpha < beta, got alpha={alpha}, beta={beta}")
    return ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)


def yarn(head_dim: int, base: float, scale: float, original_length: int, alpha: float = 1.0,
         beta: float = 32.0) -> torch.Tensor:
    """NTK-by-parts frequencies ``(1 - gamma) theta / s + gamma theta`` with ``r_i = L / lambda_i``: (d/2,)."""
    _check_scale(scale)
    if original_length < 1:
        raise ValueError(f"original_length L must be a positive integer, got {original_length}")
    theta = rope_frequencies(head_dim, base)
    gamma = yarn_ramp(original_length / wavelengths(theta), alpha, beta)
    return (1 - gamma) * theta / scale + gamma * theta


def yarn_attention_factor(scale: float) -> float:
    """``sqrt(1/t) = 0.1 ln s + 1``: YaRN multiplies q and k (or cos and sin) by it, logits by its square."""
    _check_scale(scale)
    return 0.1 * math.log(scale) + 1.0


def rescaled(theta: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """LongRoPE-style per-plane rescaling ``theta_i / lambda_i`` with given factors (d/2,)."""
    if factors.shape != theta.shape:
        raise ValueError(f"one rescale factor per plane: factors must have shape {tuple(theta.shape)}, "
                         f"got {tuple(factors.shape)}")
    return theta / factors


def _check_scale(scale: float) -> None:
    if not scale >= 1.0:
        raise ValueError(f"the extension scale s = L'/L must be >= 1, got {scale}")
