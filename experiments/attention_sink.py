"""Attention sinks: does the first token of a small causal LM become a sink during training?

One model per seed (2 layers x 4 heads, RoPE, pre-LN, causal) is trained on random windows of the
documents' own text (``experiments.tasks.documents``, next character; no beginning-of-sequence token,
so the first token is whatever character starts the window). On held-out windows,
each head's sink weight is its attention on position 0 averaged over the batch and the queries at
positions ``first_query .. n-1``; the sink score is the largest over heads and layers. Uniform causal
attention gives ``mean_i 1/(i+1)`` (about 0.03 for rows 16-63), recorded as ``uniform_baseline``.

Control of the mechanism ``placebo-key`` (the decision's seeds, scale and models): the same score read on key
:data:`PLACEBO_KEY` in place of key 0, a key that every scored query also sees but that is not the first, so
being the first token, the proposed cause of a sink, is removed.
"""
from __future__ import annotations

import functools
import json
from typing import Any

import torch

from experiments.harness import Prediction, Scale, VariantExperiment, deterministic, train
from experiments.models import ModelConfig, TinyTransformer, attention_layers, keep_attention_weights
from experiments.tasks import documents, generator

EVAL_SEED = 10_000
PLACEBO_KEY = 8  # visible to every query from first_query = 16 on, and not the first
SINK = 0.3  # a sink head: at least this mean weight on token 0, 10x the uniform 1/(i+1) averaged over rows 16-63
_EXTRA = {"task": "document-text", "vocab": 64, "lr": 0.003, "eval_batch": 16, "first_query": 16}
SCALES = {
    "ci": Scale(layers=2, d_model=32, heads=4, steps=300, seeds=5, seq_len=64, batch=16, extra=_EXTRA),
    "small": Scale(layers=4, d_model=64, heads=4, steps=1500, seeds=5, seq_len=128, batch=16,
                   extra={**_EXTRA, "first_query": 32}),
    "medium": Scale(layers=6, d_model=128, heads=8, steps=4000, seeds=5, seq_len=256, batch=16,
                    extra={**_EXTRA, "vocab": 96, "first_query": 64}),
}


def sink_weights(weights: torch.Tensor, first_query: int, key: int = 0) -> torch.Tensor:
    """``weights (B, h, n, n)`` -> per-head mean attention on ``key`` from queries ``first_query..n-1``: (h,)."""
    return weights[:, :, first_query:, key].mean(dim=(0, 2))


@functools.lru_cache(maxsize=32)
def _metrics(seed: int, scale_key: str, variant: str) -> dict[str, Any]:
    scale = Scale(**json.loads(scale_key))
    x = scale.extra
    deterministic(seed)
    task = documents(x["vocab"])
    model = TinyTransformer(ModelConfig(vocab=task.vocab, d_model=scale.d_model, layers=scale.layers,
                                        heads=scale.heads, max_len=scale.seq_len, positional="rope"))
    curve = train(model, task.sample, scale.steps, scale.batch, scale.seq_len, x["lr"], seed).losses
    ids, _ = task.sample(generator(EVAL_SEED + seed), x["eval_batch"], scale.seq_len)
    keep_attention_weights(model.eval())
    with torch.no_grad():
        model(ids)
    weights = [a.weights for a in attention_layers(model)]
    key = PLACEBO_KEY if variant == "placebo-key" else 0
    per_head = torch.stack([sink_weights(w, x["first_query"], key) for w in weights])  # (layers, h)
    keep_attention_weights(model, False)
    rows = torch.arange(x["first_query"], scale.seq_len, dtype=torch.float64)
    return {
        "sink_score": float(per_head.max()), "sink_head_fraction": float((per_head >= SINK).float().mean()),
        "uniform_baseline": float((1.0 / (rows + 1.0)).mean()),
        "curve:sink weight per head (layer-major)": per_head.flatten(), "curve:training loss": curve,
    }


class SinkExperiment(VariantExperiment):
    metrics = staticmethod(_metrics)


FIRST_TOKEN_SINK = SinkExperiment(
    "first-token-becomes-sink", "attention.index-initial-token-naturally-becomes-sink",
    Prediction("sink_score", ">=", SINK,
               "In a 2-layer causal character LM trained at n = 64, some head puts at least 30% of its attention "
               "on the first token: over 5 seeds, the largest per-head mean attention weight on position 0 from "
               "queries at positions 16-63 is >= 0.3 (uniform attention gives about 0.03)."))
EXPERIMENTS = (FIRST_TOKEN_SINK,)
