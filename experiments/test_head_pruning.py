"""Head redundancy (spectral.txt lines 404-414): pruning heads of a small character LM, heads' spectra.

CI-scale experiments (``experiments.head_pruning.SCALES["ci"]``, predictions pre-registered in
``claims.yaml``) assert the recorded outcome; each has a negative control at the ``control`` scale, a
deliberately broken model whose outcome must be the opposite one.
"""
import pytest

from claimcheck import claim_assert
from experiments.head_pruning import PRUNABLE, SCALES, SPECTRA_CONVERGE

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("spectral.heads-redundant-prunable")
def test_fewer_than_a_quarter_of_the_heads_of_a_small_lm_can_be_pruned(decide):
    result = decide(PRUNABLE, CI)
    claim_assert(not result.confirmed, result.summary(), prunable_fraction=result.values())


@pytest.mark.claim("spectral.heads-redundant-prunable")
def test_heads_whose_output_is_secretly_zeroed_are_pruned(decide):
    result = decide(PRUNABLE.control("dead-heads"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), prunable_fraction=result.values())


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_heads_attention_spectra_grow_apart_during_training(decide):
    result = decide(SPECTRA_CONVERGE, CI)
    claim_assert(not result.confirmed and result.ci_low > 1, result.summary(), diversity_ratio=result.values())


@pytest.mark.claim("spectral.heads-similar-spectra-late-training")
def test_heads_secretly_sharing_their_query_and_key_weights_have_one_spectrum(decide):
    result = decide(SPECTRA_CONVERGE.control("tied-heads"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), diversity_ratio=result.values())
