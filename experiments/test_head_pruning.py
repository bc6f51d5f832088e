"""Head redundancy (spectral.txt lines 404-414): pruning heads of a small character LM, heads' spectra.

CI-scale experiments (``experiments.head_pruning.SCALES["ci"]``, predictions registered in ``claims.yaml``)
are decided by ``experiments.analysis`` (one family: both are computed from the same five models); each
has a control: for pruning, the heads pruned in a random order (the decision's seeds, scale and models, its
outcome predicted before it ran); for the spectra, a deliberately broken model at the ``control`` scale. The
spectra experiment is uninformative by design (its early snapshot is near the initialisation), so its test only guards the
recorded interval.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, CONTRADICTED, INCONCLUSIVE, UNINFORMATIVE, expect, reject_as_predicted
from experiments.head_pruning import PRUNABLE, SCALES, SPECTRA_CONVERGE

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("spectral.heads-redundant-prunable")
def test_prunable_fraction_of_a_small_lm_is_inconclusive_at_its_resolution_of_one_head(decide):
    result = decide(PRUNABLE, CI)
    expect(result, INCONCLUSIVE, prunable_fraction=result.values())


@pytest.mark.claim("spectral.heads-redundant-prunable")
@control("the same heads pruned in a random order, not least important first: a placebo that finds no redundancy")
def test_heads_pruned_in_a_random_order_are_not_redundant(decide):
    # predicted before it ran: without the importance ranking fewer than a quarter of the heads go, wholly below 0.25
    result = decide(PRUNABLE.control("random-order"), CI, predicted=(CONTRADICTED,))
    reject_as_predicted(result, INCONCLUSIVE, prunable_fraction=result.values())


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_head_spectral_diversity_ratio_guards_the_recorded_interval_uninformative_by_design(decide):
    result = decide(SPECTRA_CONVERGE, CI)
    expect(result, UNINFORMATIVE, CONTRADICTED, diversity_ratio=result.values())


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_heads_secretly_sharing_their_query_and_key_weights_have_one_spectrum(decide):
    result = decide(SPECTRA_CONVERGE.control("tied-heads"), CONTROL, registered=False)
    expect(result, CONFIRMED, diversity_ratio=result.values())
