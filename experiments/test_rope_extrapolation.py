"""RoPE beyond its training length (spectral.txt lines 339-353, foundations.txt lines 278 and 654).

Each experiment runs at the CI scale (``experiments.rope_extrapolation.SCALES["ci"]``, its prediction
registered in ``claims.yaml``); the six are computed from the same five trained models, so
``experiments.analysis`` decides them as one family (Bonferroni: 99.17% t intervals each). The test asserts
the outcome the registry records, so a change of outcome fails the run. Each has a negative control at the
``control`` scale (three seeds, 95% t interval): a deliberately broken variant whose outcome should differ;
the one that does not is named for what it guards.
"""
import pytest

from claimcheck import claim_assert
from experiments.analysis import CONFIRMED, CONTRADICTED, INCONCLUSIVE, UNINFORMATIVE, expect
from experiments.rope_extrapolation import (ATTENTION_FLATTENS, LARGE_ALPHA_CONCENTRATES, NTK_AWARE_EXTENDS,
                                            OPTIMAL_ALPHA, SCALES, SMALL_ALPHA_NOT_ENOUGH, UNSCALED_COLLAPSES)

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
def test_skill_unscaled_rope_loses_beyond_the_training_length_is_inconclusive_against_one_half(decide):
    result = decide(UNSCALED_COLLAPSES, CI)
    expect(result, INCONCLUSIVE, lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
def test_a_planted_collapse_beyond_the_training_length_is_detected(decide):
    result = decide(UNSCALED_COLLAPSES.control("planted-collapse"), CONTROL, registered=False)
    expect(result, CONFIRMED, lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_excess_loss_of_alpha_one_half_over_alpha_one_to_two_is_inconclusive(decide):
    result = decide(SMALL_ALPHA_NOT_ENOUGH, CI)
    expect(result, INCONCLUSIVE, excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_a_planted_dilution_stays_inconclusive_with_three_seeds_guards_the_recorded_interval(decide):
    result = decide(SMALL_ALPHA_NOT_ENOUGH.control("planted-dilution"), CONTROL, registered=False)
    expect(result, INCONCLUSIVE, excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
def test_over_concentration_of_attention_at_alpha_four_is_inconclusive(decide):
    result = decide(LARGE_ALPHA_CONCENTRATES, CI)
    expect(result, INCONCLUSIVE, entropy_ratio=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
def test_alpha_secretly_doubled_over_concentrates_attention(decide):
    result = decide(LARGE_ALPHA_CONCENTRATES.control("alpha-doubled"), CONTROL, registered=False)
    expect(result, CONFIRMED, entropy_ratio=result.values())


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_best_alpha_beyond_the_training_length_guards_the_recorded_interval_uninformative_by_design(decide):
    result = decide(OPTIMAL_ALPHA, CI)
    expect(result, UNINFORMATIVE, INCONCLUSIVE, gap=result.values(), best_alpha=result.values("best_alpha"))


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_blinding_every_alpha_outside_1_5_to_2_puts_the_optimum_inside(decide):
    result = decide(OPTIMAL_ALPHA.control("off-band-blinded"), CONTROL, registered=False)
    expect(result, CONFIRMED, gap=result.values(), best_alpha=result.values("best_alpha"))


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
def test_flattening_of_unscaled_rope_attention_beyond_the_training_length_is_inconclusive(decide):
    result = decide(ATTENTION_FLATTENS, CI)
    expect(result, INCONCLUSIVE, flattening=result.values())


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
def test_rows_secretly_inside_the_training_length_do_not_flatten(decide):
    result = decide(ATTENTION_FLATTENS.control("in-distribution"), CONTROL, registered=False)
    expect(result, CONTRADICTED, flattening=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_ntk_aware_gain_beyond_the_training_length_is_inconclusive_after_the_family_correction(decide):
    result = decide(NTK_AWARE_EXTENDS, CI)
    expect(result, INCONCLUSIVE, ntk_gain=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_ntk_aware_frequencies_that_are_secretly_the_trained_ones_gain_nothing(decide):
    result = decide(NTK_AWARE_EXTENDS.control("ntk-ignored"), CONTROL, registered=False)
    expect(result, CONTRADICTED, ntk_gain=result.values())
    claim_assert(result.effect == 0, result.summary(), ntk_gain=result.values())
