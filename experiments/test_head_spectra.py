"""Heads' spectra late against mid training (spectral.txt lines 387, 408): the CI-scale experiment of
``experiments.head_spectra``, registered before its code, and its control of the mechanism at the same scale and
seeds (every target a uniformly random character: nothing for the heads to learn), which must not show what the
decision shows. At the CI scale the decision is contradicted (the diversity rises from mid to late training in 5 of 5
seeds); the control's interval straddles 0, so it does not show the rise wholly, but its mean rise is as large: the
rise is not shown to come from learning.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONTRADICTED, expect, expect_side
from experiments.head_spectra import SCALES, SPECTRA_LATE_VS_MID, LateVersusMid

CI = SCALES["ci"]


def _values(result):
    return {"mid": result.values("diversity_mid"), "late": result.values("diversity_late"),
            "final_loss": result.values("final_loss")}


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_head_spectral_diversity_rises_from_mid_to_late_training_at_ci_scale(decide):
    result = decide(SPECTRA_LATE_VS_MID, CI)
    expect(result, CONTRADICTED, **_values(result))


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
@control("every target secretly a uniformly random character, same seeds, inputs and scale: with nothing to "
         "learn, the decision's check must not see the heads' spectra move apart",
         models=["spectral.heads-similar-spectra-late-training"])
def test_with_random_targets_the_rise_of_head_spectral_diversity_is_not_resolved(decide):
    result = decide(LateVersusMid(targets="random"), CI, registered=False)
    expect_side(result, CONTRADICTED, **_values(result))
