"""The QK spectrum over training (foundations.txt lines 797-816): the CI-scale experiment of
``experiments.qk_kappa``, registered before its code, and its control of the mechanism at the same seeds and scale
(every gradient replaced by Gaussian noise of the same norm: the weights move, nothing is learned), with its
outcome predicted before it ran: not the decision's.
"""
import pytest

from claimcheck import control, refutes
from experiments.analysis import CONFIRMED, CONTRADICTED, NOT_CONTRADICTED, expect, reject_as_predicted
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
@control("every gradient replaced by Gaussian noise of the same norm (same seeds, steps, optimizer): nothing learned, "
         "so the end values must not be read as the trained ones", models=["spectral.qk-training-two-phase-empirical"])
def test_with_noise_for_gradients_kappa_does_not_end_far_from_one_in_every_seed(decide):
    # predicted before it ran: without learning, kappa is a ratio of random matrices' spectra, not wholly far from 1
    result = decide(KappaPlateau(gradients="noise"), CI, predicted=NOT_CONTRADICTED)
    reject_as_predicted(result, CONTRADICTED, **_values(result))
