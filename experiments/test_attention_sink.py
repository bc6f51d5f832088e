"""Attention sinks (index.txt lines 110-112): does the first token of a small causal LM become a sink?

The CI-scale experiment (``experiments.attention_sink.SCALES["ci"]``, its prediction registered in
``claims.yaml``) is uninformative by design (no fixed first token, a 2-layer model trained briefly: see the
registry's ``uninformative``), so its test only guards the recorded interval; its control of the mechanism reads
the same score on a key that is not the first (the decision's seeds, scale and models), predicted before it ran.
"""
import pytest

from experiments.analysis import CONTRADICTED, UNINFORMATIVE, expect, expect_as_predicted
from experiments.attention_sink import FIRST_TOKEN_SINK, SCALES

CI = SCALES["ci"]


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_sink_score_of_a_small_character_lm_guards_the_recorded_interval_uninformative_by_design(decide):
    result = decide(FIRST_TOKEN_SINK, CI)
    expect(result, UNINFORMATIVE, CONTRADICTED, sink_score=result.values(),
           uniform=result.values("uniform_baseline"))


@pytest.mark.claim("attention.index-initial-token-naturally-becomes-sink")
def test_a_key_that_is_not_the_first_is_no_sink(decide):
    # predicted before it ran: a key every query sees but that is not the first draws no sink, wholly below 0.3
    result = decide(FIRST_TOKEN_SINK.control("placebo-key"), CI, predicted=(CONTRADICTED,))
    expect_as_predicted(result, sink_score=result.values())
