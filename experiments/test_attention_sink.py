"""Attention sinks (index.txt lines 110-112): does the first token of a small causal LM become a sink?

The CI-scale experiment (``experiments.attention_sink.SCALES["ci"]``, prediction pre-registered in
``claims.yaml``) asserts the recorded outcome; its negative control plants a sink in one head's weights.
"""
import pytest

from claimcheck import claim_assert
from experiments.attention_sink import FIRST_TOKEN_SINK, SCALES

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_no_head_of_a_small_character_lm_sinks_on_the_first_token(decide):
    result = decide(FIRST_TOKEN_SINK, CI)
    claim_assert(not result.confirmed, result.summary(), sink_score=result.values(),
                 uniform=result.values("uniform_baseline"))


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_a_sink_planted_in_one_head_is_detected(decide):
    result = decide(FIRST_TOKEN_SINK.control("planted-sink"), CONTROL, registered=False)
    claim_assert(result.confirmed, result.summary(), sink_score=result.values())
