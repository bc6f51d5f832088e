"""Formulas of impl/ that the evidence of many claims rests on, pinned by hand-computed values: the log-log fit
behind every fitted exponent (slope, intercept, 95% interval) and the spectral concentration kappa."""
import math

import pytest
import torch

from impl.critical_scaling import loglog_fit
from impl.spectral import spectral_concentration


def test_the_fit_and_its_t_interval_take_their_hand_computed_values():
    # log x = 0, 1, 2, 3 and log y = 2 log x + h (1, -1, -1, 1): residuals orthogonal to the centred log x, so
    # slope 2 and intercept 0 exactly; residual sum of squares 4 h^2 over n - 2 = 2 degrees of freedom, S_xx = 5,
    # standard error h sqrt(2 / 5); Student's t with 2 degrees of freedom has the closed-form quantile
    # t_p = (2p - 1) / sqrt(2 p (1 - p)), 4.3027 at p = 0.975 (a normal 1.96 or 3 degrees of freedom would be wrong)
    h = 0.1
    lx = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    ly = 2 * lx + h * torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    fit = loglog_fit(torch.exp(lx), torch.exp(ly))
    half = (0.95 / math.sqrt(2 * 0.975 * 0.025)) * h * math.sqrt(2 / 5)
    # exp then log round-trips within a few ulps of values <= 3.1: the fit moves by ~1e-15
    assert fit.exponent == pytest.approx(2.0, abs=1e-12) and fit.intercept == pytest.approx(0.0, abs=1e-12)
    assert fit.ci95 == pytest.approx((2 - half, 2 + half), abs=1e-12) and fit.points == 4


def test_an_exact_power_law_has_a_zero_width_interval():
    n = torch.tensor([16.0, 32.0, 64.0, 128.0], dtype=torch.float64)
    fit = loglog_fit(n, 3 * n**-0.5)
    assert fit.exponent == pytest.approx(-0.5, abs=1e-12) and fit.ci95[1] - fit.ci95[0] == pytest.approx(0.0, abs=1e-10)


def test_too_few_points_are_refused():
    with pytest.raises(ValueError, match="at least 3 points"):
        loglog_fit(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0]))


def test_kappa_takes_the_eigenvalue_of_largest_real_part_over_the_trace():
    # eigenvalues -3, 1, 1 (trace -1): lambda_1 is 1 (largest real part), kappa = 1 / -1 = -1; taking lambda_1 by
    # modulus (-3) would give 3; the diagonal's eigenvalues are exact
    w = torch.diag(torch.tensor([-3.0, 1.0, 1.0], dtype=torch.float64))
    assert complex(spectral_concentration(w).item()) == pytest.approx(-1.0, abs=1e-15)
    # 2 I plus a rotation by 90 degrees: eigenvalues 2 +- i (equal real parts), trace 4: Re kappa = 1/2
    r = torch.tensor([[2.0, -1.0], [1.0, 2.0]], dtype=torch.float64)
    assert complex(spectral_concentration(r).item()).real == pytest.approx(0.5, abs=1e-14)
