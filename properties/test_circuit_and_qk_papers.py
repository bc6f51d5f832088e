"""Computations behind the second-round decisions on two cited papers (foundations.txt lines 797-827).

* The training curve and the two training phases attributed to Bao, Hataya and Karakida (lines 797-818):
  the paper's localizing regime is a QK eigenspectrum of small variance around a nonzero mean (its record).
  For real eigenvalues with mean mu > 0 and population standard deviation sigma, Samuelson's inequality
  lambda_max <= mu + sigma sqrt(d - 1) gives kappa = lambda_max / (d mu) <= 1/d + (sigma / mu) sqrt(d - 1) / d,
  so in that regime kappa stays far below the converged value 1.0 that the chapter's curve reaches.
* Row 1 of the comparison table (line 825), "Hessian spectral shape determines learning difficulty": for a
  quadratic loss L(theta) = theta^T H theta / 2 and gradient descent with the step 1 / lambda_max(H), the error
  along eigenvector i shrinks by |1 - lambda_i / lambda_max| per step, so the number of steps needed from the
  worst start is a function of the spectrum's shape (the ratios lambda_i / lambda_max) alone: unchanged when H is
  scaled, and growing with the condition number.
"""
from __future__ import annotations

import functools
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control


@pytest.mark.claim("spectral.qk-kappa-training-curve", "spectral.qk-two-phase-training",
                   "spectral.footnote12-qk-localize-section4-training")
@pytest.mark.parametrize("kappa_of", [pytest.param(lambda lam: max(lam) / sum(lam), id="kappa"), pytest.param(
    lambda lam: 1.0, id="plateau-kappa-one", marks=control(
        "the curve's converged kappa = 1.0 given to a spectrum in the paper's localizing regime: Samuelson's bound must "
        "reject it", models=["spectral.qk-kappa-training-curve", "spectral.qk-two-phase-training",
                             "spectral.footnote12-qk-localize-section4-training"]))])
@given(d=st.integers(4, 64), mu=st.floats(0.01, 100.0),
       rel=st.lists(st.floats(-1.0, 1.0), min_size=64, max_size=64), spread=st.floats(0.0, 0.1))
def test_a_qk_spectrum_of_small_variance_keeps_kappa_far_below_the_plateau_of_one(kappa_of, d, mu, rel, spread):
    # eigenvalues mu (1 + spread * r_i), r_i in [-1, 1]: the paper's localizing regime (sigma / mu <= 0.1)
    lam = [mu * (1.0 + spread * r) for r in rel[:d]]
    mean = sum(lam) / d
    sigma = math.sqrt(sum((x - mean) ** 2 for x in lam) / d)
    kappa = kappa_of(lam)
    bound = 1 / d + (sigma / mean) * math.sqrt(d - 1) / d
    claim_assert(kappa <= bound * (1 + 1e-12), "kappa exceeds Samuelson's bound 1/d + (sigma/mu) sqrt(d - 1)/d",
                 d=d, kappa=kappa, bound=bound)
    # sigma / mu <= 0.1 and d >= 4 give kappa <= 1/4 + 0.1 sqrt(3) / 4 < 0.30, far from the curve's 1.0 (and its 0.8)
    claim_assert(kappa < 0.8, "a low-variance QK spectrum reaches the curve's localisation plateau", d=d,
                 kappa=kappa)


def _gd_steps(spectrum: list[float], eps: float = 1e-3, cap: int = 100_000, step: float | None = None) -> int:
    """Steps of gradient descent with step 1/lambda_max (or ``step``) on theta^T diag(spectrum) theta / 2 until every
    coordinate of the error, started at 1, is at most eps (the worst start over unit-size coordinates)."""
    lmax = 1 / step if step else max(spectrum)
    err = [1.0] * len(spectrum)
    for t in range(cap):
        if max(abs(e) for e in err) <= eps:
            return t
        err = [e - (lam / lmax) * e for e, lam in zip(err, spectrum)]
    return cap


@pytest.mark.claim("spectral.hessian-spectrum-learning-difficulty")
@pytest.mark.parametrize("gd_steps", [pytest.param(_gd_steps, id="step-1-over-lambda-max"), pytest.param(
    functools.partial(_gd_steps, step=1.0, cap=2_000), id="fixed-step", marks=control(
        "a fixed step 1 instead of 1 / lambda_max(H): the step no longer follows the scale of H (capped at 2000 steps)"))])
@given(spectrum=st.lists(st.floats(0.02, 1.0), min_size=2, max_size=8), scale=st.floats(0.01, 100.0),
       shrink=st.floats(0.1, 0.9))
def test_gd_steps_on_a_quadratic_depend_on_the_shape_of_the_hessian_spectrum_only(gd_steps, spectrum, scale, shrink):
    assume(max(spectrum) > min(spectrum) * 1.05)
    steps = gd_steps(spectrum)
    scaled = gd_steps([scale * lam for lam in spectrum])
    # the same shape (same ratios) at any scale: the same number of steps (one step of slack for rounding)
    claim_assert(abs(steps - scaled) <= 1, "scaling the Hessian changed the number of GD steps", steps=steps,
                 scaled=scaled, scale=scale)
    # a wider spread (smallest eigenvalue shrunk, largest kept): strictly more steps
    i = spectrum.index(min(spectrum))
    wider = list(spectrum)
    wider[i] = spectrum[i] * shrink
    more = gd_steps(wider)
    claim_assert(more > steps, "a larger condition number did not make GD slower", steps=steps, wider=more,
                 kappa=max(spectrum) / min(spectrum), kappa_wider=max(wider) / min(wider))
