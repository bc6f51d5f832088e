"""Heads' spectra late against mid training (spectral.txt lines 387, 408): the CI-scale experiment of
``experiments.head_spectra``, registered before its code, and its control of the mechanism at the same scale and
seeds (every target a uniformly random character: nothing for the heads to converge on), which must not show what
the decision shows.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, expect, expect_side
from experiments.head_spectra import SCALES, SPECTRA_LATE_VS_MID, LateVersusMid

CI = SCALES["ci"]


def _values(result):
    return {"mid": result.values("diversity_mid"), "late": result.values("diversity_late"),
            "final_loss": result.values("final_loss")}


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_head_spectral_diversity_is_lower_late_than_mid_training(decide):
    result = decide(SPECTRA_LATE_VS_MID, CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
@control("every target secretly a uniformly random character, same seeds, inputs and scale: with nothing to "
         "learn the heads' spectra must not converge", models=["spectral.heads-similar-spectra-late-training"])
def test_with_random_targets_head_spectral_diversity_does_not_fall_late_in_training(decide):
    result = decide(LateVersusMid(targets="random"), CI, registered=False)
    expect_side(result, CONFIRMED, **_values(result))
