"""Sharpness late in training (spectral.txt lines 440-441, section 9.2's definitions): the CI-scale experiment of
``experiments.sharpness``, registered before its code, and its control of the mechanism at the same seeds and scale
(the second half of training removed: learning rate 0), which must not show what the decision shows.
"""
import pytest

from claimcheck import control, refutes
from experiments.analysis import CONFIRMED, CONTRADICTED, expect, expect_side
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
@control("the second half of training at learning rate 0, same seeds and scale: without late training the "
         "top eigenvalue must not rise", models=["spectral.transformers-sharp-then-drift-flat"])
def test_without_late_training_the_top_hessian_eigenvalue_does_not_rise(decide):
    result = decide(LateDrift(late_lr=0.0), CI, registered=False)
    expect_side(result, CONTRADICTED, **_values(result))
