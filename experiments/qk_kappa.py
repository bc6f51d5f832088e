"""Does training concentrate the QK spectrum to a plateau near 1 (foundations.txt lines 797-816)?

foundations.txt draws kappa(W_QK) = lambda_1 / tr W_QK rising from about 0.2 through 0.4-0.8 to a plateau
near 1.0 over training, in two phases (a flat QK spectrum with dispersed attention, then quick
concentration with attention converging to hard selection). :class:`KappaPlateau` trains a one-layer,
single-head, post-LN :class:`experiments.models.TinyTransformer` with AdamW on the bigram-chain text task and
takes ``W_QK = W_Q^T W_K`` (the scores are ``x W_QK x^T / sqrt(d_head)``; ``d x d``) at :data:`CHECKPOINTS`
points of training: kappa by :func:`impl.spectral.spectral_concentration` (lambda_1 the eigenvalue of largest
real part; kappa is complex for a general W_QK, and its real part is the one compared with 1) and the mean
entropy of the attention rows on a fixed held-out batch. Effect: ``|Re kappa - 1|`` at the last step.

The control of the mechanism runs the same seeds, scale, steps and optimizer with every gradient replaced by
Gaussian noise of the same norm (per parameter tensor, each step, :func:`noise_like`): the weights move as far
as in training, but nothing about the task is learned. Two arms are recorded beside the decision (not decided): QK normalisation (q and k of each head layer-normalised
before the scores, as in recent models) and a wider head (d_model = d_head = 64).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from experiments.harness import Experiment, Prediction, Scale
from experiments.models import ModelConfig, TinyTransformer
from impl.multihead import merge_heads, split_heads
from experiments.tasks import generator, text
from impl.softmax import stable_softmax
from impl.spectral import spectral_concentration

TASK = text(vocab=32)
LR = 1e-3
BETAS = (0.9, 0.98)
CHECKPOINTS = 10
HELD_OUT_SEED = 10_000

SCALES = {
    "ci": Scale(layers=1, d_model=32, heads=1, steps=600, seeds=5, seq_len=16, batch=16),
}


def w_qk(attn: torch.nn.Module) -> torch.Tensor:
    """``W_Q^T W_K`` (d x d, float64): nn.Linear computes ``x W^T``, so the scores are ``x W_Q^T W_K x^T``."""
    return attn.w_q.weight.detach().double().T @ attn.w_k.weight.detach().double()


def kappa(attn: torch.nn.Module) -> complex:
    return complex(spectral_concentration(w_qk(attn)).item())


def _qk_norm_forward(attn: torch.nn.Module):
    """The attention's forward with q and k layer-normalised per head (no learned gain) before the scores."""
    def forward(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-2]
        q, k, v = (split_heads(w(x), attn.heads) for w in (attn.w_q, attn.w_k, attn.w_v))
        q, k = (torch.nn.functional.layer_norm(t, t.shape[-1:]) for t in (q, k))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(attn.d_head)
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        a = stable_softmax(s)
        if attn.keep_weights:
            attn.weights = a.detach()
        return attn.w_o(merge_heads(a @ v))
    return forward


def _row_entropy(model: TinyTransformer, ids: torch.Tensor) -> float:
    attn = model.blocks[0].attn
    attn.keep_weights = True
    with torch.no_grad():
        model(ids)
    attn.keep_weights = False
    a = attn.weights.clamp_min(1e-30)
    return float(-(a * a.log()).sum(-1).mean())


NOISE_SEED = 30_000  # the placebo gradients' generator: seed + NOISE_SEED


def noise_like(grad: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Gaussian noise of the shape and Frobenius norm of ``grad`` (the placebo gradient)."""
    z = torch.randn(grad.shape, generator=g, dtype=grad.dtype)
    return z * (grad.norm() / z.norm())


def kappa_trajectory(seed: int, scale: Scale, qk_norm: bool = False, d_model: int | None = None,
                     lr: float = LR, noise_gradients: bool = False) -> dict[str, Any]:
    """Train one model; kappa (real and imaginary parts) and the attention-row entropy at the checkpoints
    (``noise_gradients``: each gradient replaced by :func:`noise_like` before the step)."""
    torch.manual_seed(seed)
    width = d_model or scale.d_model
    model = TinyTransformer(ModelConfig(vocab=TASK.vocab, d_model=width, layers=scale.layers, heads=scale.heads,
                                        max_len=scale.seq_len, norm="post"))
    attn = model.blocks[0].attn
    if qk_norm:
        attn.forward = _qk_norm_forward(attn)
    held_out, _ = TASK.sample(generator(HELD_OUT_SEED), scale.batch, scale.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=BETAS, weight_decay=0.0)
    at = {round(i * scale.steps / CHECKPOINTS) for i in range(CHECKPOINTS + 1)}
    g, steps, re, im, entropy, losses = generator(seed), [], [], [], [], []
    noise = generator(seed + NOISE_SEED)
    for step in range(scale.steps + 1):
        if step in at:
            k = kappa(attn)
            steps.append(step), re.append(k.real), im.append(k.imag), entropy.append(_row_entropy(model, held_out))
        if step == scale.steps:
            break
        ids, targets = TASK.sample(g, scale.batch, scale.seq_len)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if noise_gradients:
            for p in model.parameters():
                p.grad = noise_like(p.grad, noise)
        opt.step()
        losses.append(float(loss.detach()))
    return {"steps": steps, "kappa_real": re, "kappa_imag": im, "entropy": entropy,
            "loss_last": float(sum(losses[-20:]) / 20)}


class KappaPlateau(Experiment):
    """At the end of training kappa(W_QK) is near 1."""

    name = "qk-kappa-plateau-near-one"
    claim_id = "spectral.qk-training-two-phase-empirical"
    prediction = Prediction(
        "kappa_distance_from_one", "<=", 0.2,
        "The end of the curve (a plateau near 1.0). A one-layer, single-head, post-LN causal Transformer (d_model = "
        "d_head = 32, learned positions, FFN) trained with AdamW (lr 1e-3, betas (0.9, 0.98)) for scale.steps steps "
        "on the bigram-chain text task (vocabulary 32) ends with its QK spectrum concentrated: kappa(W_QK) = "
        "lambda_1 / tr W_QK of W_QK = W_Q^T W_K (d x d, lambda_1 the eigenvalue of largest real part) has |Re kappa "
        "- 1| <= 0.2 at the last step; over the seeds the mean of |Re kappa - 1| <= 0.2, decided by its 95% t "
        "interval. Recorded beside it, not decided: kappa and the mean attention-row entropy at 10 checkpoints, and "
        "the same for a QK-norm arm and a d_head = 64 arm.")

    def __init__(self, gradients: str = "task"):
        self.gradients = gradients  # "noise": the control of the mechanism (same-norm Gaussian noise, nothing learned)
        if gradients != "task":  # a control is not the registered experiment: its artefacts carry its own name
            self.name = f"{KappaPlateau.name}-{gradients}-gradients"

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        plain = kappa_trajectory(seed, scale, noise_gradients=self.gradients == "noise")
        if self.gradients != "task":  # the control needs the plain arm only
            return {"kappa_distance_from_one": abs(plain["kappa_real"][-1] - 1.0),
                    "kappa_real_init": plain["kappa_real"][0], "kappa_real_last": plain["kappa_real"][-1],
                    "loss_last": plain["loss_last"],
                    "curve:Re kappa(W_QK) vs step, noise gradients": {"x": plain["steps"], "y": plain["kappa_real"]}}
        normed = kappa_trajectory(seed, scale, qk_norm=True)
        wide = kappa_trajectory(seed, scale, d_model=2 * scale.d_model)
        out = {"kappa_distance_from_one": abs(plain["kappa_real"][-1] - 1.0),
               "kappa_real_init": plain["kappa_real"][0], "kappa_real_last": plain["kappa_real"][-1],
               "kappa_imag_last": plain["kappa_imag"][-1], "entropy_init": plain["entropy"][0],
               "entropy_last": plain["entropy"][-1], "loss_last": plain["loss_last"],
               "kappa_real_last_qk_norm": normed["kappa_real"][-1], "kappa_real_last_d_head_64": wide["kappa_real"][-1]}
        for arm, t in (("", plain), (", QK-norm", normed), (", d_head = 64", wide)):
            out[f"curve:Re kappa(W_QK) vs step{arm}"] = {"x": t["steps"], "y": t["kappa_real"]}
        return out


EXPERIMENTS = (KappaPlateau(),)  # as registered
