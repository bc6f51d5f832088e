"""Policy for the experiments: one torch thread per worker, one xdist group per file, the ``decide`` fixture.

Every test of one ``experiments/test_*.py`` file is put in one xdist group, so that under
``--dist loadgroup`` (``make test``, ``claims report``) a family's tests share one worker and the models
a family trains once per process (and caches in memory) are not trained again on another worker.

``decide(experiment, scale)`` runs (or reads from the cache) an experiment, attaches its result to the
test (the report's ``experiment`` object and figures) and, at the CI scale, checks that the registry
entry of the experiment's claim registers exactly this prediction and scale, so the code cannot drift
from what was pre-registered. A difference is an error of the evidence, not a counterexample.
"""
from pathlib import Path

import pytest
import torch

from claimcheck.plugin import registry
from experiments.harness import Experiment, Result, Scale, record_result, run

torch.set_num_threads(1)  # xdist runs one worker per core; more threads only oversubscribe


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.path)).parent == here:
            item.add_marker(pytest.mark.xdist_group(name=f"experiments-{item.path.stem}"))


def registered_mismatches(experiment: Experiment, scale: Scale, claim) -> list[str]:
    """How the claim's ``experiment`` field differs from ``experiment`` run at ``scale`` (empty: none)."""
    if claim is None or claim.experiment is None:
        return [f"claim {experiment.claim_id} has no 'experiment' field in the registry"]
    reg, p = claim.experiment, experiment.prediction
    want = {"name": experiment.name, "prediction": p.text, "metric": p.metric, "comparison": p.comparison,
            "threshold": p.threshold, "scale": scale.as_dict()}
    have = {"name": reg.name, "prediction": " ".join(reg.prediction.split()), "metric": reg.metric,
            "comparison": reg.comparison, "threshold": reg.threshold, "scale": reg.scale}
    want["prediction"] = " ".join(want["prediction"].split())
    return [f"{k}: registry {have[k]!r}, code {want[k]!r}" for k in want if have[k] != want[k]]


@pytest.fixture
def decide(request):
    def decide(experiment: Experiment, scale: Scale, registered: bool = True) -> Result:
        if registered:
            problems = registered_mismatches(experiment, scale, registry(request.config).get(experiment.claim_id))
            if problems:
                pytest.fail("the experiment differs from its pre-registration: " + "; ".join(problems))
        result = run(experiment, scale)
        record_result(result)
        return result
    return decide
