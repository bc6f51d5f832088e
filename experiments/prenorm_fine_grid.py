"""Does pre-LN tolerate a larger learning rate than post-LN (linear-algebra.txt line 378)? A 1/16-decade grid.

The half-decade scan of ``experiments.prenorm`` (``prenorm-lr-tolerance``) could not decide its claim: its
threshold fell between two grid steps. Here each arm's largest stable rate is located by bisection on the
grid ``10^(k / per_decade)``, ``k_low <= k <= k_high``:

* stable: after ``scale.steps`` steps of Adam without warm-up (:func:`experiments.harness.train`) the final
  loss is below ``extra.loss_threshold`` nats (a divergence is not stable);
* the anchor ``k_low`` is trained first; if it fails, the rate lies in ``[0, 10^(k_low / per_decade))``;
* bisection keeps ``lo`` stable and ``hi`` unstable (``hi = k_high`` is assumed unstable and trained only
  when the bisection reaches it; if it is stable, the rate lies in ``[10^(k_high / per_decade), inf)``);
  a single stable-to-unstable boundary between anchor and top is assumed;
* the rate found ``lo`` stands for its grid cell ``[10^(lo / D), 10^((lo + 1) / D))``, so
  ``log10(lr*_pre / lr*_post)`` is interval-censored (``experiments.analysis`` decides on the cells).

Arms: ``pre`` (``x + F(Norm(x))``), ``post`` (``Norm(x + F(x))``) and the control ``pre-no-identity``:
pre-LN blocks with the identity residual path removed (each sublayer ``x -> F(Norm(x))``, the same
parameters and initialisation), the proposed cause of pre-LN's tolerance (Xiong et al. 2020: the
un-normalised residual stream keeps its gradients well-behaved) taken away. The post-LN scan is shared
by the decision and its control (one scan per seed and scale in a process).
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any

import torch
from torch import nn

from experiments.harness import Experiment, Prediction, Scale, train
from experiments.models import Block, ModelConfig, TinyTransformer
from experiments.tasks import text

SCALES = {
    "ci": Scale(layers=4, d_model=16, heads=4, steps=60, seeds=5, seq_len=16, batch=8,
                extra={"vocab": 32, "per_decade": 16, "k_low": -40, "k_high": -8, "loss_threshold": 2.5}),
}
ARMS = ("pre", "post", "pre-no-identity")


class WithoutIdentity(nn.Module):
    """A pre-LN :class:`~experiments.models.Block` with its identity path removed: ``x -> F(Norm(x))`` per sublayer."""

    def __init__(self, block: Block):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.block
        x = b.attn(b.norm1(x))
        return x if b.ffn is None else b.ffn(b.norm2(x))


def model(scale: Scale, arm: str) -> TinyTransformer:
    net = TinyTransformer(ModelConfig(vocab=scale.extra["vocab"], d_model=scale.d_model, layers=scale.layers,
                                      heads=scale.heads, max_len=scale.seq_len, norm="post" if arm == "post" else "pre"))
    if arm == "pre-no-identity":
        net.blocks = nn.ModuleList(WithoutIdentity(b) for b in net.blocks)
    return net


def rate(k: int, scale: Scale) -> float:
    return 10.0 ** (k / scale.extra["per_decade"])


def stable(seed: int, scale: Scale, arm: str, k: int) -> tuple[bool, float]:
    """Train arm ``arm`` from the seed's initialisation at rate ``10^(k / D)``: (stable, final loss)."""
    torch.manual_seed(seed)
    task = text(vocab=scale.extra["vocab"])
    run = train(model(scale, arm), task.sample, scale.steps, scale.batch, scale.seq_len, rate(k, scale), seed)
    return run.final < scale.extra["loss_threshold"], run.final


@functools.lru_cache(maxsize=64)
def scan(seed: int, scale_key: str, arm: str) -> dict[str, Any]:
    """The bisection of one arm: its cell ``[low, high)`` of the largest stable rate and the rates tried."""
    scale = Scale(**json.loads(scale_key))
    lo, hi = scale.extra["k_low"], scale.extra["k_high"]
    tried: dict[int, float] = {}
    ok, tried[lo] = stable(seed, scale, arm, lo)
    if not ok:
        return {"low": 0.0, "high": rate(lo, scale), "tried": tried}
    while hi - lo > 1:  # lo stable, hi unstable (k_high assumed so until reached); mid < hi always
        mid = (lo + hi) // 2
        ok, tried[mid] = stable(seed, scale, arm, mid)
        lo, hi = (mid, hi) if ok else (lo, mid)
    if hi == scale.extra["k_high"]:  # reached the untested top
        ok, tried[hi] = stable(seed, scale, arm, hi)
        if ok:
            return {"low": rate(hi, scale), "high": math.inf, "tried": tried}
    return {"low": rate(lo, scale), "high": rate(lo + 1, scale), "tried": tried}


def _log10(x: float) -> float:
    return -math.inf if x == 0 else math.inf if math.isinf(x) else math.log10(x)


class FineGridTolerance(Experiment):
    """Pre-LN's largest stable learning rate against post-LN's, on a 1/16-decade grid."""

    name = "prenorm-lr-tolerance-fine-grid"
    claim_id = "architecture.la-prenorm-more-stable-larger-lr"
    prediction = Prediction(
        "log10_fine_lr_ratio", ">", 0.0,
        "Pre-LN tolerates a larger learning rate than post-LN (the weakest reading: any larger rate). Per seed and "
        "arm (4 layers, d = 16, 4 heads, Adam without warm-up, 60 steps, batch 8, n = 16, bigram-chain text; "
        "stable: final loss below 2.5 nats, a divergence is not stable), the largest stable rate is found by "
        "bisection on the 1/16-decade grid 10^(k/16), k = -40 .. -8 (10^-2.5 to 10^-0.5): the anchor 10^-2.5 is "
        "trained first (if it fails the rate lies in [0, 10^-2.5)), the top 10^-0.5 only when the bisection "
        "reaches it (if it succeeds the rate lies in [10^-0.5, inf)), and a single stable-to-unstable boundary is "
        "assumed between them. Each seed's log10(lr*_pre / lr*_post) is interval-censored by the grid cells [rate "
        "found, next rate); over 5 seeds the t interval of the mean (the lower ends' t lower bound to the upper "
        "ends' t upper bound) is wholly above 0. Control of the mechanism at the same scale and seeds: pre-LN "
        "blocks without the identity residual path (each sublayer x -> F(Norm(x))) scanned the same way against "
        "the same post-LN scan; with the proposed cause removed its interval is expected not to lie wholly above 0.")

    def __init__(self, arm: str = "pre"):
        self.arm = arm  # "pre-no-identity": the control, pre-LN without its identity path
        if arm != "pre":
            self.name = f"{FineGridTolerance.name}-{arm.removeprefix('pre-')}"

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        key = json.dumps(scale.as_dict(), sort_keys=True)
        a, b = scan(seed, key, self.arm), scan(seed, key, "post")
        return {"lr_pre_low": a["low"], "lr_pre_high": a["high"], "lr_post_low": b["low"], "lr_post_high": b["high"],
                "log10_fine_lr_ratio": _log10(a["low"]) - _log10(b["low"]),
                "log10_ratio_low": _log10(a["low"]) - _log10(b["high"]),
                "log10_ratio_high": _log10(a["high"]) - _log10(b["low"]),
                f"curve:final loss vs learning rate, {self.arm}": _curve(a["tried"], scale),
                "curve:final loss vs learning rate, post": _curve(b["tried"], scale)}


def _curve(tried: dict[int, float], scale: Scale) -> dict[str, list[float]]:
    ks = sorted(tried)
    return {"x": [rate(k, scale) for k in ks], "y": [tried[k] if math.isfinite(tried[k]) else math.nan for k in ks]}


TOLERANCE = FineGridTolerance()
EXPERIMENTS = (TOLERANCE,)  # as registered
