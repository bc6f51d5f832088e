"""The small-scale experiments of ``experiments/`` as asv benchmarks: the effect and the decision by scale.

One class per family (``Experiment<Family>``; its ``track_`` methods are spelled out in each class body,
where ``claims check`` reads benchmark names), parameterised by the scale name (``SCALES`` of the family
module; the ``control`` scale of the negative controls is left out) and the experiment; ``track_effect``
is the effect (the mean of the prediction's metric over seeds), ``track_confirmed`` 1 when the whole
t interval of :func:`experiments.analysis.decide` (over seeds, at the metric's resolution, corrected for
the decision's family) lies on the predicted side of the threshold, else 0. ``setup`` runs the
experiment through :func:`experiments.harness.run`, so a scale already run (by the tests or an earlier
benchmark) is read from its artefact in ``experiments/artefacts/`` (a larger scale run here is stored there too).

Scales beyond ``ci`` are long (minutes to hours on CPU): they run only when named in
``CLAIMS_BENCH_SCALES`` (comma-separated, e.g. ``small,medium``), and are skipped otherwise, so that
``asv run --python=same --quick --bench Experiment`` finishes. ``asv publish`` then shows how each
effect moves with scale.
"""
import importlib
import os

SKIPPED_SCALES = ("control",)  # the negative controls' scale: not a point on the effect-vs-scale curve


def _family(module: str):
    """``(module, None)``, or ``(None, why)`` when it cannot be imported (an old commit, a missing family):
    its benchmarks then skip instead of breaking the suite."""
    try:
        return importlib.import_module(f"experiments.{module}"), None
    except Exception as exc:  # noqa: BLE001 - any import failure is a reason to skip
        return None, f"{type(exc).__name__}: {exc}"


def _enabled(scale: str) -> bool:
    return scale == "ci" or scale in os.environ.get("CLAIMS_BENCH_SCALES", "").split(",")


class _ExperimentFamily:
    """Shared body: ``module`` names the family; params are (scale, experiment name)."""

    module = ""
    version = "1"
    param_names = ["scale", "experiment"]
    timeout = 3600

    @classmethod
    def parameters(cls, module: str) -> list[list[str]]:
        family, _ = _family(module)
        if family is None:
            return [["ci"], ["-"]]
        return [[s for s in family.SCALES if s not in SKIPPED_SCALES], [e.name for e in family.EXPERIMENTS]]

    def setup(self, scale, experiment):
        family, why = _family(self.module)
        if family is None:
            raise NotImplementedError(f"experiments.{self.module} is not importable: {why}")
        if not _enabled(scale):
            raise NotImplementedError(f"scale {scale!r} runs only when CLAIMS_BENCH_SCALES names it")
        chosen = [e for e in family.EXPERIMENTS if e.name == experiment]
        if not chosen:
            raise NotImplementedError(f"no experiment {experiment!r} in experiments.{self.module}")
        from experiments.analysis import decide
        from experiments.harness import run

        self.result = decide(chosen[0], run(chosen[0], family.SCALES[scale]))

    def effect(self) -> float:
        return self.result.effect

    def confirmed(self) -> int:
        return int(self.result.side == "confirmed")


class ExperimentPrenorm(_ExperimentFamily):
    """Pre-LN vs post-LN: learning-rate tolerance, warm-up, gradient spread, block Jacobians."""

    module = "prenorm"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentRankCollapse(_ExperimentFamily):
    """Rank collapse and query/key gradients in attention-only stacks with and without residuals."""

    module = "rank_collapse"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentRopeExtrapolation(_ExperimentFamily):
    """RoPE beyond the training length, with log-n scaling and NTK-aware frequencies."""

    module = "rope_extrapolation"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentHeadPruning(_ExperimentFamily):
    """Head redundancy under pruning."""

    module = "head_pruning"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentAttentionSink(_ExperimentFamily):
    """Attention-sink emergence in a small causal LM."""

    module = "attention_sink"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentHeadSpectra(_ExperimentFamily):
    """Heads' spectral diversity late against mid training, over checkpoints of one run."""

    module = "head_spectra"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentPrenormFineGrid(_ExperimentFamily):
    """Pre-LN against post-LN largest stable learning rate on a 1/16-decade grid."""

    module = "prenorm_fine_grid"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()


class ExperimentJacobianHealth(_ExperimentFamily):
    """Block Jacobian spectra after a failed run against a healthy one."""

    module = "jacobian_health"
    params = _ExperimentFamily.parameters(module)

    def track_effect(self, scale, experiment):
        return self.effect()

    def track_confirmed(self, scale, experiment):
        return self.confirmed()
