"""The experiments at their larger scales: read from stored artefacts (current, stale or missing), never trained
by the report, and decided as the CI scale is (experiments/larger.py, claimcheck/report.py)."""
import json
import shutil

import pytest

from claimcheck.report import larger_scales, larger_text
from experiments import larger
from experiments.analysis import decide
from experiments.harness import ARTEFACTS, cache_key, run

NAME = "rank-collapse-qk-gradients"  # its small scale trains nothing (0 steps): the cheapest to check by hand


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMS_EXPERIMENT_CACHE", str(tmp_path))
    return tmp_path


def _small():
    family, experiment = larger.find(NAME)
    return experiment, larger.scales(family)["small"]


def test_families_are_the_modules_with_scales_and_experiments():
    assert "rope_extrapolation" in larger.FAMILIES and "harness" not in larger.FAMILIES
    for family in larger.FAMILIES:
        assert "ci" in larger.scales(family) and larger.experiments(family)
    assert "small" in larger.scales("sharpness")  # added here, not in its module (its CI keys stay)


def test_a_current_artefact_is_read_and_decided_as_a_run_would_decide_it(folder):
    experiment, scale = _small()
    path = ARTEFACTS / f"{NAME}-{cache_key(experiment, scale)}.json"
    assert path.exists(), "the committed small-scale artefact: tools/run_scale.py small rank_collapse"
    shutil.copy(path, folder / path.name)
    (row,) = [r for r in larger_scales(NAME) if r["scale_name"] == "small"]
    expected = decide(experiment, run(experiment, scale))  # the artefact is in folder: run reads it
    assert row["state"] == "current" and row["outcome"] == expected.outcome
    assert (row["effect"], row["ci_low"], row["ci_high"]) == (expected.effect, expected.ci_low, expected.ci_high)
    assert "per_seed" not in row and path.name in larger_text(row)


def test_an_artefact_of_other_code_is_stale_and_not_decided(folder):
    experiment, scale = _small()
    source = ARTEFACTS / f"{NAME}-{cache_key(experiment, scale)}.json"
    saved = json.loads(source.read_text())
    (folder / f"{NAME}-0123456789abcdef.json").write_text(json.dumps({**saved, "key": "0123456789abcdef"}))
    (row,) = [r for r in larger_scales(NAME) if r["scale_name"] == "small"]
    assert row["state"] == "stale" and "outcome" not in row
    assert row["stale"][0]["path"] == f"{NAME}-0123456789abcdef.json"
    assert "tools/run_scale.py small" in larger_text(row)


def test_a_control_of_the_same_scale_is_not_taken_for_the_experiment(folder):
    experiment, scale = _small()
    source = ARTEFACTS / f"{NAME}-{cache_key(experiment, scale)}.json"
    saved = json.loads(source.read_text())
    (folder / f"{NAME}-decollapsed-0123456789abcdef.json").write_text(json.dumps({**saved, "name": f"{NAME}-decollapsed"}))
    (row,) = [r for r in larger_scales(NAME) if r["scale_name"] == "small"]
    assert row["state"] == "missing" and row["stale"] == []
    assert "not run" in larger_text(row)


def test_nothing_is_trained_for_a_missing_scale(folder, monkeypatch):
    def trains(*args, **kwargs):
        raise AssertionError("the report trained an experiment")

    monkeypatch.setattr(type(_small()[0]), "run_seed", trains)
    monkeypatch.setenv("CLAIMS_EXPERIMENTS", "rerun")  # not even when every experiment is asked to run again
    assert {r["state"] for r in larger_scales(NAME)} == {"missing"}
    assert larger_scales("no-such-experiment") == []
