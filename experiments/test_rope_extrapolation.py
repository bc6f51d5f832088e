"""RoPE beyond its training length (spectral.txt lines 339-353, foundations.txt lines 278 and 654).

Each experiment runs at the CI scale (``experiments.rope_extrapolation.SCALES["ci"]``, its prediction
pre-registered in ``claims.yaml``); the test asserts the outcome the registry records, so a change of
outcome fails the run. Each has a negative control at the ``control`` scale: a deliberately broken
variant whose outcome must be the opposite one.
"""
import pytest

from claimcheck import claim_assert
from experiments.rope_extrapolation import (ATTENTION_FLATTENS, LARGE_ALPHA_CONCENTRATES, NTK_AWARE_EXTENDS,
                                            OPTIMAL_ALPHA, SCALES, SMALL_ALPHA_NOT_ENOUGH, UNSCALED_COLLAPSES)

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
def test_unscaled_rope_loses_less_than_half_of_its_skill_beyond_the_training_length(decide):
    result = decide(UNSCALED_COLLAPSES, CI)
    claim_assert(not result.confirmed, result.summary(), lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
def test_a_planted_collapse_beyond_the_training_length_is_detected(decide):
    result = decide(UNSCALED_COLLAPSES.control("planted-collapse"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_alpha_one_half_is_not_worse_than_alpha_one_to_two_beyond_the_training_length(decide):
    result = decide(SMALL_ALPHA_NOT_ENOUGH, CI)
    claim_assert(not result.confirmed, result.summary(), excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_a_planted_dilution_makes_alpha_one_half_too_small(decide):
    result = decide(SMALL_ALPHA_NOT_ENOUGH.control("planted-dilution"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
def test_alpha_four_does_not_clearly_over_concentrate_attention(decide):
    result = decide(LARGE_ALPHA_CONCENTRATES, CI)
    claim_assert(not result.confirmed, result.summary(), entropy_ratio=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
def test_alpha_secretly_doubled_over_concentrates_attention(decide):
    result = decide(LARGE_ALPHA_CONCENTRATES.control("alpha-doubled"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), entropy_ratio=result.values())


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_the_best_alpha_beyond_the_training_length_lies_outside_1_5_to_2(decide):
    result = decide(OPTIMAL_ALPHA, CI)
    claim_assert(not result.confirmed and result.ci_low > 0, result.summary(), gap=result.values(),
                 best_alpha=result.values("best_alpha"))


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_blinding_every_alpha_outside_1_5_to_2_puts_the_optimum_inside(decide):
    result = decide(OPTIMAL_ALPHA.control("off-band-blinded"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), gap=result.values(), best_alpha=result.values("best_alpha"))


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
def test_unscaled_rope_attention_flattens_beyond_the_training_length(decide):
    result = decide(ATTENTION_FLATTENS, CI)
    claim_assert(result.confirmed, result.summary(), flattening=result.values())


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
def test_rows_secretly_inside_the_training_length_do_not_flatten(decide):
    result = decide(ATTENTION_FLATTENS.control("in-distribution"), CONTROL, registered=False)
    claim_assert(not result.confirmed, result.summary(), flattening=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_ntk_aware_frequencies_lower_the_loss_beyond_the_training_length(decide):
    result = decide(NTK_AWARE_EXTENDS, CI)
    claim_assert(result.confirmed, result.summary(), ntk_gain=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_ntk_aware_frequencies_that_are_secretly_the_trained_ones_gain_nothing(decide):
    result = decide(NTK_AWARE_EXTENDS.control("ntk-ignored"), CONTROL, registered=False)
    claim_assert(not result.confirmed and result.effect == 0, result.summary(), ntk_gain=result.values())
