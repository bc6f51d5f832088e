"""Pre-LN vs post-LN (foundations.txt lines 372-375, linear-algebra.txt line 378, index.txt line 264):
learning-rate tolerance, the need for warm-up, gradient spread across depth, block Jacobian spectra.

Each claim has its experiment at the CI scale (``experiments.prenorm.SCALES["ci"]``, the prediction
registered in ``claims.yaml``), decided by ``experiments.analysis`` and checked by one assertion of the
outcome the registry records (a change of outcome fails the run and the registry must follow), and a
control: for the warm-up and the gradient spread, a control of the mechanism at the decision's seeds and scale
(``experiments.prenorm_controls``: the comparison on pre-LN, a second pre-LN stack), its outcome predicted in
the test before it ran; for the learning-rate tolerance and the block Jacobians, a negative control
(``@control``) that runs the same check of the interval on a deliberately broken variant at the ``control``
scale and must be rejected by it. The learning-rate scans are read at the grid's
resolution, and the two scans that share the post-LN arm without warm-up are one family. Two experiments
are uninformative by design (the registry's ``uninformative`` says why): their tests only guard the
recorded interval.
"""
import pytest

from claimcheck import control
from experiments.analysis import (CONFIRMED, CONTRADICTED, INCONCLUSIVE, NOT_CONFIRMED, UNINFORMATIVE, Decision,
                                  expect, expect_as_predicted, expect_side)
from experiments.prenorm import SCALES, GradientSpread, HealthyJacobian, LearningRateTolerance, WarmupNeed
from experiments.prenorm_controls import GradientSpreadPlacebo, WarmupNeedPreLN

CI, CONTROL = SCALES["ci"], SCALES["control"]


def values(result: Decision, *metrics: str) -> dict:
    return {m: result.values(m) for m in metrics}


@pytest.mark.claim("architecture.la-prenorm-more-stable-larger-lr")
def test_pre_ln_learning_rate_advantage_guards_the_recorded_interval_uninformative_by_design(decide):
    # on the grid: lr*_pre in [3e-2, 1e-1), lr*_post in [1e-2, 3e-2) in every seed, a log10 ratio in [0, 1]
    result = decide(LearningRateTolerance(), CI)
    expect(result, UNINFORMATIVE, INCONCLUSIVE, **values(result, "lr_pre", "lr_post"))


@pytest.mark.claim("architecture.la-prenorm-more-stable-larger-lr")
def test_post_ln_secretly_at_10x_the_learning_rate_stays_inconclusive_on_the_grid_guards_the_recorded_interval(decide):
    # not a control: with three seeds on the half-decade grid even a planted 10x gap is not resolved
    result = decide(LearningRateTolerance(post_lr_factor=10.0), CONTROL, registered=False)
    expect(result, INCONCLUSIVE, **values(result, "lr_pre", "lr_post"))


@pytest.mark.claim("optimization.post-norm-unstable-needs-warmup")
def test_warmup_raises_post_ln_learning_rate_tolerance_less_than_3_2x_at_ci_scale(decide):
    expect(decide(WarmupNeed(), CI), CONTRADICTED)


@pytest.mark.claim("optimization.post-norm-unstable-needs-warmup")
def test_pre_ln_gains_less_than_3_2x_in_learning_rate_from_warmup(decide):
    # predicted before it ran: without post-LN's norm after the sum warm-up buys no 3.2x; read on the grid (a cell
    # [3e-2, 1e-1) spans a ratio of 10^0.52) the interval need not lie wholly below 0.5, so: not confirmed
    result = decide(WarmupNeedPreLN(), CI, predicted=NOT_CONFIRMED)
    expect_as_predicted(result, **values(result, "lr_warmup", "lr_no_warmup"))


@pytest.mark.claim("optimization.pre-norm-gradient-stability-deep")
def test_post_ln_gradient_spread_across_depth_is_less_than_2x_pre_ln_at_ci_scale(decide):
    result = decide(GradientSpread(), CI)
    expect(result, CONTRADICTED, **values(result, "spread_pre", "spread_post"))


@pytest.mark.claim("optimization.pre-norm-gradient-stability-deep")
def test_a_second_pre_ln_stack_in_place_of_post_ln_shows_no_spread_ratio(decide):
    # predicted before it ran: two draws of one architecture differ by less than 2x in spread, wholly below 1
    result = decide(GradientSpreadPlacebo(), CI, predicted=(CONTRADICTED,))
    expect_as_predicted(result, **values(result, "spread_pre", "spread_post"))


@pytest.mark.claim("optimization.index-health-check-jacobian-spectrum-near-one")
def test_block_jacobian_spectrum_is_near_one_after_a_healthy_pre_ln_run(decide):
    result = decide(HealthyJacobian(), CI)
    expect(result, CONFIRMED, **values(result, "final_loss"))


@pytest.mark.claim("optimization.index-health-check-jacobian-spectrum-near-one")
@control("the blocks secretly lose their residual connections")
def test_blocks_without_residuals_have_jacobian_spectra_away_from_one(decide):
    expect_side(decide(HealthyJacobian(norm="none"), CONTROL, registered=False), CONFIRMED)
