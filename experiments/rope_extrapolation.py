"""RoPE beyond its training length: unscaled, with log-n scaling ``(log n)^alpha``, with NTK-aware frequencies.

One model per seed is trained at length ``L = scale.seq_len`` on a lag-2 copy task (:func:`lag_copy`:
``x_t = x_{t-2}`` with probability ``1 - noise``, else a fresh token, so the query at ``t - 1`` must find
the key at ``t - 2`` by its RoPE offset) and evaluated, without retraining, at ``n = test_len`` (4 L at
the CI scale) in several ways:

* log-n scaling with exponent ``alpha`` (spectral.txt lines 339-353: ``softmax(QK^T/sqrt(d) (log n)^alpha)``),
  read causally and normalised at the training length: row ``i`` sees ``i + 1`` keys and its logits are
  multiplied by ``max(1, log(i+1)/log L)^alpha`` (:func:`polylog_scale`). At the training length the
  factor ``(log L)^alpha`` is a constant that ``W_Q W_K`` absorbs, so rows within ``L`` are unchanged and
  one trained model serves every ``alpha``, as in the documents' table of critical scaling applied
  "without retraining" (foundations.txt lines 744-753);
* NTK-aware frequencies ``b' = b s^(d/(d-2))`` (``impl.rope_scaling.ntk_aware``, ``s = test_len / L``).

Metrics per seed (nats/token; rows ``< L`` are "within", rows ``>= L`` "beyond"): the loss beyond the
training length per alpha and with NTK-aware frequencies, the lost fraction ``(loss_beyond -
loss_within) / (ln(vocab - 1) - loss_within)`` (0: no loss, 1: chance), attention row entropies (raw
and normalised by ``log(i+1)``). Each :class:`RopeExperiment` decides one claim from them.

Controls of the mechanism (``variant``), run at the decisions' seeds and scale on the same trained models, each
removing the proposed cause and keeping everything else: ``in-distribution`` (the rows read as "beyond" lie inside
the training length: boundary ``L/2`` and evaluation length ``L``, the same model, task, scaling and metrics), and
``alpha-zero`` (every alpha applied as 0: the over-concentration's proposed cause, a large exponent, removed).
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any

import torch
import torch.nn.functional as F

from experiments.harness import Prediction, Scale, VariantExperiment, deterministic, train
from experiments.models import (ModelConfig, ScoreScale, TinyTransformer, attention_layers, keep_attention_weights,
                                set_rope_frequencies)
from experiments.tasks import IGNORE, Batch, generator
from impl.critical_scaling import row_entropy
from impl.rope import rope_frequencies
from impl.rope_scaling import ntk_aware

ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
BAND = (1.5, 2.0)  # the documents' empirical optimum, spectral.txt line 353
ROPE_BASE = 10000.0
EVAL_SEED = 10_000  # evaluation batches come from generator(EVAL_SEED + seed), never seen in training

_EXTRA = {"task": "lag-2 copy", "vocab": 16, "noise": 0.1, "lr": 0.003, "test_len": 128, "eval_batch": 16,
          "alphas": list(ALPHAS), "ntk_scale": 4}
SCALES = {
    "ci": Scale(layers=2, d_model=32, heads=2, steps=300, seeds=5, seq_len=32, batch=32, extra=_EXTRA),
    "small": Scale(layers=2, d_model=64, heads=4, steps=1000, seeds=5, seq_len=64, batch=32,
                   extra={**_EXTRA, "test_len": 256}),
    "medium": Scale(layers=4, d_model=128, heads=4, steps=3000, seeds=5, seq_len=128, batch=32,
                    extra={**_EXTRA, "vocab": 32, "test_len": 1024, "ntk_scale": 8}),
}


def lag_copy(g: torch.Generator, batch: int, seq_len: int, vocab: int, lag: int = 2, noise: float = 0.1) -> Batch:
    """Tokens ``1..vocab-1``: ``x_t = x_{t-lag}`` with probability ``1 - noise``, else uniform; every next token
    is scored. ``(ids, targets)``, each ``(batch, seq_len)``."""
    x = torch.randint(1, vocab, (batch, seq_len), generator=g)
    keep = torch.rand(batch, seq_len, generator=g) >= noise
    for t in range(lag, seq_len):
        x[:, t] = torch.where(keep[:, t], x[:, t - lag], x[:, t])
    targets = torch.full_like(x, IGNORE)
    targets[:, :-1] = x[:, 1:]
    return x, targets


VARIANT_EXPONENT = {"alpha-zero": lambda a: 0.0}


def polylog_scale(train_len: int, alpha: float) -> ScoreScale:
    """Row ``i`` (``i + 1`` keys) scaled by ``max(1, log(i+1)/log train_len)^alpha / sqrt(d)``: (n_q, 1)."""
    def scale(positions: torch.Tensor, d_head: int) -> torch.Tensor:
        ratio = (torch.log(positions.to(torch.float64) + 1.0) / math.log(train_len)).clamp(min=1.0)
        return (ratio**alpha / math.sqrt(d_head)).to(torch.float32)[:, None]
    return scale


def _config(scale: Scale) -> ModelConfig:
    x = scale.extra
    return ModelConfig(vocab=x["vocab"], d_model=scale.d_model, layers=scale.layers, heads=scale.heads,
                       max_len=x["test_len"], positional="rope", rope_base=ROPE_BASE)


@functools.lru_cache(maxsize=16)
def _trained(seed: int, scale_key: str) -> TinyTransformer:
    """The model of one seed (shared by every experiment and variant of this module in one process)."""
    scale = Scale(**json.loads(scale_key))
    x = scale.extra
    deterministic(seed)
    model = TinyTransformer(_config(scale))
    sample = functools.partial(lag_copy, vocab=x["vocab"], noise=x["noise"])
    model.training_curve = train(model, sample, scale.steps, scale.batch, scale.seq_len, x["lr"], seed).losses
    return model.eval()


def _row_stats(model: TinyTransformer, ids: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss ``(n,)`` (mean over the batch; nan where unscored) and per-row entropy ``(n,)`` (mean
    over batch, heads and layers)."""
    keep_attention_weights(model)
    with torch.no_grad():
        logits = model(ids)
    loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none")  # (B, n)
    scored = (targets != IGNORE).float()
    row_loss = (loss * scored).sum(0) / scored.sum(0)  # nan where no row is scored
    entropy = torch.stack([row_entropy(a.weights).mean(dim=(0, 1)) for a in attention_layers(model)])  # (layers, n)
    keep_attention_weights(model, False)
    return row_loss, entropy.mean(dim=0)


def _set_scale(model: TinyTransformer, score_scale: ScoreScale) -> None:
    for attn in attention_layers(model):
        attn.score_scale = score_scale


@functools.lru_cache(maxsize=64)
def _metrics(seed: int, scale_key: str, variant: str) -> dict[str, Any]:
    """Every metric of the module for one seed: losses and entropies per alpha, the NTK-aware loss."""
    scale = Scale(**json.loads(scale_key))
    x = scale.extra
    model = _trained(seed, scale_key)
    boundary, test_len = scale.seq_len, x["test_len"]
    if variant == "in-distribution":  # the "beyond" rows lie inside the training length
        boundary, test_len = scale.seq_len // 2, scale.seq_len
    g = generator(EVAL_SEED + seed)
    ids, targets = lag_copy(g, x["eval_batch"], test_len, x["vocab"], noise=x["noise"])
    exponent = VARIANT_EXPONENT.get(variant, lambda a: a)
    within, beyond = slice(0, boundary), slice(boundary, test_len)
    trained_rows = slice(boundary // 2, boundary)
    log_rows = torch.log(torch.arange(test_len, dtype=torch.float32) + 1.0)
    chance = math.log(x["vocab"] - 1)
    out: dict[str, Any] = {"curve:training loss": model.training_curve}
    for alpha in x["alphas"]:
        _set_scale(model, polylog_scale(boundary, exponent(alpha)))
        row_loss, row_h = _row_stats(model, ids, targets)
        out[f"loss_beyond@{alpha:g}"] = float(row_loss[beyond].nanmean())
        out[f"entropy_beyond@{alpha:g}"] = float(row_h[beyond].mean())
        if alpha == 0.0:
            out["loss_within"] = float(row_loss[within].nanmean())
            out["entropy_trained_rows"] = float(row_h[trained_rows].mean())
            normalised = row_h[1:] / log_rows[1:]  # H_i / log(i+1), rows i >= 1
            out["normalised_entropy_beyond"] = float(normalised[boundary - 1:].mean())
            out["normalised_entropy_trained_rows"] = float(normalised[trained_rows.start - 1:boundary - 1].mean())
            out["curve:loss per position (alpha 0)"] = row_loss.nan_to_num(0.0)
    _set_scale(model, polylog_scale(boundary, exponent(0.0)))
    d_head = scale.d_model // scale.heads
    set_rope_frequencies(model, ntk_aware(d_head, ROPE_BASE, x["ntk_scale"]))
    out["loss_beyond_ntk"] = float(_row_stats(model, ids, targets)[0][beyond].nanmean())
    set_rope_frequencies(model, rope_frequencies(d_head, ROPE_BASE))  # leave the shared model as trained
    _set_scale(model, polylog_scale(scale.seq_len, 0.0))

    loss = {a: out[f"loss_beyond@{a:g}"] for a in x["alphas"]}
    out["lost_fraction_unscaled"] = (loss[0.0] - out["loss_within"]) / (chance - out["loss_within"])
    out["small_alpha_excess_loss"] = loss[0.5] - min(loss[1.0], loss[1.5], loss[2.0])
    out["large_alpha_entropy_ratio"] = out["entropy_beyond@4"] / out["entropy_trained_rows"]
    out["optimum_in_band_gap"] = min(loss[a] for a in BAND) - min(v for a, v in loss.items() if a not in BAND)
    out["best_alpha"] = min(loss, key=loss.get)
    out["flattening"] = out["normalised_entropy_beyond"] - out["normalised_entropy_trained_rows"]
    out["ntk_gain"] = loss[0.0] - out["loss_beyond_ntk"]
    out["curve:loss beyond vs alpha"] = [loss[a] for a in x["alphas"]]
    return out


class RopeExperiment(VariantExperiment):
    metrics = staticmethod(_metrics)


UNSCALED_COLLAPSES = RopeExperiment(
    "rope-unscaled-collapses-beyond-train-length", "spectral.scaling-ablation-qualitative",
    Prediction("lost_fraction_unscaled", ">=", 0.5,
               "A RoPE model trained at n = 32 and run without length scaling at n = 128 loses at least half of "
               "what it learned beyond the training length: over 5 seeds, (loss on positions 32-127 - loss on "
               "positions 0-31) / (chance loss ln 15 - loss on positions 0-31) >= 0.5 (95% bootstrap interval)."))
SMALL_ALPHA_NOT_ENOUGH = RopeExperiment(
    "rope-small-alpha-is-not-enough", "spectral.scaling-ablation-alpha-too-small",
    Prediction("small_alpha_excess_loss", ">", 0.0,
               "With row-wise scaling max(1, log(i+1)/log 32)^alpha applied at n = 128, alpha = 0.5 leaves a higher "
               "loss on positions 32-127 than the best of alpha in {1, 1.5, 2}: over 5 seeds the difference "
               "(nats/token) is > 0."))
LARGE_ALPHA_CONCENTRATES = RopeExperiment(
    "rope-large-alpha-over-concentrates", "spectral.scaling-ablation-alpha-too-large",
    Prediction("large_alpha_entropy_ratio", "<", 1.0,
               "With alpha = 4, attention on rows 32-127 at n = 128 is more concentrated than the model's trained "
               "attention: over 5 seeds, mean row entropy (rows 32-127, alpha = 4) / mean row entropy (rows "
               "16-31) < 1."))
OPTIMAL_ALPHA = RopeExperiment(
    "rope-optimal-alpha-in-1-5-to-2", "spectral.empirical-optimal-alpha-1-5-to-2",
    Prediction("optimum_in_band_gap", "<", 0.0,
               "Over the grid alpha in {0, 0.5, 1, 1.5, 2, 3, 4}, the lowest loss on positions 32-127 at n = 128 "
               "lies at alpha in {1.5, 2}: over 5 seeds, min(loss at 1.5, 2) - min(loss at 0, 0.5, 1, 3, 4) < 0."))
ATTENTION_FLATTENS = RopeExperiment(
    "rope-attention-flattens-beyond-train-length", "long-context.rank-collapse-beyond-train-length",
    Prediction("flattening", ">", 0.1,
               "Without scaling, attention rows beyond the training length are markedly closer to uniform: over 5 "
               "seeds, mean normalised row entropy H_i / log(i+1) over rows 32-127 minus that over rows 16-31 is "
               "> 0.1."))
NTK_AWARE_EXTENDS = RopeExperiment(
    "rope-ntk-aware-extends-context", "long-context.sinusoidal-vs-rope-extension-methods",
    Prediction("ntk_gain", ">", 0.0,
               "NTK-aware frequencies (base 10000 * 4^(d/(d-2)), d = 16), set at evaluation without retraining, "
               "lower the loss on positions 32-127 at n = 128: over 5 seeds, loss(plain RoPE) - loss(NTK-aware) "
               "> 0 nats/token."))
EXPERIMENTS = (UNSCALED_COLLAPSES, SMALL_ALPHA_NOT_ENOUGH, LARGE_ALPHA_CONCENTRATES, OPTIMAL_ALPHA,
               ATTENTION_FLATTENS, NTK_AWARE_EXTENDS)
