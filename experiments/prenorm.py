"""Pre-LN vs post-LN: learning-rate tolerance, the need for warm-up, gradient norms across depth.

The documents say post-norm ``x_{l+1} = Norm(x_l + F(x_l))`` trains unstably and needs warm-up
(foundations.txt line 372), pre-norm ``x_{l+1} = x_l + F(Norm(x_l))`` trains more stably, allows larger
learning rates (linear-algebra.txt line 378) and keeps gradients stable in deep networks
(foundations.txt line 375); on record, Xiong et al. (2020) show that at initialisation post-LN's
gradients grow towards the output layers while pre-LN's do not, so post-LN without warm-up fails at
learning rates pre-LN tolerates.

Three experiments on :class:`experiments.models.TinyTransformer` (the ``impl.blocks`` wrappers), trained
with Adam on the bigram-chain text task (:func:`experiments.tasks.text`, loss floor ``log 3``):

* :class:`LearningRateTolerance`: per seed, the largest learning rate of a half-decade grid (scanned
  upwards, stopping at the first failure) at which the final loss is below ``loss_threshold``, for pre-LN
  and for post-LN, both without warm-up; effect: ``log10(lr*_pre / lr*_post)``.
* :class:`WarmupNeed`: the same scan for post-LN with and without a linear warm-up; effect
  ``log10(lr*_warm / lr*_none)``.
* :class:`GradientSpread`: at initialisation (no training), the per-layer gradient norm of the FFN's
  first weight over a deep stack; spread = max / min over layers; effect ``log2(spread_post / spread_pre)``.
* :class:`HealthyJacobian`: after a healthy pre-LN run (a learning rate below the instability), the
  singular values of each block's input-output Jacobian (``n d x n d``, on one sequence): the fraction
  within a factor 2 of 1 (index.txt line 264 gives no tolerance; the factor 2 is ours).

Negative controls break one arm on purpose, so that the outcome must change: the arm that should fail
first (post-LN; post-LN without warm-up) is secretly trained at 10x the nominal learning rate; the
post-LN stack of the gradient experiment secretly has neither residuals nor norms; the blocks of the
Jacobian experiment secretly lose their residual connection.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from experiments.harness import Experiment, Prediction, Scale, train
from experiments.models import ModelConfig, TinyTransformer
from experiments.tasks import generator, text

TASK = text(vocab=32)
LRS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # half-decade grid: one step is a factor 10^0.5 ~ 3.2
LOSS_THRESHOLD = 2.0  # nats: between the bigram floor log 3 = 1.10 and the uniform log 32 = 3.47

SCALES = {
    "ci": Scale(layers=6, d_model=32, heads=4, steps=120, seeds=5, seq_len=16, batch=8,
                extra={"warmup": 40, "depth": 12, "healthy_lr": 3e-3}),
    "control": Scale(layers=4, d_model=32, heads=4, steps=100, seeds=3, seq_len=16, batch=8,
                     extra={"warmup": 33, "depth": 8, "healthy_lr": 3e-3}),
    "small": Scale(layers=6, d_model=64, heads=4, steps=400, seeds=5, seq_len=32, batch=16,
                   extra={"warmup": 100, "depth": 24, "healthy_lr": 3e-3}),
    "medium": Scale(layers=12, d_model=128, heads=8, steps=2000, seeds=5, seq_len=64, batch=32,
                    extra={"warmup": 400, "depth": 48, "healthy_lr": 1e-3}),
}


def model(scale: Scale, norm: str, layers: int | None = None) -> TinyTransformer:
    return TinyTransformer(ModelConfig(vocab=TASK.vocab, d_model=scale.d_model, layers=layers or scale.layers,
                                       heads=scale.heads, max_len=scale.seq_len, norm=norm))


def largest_stable_lr(seed: int, scale: Scale, norm: str, warmup: int,
                      lr_factor: float = 1.0) -> tuple[float, list[float]]:
    """Scan ``LRS`` upwards from one initialisation per rate; stop at the first whose final loss is not
    below ``LOSS_THRESHOLD``. Returns the last rate that succeeded (``LRS[0] / sqrt(10)`` if none did)
    and the final losses of the rates tried (inf for a divergence). ``lr_factor`` != 1 trains at
    ``lr_factor`` times the nominal rate (negative controls only)."""
    best, finals = LRS[0] / math.sqrt(10), []
    for lr in LRS:
        torch.manual_seed(seed)
        run = train(model(scale, norm), TASK.sample, scale.steps, scale.batch, scale.seq_len, lr * lr_factor, seed,
                    warmup)
        finals.append(run.final)
        if not run.final < LOSS_THRESHOLD:
            break
        best = lr
    return best, finals


class LearningRateTolerance(Experiment):
    """Pre-LN tolerates larger learning rates than post-LN (both without warm-up)."""

    name = "prenorm-lr-tolerance"
    claim_id = "architecture.la-prenorm-more-stable-larger-lr"
    prediction = Prediction(
        "log10_lr_ratio", ">=", 0.5,
        "Over the seeds, the largest learning rate (half-decade grid 1e-3..3e-1, Adam, no warm-up) at which "
        "the final loss falls below 2.0 nats is at least 10^0.5 ~ 3.2x larger for pre-LN than for post-LN: "
        "the whole 95% bootstrap interval of the mean log10 ratio is >= 0.5.")

    def __init__(self, post_lr_factor: float = 1.0):
        self.post_lr_factor = post_lr_factor  # 10 is the negative control: post-LN secretly at 10x the rate

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        lr_pre, finals_pre = largest_stable_lr(seed, scale, "pre", 0)
        lr_post, finals_post = largest_stable_lr(seed, scale, "post", 0, self.post_lr_factor)
        return {"lr_pre": lr_pre, "lr_post": lr_post, "log10_lr_ratio": math.log10(lr_pre / lr_post),
                "curve:final loss vs learning rate, pre-LN": _scan_curve(finals_pre),
                "curve:final loss vs learning rate, post-LN": _scan_curve(finals_post)}


class WarmupNeed(Experiment):
    """Post-LN without warm-up fails at learning rates it tolerates with warm-up."""

    name = "postln-warmup-need"
    claim_id = "optimization.post-norm-unstable-needs-warmup"
    prediction = Prediction(
        "log10_lr_ratio", ">=", 0.5,
        "Over the seeds, post-LN's largest learning rate (half-decade grid 1e-3..3e-1, Adam) at which the final "
        "loss falls below 2.0 nats is at least 10^0.5 ~ 3.2x larger with a linear warm-up (first third of the "
        "steps) than without: the whole 95% bootstrap interval of the mean log10 ratio is >= 0.5.")

    def __init__(self, none_lr_factor: float = 1.0):
        self.none_lr_factor = none_lr_factor  # 10 is the negative control: no warm-up secretly at 10x the rate

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        lr_none, finals_none = largest_stable_lr(seed, scale, "post", 0, self.none_lr_factor)
        lr_warm, finals_warm = largest_stable_lr(seed, scale, "post", scale.extra["warmup"])
        return {"lr_warmup": lr_warm, "lr_no_warmup": lr_none, "log10_lr_ratio": math.log10(lr_warm / lr_none),
                "curve:final loss vs learning rate, post-LN with warm-up": _scan_curve(finals_warm),
                "curve:final loss vs learning rate, post-LN without warm-up": _scan_curve(finals_none)}


def layer_gradient_norms(seed: int, scale: Scale, norm: str) -> list[float]:
    """``||dL/dW_up||_F`` of each block's FFN first weight, at initialisation, for one batch."""
    torch.manual_seed(seed)
    net = model(scale, norm, layers=scale.extra["depth"])
    ids, targets = TASK.sample(generator(seed), scale.batch, scale.seq_len)
    logits = net(ids)
    torch.nn.functional.cross_entropy(logits.reshape(-1, TASK.vocab), targets.reshape(-1)).backward()
    return [float(b.ffn.up.weight.grad.norm()) for b in net.blocks]


class GradientSpread(Experiment):
    """At initialisation, per-layer gradient norms vary more across depth for post-LN than for pre-LN."""

    name = "prenorm-gradient-spread"
    claim_id = "optimization.pre-norm-gradient-stability-deep"
    prediction = Prediction(
        "log2_spread_ratio", ">=", 1.0,
        "At initialisation of a deep stack (extra.depth layers), the spread max/min over layers of the FFN "
        "weight gradient norm is at least 2x larger for post-LN than for pre-LN: the whole 95% bootstrap "
        "interval of the mean log2 ratio of spreads is >= 1.")

    def __init__(self, post: str = "post"):
        self.post = post  # "none" is the negative control: the post-LN stack secretly without residuals or norms

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        pre, post = layer_gradient_norms(seed, scale, "pre"), layer_gradient_norms(seed, scale, self.post)
        spread_pre, spread_post = max(pre) / min(pre), max(post) / min(post)
        return {"spread_pre": spread_pre, "spread_post": spread_post,
                "log2_spread_ratio": math.log2(spread_post / spread_pre),
                "curve:FFN weight gradient norm vs layer, pre-LN": pre,
                "curve:FFN weight gradient norm vs layer, post-LN": post}


NEAR_ONE = 2.0  # "close to 1": a singular value within a factor 2 of 1, [1/2, 2] (our tolerance)


def block_singular_values(block: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Singular values of the Jacobian of ``block`` at one sequence ``x (1, n, d)``: an ``(n d, n d)`` matrix."""
    jac = torch.autograd.functional.jacobian(block, x)  # (1, n, d, 1, n, d)
    return torch.linalg.svdvals(jac.reshape(x.numel(), x.numel()).double())


class HealthyJacobian(Experiment):
    """After healthy (converging) training, each block's Jacobian spectrum lies close to 1."""

    name = "healthy-block-jacobian"
    claim_id = "optimization.index-health-check-jacobian-spectrum-near-one"
    prediction = Prediction(
        "fraction_near_one", ">=", 0.9,
        "After a healthy run (pre-LN, Adam at extra.healthy_lr, no warm-up, scale.steps steps, final loss below "
        "2.0 nats), at least 90% of the singular values of the blocks' input-output Jacobians (pooled over "
        "blocks, on one training-length sequence) lie within a factor 2 of 1: the whole 95% bootstrap "
        "interval of the mean fraction is >= 0.9.")

    def __init__(self, norm: str = "pre"):
        self.norm = norm  # "none" is the negative control: blocks with the residual connection removed

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        torch.manual_seed(seed)
        net = model(scale, self.norm)
        run = train(net, TASK.sample, scale.steps, scale.batch, scale.seq_len, scale.extra["healthy_lr"], seed)
        ids, _ = TASK.sample(generator(seed + 10_000), 1, scale.seq_len)
        with torch.no_grad():
            states = net.hidden(ids)
        svals = [block_singular_values(b, states[i]) for i, b in enumerate(net.blocks)]
        pooled = torch.cat(svals)
        near = ((pooled >= 1 / NEAR_ONE) & (pooled <= NEAR_ONE)).double().mean()
        return {"fraction_near_one": float(near), "final_loss": run.final,
                "max_singular_value": float(pooled.max()), "min_singular_value": float(pooled.min()),
                "curve:Jacobian singular value vs block, largest": [float(v.max()) for v in svals],
                "curve:Jacobian singular value vs block, smallest": [float(v.min()) for v in svals],
                "curve:training loss vs step": run.losses}


def _scan_curve(finals: list[float]) -> dict[str, list[float]]:
    """The final losses of a scan against the rates tried; divergences (inf) as nan."""
    return {"x": list(LRS[:len(finals)]), "y": [v if np.isfinite(v) else math.nan for v in finals]}


EXPERIMENTS = (LearningRateTolerance(), WarmupNeed(), GradientSpread(), HealthyJacobian())  # as registered
