"""The analysis that decides an experiment from its per-seed results: a Student t interval over seeds,
quantised metrics at their resolution, a family-wise correction, and one of four outcomes.

:func:`experiments.harness.run` stores and returns the per-seed results (and a percentile bootstrap,
kept for comparison only); :func:`decide` turns a :class:`~experiments.harness.Result` into a
:class:`Decision`, whose interval is the one that decides:

* **t interval**: ``mean +- t_{1 - a/2, n - 1} s / sqrt(n)`` over the ``n`` seeds (Student t with
  ``n - 1`` degrees of freedom), the interval of the mean effect. A percentile bootstrap of the mean over 5
  seeds is about 1.6x narrower than this (it treats the 5 values as the population).
* **resolution**: a metric read off a grid is interval-censored: each seed's true value lies somewhere in
  its grid cell. The learning-rate scans of ``experiments.prenorm`` stop at the first failing rate of the
  half-decade grid ``LRS``, so the largest stable rate lies in ``[lr found, next grid rate)``, and
  ``log10(lr_a / lr_b)`` in ``[log10(lo_a / hi_b), log10(hi_a / lo_b)]``; the prunable fraction of
  ``experiments.head_pruning`` counts whole heads, ``k / H`` meaning a fraction in ``[k / H, (k + 1) / H)``.
  The bisection of ``experiments.prenorm_fine_grid`` stores each seed's cells of the log10 ratio itself
  (1/16-decade grid cells).
  The interval is then the t lower bound of the cells' lower ends to the t upper bound of their upper ends
  (never of zero width when every seed lands in one cell).
* **family**: decisions computed from the same trained models are one family, and their intervals are
  Bonferroni-corrected (level ``1 - 0.05 / m`` each, so that all ``m`` hold together with 95%): the
  decisions of a :class:`~experiments.harness.VariantExperiment` family at one scale share its ``metrics``
  function (one model per seed); ``LearningRateTolerance`` and ``WarmupNeed`` share the post-LN scan
  without warm-up. Controls are single checks: no correction.
* **controls of the mechanism**: a control removes the proposed cause while keeping everything else (or is a
  placebo of the same size that should not work), runs at its decision's registered scale and seeds, and
  carries its predicted outcome, stated in its test before it ran (``predicted``: the sides it may show).
  Its decision reports the side it showed and whether that is the predicted one.
* **outcome**: ``confirmed`` (the whole interval on the predicted side of the threshold),
  ``contradicted`` (the whole interval on the other side), ``inconclusive`` (it straddles), or
  ``uninformative by design`` when the registration says that the design cannot show the effect (the
  registry's ``experiment.uninformative``, with its reason); the interval's side is still reported.

No experiment module imports this one, so a change here never changes an artefact's key.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, fields
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

from experiments.harness import Experiment, Result, Scale, VariantExperiment, scale_key

CONFIRMED, CONTRADICTED, INCONCLUSIVE = "confirmed", "contradicted", "inconclusive"
UNINFORMATIVE = "uninformative by design"
OUTCOMES = (CONFIRMED, CONTRADICTED, INCONCLUSIVE, UNINFORMATIVE)
SIDES = (CONFIRMED, CONTRADICTED, INCONCLUSIVE)  # where an interval can lie
NOT_CONFIRMED, NOT_CONTRADICTED = (CONTRADICTED, INCONCLUSIVE), (CONFIRMED, INCONCLUSIVE)
LEVEL = 0.95  # family-wise: each of m decisions of one family at 1 - (1 - LEVEL) / m


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Student t interval of the mean of ``values`` (n - 1 degrees of freedom); nan for n < 2 or a
    non-finite value."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or not np.isfinite(x).all():
        return math.nan, math.nan
    half = stats.t.ppf(1 - (1 - level) / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean() - half), float(x.mean() + half)


def censored_t_interval(lows: Sequence[float], highs: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Interval of the mean of values known only to lie in ``[lows[i], highs[i])``: the t lower bound of the
    lower ends to the t upper bound of the upper ends (an end at -inf or inf stays there)."""
    lo, hi = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
    low = -math.inf if np.isneginf(lo).any() else t_interval(lo, level)[0]
    high = math.inf if np.isposinf(hi).any() else t_interval(hi, level)[1]
    return low, high


def side(experiment: Experiment, low: float, high: float) -> str:
    """Where ``[low, high]`` lies against the prediction: confirmed, contradicted or inconclusive (nan)."""
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    holds = experiment.prediction.holds_for
    if holds(low) and holds(high):
        return CONFIRMED
    if not holds(low) and not holds(high):  # the predicted side is a half-line: the whole interval is off it
        return CONTRADICTED
    return INCONCLUSIVE


# --- quantised metrics: each seed's grid cell ------------------------------------------------------------

Cells = Callable[[Experiment, list[dict[str, Any]], Scale], tuple[list[float], list[float]]]


def _lr_cell(lr: float) -> tuple[float, float]:
    """The largest stable rate found by ``largest_stable_lr`` as its cell ``[lr, next rate of LRS)``
    (``[0, LRS[0])`` when none succeeded, ``[LRS[-1], inf)`` when none failed)."""
    from experiments.prenorm import LRS

    if lr < LRS[0]:
        return 0.0, LRS[0]
    i = min(range(len(LRS)), key=lambda j: abs(math.log(LRS[j] / lr)))
    return LRS[i], LRS[i + 1] if i + 1 < len(LRS) else math.inf


def _log10_ratio_cells(numerator: str, denominator: str) -> Cells:
    def cells(experiment, per_seed, scale):
        lows, highs = [], []
        for m in per_seed:
            (a_lo, a_hi), (b_lo, b_hi) = _lr_cell(m[numerator]), _lr_cell(m[denominator])
            lows.append(_log10(a_lo) - _log10(b_hi))
            highs.append(_log10(a_hi) - _log10(b_lo))
        return lows, highs
    return cells


def _log10(x: float) -> float:
    return -math.inf if x == 0 else math.inf if math.isinf(x) else math.log10(x)


def _head_fraction_cells(experiment, per_seed, scale):
    heads = scale.layers * scale.heads
    ks = [int(round(m["prunable_heads"])) for m in per_seed]
    return [k / heads for k in ks], [min(k + 1, heads) / heads for k in ks]


def _stored_cells(low: str, high: str) -> Cells:
    """Cells the experiment stores per seed itself, as the metrics ``low`` and ``high``."""
    def cells(experiment, per_seed, scale):
        return [float(m[low]) for m in per_seed], [float(m[high]) for m in per_seed]
    return cells


def resolution(experiment: Experiment) -> tuple[Cells, str] | None:
    """How the experiment's metric is quantised (its cells and the sentence the report shows), or None."""
    from experiments.head_pruning import HeadExperiment
    from experiments.prenorm import LearningRateTolerance, WarmupNeed
    from experiments.prenorm_fine_grid import FineGridTolerance

    if isinstance(experiment, FineGridTolerance):
        return _stored_cells("log10_ratio_low", "log10_ratio_high"), (
            "located by bisection on the 1/16-decade learning-rate grid 10^(k/16): each seed's largest stable rate "
            "lies in [rate found, next rate), so its log10 ratio is interval-censored (cells 1/16 decade wide)")

    grid = ("read on the half-decade learning-rate grid (1e-3, 3e-3, ..., 3e-1; steps of 3 and 3.33): each "
            "seed's largest stable rate lies in [rate found, next rate), so its log10 ratio is interval-censored")
    if isinstance(experiment, LearningRateTolerance):
        return _log10_ratio_cells("lr_pre", "lr_post"), grid
    if isinstance(experiment, WarmupNeed):
        return _log10_ratio_cells("lr_warmup", "lr_no_warmup"), grid
    if isinstance(experiment, HeadExperiment) and experiment.prediction.metric == "prunable_fraction":
        return _head_fraction_cells, ("counted in whole heads (eighths of 8 heads): k prunable heads means a "
                                      "fraction in [k/8, (k+1)/8), interval-censored")
    return None


# --- families: decisions computed from the same trained models -------------------------------------------

SHARED_SCAN = "prenorm: post-LN without warm-up, largest_stable_lr(seed, scale, 'post', 0)"


def family_key(experiment: Experiment, scale: Scale) -> tuple[str, str]:
    """What trains the models a decision is computed from, at ``scale``: equal keys share models."""
    from experiments.prenorm import LearningRateTolerance, WarmupNeed

    if isinstance(experiment, VariantExperiment):
        fn = type(experiment).metrics
        return f"{fn.__module__}.{fn.__qualname__}", scale_key(scale)
    if isinstance(experiment, (LearningRateTolerance, WarmupNeed)):
        return SHARED_SCAN, scale_key(scale)
    return experiment.name, scale_key(scale)


def family(experiment: Experiment, scale: Scale) -> tuple[str, ...]:
    """The registered experiments of ``experiment``'s module (its ``EXPERIMENTS``) that share its models at
    ``scale``, by name (``experiment`` itself included)."""
    registered = getattr(sys.modules[type(experiment).__module__], "EXPERIMENTS", ())
    key = family_key(experiment, scale)
    names = tuple(e.name for e in registered if family_key(e, scale) == key)
    return names if experiment.name in names else (*names, experiment.name)


# --- the decision ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision(Result):
    """A :class:`Result` decided by the t interval (``ci_low``, ``ci_high``) at ``level``; ``side`` is where
    that interval lies, ``decided`` the outcome (``side``, or uninformative by design when registered so)."""

    decided: str = INCONCLUSIVE
    side: str = INCONCLUSIVE
    level: float = LEVEL
    family: tuple[str, ...] = ()
    resolution: str | None = None
    bootstrap: tuple[float, float] = (math.nan, math.nan)
    uninformative: str | None = None
    predicted: tuple[str, ...] = ()  # a control's predicted sides (empty: not a control of the mechanism)

    @property
    def outcome(self) -> str:
        return self.decided

    def interval_text(self) -> str:
        """``99.17% t interval [a, b] (Bonferroni over 6 decisions sharing models; ...resolution...)``."""
        notes = []
        if len(self.family) > 1:
            notes.append(f"Bonferroni over {len(self.family)} decisions sharing models")
        if self.resolution:
            notes.append("interval-censored at the metric's resolution")
        return (f"{100 * self.level:.4g}% t interval [{self.ci_low:.4g}, {self.ci_high:.4g}]"
                + (f" ({'; '.join(notes)})" if notes else ""))

    def summary(self) -> str:
        p = self.prediction
        seen = f"; the interval is {self.side}" if self.decided == UNINFORMATIVE else ""
        if self.predicted:
            seen += f"; predicted {predicted_text(self.predicted)}, {'as' if self.as_predicted else 'NOT as'} predicted"
        return (f"{self.name}: effect {self.effect:.4g}, {self.interval_text()}, {len(self.seeds)} seeds, vs "
                f"{p.comparison} {p.threshold:g}: {self.decided}{seen} ({self.scale.describe()})")

    @property
    def as_predicted(self) -> bool | None:
        """Whether a control showed a side it predicted (None: not a control of the mechanism)."""
        return self.side in self.predicted if self.predicted else None

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out.update({"outcome": self.decided, "side": self.side, "confirmed": self.decided == CONFIRMED,
                    "interval": "t", "level": self.level, "family": list(self.family),
                    "resolution": self.resolution, "interval_text": self.interval_text(),
                    "bootstrap": [_finite(v) for v in self.bootstrap], "uninformative": self.uninformative,
                    "predicted": list(self.predicted) or None, "predicted_text": predicted_text(self.predicted),
                    "as_predicted": self.as_predicted})
        return out


def _finite(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)


def predicted_text(sides: Sequence[str]) -> str | None:
    """``contradicted``, or ``not confirmed`` for the two sides other than confirmed (None: no prediction)."""
    sides = tuple(sides)
    if not sides:
        return None
    if len(sides) == 1:
        return sides[0]
    missing = [s for s in SIDES if s not in sides]
    return f"not {missing[0]}" if len(missing) == 1 else " or ".join(sides)


def decide(experiment: Experiment, result: Result, registered: bool = True,
           uninformative: str | None = None, predicted: Sequence[str] = ()) -> Decision:
    """Decide ``result`` (``experiment`` run at ``result.scale``). A registered decision is corrected for its
    family; ``uninformative`` is the registration's reason that the design cannot show the effect;
    ``predicted`` are the sides a control of the mechanism predicts (a control is never registered)."""
    predicted = tuple(predicted)
    if predicted and (registered or not set(predicted) <= set(SIDES) or len(predicted) == len(SIDES)):
        raise ValueError(f"a control predicts one or two of {SIDES} and is not registered: {predicted!r}")
    names = family(experiment, result.scale) if registered else (experiment.name,)
    level = 1 - (1 - LEVEL) / len(names)
    quantised = resolution(experiment)
    per_seed = list(result.per_seed)
    if quantised is None:
        low, high = t_interval([float(m[experiment.prediction.metric]) for m in per_seed], level)
    else:
        low, high = censored_t_interval(*quantised[0](experiment, per_seed, result.scale), level)
    where = side(experiment, low, high)
    base = {f.name: getattr(result, f.name) for f in fields(Result)}
    base.update(ci_low=low, ci_high=high, confirmed=where == CONFIRMED and uninformative is None)
    return Decision(**base, decided=UNINFORMATIVE if uninformative else where, side=where, level=level,
                    family=names, resolution=quantised[1] if quantised else None,
                    bootstrap=(result.ci_low, result.ci_high), uninformative=uninformative, predicted=predicted)


__all__ = ["CONFIRMED", "CONTRADICTED", "INCONCLUSIVE", "UNINFORMATIVE", "OUTCOMES", "SIDES", "NOT_CONFIRMED",
           "NOT_CONTRADICTED", "Decision", "censored_t_interval", "decide", "expect", "expect_as_predicted",
           "reject_as_predicted",
           "expect_side", "family", "family_key", "predicted_text", "resolution", "side", "t_interval"]


def expect(decision: Decision, outcome: str, side: str | None = None, **values: Any) -> None:
    """The test's one assertion: ``decision`` has ``outcome`` (and its interval lies ``side``, for an
    uninformative one, whose test guards the recorded interval), else a ClaimViolation with the summary."""
    from claimcheck import claim_assert

    claim_assert(decision.outcome == outcome and (side is None or decision.side == side), decision.summary(),
                 **values)


def expect_side(decision: Decision, side: str, **values: Any) -> None:
    """A negative control's assertion: the interval of ``decision`` lies ``side`` (confirmed, contradicted or
    inconclusive), the check its decision's test makes of the interval."""
    from claimcheck import claim_assert

    claim_assert(decision.side == side, decision.summary(), **values)


def expect_as_predicted(decision: Decision, **values: Any) -> None:
    """A control of the mechanism's assertion: its interval lies on a side it predicted before it ran."""
    from claimcheck import claim_assert

    if not decision.predicted:
        raise ValueError(f"{decision.name} is not a control of the mechanism: it has no predicted outcome")
    claim_assert(decision.as_predicted, decision.summary(), **values)


def reject_as_predicted(decision: Decision, outcome: str, **values: Any) -> None:
    """The body of a control of the mechanism marked ``@control``: the control shows a side it predicted (else
    the control does not model what it was built for, an error of the evidence: :class:`PremiseFailed`), and
    then its decision's own assertion, ``expect(decision, outcome)``, which must reject it."""
    from claimcheck import premise

    if not decision.predicted or outcome in decision.predicted:
        raise ValueError(f"{decision.name}: a control rejected by its decision's check predicts another side than "
                         f"{outcome!r}, not {decision.predicted!r}")
    premise(decision.as_predicted, f"the control misses its predicted outcome: {decision.summary()}", **values)
    expect(decision, outcome, **values)
