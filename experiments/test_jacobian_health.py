"""The block Jacobian spectrum as a health check (index.txt line 264): the CI-scale experiment of
``experiments.jacobian_health``, registered before its code (a failed run against a healthy one of the same seed),
and its placebo at the same scale and seeds (a second healthy run in the failed run's place), which must not show
what the decision shows. At the CI scale the decision is confirmed (S is larger after the failed run in 5 of 5
seeds) and the placebo's interval straddles 0.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, expect, expect_side
from experiments.jacobian_health import FAILED_RUNS, SCALES, FailedRunJacobian

CI = SCALES["ci"]


def _values(result):
    return {m: result.values(m) for m in ("S_healthy", "S_other", "other_lr", "final_loss_healthy", "final_loss_other")}


@pytest.mark.claim("optimization.index-health-check-jacobian-spectrum-near-one")
def test_block_jacobian_spectra_lie_further_from_one_after_a_failed_run_than_after_a_healthy_one(decide):
    result = decide(FAILED_RUNS, CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("optimization.index-health-check-jacobian-spectrum-near-one")
@control("a second healthy run secretly in the failed run's place, same seeds and scale: run-to-run variation "
         "alone must not look like a failure", models=["optimization.index-health-check-jacobian-spectrum-near-one"])
def test_a_second_healthy_run_does_not_look_like_a_failed_one(decide):
    result = decide(FailedRunJacobian(against="placebo"), CI, registered=False)
    expect_side(result, CONFIRMED, **_values(result))
