"""Policy for the experiments: one torch thread per worker, one xdist group per file, the ``decide`` fixture.

Every test of one ``experiments/test_*.py`` file is put in one xdist group, so that under
``--dist loadgroup`` (``make test``, ``claims report``) a family's tests share one worker and the models
a family trains once per process (and caches in memory) are not trained again on another worker.

``decide(experiment, scale)`` runs (or reads from the cache) an experiment, decides it with
``experiments.analysis`` (t interval over seeds, quantised metrics at their resolution, Bonferroni over the
registered decisions that share its models, uninformative by design where the registry says so), attaches
the decision to the test (the report's ``experiment`` object and figures) and, at the CI scale, checks
that the registry entry of the experiment's claim registers exactly this prediction and scale, so the code
cannot drift from what was registered. A difference is an error of the evidence, not a counterexample.
``decide(control, scale, predicted=sides)`` decides a control of the mechanism: it is never registered, its
predicted sides are stated in the call, and it must run at its decision's registered scale (seeds included).
"""
from pathlib import Path

import pytest
import torch

from claimcheck.plugin import registry
from experiments.analysis import Decision
from experiments.analysis import decide as analyse
from experiments.harness import Experiment, Scale, record_result, run

torch.set_num_threads(1)  # xdist runs one worker per core; more threads only oversubscribe


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.path)).parent == here:
            item.add_marker(pytest.mark.xdist_group(name=f"experiments-{item.path.stem}"))


def registered_mismatches(experiment: Experiment, scale: Scale, claim) -> list[str]:
    """How the claim's registration of ``experiment`` (its ``experiment`` field, or the ``superseded`` one of
    that name) differs from ``experiment`` run at ``scale`` (empty: none)."""
    reg = registration(claim, experiment.name)
    if reg is None:
        return [f"claim {experiment.claim_id} has no 'experiment' field in the registry"]
    p = experiment.prediction
    want = {"name": experiment.name, "prediction": p.text, "metric": p.metric, "comparison": p.comparison,
            "threshold": p.threshold, "scale": scale.as_dict()}
    have = {"name": reg.name, "prediction": " ".join(reg.prediction.split()), "metric": reg.metric,
            "comparison": reg.comparison, "threshold": reg.threshold, "scale": reg.scale}
    want["prediction"] = " ".join(want["prediction"].split())
    return [f"{k}: registry {have[k]!r}, code {want[k]!r}" for k in want if have[k] != want[k]]


def registration(claim, name: str):
    """The claim's registered experiment called ``name``: its ``experiment``, else a ``superseded`` one, else
    its ``experiment`` (whose name then differs, and says so); None without a claim or an experiment."""
    if claim is None:
        return None
    named = [e for e in (claim.experiment, *claim.superseded) if e is not None and e.name == name]
    return named[0] if named else claim.experiment


@pytest.fixture
def decide(request):
    def decide(experiment: Experiment, scale: Scale, registered: bool = True, predicted=()) -> Decision:
        uninformative = None
        if predicted:
            claim, registered = registry(request.config).get(experiment.claim_id), False
            if claim is None or claim.experiment is None or claim.experiment.scale != scale.as_dict():
                pytest.fail(f"the control {experiment.name} does not run at its decision's registered scale")
        if registered:
            claim = registry(request.config).get(experiment.claim_id)
            problems = registered_mismatches(experiment, scale, claim)
            if problems:
                pytest.fail("the experiment differs from its registration: " + "; ".join(problems))
            uninformative = registration(claim, experiment.name).uninformative
        decision = analyse(experiment, run(experiment, scale), registered, uninformative, predicted)
        record_result(decision)
        return decision
    return decide
