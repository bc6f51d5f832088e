"""Are the dominant eigenvalues of a Transformer's NTK task-related (spectral.txt lines 258-260)?

spectral.txt section 5.3 says the typical NTK eigenvalue distribution has many near-zero eigenvalues, a few
dominant task-related ones and a transition region between. "Task-related" is decided here: the empirical
neural tangent kernel ``K_ij = <grad_theta f(x_i), grad_theta f(x_j)>`` of a small causal
:class:`experiments.models.TinyTransformer` at initialisation (scalar output ``f(x)``: the first logit at the
last position) on random token sequences, and a label that is a function of the sequence, ``y = (count of
token 0) - (count of token 1)``. The kernel's top eigenvectors are task-related when the centred labels put
more of their energy in them than the same labels shuffled across the inputs do: the share
``|U_5^T y_c|^2 / |y_c|^2`` of the top 5 eigenvectors against its mean over :data:`PERMUTATIONS` random
permutations. Effect: ``log10`` of that ratio per initialisation seed.

The control of the mechanism, at the same seeds and scale, removes the cause (labels that depend on the
inputs): its "true" labels are themselves a random permutation, unrelated to the sequences.
The spectrum itself (the other two clauses) is recorded: the share of eigenvalues below 1% of the largest,
and the share of the trace in the top 5.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from experiments.harness import Experiment, Prediction, Scale
from experiments.models import ModelConfig, TinyTransformer
from experiments.tasks import generator

VOCAB = 8
TOP = 5
PERMUTATIONS = 10
DATA_SEED = 20_000  # the sequences and labels: the same for every initialisation seed

SCALES = {
    "ci": Scale(layers=2, d_model=32, heads=4, steps=0, seeds=5, seq_len=16, batch=96),
}


def task(n: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random sequences over :data:`VOCAB` tokens and their labels ``count(0) - count(1)`` (float64)."""
    ids = torch.randint(0, VOCAB, (n, seq_len), generator=generator(DATA_SEED))
    return ids, ((ids == 0).sum(-1) - (ids == 1).sum(-1)).double()


def ntk_gram(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The empirical NTK ``J J^T`` (float64, (n, n)) of the scalar output, one gradient per input."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for x in ids:
        out = model(x[None])[0, -1, 0]
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(out, params)]).double())
    jac = torch.stack(rows)  # (n, P)
    return jac @ jac.T


def top_share(vectors: torch.Tensor, y: torch.Tensor) -> float:
    """``|U^T y_c|^2 / |y_c|^2`` for the orthonormal columns ``U`` and the centred ``y``."""
    yc = y - y.mean()
    return float((vectors.T @ yc).pow(2).sum() / yc.pow(2).sum())


def ntk_alignment(seed: int, scale: Scale, unrelated_labels: bool = False) -> dict[str, Any]:
    """The NTK of one initialisation: the top-5 share of the labels, its mean over permuted labels, the spectrum."""
    torch.manual_seed(seed)
    model = TinyTransformer(ModelConfig(vocab=VOCAB, d_model=scale.d_model, layers=scale.layers, heads=scale.heads,
                                        max_len=scale.seq_len, norm="pre"))
    ids, y = task(scale.batch, scale.seq_len)
    g = generator(seed)
    if unrelated_labels:  # the control: the labels no longer depend on the sequences
        y = y[torch.randperm(len(y), generator=g)]
    eigenvalues, vectors = torch.linalg.eigh(ntk_gram(model, ids))  # ascending
    eigenvalues, vectors = eigenvalues.flip(0), vectors.flip(1)
    top = vectors[:, :TOP]
    share = top_share(top, y)
    permuted = [top_share(top, y[torch.randperm(len(y), generator=g)]) for _ in range(PERMUTATIONS)]
    baseline = sum(permuted) / len(permuted)
    lam = eigenvalues.clamp_min(0.0)
    return {"top5_label_share": share, "top5_permuted_share": baseline,
            "log10_top5_label_share_over_permuted": math.log10(share / baseline),
            "eigenvalues_below_1pct_of_max": float((lam < 0.01 * lam[0]).double().mean()),
            "trace_share_top5": float(lam[:TOP].sum() / lam.sum()),
            "eigenvalue_2_over_1": float(lam[1] / lam[0]), "eigenvalue_6_over_1": float(lam[TOP] / lam[0])}


class TaskAlignedTop(Experiment):
    """The top eigenvectors of the NTK carry more of the task's labels than of shuffled ones."""

    name = "ntk-top-eigenvectors-task-aligned"
    claim_id = "spectral.ntk-eigenvalue-distribution"
    prediction = Prediction(
        "log10_top5_label_share_over_permuted", ">", 0.0,
        'The clause "a few dominant (task-related) eigenvalues". For a small causal Transformer at initialisation '
        "(scale.layers pre-LN layers, d_model, heads; scalar output f(x) = the first logit at the last position) on "
        "scale.batch random sequences of length seq_len over 8 tokens, labelled y = (count of token 0) - (count of "
        "token 1), the empirical NTK Gram matrix K_ij = <grad f(x_i), grad f(x_j)> has top eigenvectors aligned with "
        "the task: the share of the centred labels' energy in the top 5 eigenvectors is larger than for the same "
        "labels randomly permuted (mean over 10 permutations); over the seeds (initialisations), the mean of "
        "log10(share(y) / share(permuted y)) > 0, decided by its 95% t interval.")

    def __init__(self, unrelated_labels: bool = False):
        self.unrelated_labels = unrelated_labels  # True: the control of the mechanism
        if unrelated_labels:  # a control is not the registered experiment: its artefacts carry its own name
            self.name = f"{TaskAlignedTop.name}-unrelated-labels"

    def run_seed(self, seed: int, scale: Scale) -> dict[str, Any]:
        return ntk_alignment(seed, scale, self.unrelated_labels)


EXPERIMENTS = (TaskAlignedTop(),)  # as registered
