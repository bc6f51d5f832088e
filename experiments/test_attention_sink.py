"""Attention sinks (index.txt lines 110-112): does the first token of a small causal LM become a sink?

The CI-scale experiment (``experiments.attention_sink.SCALES["ci"]``, its prediction registered in
``claims.yaml``) is uninformative by design (no fixed first token, a 2-layer model trained briefly: see the
registry's ``uninformative``), so its test only guards the recorded interval; the control plants a sink in
one head's weights and checks that the metric and threshold see it.
"""
import pytest

from experiments.analysis import CONFIRMED, CONTRADICTED, UNINFORMATIVE, expect
from experiments.attention_sink import FIRST_TOKEN_SINK, SCALES

CI, CONTROL = SCALES["ci"], SCALES["control"]


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_sink_score_of_a_small_character_lm_guards_the_recorded_interval_uninformative_by_design(decide):
    result = decide(FIRST_TOKEN_SINK, CI)
    expect(result, UNINFORMATIVE, CONTRADICTED, sink_score=result.values(),
           uniform=result.values("uniform_baseline"))


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_a_sink_planted_in_one_head_is_detected(decide):
    result = decide(FIRST_TOKEN_SINK.control("planted-sink"), CONTROL, registered=False)
    expect(result, CONFIRMED, sink_score=result.values())
