"""RoPE beyond its training length (spectral.txt lines 339-353, foundations.txt lines 278 and 654).

Each experiment runs at the CI scale (``experiments.rope_extrapolation.SCALES["ci"]``, its prediction
registered in ``claims.yaml``); the six are computed from the same five trained models, so
``experiments.analysis`` decides them as one family (Bonferroni: 99.17% t intervals each). The test asserts
the outcome the registry records, so a change of outcome fails the run. Each has a control of the mechanism on
the same five models (the decision's seeds and scale, 95% t interval): the proposed cause removed, everything
else kept, and its outcome predicted in the call before it ran.
"""
import pytest

from claimcheck import control
from experiments.analysis import (CONTRADICTED, INCONCLUSIVE, NOT_CONFIRMED, UNINFORMATIVE, expect,
                                  expect_as_predicted, reject_as_predicted)
from experiments.rope_extrapolation import (ATTENTION_FLATTENS, LARGE_ALPHA_CONCENTRATES, NTK_AWARE_EXTENDS,
                                            OPTIMAL_ALPHA, SCALES, SMALL_ALPHA_NOT_ENOUGH, UNSCALED_COLLAPSES)

CI = SCALES["ci"]


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
def test_skill_unscaled_rope_loses_beyond_the_training_length_is_inconclusive_against_one_half(decide):
    result = decide(UNSCALED_COLLAPSES, CI)
    expect(result, INCONCLUSIVE, lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-qualitative")
@control("no row beyond the training length (boundary L/2, evaluation length L, the same models)")
def test_rows_inside_the_training_length_lose_less_than_half_of_the_skill(decide):
    # predicted before it ran: with no row beyond the training length nothing is lost, wholly below 0.5
    result = decide(UNSCALED_COLLAPSES.control("in-distribution"), CI, predicted=(CONTRADICTED,))
    reject_as_predicted(result, INCONCLUSIVE, lost_fraction=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_excess_loss_of_alpha_one_half_over_alpha_one_to_two_is_inconclusive(decide):
    result = decide(SMALL_ALPHA_NOT_ENOUGH, CI)
    expect(result, INCONCLUSIVE, excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-small")
def test_inside_the_training_length_alpha_one_half_is_not_worse_than_alpha_one_to_two(decide):
    # predicted before it ran: with no dilution to undo, a larger alpha cannot be shown to help
    result = decide(SMALL_ALPHA_NOT_ENOUGH.control("in-distribution"), CI, predicted=NOT_CONFIRMED)
    expect_as_predicted(result, excess_loss=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
def test_over_concentration_of_attention_at_alpha_four_is_inconclusive(decide):
    result = decide(LARGE_ALPHA_CONCENTRATES, CI)
    expect(result, INCONCLUSIVE, entropy_ratio=result.values())


@pytest.mark.claim("spectral.scaling-ablation-alpha-too-large")
@control("alpha 0 in place of 4 (the same models and rows): the proposed cause, a large exponent, removed")
def test_with_alpha_zero_in_place_of_four_attention_beyond_the_training_length_is_not_concentrated(decide):
    # predicted before it ran: unscaled rows beyond the training length see more keys, entropy ratio wholly >= 1
    result = decide(LARGE_ALPHA_CONCENTRATES.control("alpha-zero"), CI, predicted=(CONTRADICTED,))
    reject_as_predicted(result, INCONCLUSIVE, entropy_ratio=result.values())


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_best_alpha_beyond_the_training_length_guards_the_recorded_interval_uninformative_by_design(decide):
    result = decide(OPTIMAL_ALPHA, CI)
    expect(result, UNINFORMATIVE, INCONCLUSIVE, gap=result.values(), best_alpha=result.values("best_alpha"))


@pytest.mark.claim("spectral.empirical-optimal-alpha-1-5-to-2")
def test_inside_the_training_length_the_optimum_is_not_shown_in_1_5_to_2(decide):
    # predicted before it ran: with nothing beyond the training length to rescale, the band is not the optimum
    result = decide(OPTIMAL_ALPHA.control("in-distribution"), CI, predicted=NOT_CONFIRMED)
    expect_as_predicted(result, gap=result.values(), best_alpha=result.values("best_alpha"))


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
def test_flattening_of_unscaled_rope_attention_beyond_the_training_length_is_inconclusive(decide):
    result = decide(ATTENTION_FLATTENS, CI)
    expect(result, INCONCLUSIVE, flattening=result.values())


@pytest.mark.claim("long-context.rank-collapse-beyond-train-length")
@control("no row beyond the training length (boundary L/2, evaluation length L, the same models)")
def test_rows_inside_the_training_length_do_not_flatten(decide):
    # predicted before it ran: rows the model was trained on do not flatten, wholly below 0.1
    result = decide(ATTENTION_FLATTENS.control("in-distribution"), CI, predicted=(CONTRADICTED,))
    reject_as_predicted(result, INCONCLUSIVE, flattening=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_ntk_aware_gain_beyond_the_training_length_is_inconclusive_after_the_family_correction(decide):
    result = decide(NTK_AWARE_EXTENDS, CI)
    expect(result, INCONCLUSIVE, ntk_gain=result.values())


@pytest.mark.claim("long-context.sinusoidal-vs-rope-extension-methods")
def test_inside_the_training_length_ntk_aware_frequencies_gain_nothing(decide):
    # predicted before it ran: NTK-aware frequencies help only where the trained rotations run out
    result = decide(NTK_AWARE_EXTENDS.control("in-distribution"), CI, predicted=NOT_CONFIRMED)
    expect_as_predicted(result, ntk_gain=result.values())
