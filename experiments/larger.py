"""The experiments beyond the CI scale: which families, which scales, and which results are stored for them.

A family is a module of ``experiments/`` with ``SCALES`` and ``EXPERIMENTS``. The scales its module lists
are its own; :data:`ADDED` holds the ``small`` scales given later to the families that had only a CI scale.
They are kept here, apart from the families (as :mod:`experiments.prenorm_controls` keeps the pre-LN
controls), because an artefact's key hashes its family's source: a scale added there would re-key, and
re-run, every CI-scale result of the family.

Larger scales are run once, by ``tools/run_scale.py`` (the same :func:`experiments.harness.run`, so their
per-seed results are artefacts of ``experiments/artefacts/`` keyed like the CI ones), and never by the
tests or the report. :func:`stored` finds, without training anything, the artefact of a registered
experiment at each larger scale: current (its key matches the code and scale now), stale (an artefact of
the same experiment and scale made from other code: reported with its commit, never decided as if
current), or missing.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.harness import (ARTEFACTS, Experiment, Result, Scale, bootstrap_interval, cache_dir, cache_key,
                                 seeds_for)

HERE = Path(__file__).resolve().parent
NOT_FAMILIES = {"analysis", "conftest", "harness", "larger", "models", "prenorm_controls", "tasks", "__init__"}
LARGER = ("small", "medium")  # the points beyond ci on an effect-vs-scale curve (``control`` is not one)

ADDED: dict[str, dict[str, Scale]] = {
    # about twice the width and length of the CI scale, two to eight times its cost
    "sharpness": {"small": Scale(layers=2, d_model=64, heads=4, steps=600, seeds=5, seq_len=32, batch=16)},
    "qk_kappa": {"small": Scale(layers=1, d_model=64, heads=1, steps=1200, seeds=5, seq_len=32, batch=16)},
    "ntk_spectrum": {"small": Scale(layers=2, d_model=64, heads=4, steps=0, seeds=5, seq_len=32, batch=192)},
}


def families() -> tuple[str, ...]:
    """The family modules of ``experiments/``, by name."""
    return tuple(sorted(p.stem for p in HERE.glob("*.py")
                        if p.stem not in NOT_FAMILIES and not p.stem.startswith("test_")))


FAMILIES = families()


def scales(family: str) -> dict[str, Scale]:
    """Every scale of ``family``: its module's ``SCALES`` and the ones :data:`ADDED` gives it."""
    module = importlib.import_module(f"experiments.{family}")
    return {**module.SCALES, **ADDED.get(family, {})}


def experiments(family: str) -> tuple[Experiment, ...]:
    return tuple(importlib.import_module(f"experiments.{family}").EXPERIMENTS)


def find(name: str) -> tuple[str, Experiment] | None:
    """``(family, experiment)`` of the registered experiment called ``name``, or None."""
    for family in FAMILIES:
        for experiment in experiments(family):
            if experiment.name == name:
                return family, experiment
    return None


@dataclass(frozen=True)
class Stored:
    """One larger scale of one experiment: ``state`` is ``current``, ``stale`` or ``missing``; ``result`` is
    read from the current artefact (None otherwise); ``stale`` lists the other artefacts of this experiment
    at this scale (their paths and commits)."""

    scale_name: str
    scale: Scale
    state: str
    result: Result | None
    stale: tuple[dict[str, Any], ...]

    def to_json(self, uninformative: str | None = None) -> dict[str, Any]:
        """The report's row of this scale: its state, and for a current artefact the decision (corrected for
        its family, as at the CI scale; ``uninformative`` is the registration's reason, if any)."""
        from experiments.analysis import decide

        row = {"scale_name": self.scale_name, "scale_text": self.scale.describe(), "state": self.state,
               "stale": list(self.stale)}
        if self.result is not None:
            found = find(self.result.name)
            assert found is not None  # stored() found it
            decided = decide(found[1], self.result, uninformative=uninformative).to_json()
            row.update({k: v for k, v in decided.items() if k not in ("per_seed", "curves")})  # the page's budget
            row["state"] = self.state  # the decision's own fields never hide the artefact's state
        return row


def _artefact(path: Path, name: str, scale: Scale) -> dict[str, Any] | None:
    """The artefact at ``path`` if it is one of experiment ``name`` at ``scale``, else None."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved if saved.get("name") == name and saved.get("scale") == scale.as_dict() else None


def _result(experiment: Experiment, scale: Scale, path: Path, saved: dict[str, Any]) -> Result:
    """The :class:`Result` that :func:`experiments.harness.run` returns for a reused artefact (read, not run)."""
    per_seed = saved["per_seed"]
    low, high = bootstrap_interval(experiment, per_seed)
    artefact = {"path": path.name, "reused": True, "created": saved.get("created"), "commit": saved.get("commit")}
    return Result(experiment.name, experiment.claim_id, experiment.prediction, scale, seeds_for(scale),
                  tuple(per_seed), float(experiment.effect(per_seed)), low, high,
                  experiment.prediction.confirmed_by(low, high), saved["wall_s"], True, artefact)


def stored(name: str) -> list[Stored]:
    """The larger scales of the registered experiment ``name`` and what is stored for each (nothing runs)."""
    found = find(name)
    folder = cache_dir() or ARTEFACTS
    if found is None:
        return []
    family, experiment = found
    out = []
    for scale_name, scale in scales(family).items():
        if scale_name not in LARGER:
            continue
        path = folder / f"{name}-{cache_key(experiment, scale)}.json"
        others = tuple({"path": p.name, "commit": saved.get("commit"), "created": saved.get("created")}
                       for p in sorted(folder.glob(f"{name}-*.json")) if p != path
                       for saved in [_artefact(p, name, scale)] if saved is not None)
        current = _artefact(path, name, scale) if path.exists() else None
        if current is not None:
            out.append(Stored(scale_name, scale, "current", _result(experiment, scale, path, current), others))
        else:
            out.append(Stored(scale_name, scale, "stale" if others else "missing", None, others))
    return out
