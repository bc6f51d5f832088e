"""Sharpness late in training: does a small Transformer LM drift to flatter regions (spectral.txt line 440)?

Section 9.2 of spectral.txt defines a sharp minimum by a large top Hessian eigenvalue and a flat one by a
small one (lines 434-436), and says Transformers tend to sharp minima but drift to flat regions late in
training (lines 440-441). On record, under (full-batch) gradient descent the top eigenvalue rises during
training until about 2/lr and then hovers there (progressive sharpening, Cohen et al. 2021), and Adam's
preconditioned sharpness settles at its own threshold (Cohen et al. 2022): the opposite of a late drift.

:class:`LateDrift` trains a pre-LN :class:`experiments.models.TinyTransformer` with AdamW on the bigram-chain
text task and measures the top eigenvalue of the training loss's Hessian on one fixed held-out batch at the
middle step and at the last one, by power iteration on Hessian-vector products (double backward, every
parameter, :data:`POWER_ITERATIONS` steps from a seeded random start). Effect: ``log10(lambda_max(last) /
lambda_max(middle))`` per seed, negative for a drift to flatness.

The control of the mechanism runs the same seeds and scale with the cause removed: in the second half of
training every gradient is replaced by Gaussian noise of the same norm (per parameter tensor, each step,
:func:`experiments.qk_kappa.noise_like`), so the optimizer takes steps of the same size and the weights move
as far, but the loss no longer steers them: whatever the late drift of lambda_max is, descent on the loss
causes it only if it does not survive this.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from experiments.harness import Experiment, Prediction, Scale
from experiments.models import ModelConfig, TinyTransformer
from experiments.qk_kappa import NOISE_SEED, noise_like
from experiments.tasks import generator, text

TASK = text(vocab=32)
LR = 1e-3
BETAS = (0.9, 0.98)
POWER_ITERATIONS = 30
HELD_OUT_SEED = 10_000  # the batch the Hessian is taken on: the same for every seed, never trained on

SCALES = {
    "ci": Scale(layers=2, d_model=32, heads=4, steps=300, seeds=5, seq_len=16, batch=8),
}


def _loss(model: torch.nn.Module, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def top_hessian_eigenvalue(model: torch.nn.Module, ids: torch.Tensor, targets: torch.Tensor, seed: int,
                           iterations: int = POWER_ITERATIONS) -> float:
    """The Rayleigh quotient ``v^T H v`` after ``iterations`` steps of power iteration ``v <- H v / |H v|`` on the
    Hessian ``H`` of the loss on ``(ids, targets)`` in every parameter (the eigenvalue of largest modulus)."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(_loss(model, ids, targets), params, create_graph=True)
    g = torch.Generator().manual_seed(seed)
    v = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]
    norm = math.sqrt(sum(float((x * x).sum()) for x in v))
    v = [x / norm for x in v]
    quotient = math.nan
    for _ in range(iterations):
        hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
        quotient = sum(float((h * x).sum()) for h, x in zip(hv, v))
        norm = math.sqrt(sum(float((h * h).sum()) for h in hv))
        v = [h.detach() / norm for h in hv]
    return quotient


def sharpness_trajectory(seed: int, scale: Scale, late_noise: bool = False) -> dict[str, Any]:
    """Train ``scale.steps`` steps (``late_noise``: the second half's gradients replaced by same-norm Gaussian
    noise); the top Hessian eigenvalue on the held-out batch at the middle step and at the last, and the
    training loss."""
    torch.manual_seed(seed)
    model = TinyTransformer(ModelConfig(vocab=TASK.vocab, d_model=scale.d_model, layers=scale.layers,
                                        heads=scale.heads, max_len=scale.seq_len, norm="pre"))
    held_out = TASK.sample(generator(HELD_OUT_SEED), scale.batch, scale.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=0.0)
    g, middle, losses, sharpness = generator(seed), scale.steps // 2, [], {}
    noise = generator(seed + NOISE_SEED)
    for step in range(scale.steps):
        if step == middle:
            sharpness["middle"] = top_hessian_eigenvalue(model, *held_out, seed=seed)
        ids, targets = TASK.sample(g, scale.batch, scale.seq_len)
        loss = _loss(model, ids, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if late_noise and step >= middle:
            for p in model.parameters():
                p.grad = noise_like(p.grad, noise)
        opt.step()
        losses.append(float(loss.detach()))
    sharpness["last"] = top_hessian_eigenvalue(model, *held_out, seed=seed + 1)  # another start: the noise shows
    return {"sharpness_middle": sharpness["middle"], "sharpness_last": sharpness["last"],
            "loss_middle": float(sum(losses[middle - 10:middle]) / 10), "loss_last": float(sum(losses[-10:]) / 10)}


class LateDrift(Experiment):
    """Late in training the top Hessian eigenvalue falls (a drift to flatter regions)."""

    name = "sharpness-late-drift"
    claim_id = "spectral.transformers-sharp-then-drift-flat"
    prediction = Prediction(
        "log10_sharpness_late_over_mid", "<", 0.0,
        "Section 9.2's definitions (sharp = a large top Hessian eigenvalue). A small causal Transformer LM "
        "(scale.layers pre-LN layers, d_model, heads; the bigram-chain text task, vocabulary 32) trained with AdamW "
        "(lr 1e-3, betas (0.9, 0.98), no decay, no warm-up) for scale.steps steps drifts to flatter regions late in "
        "training: the top eigenvalue of the training-loss Hessian on one fixed held-out batch (power iteration on "
        "Hessian-vector products, 30 iterations) is smaller at the last step than at the middle one; over the "
        "seeds, the mean of log10(lambda_max(last) / lambda_max(middle)) < 0, decided by its 95% t interval (4 "
        "degrees of freedom at 5 seeds). The record (progressive sharpening) predicts the opposite sign.")

    def __init__(self, late_gradients: str = "task"):
        self.late_gradients = late_gradients  # "noise": the control of the mechanism (no descent in the second half)
        if late_gradients != "task":  # a control is not the registered experiment: its artefacts carry its own name
            self.name = f"{LateDrift.name}-late-{late_gradients}-gradients"

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        m = sharpness_trajectory(seed, scale, self.late_gradients == "noise")
        ratio = m["sharpness_last"] / m["sharpness_middle"]
        return {**m, "log10_sharpness_late_over_mid": math.log10(ratio) if ratio > 0 else math.nan}


EXPERIMENTS = (LateDrift(),)  # as registered
