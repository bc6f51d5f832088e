"""Sharpness late in training (spectral.txt lines 440-441, section 9.2's definitions): the CI-scale experiment of
``experiments.sharpness``, registered before its code, and its control of the mechanism at the same seeds and scale
(the second half's gradients replaced by Gaussian noise of the same norm: the steps go on, the loss no longer
steers them), with its outcome predicted before it ran: not the decision's.
"""
import pytest

from claimcheck import control, refutes
from experiments.analysis import CONFIRMED, CONTRADICTED, NOT_CONTRADICTED, expect, reject_as_predicted
from experiments.sharpness import SCALES, LateDrift

CI = SCALES["ci"]


def _values(result):
    return {"middle": result.values("sharpness_middle"), "last": result.values("sharpness_last"),
            "loss_middle": result.values("loss_middle"), "loss_last": result.values("loss_last")}


@pytest.mark.claim("spectral.transformers-sharp-then-drift-flat")
@refutes(reason="the registered experiment at its CI scale (2 pre-LN layers, d = 32, 4 heads, AdamW 300 steps, 5 "
                "seeds): the top Hessian eigenvalue is larger at the last step than at the middle one in every seed")
def test_a_small_transformer_lm_drifts_to_flatter_regions_late_in_training(decide):
    result = decide(LateDrift(), CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("spectral.transformers-sharp-then-drift-flat")
def test_the_top_hessian_eigenvalue_rises_late_in_training_contradicting_a_drift_to_flatness(decide):
    result = decide(LateDrift(), CI)
    expect(result, CONTRADICTED, **_values(result))


@pytest.mark.claim("spectral.transformers-sharp-then-drift-flat")
@control("the second half's gradients replaced by Gaussian noise of the same norm (same seeds and scale): without "
         "descent the rise must go", models=["spectral.transformers-sharp-then-drift-flat"])
def test_with_noise_for_late_gradients_the_top_hessian_eigenvalue_does_not_rise(decide):
    # predicted before it ran: without descent in the second half, lambda_max does not rise in every seed
    result = decide(LateDrift(late_gradients="noise"), CI, predicted=NOT_CONTRADICTED)
    reject_as_predicted(result, CONTRADICTED, **_values(result))
