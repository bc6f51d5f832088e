"""Controls of the mechanism for the pre-LN vs post-LN experiments of :mod:`experiments.prenorm`, at their
decisions' seeds and scale.

Kept apart from :mod:`experiments.prenorm` so that adding a control leaves the decisions' artefact keys (the
source of the decision's module) as they are.

* :class:`GradientSpreadPlacebo`: the post-LN arm of :class:`~experiments.prenorm.GradientSpread` replaced by a
  second pre-LN stack of the same depth and width from another initialisation and batch
  (``seed + PLACEBO_SEED``): a placebo of the same size without the proposed cause (the norm after the
  residual sum), so its spread ratio should be that of two draws of one architecture.
* :class:`WarmupNeedPreLN`: the warm-up comparison of :class:`~experiments.prenorm.WarmupNeed` (the same grid,
  warm-up, seeds and scale) run on pre-LN: the proposed cause of the need for warm-up, the norm after the
  residual sum, removed, everything else kept.
"""
from __future__ import annotations

import math
from typing import Any

from experiments.harness import Scale
from experiments.prenorm import GradientSpread, WarmupNeed, _scan_curve, largest_stable_lr, layer_gradient_norms

PLACEBO_SEED = 40_000


class GradientSpreadPlacebo(GradientSpread):
    """Pre-LN against pre-LN from another draw: the spread ratio of the placebo."""

    name = f"{GradientSpread.name}-pre-ln-placebo"

    def __init__(self):
        self.post = "pre"  # the second arm: a pre-LN stack

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        pre, placebo = layer_gradient_norms(seed, scale, "pre"), layer_gradient_norms(seed + PLACEBO_SEED, scale, "pre")
        spread_pre, spread_placebo = max(pre) / min(pre), max(placebo) / min(placebo)
        return {"spread_pre": spread_pre, "spread_post": spread_placebo,
                "log2_spread_ratio": math.log2(spread_placebo / spread_pre),
                "curve:FFN weight gradient norm vs layer, pre-LN": pre,
                "curve:FFN weight gradient norm vs layer, pre-LN placebo": placebo}


class WarmupNeedPreLN(WarmupNeed):
    """Pre-LN's largest stable rate with a linear warm-up over without: the warm-up gain without post-LN."""

    name = f"{WarmupNeed.name}-pre-ln"

    def __init__(self):
        self.norm = "pre"  # both arms pre-LN

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        lr_none, finals_none = largest_stable_lr(seed, scale, self.norm, 0)
        lr_warm, finals_warm = largest_stable_lr(seed, scale, self.norm, scale.extra["warmup"])
        return {"lr_warmup": lr_warm, "lr_no_warmup": lr_none, "log10_lr_ratio": math.log10(lr_warm / lr_none),
                "curve:final loss vs learning rate, pre-LN with warm-up": _scan_curve(finals_warm),
                "curve:final loss vs learning rate, pre-LN without warm-up": _scan_curve(finals_none)}
