"""Head redundancy: how many heads of a small character LM can be pruned, and do heads' spectra converge?

One model per seed (2 layers x 4 heads, RoPE, pre-LN) is trained on the documents' own text
(``experiments.tasks.documents``, next character). Training is split at ``early_step`` to take a
snapshot of the attention spectra (the optimiser is restarted there: ``harness.train`` runs whole).

* Pruning (spectral.txt lines 412-414): each head's importance is the held-out loss increase when it
  alone is zeroed (``head_mask``); heads are then removed together, least important first, and the
  prunable fraction is the largest ``k / H`` whose loss stays within ``(1 + tolerance)`` of the full
  model's (greedy pruning by single-head ablation). Control of the mechanism ``random-order`` (the decision's
  seeds, scale and models): the same heads removed the same way, in a seeded random order instead of least
  important first, a placebo of the same size that finds no redundancy.
* Spectra (spectral.txt line 408): the documents' ``head_spectral_diversity`` (line 387: singular values
  of each head's attention matrix, mean pairwise Euclidean distance between heads, diagonal included),
  per layer and held-out sequence, averaged; the metric is its ratio late (end) / early (``early_step``).
  Control ``tied-heads``: after training, every head secretly gets head 0's query and key weights, so the
  heads of a layer have one spectrum.
The controls edit a copy of the trained model, never the shared one.
"""
from __future__ import annotations

import copy
import functools
import json
from typing import Any

import torch
import torch.nn.functional as F

from experiments.harness import Prediction, Scale, VariantExperiment, deterministic, train
from experiments.models import ModelConfig, TinyTransformer, attention_layers, keep_attention_weights
from experiments.tasks import IGNORE, documents, generator

EVAL_SEED = 10_000
_EXTRA = {"task": "document-text", "vocab": 64, "lr": 0.003, "eval_batch": 32, "tolerance": 0.02, "early_step": 30}
SCALES = {
    "ci": Scale(layers=2, d_model=32, heads=4, steps=300, seeds=5, seq_len=32, batch=32, extra=_EXTRA),
    "small": Scale(layers=2, d_model=64, heads=8, steps=1500, seeds=5, seq_len=64, batch=32,
                   extra={**_EXTRA, "early_step": 150}),
    "medium": Scale(layers=4, d_model=128, heads=8, steps=4000, seeds=5, seq_len=128, batch=32,
                    extra={**_EXTRA, "vocab": 96, "early_step": 400}),
    "control": Scale(layers=2, d_model=32, heads=4, steps=100, seeds=3, seq_len=32, batch=32,
                    extra={**_EXTRA, "early_step": 10}),  # the negative controls
}
CONTROL = SCALES["control"]


def head_spectral_diversity(attn_matrices: torch.Tensor) -> float:
    """spectral.txt line 387: ``attn_matrices (h, n, n)`` -> mean of ``cdist`` between the heads' singular values."""
    spectra = torch.linalg.svdvals(attn_matrices.double())  # (h, n)
    return float(torch.cdist(spectra, spectra).mean())


def _held_out(scale: Scale, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    task = documents(scale.extra["vocab"])
    return task.sample(generator(EVAL_SEED + seed), scale.extra["eval_batch"], scale.seq_len)


def _loss(model: TinyTransformer, ids: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        logits = model(ids)
    return float(F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE))


def _diversity(model: TinyTransformer, ids: torch.Tensor) -> float:
    keep_attention_weights(model)
    with torch.no_grad():
        model(ids)
    values = [head_spectral_diversity(a.weights[b]) for a in attention_layers(model) for b in range(ids.shape[0])]
    keep_attention_weights(model, False)
    return sum(values) / len(values)


@functools.lru_cache(maxsize=16)
def _trained(seed: int, scale_key: str) -> tuple[TinyTransformer, float, list[float]]:
    """The trained model of one seed, its head-spectral diversity at ``early_step``, its loss curve."""
    scale = Scale(**json.loads(scale_key))
    x = scale.extra
    deterministic(seed)
    task = documents(x["vocab"])
    model = TinyTransformer(ModelConfig(vocab=task.vocab, d_model=scale.d_model, layers=scale.layers,
                                        heads=scale.heads, max_len=scale.seq_len, positional="rope"))
    ids, _ = _held_out(scale, seed)
    first = train(model, task.sample, x["early_step"], scale.batch, scale.seq_len, x["lr"], seed)
    early = _diversity(model.eval(), ids)
    rest = train(model.train(), task.sample, scale.steps - x["early_step"], scale.batch, scale.seq_len, x["lr"],
                 seed + 7919)  # fresh batches for the second part
    return model.eval(), early, first.losses + rest.losses


def _masked_loss(model: TinyTransformer, pruned: set[tuple[int, int]], ids, targets) -> float:
    layers = attention_layers(model)
    for layer, attn in enumerate(layers):
        attn.head_mask = torch.tensor([0.0 if (layer, h) in pruned else 1.0 for h in range(attn.heads)])
    loss = _loss(model, ids, targets)
    for attn in layers:
        attn.head_mask = torch.ones(attn.heads)
    return loss


def _tie_the_heads(model: TinyTransformer) -> None:
    """Give every head of a layer head 0's query and key weights (rows ``0..d_head-1``)."""
    for attn in attention_layers(model):
        with torch.no_grad():
            for w in (attn.w_q.weight, attn.w_k.weight):
                w.copy_(w[:attn.d_head].repeat(attn.heads, 1))


BREAK = {"tied-heads": _tie_the_heads}
ORDER_SEED = 20_000  # the random-order control's permutation: generator(seed + ORDER_SEED)


@functools.lru_cache(maxsize=32)
def _metrics(seed: int, scale_key: str, variant: str) -> dict[str, Any]:
    scale = Scale(**json.loads(scale_key))
    model, early, curve = _trained(seed, scale_key)
    if variant in BREAK:
        model = copy.deepcopy(model)
        BREAK[variant](model)
    ids, targets = _held_out(scale, seed)
    full = _loss(model, ids, targets)
    heads = [(layer, h) for layer, attn in enumerate(attention_layers(model)) for h in range(attn.heads)]
    importance = {head: _masked_loss(model, {head}, ids, targets) - full for head in heads}
    order = sorted(heads, key=importance.get)
    if variant == "random-order":
        order = [heads[i] for i in torch.randperm(len(heads), generator=generator(seed + ORDER_SEED)).tolist()]
    pruned_curve, prunable = [], 0
    for k in range(1, len(heads) + 1):
        pruned_curve.append(_masked_loss(model, set(order[:k]), ids, targets))
        if prunable == k - 1 and pruned_curve[-1] <= full * (1 + scale.extra["tolerance"]):
            prunable = k
    late = _diversity(model, ids)
    ranked = sorted(importance.values())
    return {
        "loss_full": full, "prunable_fraction": prunable / len(heads), "prunable_heads": prunable,
        "top_head_share": ranked[-1] / max(sum(max(v, 0.0) for v in ranked), 1e-12),
        "diversity_early": early, "diversity_late": late, "diversity_ratio": late / early,
        "curve:single-head ablation loss increase (sorted)": ranked,
        "curve:loss with the k least important heads pruned": pruned_curve,
        "curve:training loss": curve,
    }


class HeadExperiment(VariantExperiment):
    metrics = staticmethod(_metrics)


PRUNABLE = HeadExperiment(
    "heads-prunable-fraction", "spectral.heads-redundant-prunable",
    Prediction("prunable_fraction", ">=", 0.25,
               "In a 2-layer, 4-heads-per-layer character LM, at least a quarter of the 8 heads can be removed "
               "together (least important first, by single-head ablation) with at most 2% more held-out loss: "
               "over 5 seeds the prunable fraction is >= 0.25."))
SPECTRA_CONVERGE = HeadExperiment(
    "heads-spectra-converge-late-in-training", "spectral.heads-similar-spectra-late-training",
    Prediction("diversity_ratio", "<", 1.0,
               "Heads' attention spectra are more alike late in training than early: over 5 seeds, the documents' "
               "head_spectral_diversity (mean pairwise distance of singular values, spectral.txt line 387) at "
               "step 300 divided by that at step 30 is < 1 (mean over layers and held-out sequences)."))
EXPERIMENTS = (PRUNABLE, SPECTRA_CONVERGE)
