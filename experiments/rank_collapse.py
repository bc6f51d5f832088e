"""Rank collapse in deep attention-only stacks, with and without residual connections, and its gradients.

spectral.txt section 3.4 says rank collapse harms training by weakening the gradient signal (line 131).
On record (Dong et al. 2021; Noci et al. 2022), a stack of self-attention layers without skip
connections loses rank doubly exponentially with depth (every token tends to the same vector), and at
rank collapse the gradients of the queries and keys vanish; residual connections prevent both.

:class:`CollapseGradients` builds two attention-only stacks of ``scale.layers`` layers
(:class:`experiments.models.TinyTransformer` with ``ffn=False``; ``norm="none"`` is ``x_{l+1} = Attn(x_l)``,
``norm="residual"`` is ``x_{l+1} = x_l + Attn(x_l)``) from the same initialisation, and at initialisation
measures on one batch of the bigram-chain text task:

* the rank-collapse residual of each layer's output, ``||X - 1 mean(X)||_F / ||X||_F`` (0 = every token
  the same vector; Dong et al.'s ``res(X)`` relative to ``X``);
* the query/key gradient signal relative to the value gradient,
  ``sum_l (||dL/dW_Q^l|| + ||dL/dW_K^l||) / sum_l ||dL/dW_V^l||`` (relative, so that the overall shrinking
  of the signal without residuals does not count as "weakening").

Effect: ``log10`` of that ratio with residuals over without.

The control of the mechanism (``collapsed="decollapsed"``, the decision's seeds and scale) keeps the
no-residual stack and removes only its collapse: after each layer the token deviations ``X - 1 mean(X)`` of
the output are rescaled by a constant gain (no gradient through it) so that the output's collapse residual
equals the layer input's (:func:`decollapse`). Nothing else changes (no residual connection, the same
weights, batch and loss), so if the weakening is caused by the collapse, the effect falls below 0.5.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from experiments.harness import Experiment, Prediction, Scale
from experiments.models import ModelConfig, TinyTransformer
from experiments.tasks import generator, text

TASK = text(vocab=32)

SCALES = {
    "ci": Scale(layers=12, d_model=32, heads=4, steps=0, seeds=5, seq_len=16, batch=8),
    "small": Scale(layers=24, d_model=64, heads=4, steps=0, seeds=5, seq_len=32, batch=16),
    "medium": Scale(layers=48, d_model=128, heads=8, steps=0, seeds=5, seq_len=64, batch=32),
}


def collapse_residual(x: torch.Tensor) -> float:
    """``||X - 1 mean(X)||_F / ||X||_F`` averaged over the batch: x (B, n, d)."""
    centred = x - x.mean(dim=-2, keepdim=True)  # (B, n, d)
    return float((centred.flatten(1).norm(dim=-1) / x.flatten(1).norm(dim=-1)).mean())


def decollapse(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y (B, n, d)`` with its token deviations rescaled, per sequence, by a constant gain (detached) so that
    its collapse residual ``||Y - 1 mean(Y)||_F / ||Y||_F`` equals that of ``x``: with ``Y = M + C`` (the mean
    rows and the deviations, orthogonal), the gain ``s = r ||M|| / (||C|| sqrt(1 - r^2))`` for ``r = res(x)``."""
    def parts(t):
        mean = t.mean(dim=-2, keepdim=True).expand_as(t)
        return mean, t - mean
    (xm, xc), (ym, yc) = parts(x.detach()), parts(y)
    r = xc.flatten(1).norm(dim=-1) / x.detach().flatten(1).norm(dim=-1)  # (B,)
    gain = (r * ym.detach().flatten(1).norm(dim=-1)
            / (yc.detach().flatten(1).norm(dim=-1) * (1 - r**2).sqrt()))  # (B,)
    return ym + gain[:, None, None] * yc


def stack_measurements(seed: int, scale: Scale, wrap: str) -> dict[str, Any]:
    """Per-layer collapse residuals and projection-gradient norms of one attention-only stack at init
    (``wrap="decollapsed"``: the stack without residuals, each layer's output passed through :func:`decollapse`)."""
    torch.manual_seed(seed)
    net = TinyTransformer(ModelConfig(vocab=TASK.vocab, d_model=scale.d_model, layers=scale.layers,
                                      heads=scale.heads, max_len=scale.seq_len,
                                      norm="none" if wrap == "decollapsed" else wrap, ffn=False))
    ids, targets = TASK.sample(generator(seed), scale.batch, scale.seq_len)
    if wrap == "decollapsed":
        states = net.hidden(ids)[:1]  # the embedding (+ positions)
        for block in net.blocks:
            states.append(decollapse(block(states[-1]), states[-1]))
    else:
        states = net.hidden(ids)
    logits = net.head(net.final(states[-1]))
    torch.nn.functional.cross_entropy(logits.reshape(-1, TASK.vocab), targets.reshape(-1)).backward()
    grad = {w: [float(getattr(b.attn, w).weight.grad.norm()) for b in net.blocks] for w in ("w_q", "w_k", "w_v")}
    return {"residuals": [collapse_residual(s.detach()) for s in states[1:]],
            "qk": [q + k for q, k in zip(grad["w_q"], grad["w_k"])], "v": grad["w_v"]}


class CollapseGradients(Experiment):
    """Without residuals the stack collapses and its query/key gradients weaken relative to the values'."""

    name = "rank-collapse-qk-gradients"
    claim_id = "spectral.rank-collapse-training-consequences"
    prediction = Prediction(
        "log10_qk_ratio", ">=", 0.5,
        "At initialisation of a deep attention-only stack (scale.layers layers), the query/key gradient norm "
        "relative to the value gradient norm, sum_l(|dW_Q|+|dW_K|)/sum_l |dW_V|, is at least 10^0.5 ~ 3.2x "
        "smaller without residual connections (rank-collapsed) than with them: the whole 95% bootstrap "
        "interval of the mean log10 ratio (residual / no residual) is >= 0.5.")

    def __init__(self, collapsed: str = "none"):
        self.collapsed = collapsed  # "decollapsed": the control of the mechanism (no residual, no collapse)
        if collapsed != "none":  # a control is not the registered experiment: its artefacts carry its own name
            self.name = f"{CollapseGradients.name}-{collapsed}"

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        res, bare = stack_measurements(seed, scale, "residual"), stack_measurements(seed, scale, self.collapsed)
        ratio_res, ratio_bare = sum(res["qk"]) / sum(res["v"]), sum(bare["qk"]) / sum(bare["v"])
        return {"qk_over_v_residual": ratio_res, "qk_over_v_no_residual": ratio_bare,
                "log10_qk_ratio": math.log10(ratio_res / ratio_bare),
                "collapse_residual_out_residual": res["residuals"][-1],
                "collapse_residual_out_no_residual": bare["residuals"][-1],
                "curve:collapse residual vs layer, with residuals": res["residuals"],
                "curve:collapse residual vs layer, without residuals": bare["residuals"],
                "curve:query+key gradient norm vs layer, with residuals": res["qk"],
                "curve:query+key gradient norm vs layer, without residuals": bare["qk"]}


EXPERIMENTS = (CollapseGradients(),)  # as registered
