"""The QK spectrum over training (foundations.txt lines 797-816): the CI-scale experiment of
``experiments.qk_kappa``, registered before its code, and its control of the mechanism at the same seeds and scale
(learning rate 0: nothing learned), which must not show what the decision shows.
"""
import pytest

from claimcheck import control, refutes
from experiments.analysis import CONFIRMED, CONTRADICTED, expect, expect_side
from experiments.qk_kappa import SCALES, KappaPlateau

CI = SCALES["ci"]


def _values(result):
    return {"kappa_init": result.values("kappa_real_init"), "kappa_last": result.values("kappa_real_last")}


@pytest.mark.claim("spectral.qk-training-two-phase-empirical")
@refutes(reason="the registered experiment at its CI scale (one post-LN layer, one head of width 32, AdamW 600 "
                "steps on bigram-chain text, 5 seeds): Re kappa(W_QK) ends far from 1 in every seed")
def test_training_concentrates_the_qk_spectrum_to_a_plateau_near_one(decide):
    result = decide(KappaPlateau(), CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("spectral.qk-training-two-phase-empirical")
def test_re_kappa_of_w_qk_ends_far_below_one_while_attention_sharpens(decide):
    result = decide(KappaPlateau(), CI)
    expect(result, CONTRADICTED, **_values(result), entropy_init=result.values("entropy_init"),
           entropy_last=result.values("entropy_last"))


@pytest.mark.claim("spectral.qk-training-two-phase-empirical")
@control("the same seeds, scale and steps at learning rate 0 (nothing learned): kappa stays at its initial value, "
         "which must not be read as the trained one", models=["spectral.qk-training-two-phase-empirical"])
def test_without_learning_kappa_does_not_end_far_from_one_in_every_seed(decide):
    result = decide(KappaPlateau(lr=0.0), CI, registered=False)
    expect_side(result, CONTRADICTED, **_values(result))
