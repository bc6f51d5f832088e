"""The experiment harness: seeded small-scale runs, a pre-registered prediction, a bootstrap interval.

An :class:`Experiment` trains something small for one seed and returns its metrics
(``run_seed(seed, scale) -> {metric: value, "curve:<name>": [values...]}``); :func:`run` runs it for
``scale.seeds`` seeds, computes the effect (by default the mean of the prediction's metric over seeds),
a seeded 95% bootstrap interval over seeds, and decides the :class:`Prediction`: confirmed only when
the whole interval lies on the predicted side of the threshold, so the outcome cannot flip with one seed.

Determinism: per seed ``torch.manual_seed(seed)``, ``torch.use_deterministic_algorithms(True)`` and one
thread. Per-seed results are versioned artefacts of the repository, ``experiments/artefacts/<name>-<key>.json``
(with when, at which commit and with which torch they were made), the key a hash of the scale, the
experiment's configuration and the source of the experiment's module and of every module of
``experiments/`` and ``impl/`` it imports (transitively): a changed line of any of them runs it again and
replaces the artefact; an unchanged one reuses it, and the report says so and from when.
``CLAIMS_EXPERIMENTS=rerun`` (``claims report --experiments``) runs every experiment again;
``CLAIMS_EXPERIMENT_CACHE=0`` stores nothing; ``CLAIMS_EXPERIMENT_CACHE=<dir>`` stores elsewhere.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
COMPARISONS = (">=", "<=", ">", "<")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261201
CURVE = "curve:"


@dataclass(frozen=True)
class Scale:
    """How large one run is: model size, training steps, seeds, sequence length, batch; ``extra`` per family."""

    layers: int
    d_model: int
    heads: int
    steps: int
    seeds: int
    seq_len: int
    batch: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d

    def describe(self) -> str:
        """``6 layers, d = 64, 4 heads, 2000 steps, 5 seeds, n = 32, batch 16`` (what the verdict states)."""
        text = (f"{self.layers} layers, d = {self.d_model}, {self.heads} heads, {self.steps} steps, "
                f"{self.seeds} seeds, n = {self.seq_len}, batch {self.batch}")
        extra = ", ".join(f"{k} = {v}" for k, v in sorted(self.extra.items()))
        return f"{text}, {extra}" if extra else text


@dataclass(frozen=True)
class Prediction:
    """The pre-registered prediction: ``effect <comparison> threshold``, and the same in words."""

    metric: str
    comparison: str
    threshold: float
    text: str

    def __post_init__(self) -> None:
        if self.comparison not in COMPARISONS:
            raise ValueError(f"comparison {self.comparison!r} is not one of {COMPARISONS}")

    def holds_for(self, value: float) -> bool:
        """Whether one value lies on the predicted side of the threshold."""
        t = self.threshold
        return {">=": value >= t, "<=": value <= t, ">": value > t, "<": value < t}[self.comparison]

    def confirmed_by(self, low: float, high: float) -> bool:
        """Whether the whole interval ``[low, high]`` lies on the predicted side (nan never confirms)."""
        if math.isnan(low) or math.isnan(high):
            return False
        return self.holds_for(low) and self.holds_for(high)


class Experiment:
    """One experiment: subclasses set ``name``, ``claim_id``, ``prediction`` and implement ``run_seed``.

    ``effect`` defaults to the mean over seeds of ``prediction.metric``; override it for a ratio or a
    median. ``config()`` names what distinguishes two instances of one class (a broken variant used
    as a negative control must differ in ``name`` or in ``config()``); it enters the cache key.
    """

    name: str
    claim_id: str
    prediction: Prediction

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        raise NotImplementedError

    def effect(self, per_seed: list[dict[str, Any]]) -> float:
        return float(np.mean([float(m[self.prediction.metric]) for m in per_seed]))

    def config(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class VariantExperiment(Experiment):
    """An experiment whose per-seed metrics are one function of ``(seed, scale key, variant)``: a family
    sets ``metrics`` (a cached function, so that the experiments and controls of one family share their
    trained models) and builds broken variants for its negative controls with :meth:`control`."""

    metrics: Any = None  # staticmethod(fn(seed, scale_key: str, variant: str) -> dict)

    def __init__(self, name: str, claim_id: str, prediction: Prediction, variant: str = "plain"):
        self.name, self.claim_id, self.prediction, self.variant = name, claim_id, prediction, variant

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        return dict(type(self).metrics(seed, scale_key(scale), self.variant))

    def control(self, variant: str) -> "VariantExperiment":
        return type(self)(f"{self.name}-{variant}", self.claim_id, self.prediction, variant)


def scale_key(scale: Scale) -> str:
    """A scale as a hashable string (the argument of a family's cached training function)."""
    return json.dumps(scale.as_dict(), sort_keys=True)


@dataclass(frozen=True)
class Result:
    """The outcome of :func:`run`: per-seed metrics, the effect, its 95% bootstrap interval, the decision."""

    name: str
    claim_id: str
    prediction: Prediction
    scale: Scale
    seeds: tuple[int, ...]
    per_seed: tuple[dict[str, Any], ...]
    effect: float
    ci_low: float
    ci_high: float
    confirmed: bool
    wall_s: float = 0.0
    cached: bool = False
    artefact: dict[str, Any] | None = None  # where the per-seed results are stored, when, reused or not

    @property
    def outcome(self) -> str:
        return "confirmed" if self.confirmed else "not reproduced"

    def values(self, metric: str | None = None) -> list[float]:
        """Per-seed values of ``metric`` (default: the prediction's)."""
        metric = metric or self.prediction.metric
        return [float(m[metric]) for m in self.per_seed if metric in m]

    def summary(self) -> str:
        """One line: the effect, its interval, the threshold, the outcome and the scale."""
        return (f"{self.name}: effect {self.effect:.4g} (95% CI [{self.ci_low:.4g}, {self.ci_high:.4g}], "
                f"{len(self.seeds)} seeds) vs {self.prediction.comparison} {self.prediction.threshold:g}: "
                f"{self.outcome} at small scale ({self.scale.describe()})")

    def to_json(self) -> dict[str, Any]:
        """The ``experiment`` object of the report (``claimcheck/report.schema.json``)."""
        return {
            "name": self.name, "claim": self.claim_id, "prediction": asdict(self.prediction),
            "scale": self.scale.as_dict(), "scale_text": self.scale.describe(), "seeds": list(self.seeds),
            "per_seed": [{k: v for k, v in m.items() if not k.startswith(CURVE)} for m in self.per_seed],
            "curves": [{k[len(CURVE):]: v for k, v in m.items() if k.startswith(CURVE)} for m in self.per_seed],
            "values": self.values(), "effect": _finite(self.effect), "ci_low": _finite(self.ci_low),
            "ci_high": _finite(self.ci_high), "confirmed": self.confirmed, "outcome": self.outcome,
            "wall_s": round(self.wall_s, 3), "artefact": self.artefact,
        }


def _finite(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)


def bootstrap_interval(experiment: Experiment, per_seed: list[dict[str, Any]],
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile 95% interval of ``experiment.effect`` over seeds resampled with replacement (seeded)."""
    rng = np.random.default_rng(seed)
    k = len(per_seed)
    draws = [experiment.effect([per_seed[i] for i in rng.integers(0, k, size=k)]) for _ in range(resamples)]
    draws = np.asarray(draws, dtype=float)
    if np.isnan(draws).any():
        return math.nan, math.nan
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def deterministic(seed: int) -> None:
    """Seed torch and numpy, force deterministic kernels, one intra-op thread."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


LOCAL_PACKAGES = ("experiments", "impl")


def source_files(path: Path) -> set[Path]:
    """``path`` and every module of this repository's ``experiments``/``impl`` it imports, transitively
    (read from the syntax trees, so the set does not depend on what a process happened to import)."""
    seen: set[Path] = set()
    todo = [path.resolve()]
    while todo:
        current = todo.pop()
        if current in seen or not current.exists():
            continue
        seen.add(current)
        for node in ast.walk(ast.parse(current.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                if name.split(".")[0] in LOCAL_PACKAGES:
                    module = ROOT.joinpath(*name.split("."))
                    todo += [module.with_suffix(".py"), module / "__init__.py"]
    return seen


def _source_digest(experiment: Experiment) -> str:
    files = source_files(Path(inspect.getfile(type(experiment)))) | source_files(Path(__file__))
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(experiment: Experiment, scale: Scale) -> str:
    """A hash of the scale, the experiment's name and configuration, and the source it runs."""
    payload = json.dumps({"name": experiment.name, "scale": scale.as_dict(), "config": experiment.config(),
                          "prediction": asdict(experiment.prediction)}, sort_keys=True, default=repr)
    return hashlib.sha256((payload + _source_digest(experiment)).encode()).hexdigest()[:16]


ARTEFACTS = ROOT / "experiments" / "artefacts"


def cache_dir() -> Path | None:
    """Where results are stored: the versioned artefacts of ``experiments/artefacts/`` unless
    ``CLAIMS_EXPERIMENT_CACHE`` names another folder (or is ``0``: none)."""
    setting = os.environ.get("CLAIMS_EXPERIMENT_CACHE", "")
    if setting == "0":
        return None
    return Path(setting) if setting else ARTEFACTS


def rerun_requested() -> bool:
    """``CLAIMS_EXPERIMENTS=rerun`` (``claims report --experiments``): run again even where an artefact exists."""
    return os.environ.get("CLAIMS_EXPERIMENTS", "") == "rerun"


def _read_artefact(path: Path) -> dict | None:
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a damaged artefact is run again and replaced
    return saved if isinstance(saved, dict) and isinstance(saved.get("per_seed"), list) else None


def _plain_config(experiment: Experiment) -> Any:
    """``experiment.config()`` as JSON stores it (values JSON cannot hold written with repr, as in the key)."""
    return json.loads(json.dumps(experiment.config(), sort_keys=True, default=repr))


def _store_artefact(path: Path, experiment: Experiment, scale: Scale, per_seed: list, wall: float) -> dict:
    """Write the artefact of one run (atomically) and remove the artefacts of the same experiment and
    scale that older code wrote (their key no longer matches)."""
    from claimcheck.runrecord import git_state

    commit, dirty = git_state(ROOT)
    saved = {"name": experiment.name, "claim": experiment.claim_id, "scale": scale.as_dict(),
             "key": path.stem.rsplit("-", 1)[-1], "config": _plain_config(experiment),
             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "dirty": dirty,
             "torch": torch.__version__, "wall_s": wall, "per_seed": per_seed}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    for old in path.parent.glob(f"{experiment.name}-*.json"):
        if old != path and old.stem.rsplit("-", 1)[0] == experiment.name:
            earlier = _read_artefact(old)
            if earlier is None or (earlier.get("scale") == scale.as_dict()
                                   and earlier.get("config") == _plain_config(experiment)):
                old.unlink()
    return saved


def seeds_for(scale: Scale) -> tuple[int, ...]:
    return tuple(range(scale.seeds))


def run(experiment: Experiment, scale: Scale) -> Result:
    """Run ``experiment`` for every seed of ``scale`` (or read the cache), and decide its prediction."""
    folder = cache_dir()
    path = folder / f"{experiment.name}-{cache_key(experiment, scale)}.json" if folder else None
    saved = _read_artefact(path) if path is not None and path.exists() and not rerun_requested() else None
    if saved is not None:
        per_seed, wall, cached = saved["per_seed"], saved["wall_s"], True
    else:
        threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
        start = time.perf_counter()
        per_seed = []
        try:
            for seed in seeds_for(scale):
                deterministic(seed)
                per_seed.append({k: _jsonable(v) for k, v in experiment.run_seed(seed, scale).items()})
        finally:
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(det)
        wall, cached = time.perf_counter() - start, False
        if path is not None:
            saved = _store_artefact(path, experiment, scale, per_seed, wall)
    artefact = None if path is None else {
        "path": path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path), "reused": cached,
        "created": (saved or {}).get("created"), "commit": (saved or {}).get("commit")}
    effect = experiment.effect(per_seed)
    low, high = bootstrap_interval(experiment, per_seed)
    return Result(experiment.name, experiment.claim_id, experiment.prediction, scale, seeds_for(scale),
                  tuple(per_seed), float(effect), low, high, experiment.prediction.confirmed_by(low, high),
                  wall, cached, artefact)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):  # a curve with its own x values: {"x": [...], "y": [...]}
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [float(v) for v in np.asarray(value, dtype=float).ravel()]
    return float(value)


EXPERIMENT_FIGURE = "experiment"


def curve_points(value: Any) -> tuple[list[float], list[float]]:
    """A curve as ``(x, y)``: a list is ``y`` against 1, 2, ...; a mapping gives its own ``x``."""
    if isinstance(value, dict):
        return list(value["x"]), list(value["y"])
    return [float(i) for i in range(1, len(value) + 1)], list(value)


def mean_curve(curves: list[Any]) -> tuple[list[float], list[float]]:
    """The mean over seeds at each x that some seed reached (nan and inf left out)."""
    at: dict[float, list[float]] = {}
    for value in curves:
        for x, y in zip(*curve_points(value)):
            if math.isfinite(y):
                at.setdefault(x, []).append(y)
    xs = sorted(at)
    return xs, [float(np.mean(at[x])) for x in xs]


def record_result(result: Result) -> None:
    """Attach ``result`` to the running test: the report's ``experiment`` object and its figures.

    The experiment travels as the figure named ``experiment`` (``claimcheck.report`` lifts it into the
    claim's ``experiment`` field). Each curve ``curve:<Y> vs <X>, <arm>`` becomes the figure
    ``series[<Y> vs <X>, <arm>, mean of k seeds]`` (``claimcheck.plots`` draws it on the claim's panel).
    """
    from claimcheck import record

    record(EXPERIMENT_FIGURE, result.to_json())
    keys = sorted({k for m in result.per_seed for k in m if k.startswith(CURVE)})
    for key in keys:
        curves = [m[key] for m in result.per_seed if key in m]
        xs, ys = mean_curve(curves)
        label, _, x_name = key[len(CURVE):].partition(" vs ")
        x_name, _, arm = x_name.partition(", ")
        title = f"{label} vs {x_name}, {arm + ', ' if arm else ''}mean of {len(curves)} seeds"
        record(f"series[{title}]", {"n": xs, "y": ys, "x_label": x_name, "y_label": label})


@dataclass(frozen=True)
class Training:
    """What :func:`train` returns: the loss per step (nan after a divergence) and the final loss."""

    losses: list[float]
    final: float  # mean loss of the last ``max(1, steps // 10)`` steps; inf if training diverged
    diverged: bool


def train(model: torch.nn.Module, sample, steps: int, batch: int, seq_len: int, lr: float, seed: int,
          warmup: int = 0, weight_decay: float = 0.0, clip: float | None = None,
          betas: tuple[float, float] = (0.9, 0.98)) -> Training:
    """Adam(W) on next-token cross-entropy, linear warm-up over ``warmup`` steps then constant ``lr``.

    ``sample(g, batch, seq_len) -> (ids, targets)`` draws each batch from a generator seeded by ``seed``.
    A non-finite loss stops training (``diverged``); the curve is padded with nan.
    """
    from experiments.tasks import generator

    g = generator(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    losses: list[float] = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
        ids, targets = sample(g, batch, seq_len)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        if not torch.isfinite(loss):
            losses += [math.nan] * (steps - step)
            return Training(losses, math.inf, True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(float(loss.detach()))
    tail = losses[-max(1, steps // 10):]
    return Training(losses, float(np.mean(tail)), False)
