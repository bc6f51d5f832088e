"""Fitted log-log scaling exponents: ``y ~ c * n^p``, ``p`` the least-squares slope of ``log y`` on ``log n``.

The tracked figures ``track_*_exponent`` measure a cost at a few sizes ``n`` and report ``p``:
about 2 for the ``n x n`` score matrix of standard attention, about 1 for memory linear in ``n``.
A constant term (fixed workspace, call overhead) makes a finite-range fit read below the
asymptotic exponent, never above it, so the sizes must be large enough for the leading term to
dominate; :func:`fit_power_law` returns ``r2`` so that a poor fit is visible.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class PowerLaw:
    """``y = prefactor * n^exponent``, fitted on log-log axes; ``r2`` of that linear fit."""

    exponent: float
    prefactor: float
    r2: float

    def __call__(self, n: float) -> float:
        return self.prefactor * n ** self.exponent


def fit_power_law(n: Sequence[float], y: Sequence[float]) -> PowerLaw:
    """Least-squares fit of ``log y = log c + p log n``; needs two or more distinct positive ``n``
    and positive ``y`` of the same length."""
    if len(n) != len(y):
        raise ValueError(f"n and y must have the same length: got {len(n)} and {len(y)}")
    if any(v <= 0 for v in n) or any(v <= 0 for v in y):
        raise ValueError(f"a log-log fit needs positive sizes and values: got n={list(n)}, y={list(y)}")
    if len(set(n)) < 2:
        raise ValueError(f"a log-log fit needs at least two distinct sizes: got n={list(n)}")
    xs = [math.log(v) for v in n]
    ys = [math.log(v) for v in y]
    x_bar, y_bar = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - x_bar) ** 2 for x in xs)
    sxy = sum((x - x_bar) * (v - y_bar) for x, v in zip(xs, ys))
    syy = sum((v - y_bar) ** 2 for v in ys)
    slope = sxy / sxx
    r2 = 1.0 if syy == 0 else sxy * sxy / (sxx * syy)
    return PowerLaw(exponent=slope, prefactor=math.exp(y_bar - slope * x_bar), r2=r2)


def scaling_exponent(measure: Callable[[int], float], sizes: Sequence[int]) -> float:
    """The fitted exponent ``p`` of ``measure(n) ~ c n^p`` over ``sizes``."""
    return fit_power_law(list(sizes), [measure(n) for n in sizes]).exponent
