"""The experiment harness itself (experiments/harness.py): decisions, intervals, caching, pre-registration."""
import math

import pytest

from experiments import harness
from experiments.conftest import registered_mismatches
from experiments.harness import Experiment, Prediction, Scale
from claimcheck.registry import Claim, Experiment as Registered

SCALE = Scale(layers=1, d_model=4, heads=1, steps=0, seeds=4, seq_len=2, batch=1, extra={"k": 1})


class Toy(Experiment):
    name = "toy"
    claim_id = "toy.claim"
    prediction = Prediction("m", ">=", 1.0, "the mean of m over seeds is at least 1")

    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def run_seed(self, seed, scale):
        return {"m": 1.5 + self.offset + 0.1 * seed, "curve:y vs x": [seed, seed + 1.0]}


@pytest.mark.parametrize("comparison,low,high,want", [
    (">=", 1.0, 2.0, True), (">=", 0.9, 2.0, False), (">", 1.0, 2.0, False), ("<=", 0.0, 1.0, True),
    ("<", 0.0, 1.0, False), ("<", 0.0, 0.9, True), (">=", math.nan, 2.0, False)])
def test_a_prediction_is_confirmed_only_by_an_interval_wholly_on_its_side(comparison, low, high, want):
    assert Prediction("m", comparison, 1.0, "x" * 10).confirmed_by(low, high) is want


def test_an_unknown_comparison_is_rejected():
    with pytest.raises(ValueError):
        Prediction("m", "==", 1.0, "equal")


def test_run_decides_caches_and_rereads_the_same_result(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    first = harness.run(Toy(), SCALE)
    again = harness.run(Toy(), SCALE)
    assert not first.cached and again.cached
    assert (first.effect, first.ci_low, first.ci_high) == (again.effect, again.ci_low, again.ci_high)
    assert first.confirmed and first.ci_low <= first.effect <= first.ci_high
    assert first.values() == pytest.approx([1.5, 1.6, 1.7, 1.8])


def test_a_broken_variant_gets_its_own_cache_entry_and_can_flip_the_outcome(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    assert harness.cache_key(Toy(), SCALE) != harness.cache_key(Toy(offset=-1.0), SCALE)
    assert harness.run(Toy(), SCALE).confirmed and not harness.run(Toy(offset=-1.0), SCALE).confirmed


def test_identical_seeds_give_a_degenerate_interval():
    per_seed = [{"m": 2.0}] * 5
    assert harness.bootstrap_interval(Toy(), per_seed) == (2.0, 2.0)


def test_curves_average_over_seeds_at_each_x():
    assert harness.mean_curve([[1.0, 3.0], {"x": [1.0, 2.0, 3.0], "y": [3.0, math.inf, 5.0]}]) == \
        ([1.0, 2.0, 3.0], [2.0, 3.0, 5.0])


def _claim(**experiment) -> Claim:
    reg = Registered(**{"name": "toy", "prediction": "the mean of m over seeds is at least 1", "metric": "m",
                        "comparison": ">=", "threshold": 1.0, "scale": SCALE.as_dict(), **experiment})
    return Claim("toy.claim", "foundations", 1, "q", "s", "t", "empirical", "holds", experiment=reg)


def test_the_registered_prediction_must_match_the_code():
    assert registered_mismatches(Toy(), SCALE, _claim()) == []
    assert registered_mismatches(Toy(), SCALE, _claim(threshold=0.5))
    assert registered_mismatches(Toy(), SCALE, None)


def test_results_are_stored_as_artefacts_with_when_and_where_they_were_made(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    first, again = harness.run(Toy(), SCALE), harness.run(Toy(), SCALE)
    (path,) = tmp_path.glob("toy-*.json")
    import json

    saved = json.loads(path.read_text())
    assert {"created", "commit", "torch", "key", "scale", "config", "per_seed", "wall_s"} <= set(saved)
    assert saved["key"] == harness.cache_key(Toy(), SCALE)
    assert first.artefact["reused"] is False and again.artefact["reused"] is True
    assert again.artefact["created"] == saved["created"] and again.to_json()["artefact"] == again.artefact


def test_a_rerun_on_request_runs_again_and_replaces_the_artefact(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    harness.run(Toy(), SCALE)
    monkeypatch.setenv("CLAIMS_EXPERIMENTS", "rerun")
    assert harness.run(Toy(), SCALE).cached is False
    assert len(list(tmp_path.glob("toy-*.json"))) == 1


def test_changed_code_replaces_the_artefact_of_its_scale_and_keeps_other_scales(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    other = Scale(layers=1, d_model=4, heads=1, steps=0, seeds=3, seq_len=2, batch=1, extra={"k": 1})
    harness.run(Toy(), SCALE), harness.run(Toy(), other)
    old = {p.name for p in tmp_path.glob("toy-*.json")}
    monkeypatch.setattr(harness, "_source_digest", lambda experiment: "a changed line")
    assert harness.run(Toy(), SCALE).cached is False  # a new key: run again
    now = {p.name for p in tmp_path.glob("toy-*.json")}
    assert len(now) == 2 and len(now & old) == 1  # the other scale's artefact stays, the stale one is gone


def test_a_control_reports_whether_it_showed_a_side_it_predicted(tmp_path, monkeypatch):
    from experiments.analysis import CONFIRMED, CONTRADICTED, NOT_CONFIRMED, decide

    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    removed = Toy(offset=-1.0)  # the effect gone: every seed below the threshold
    hit = decide(removed, harness.run(removed, SCALE), registered=False, predicted=NOT_CONFIRMED)
    miss = decide(removed, harness.run(removed, SCALE), registered=False, predicted=(CONFIRMED,))
    assert (hit.side, hit.as_predicted, miss.as_predicted) == (CONTRADICTED, True, False)
    assert "predicted not confirmed, as predicted" in hit.summary() and "NOT as predicted" in miss.summary()
    assert hit.to_json()["predicted_text"] == "not confirmed" and hit.to_json()["as_predicted"] is True


@pytest.mark.parametrize("registered,predicted", [
    (True, ("contradicted",)), (False, ("confirmed", "contradicted", "inconclusive")), (False, ("refuted",))])
def test_a_control_predicts_one_or_two_sides_and_is_never_registered(registered, predicted, tmp_path, monkeypatch):
    from experiments.analysis import decide

    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    with pytest.raises(ValueError):
        decide(Toy(), harness.run(Toy(), SCALE), registered=registered, predicted=predicted)


def test_a_control_rejected_by_its_decisions_check_fails_as_evidence_when_it_misses_its_prediction(tmp_path,
                                                                                                     monkeypatch):
    from claimcheck.evidence import ClaimViolation, PremiseFailed
    from experiments.analysis import CONFIRMED, CONTRADICTED, INCONCLUSIVE, NOT_CONTRADICTED, decide, reject_as_predicted

    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    removed = Toy(offset=-1.0)
    as_predicted = decide(removed, harness.run(removed, SCALE), registered=False, predicted=(CONTRADICTED,))
    with pytest.raises(ClaimViolation):  # the decision's own check rejects the control: the @control passes
        reject_as_predicted(as_predicted, CONFIRMED)
    missed = decide(Toy(), harness.run(Toy(), SCALE), registered=False, predicted=(CONTRADICTED,))
    with pytest.raises(PremiseFailed):  # confirmed where contradicted was predicted: an error, never a pass
        reject_as_predicted(missed, INCONCLUSIVE)
    with pytest.raises(ValueError):  # a prediction that includes the outcome the check asserts cannot be rejected
        reject_as_predicted(decide(removed, harness.run(removed, SCALE), registered=False,
                                   predicted=NOT_CONTRADICTED), CONFIRMED)

