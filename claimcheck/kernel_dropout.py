"""Dropout on the attention weights, checked without knowing the kernel's random numbers.

A kernel that declares ``dropout`` takes ``Mask(dropout=(p, seed))``: each weight of softmax(S) is zeroed with
probability p and the others are divided by 1 - p. Nobody else can reproduce which weights a kernel drops. With
V = I (d_v = n_k), though, the output is the dropped weight matrix itself, ``out = P * M / (1 - p)``, so the mask M
can be read back from the kernel's own output: it is where the output is not 0. On that problem:

- ``reproducible``: the same seed gives the same output, bit for bit, call after call;
- ``seeded``: another seed drops other weights;
- ``keep-rate``: the number of kept weights over the N = B H n_q n_k drawn is Binomial(N, 1 - p)
  (two-sided exact test, rejected below :data:`ALPHA`);
- ``independent``: two (batch, head) slices agree on a weight with probability p^2 + (1 - p)^2, so each pair's
  agreements are binomial too; every pair is tested, at :data:`ALPHA` over the number of pairs (a mask shared
  across heads or across the batch, or two slices drawn from one stream, agree everywhere);
- ``values``: the kept weights are P / (1 - p) under the error-ratio rule, against the float64 P with the same M.

The problem's seeds are fixed, so the verdict is the same on every run.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from scipy.stats import binomtest

from impl.attention import Mask, attention, attention_weights

P_DROP = 0.25  # the dropout rate checked: far from 0 and 1/2, so that p and 1 - p give keep rates apart
SEEDS = (11, 12)  # the seed of the run, and the other seed the ``seeded`` check compares with
# a kept-count or agreement count with a two-sided p-value below this is rejected: about 5 standard deviations (a
# keep rate off by 0.03 on 6144 weights); a correct kernel is rejected with probability 1e-6 for a given seed
ALPHA = 1e-6
B, H_Q, N_Q = 2, 4, 24  # 8 (batch, head) slices of 24 queries; n_k = d is the head dim (32, or the declared one)


@dataclass
class DropoutCheck:
    """One of the checks above: its name, whether it held, and the figure it measured."""

    name: str
    ok: bool
    figure: str
    message: str = ""


def head_dim(backend) -> int | None:
    """n_k = d_k = d_v of the problem: 32, or the smallest declared head dim above it (None: none fits)."""
    lo, hi = backend.head_dims
    m = backend.head_dim_multiple
    d = -(-max(32, lo) // m) * m
    return d if d <= hi else None


def dropout_problem(backend) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 q, k and V = I: (B, H_q, 24, d), (B, H_kv, d, d) twice, H_kv = 2 under GQA, else 4."""
    d = head_dim(backend)
    h_kv = 2 if backend.gqa else H_Q
    gen = torch.Generator().manual_seed(2024)
    q = torch.randn((B, H_Q, N_Q, d), generator=gen, dtype=torch.float64)
    k = torch.randn((B, h_kv, d, d), generator=gen, dtype=torch.float64)
    v = torch.eye(d, dtype=torch.float64).expand(B, h_kv, d, d).contiguous()
    return q, k, v


def _binomial(count: int, trials: int, rate: float) -> float:
    return binomtest(count, trials, rate).pvalue


def check_dropout(backend, dtype: torch.dtype, device: str = "cpu") -> list[DropoutCheck]:
    """The five checks of the module docstring on ``backend`` in ``dtype``."""
    from claimcheck.kernel import C_OUT, within_reference_error

    q64, k64, v64 = dropout_problem(backend)
    q, k, v = (t.to(device, dtype) for t in (q64, k64, v64))
    p = P_DROP

    def run(seed: int) -> torch.Tensor:
        return backend.fn(q, k, v, None, Mask(dropout=(p, seed))).detach().to("cpu")

    out, again, other = run(SEEDS[0]), run(SEEDS[0]), run(SEEDS[1])
    checks = []
    same = torch.equal(out, again)
    checks.append(DropoutCheck("reproducible", same, "bitwise equal" if same else "outputs differ",
                               "" if same else "the same seed gave another output on the second call"))
    keep, keep_other = out != 0, other != 0
    moved = not torch.equal(keep, keep_other)
    checks.append(DropoutCheck("seeded", moved, f"{(keep != keep_other).float().mean().item():.3f} of the weights "
                               "change with the seed", "" if moved else "another seed dropped the same weights"))
    kept, trials = int(keep.sum()), keep.numel()
    pv = _binomial(kept, trials, 1 - p)
    checks.append(DropoutCheck("keep-rate", pv >= ALPHA, f"kept {kept / trials:.4f} of {trials} (expected {1 - p:g}, "
                               f"p-value {pv:.2g})", "" if pv >= ALPHA else
                               f"kept {kept / trials:.4f} of the weights, not 1 - p = {1 - p:g} (two-sided binomial "
                               f"p-value {pv:.2g} < {ALPHA:g})"))
    # every pair of (batch, head) slices, each its own binomial test, Bonferroni over the pairs: a mask shared across
    # the batch, or one whose stream is seeded by b + h, agrees on all of a pair that disjoint neighbours never compare
    heads = keep.shape[1]
    slices = keep.reshape(-1, keep.shape[-2] * keep.shape[-1])
    expected, width = p * p + (1 - p) ** 2, slices.shape[1]
    tests = [(_binomial(int((slices[i] == slices[j]).sum()), width, expected), i, j)
             for i in range(len(slices)) for j in range(i + 1, len(slices))]
    pv, i, j = min(tests)
    agree = (slices[i] == slices[j]).float().mean().item()
    ok = pv >= ALPHA / len(tests)
    where = f"(batch {i // heads}, head {i % heads}) and (batch {j // heads}, head {j % heads})"
    checks.append(DropoutCheck("independent", ok, f"the closest of {len(tests)} pairs of slices, {where}, agree on "
                               f"{agree:.4f} (expected {expected:g}, p-value {pv:.2g})", "" if ok else
                               f"slices {where} agree on {agree:.4f} of their weights, not p^2 + (1 - p)^2 = "
                               f"{expected:g} (p-value {pv:.2g} < {ALPHA:g} / {len(tests)} pairs): their masks are not "
                               "independent"))
    oracle = attention_weights(q64, k64) * keep / (1 - p)
    naive = attention(q, k, v).to("cpu") * keep.to(dtype) / (1 - p)  # P @ I in the dtype: the naive weights
    c = within_reference_error(out, oracle, naive, C_OUT, part="values", scale=1.0 / (1 - p))
    checks.append(DropoutCheck("values", c.ok, f"error {c.error:.3g}, ratio {c.ratio:.3g}",
                               "" if c.ok else f"kept weights are not P / (1 - p): {c.message}"))
    bad = ~torch.isfinite(out)
    if bad.any():
        checks.append(DropoutCheck("finite", False, f"{int(bad.sum())} non-finite", "the output is not finite"))
    return checks


def run_dropout_case(backend, case):
    """The dropout case of the matrix as a :class:`claimcheck.kernel.CaseResult`."""
    from claimcheck.kernel import CaseResult

    result = CaseResult(case)
    if head_dim(backend) is None:
        result.status, result.message = "declined", (f"no head dim of 32 or more fits the declared "
                                                     f"{backend.head_dims[0]}..{backend.head_dims[1]}")
        return result
    try:
        result.dropout = check_dropout(backend, case.dtype, case.device)
    except Exception as exc:  # noqa: BLE001  the kernel crashed: an error, not a wrong answer
        result.status, result.error, result.message = "error", exc, f"{type(exc).__name__}: {exc}"
        result.failed_checks.append("dropout:error")
        return result
    result.problems = 1
    bad = [c for c in result.dropout if not c.ok]
    if bad:
        result.status = "fail"
        result.failed_checks = [f"dropout:{c.name}" for c in bad]
        result.message = "; ".join(c.message for c in bad)
    return result


def summary(checks: list[DropoutCheck]) -> str:
    """One line of the figures, for ``claims kernel``."""
    return "; ".join(f"{c.name}: {c.figure}" for c in checks) if checks else "-"


__all__ = ["ALPHA", "P_DROP", "SEEDS", "DropoutCheck", "check_dropout", "dropout_problem", "run_dropout_case",
           "summary"]
