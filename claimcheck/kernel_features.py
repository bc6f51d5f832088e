"""The features of fused kernels that change the call, each a declared capability with its own float64
reference, fixed and drawn problems and checks (the cases ``lse``, ``varlen`` and ``kvcache`` of
:mod:`claimcheck.kernel`'s matrix, run only when a kernel declares them):

``lse``
    ``fn(q, k, v, scale, mask, return_lse=True) -> (out, lse)``, ``lse (B, H_q, n_q)`` the natural
    log-sum-exp of each row of scaled, masked scores (flash-attn's ``softmax_lse``, FlexAttention's
    ``return_lse``). Judged by the error-ratio rule against ``torch.logsumexp`` of the float64 scores; a
    row with no allowed key gives ``-inf`` (log 0) unless the kernel declares ``lse_fully_masked``
    ``inf`` (flash-attn's) or ``any``; with backward, the loss ``sum(out * dO) + sum(lse * dL)`` checks
    the gradient that reaches q and k through the log-sum-exp too (``dS += P dL``).
``varlen``
    ``fn(q, k, v, scale, mask, cu_seqlens_q=, cu_seqlens_k=, max_seqlen_q=, max_seqlen_k=)`` with packed
    ``q (total_q, H_q, d_k)``, ``k (total_k, H_kv, d_k)``, ``v (total_k, H_kv, d_v)`` and int32 cumulative
    lengths ``(n_seq + 1,)`` starting at 0 (flash-attn's ``flash_attn_varlen_func``) -> ``(total_q, H_q,
    d_v)``: attention within each sequence, a causal mask aligned per sequence. Reference:
    :func:`varlen_attention` (unpack, attend per sequence, pack). Every fixed problem has a sequence of length 0.
``kvcache``
    ``fn(q, k_cache, v_cache, scale, mask, cache_seqlens=)`` with ``q (B, H_q, n_q, d_k)`` (the new
    queries), ``k_cache (B, H_kv, L, d_k)``, ``v_cache (B, H_kv, L, d_v)`` and int32 ``cache_seqlens (B,)``:
    query i of sequence b attends to the cache entries ``j < cache_seqlens[b]`` (the new queries' own keys
    are the last n_q of them), and under ``Mask(causal="bottom-right")`` to ``j <= i + cache_seqlens[b] - n_q``
    (flash-attn's ``flash_attn_with_kvcache``). The entries past ``cache_seqlens`` hold other finite values
    (a stale cache), which a kernel must never read. Reference: :func:`kvcache_attention`. Forward only
    (decode kernels have no backward).

Each case sees a few fixed problems and ``max(1, examples // 3)`` drawn ones (:data:`DRAWN_SHARE`), so that
the default tier stays within its time for one kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from claimcheck import kernel as K
from impl.attention import ALIGNMENTS, Mask, attention, attention_weights, default_scale, repeat_kv

FEATURES = ("lse", "varlen", "kvcache")
DRAWN_SHARE = 3  # a feature case draws examples // 3 problems (at least 1): its fixed problems carry most of it
LSE_JOINS = ("window", "alibi", "softcap", "sink")  # the features an lse problem of their own comes with, when declared
LSE_FULLY_MASKED = ("-inf", "inf", "any")  # what a row with no allowed key may give as its log-sum-exp
STALE = 3.0  # the size of the stale values past cache_seqlens: O(1) scores, so a kernel reading them is off by O(1)


@dataclass(frozen=True)
class Plan:
    """What one feature case runs: its fixed problems, the strategy of its drawn ones, and the check of one."""

    fixed: list
    strategy: Any
    check: Callable[[Any], list]
    examples: int


def plan(backend, case, tier: str, examples: int) -> Plan:
    """The plan of ``case`` (a feature case) for ``backend``: its fixed problems are the same in every ``tier``
    (a few small ones, so that the default tier keeps its time); ``examples // 3`` drawn ones."""
    backward = backend.devices[case.device].backward
    drawn = max(1, examples // DRAWN_SHARE) if examples > 0 else 0
    if case.mask == "lse":
        return Plan(lse_problems(backend, case.device), lse_strategy(backend, case.device),
                    lambda p: check_lse(backend, case, p, backward), drawn)
    if case.mask == "varlen":
        return Plan(packed_problems(backend, case.device), packed_strategy(backend, case.device),
                    lambda p: check_varlen(backend, case, p, backward), drawn)
    if case.mask == "kvcache":
        return Plan(cache_problems(backend, case.device), cache_strategy(backend, case.device),
                    lambda p: check_kvcache(backend, case, p), drawn)
    raise ValueError(f"unknown feature {case.mask!r}; expected one of {', '.join(FEATURES)}")


# ---- shared -----------------------------------------------------------------------------------------


def _masks(backend, device: str) -> frozenset:
    return (backend.devices.get(device) or next(iter(backend.devices.values()))).masks


def _alignments(backend, device: str) -> tuple[str, ...]:
    masks = _masks(backend, device)
    return tuple(a for a in ALIGNMENTS if f"causal-{a}" in masks)


def _dims(backend) -> tuple[int, int]:
    """``(d_k, d_v)`` of the fixed problems: 16 (or the smallest declared), d_v = d_k + 8 unless it must equal d_k."""
    lo, hi = backend.head_dims
    d = min(K._round_up(max(16, lo), backend.head_dim_multiple), hi)
    d_v = d + K._round_up(8, backend.head_dim_multiple)
    return d, d if backend.equal_head_dims or d_v > hi else d_v


def _heads(backend, h_q: int, h_kv: int) -> tuple[int, int]:
    return (h_q, h_kv) if backend.gqa else (h_q, h_q)


def _seed(label: str) -> int:
    return 5000 + sum(map(ord, label))  # one seed per fixed problem, the same in every tier and process


def _call(fn: Callable, q, k, v, scale, mask, d_out, backward: bool, **feature) -> tuple[torch.Tensor, ...]:
    """``(out,)`` or ``(out, dq, dk, dv)`` of ``fn`` called with the feature's keyword arguments."""
    if not backward:
        with torch.no_grad():
            return (fn(q, k, v, scale, mask, **feature),)
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, scale, mask, **feature)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the kernel returned a {type(out).__name__}, not the output tensor")
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), (q, k, v)))


def _judge(part: str, actual, oracle: torch.Tensor, naive: torch.Tensor, c: float, scale: float,
           extra_floor: float = 0.0, dtype: torch.dtype | None = None) -> K.Check:
    """The error-ratio rule for one part, after its shape (and, given ``dtype``, its dtype)."""
    if not isinstance(actual, torch.Tensor) or actual.shape != oracle.shape or (dtype is not None
                                                                                and actual.dtype != dtype):
        got = f"{tuple(actual.shape)} {K.dtype_name(actual.dtype)}" if isinstance(actual, torch.Tensor) else \
            type(actual).__name__
        return K.Check(part, math.inf, 0.0, 0.0, c, math.inf, False, f"{part}: wrong shape or dtype: got {got}, "
                       f"expected {tuple(oracle.shape)}" + (f" {K.dtype_name(dtype)}" if dtype is not None else ""))
    if not actual.dtype.is_floating_point:
        return K.Check(part, math.inf, 0.0, 0.0, c, math.inf, False, f"{part}: not a float tensor ({actual.dtype})")
    return K.within_reference_error(actual, oracle, naive, c, part, floor_ulps=K.FLOOR_ULPS, scale=scale,
                                    extra_floor=extra_floor)


def _grad_parts(actual, oracle, naive, terms: dict[str, float], dtype, start: int = 1) -> list[K.Check]:
    return [_judge(part, a, o, n, K.C_GRAD, terms[part], K.recompute_floor(terms, part), dtype)
            for part, a, o, n in zip(("dq", "dk", "dv"), actual[start:], oracle[start:], naive[start:])]


def _max_terms(parts: list[dict[str, float]]) -> dict[str, float]:
    return {key: max((p[key] for p in parts), default=0.0) for key in ("out", "dq", "dk", "dv", "logits")}


# ---- lse --------------------------------------------------------------------------------------------


def lse_problems(backend, device: str = "cpu") -> list[K.AttentionProblem]:
    """``lse-gqa-4/2`` (4 over 2 heads, 9 x 20), ``lse-large-logits`` (the largest score 110: L past exp's
    float32 overflow), ``lse-causal-A`` for each declared alignment, ``lse-F`` for each declared feature F of
    :data:`LSE_JOINS` (the sink's logit is one of L's terms), and, forward only, rows with no allowed key:
    ``lse-fully-masked`` from key padding that hides every key of the second sequence and
    ``lse-fully-masked-causal`` from bottom-right causal with 9 queries over 5 keys (its first 4 rows see nothing;
    named ``lse-fully-masked`` when no key padding is declared)."""
    d, d_v = _dims(backend)
    masks = _masks(backend, device)
    specs = [("lse-gqa-4/2", K.ProblemSpec("none", 1, *_heads(backend, 4, 2), 9, 20, d, d_v)),
             ("lse-large-logits", K.ProblemSpec("none", 1, *_heads(backend, 2, 1), 19, 19, d, d,
                                                max_logit=K.LARGE_LOGIT))]
    specs += [(f"lse-causal-{a}", K.ProblemSpec(f"causal-{a}", 1, *_heads(backend, 4, 2), 9, 20, d, d_v))
              for a in _alignments(backend, device)]
    # the log-sum-exp under each declared feature: a sink is one of its terms, a softcap, ALiBi and a window change the
    # others
    specs += [(f"lse-{kind}", K.ProblemSpec(kind, 1, *_heads(backend, 4, 2), 9, 20, d, d_v))
              for kind in LSE_JOINS if kind in masks]
    problems = [K.make_problem(replace(spec, seed=_seed(label)), label) for label, spec in specs]
    if "key-padding" in masks:
        p = K.make_problem(K.ProblemSpec("key-padding", 2, *_heads(backend, 2, 1), 7, 11, d, d_v,
                                         seed=_seed("lse-fully-masked")), "lse-fully-masked")
        keep = p.mask.key_padding.clone()
        keep[1] = False
        problems.append(replace(p, mask=replace(p.mask, key_padding=keep), spec=None))
    if "causal-bottom-right" in masks:  # rows hidden by the alignment: a kernel must place L's rows by it too
        label = "lse-fully-masked-causal" if "key-padding" in masks else "lse-fully-masked"
        problems.append(K.make_problem(K.ProblemSpec("causal-bottom-right", 1, *_heads(backend, 2, 1), 9, 5, d, d_v,
                                                     seed=_seed("lse-fully-masked")), label))
    return problems


def lse_strategy(backend, device: str = "cpu"):
    """Drawn problems under the declared masks that never hide a whole row (none, causal, key padding)."""
    kinds = tuple(m for m in ("none", "causal-top-left", "causal-bottom-right", "key-padding")
                  if m == "none" or m in _masks(backend, device))
    lo, hi = backend.head_dims
    m = backend.head_dim_multiple
    return K.attention_problems(mask_kinds=kinds, gqa=backend.gqa, min_d=max(1, lo), max_d=min(max(16, lo) + 8, hi),
                                same_dv=backend.equal_head_dims, max_batch=2, max_heads=4, max_n=24, d_multiple=m,
                                scales=(None, K.SCALE) if backend.scale else (None,))


def _pair(got) -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise TypeError(f"a kernel declaring lse returns (out, lse) when called with return_lse=True: got "
                        f"{type(got).__name__}" + (f" of {len(got)}" if isinstance(got, (tuple, list)) else ""))
    return got[0], got[1]


def _lse_call(fn: Callable, q, k, v, scale, mask, d_out, d_lse, backward: bool) -> tuple[torch.Tensor, ...]:
    """``(out, lse)`` or ``(out, lse, dq, dk, dv)`` for the loss ``sum(out * dO) + sum(lse * dL)``."""
    if not backward:
        with torch.no_grad():
            return _pair(fn(q, k, v, scale, mask, return_lse=True))
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out, lse = _pair(fn(q, k, v, scale, mask, return_lse=True))
    loss = (out * d_out).sum() + (lse * d_lse.to(lse.dtype)).sum()
    return (out.detach(), lse.detach(), *torch.autograd.grad(loss, (q, k, v)))


def lse_term_scales(q, k, v, mask: Mask, d_out, d_lse, scale: float | None) -> dict[str, float]:
    """:func:`claimcheck.kernel.attention_term_scales`, with the terms the log-sum-exp's gradient adds:
    ``dS += P dL``, so dQ gains ``s (P |dL|) |K|`` and dK ``s (P |dL|)^T |Q|`` (float64)."""
    terms = K.attention_term_scales(q, k, v, mask, d_out, scale)
    s = default_scale(q.shape[-1]) if scale is None else scale
    group = q.shape[-3] // k.shape[-3]
    t = attention_weights(q, k, s, mask).nan_to_num() * d_lse.abs()[..., None]  # (B, H_q, n_q, n_k)
    terms["dq"] += s * (t @ repeat_kv(k, group).abs()).max().item()
    terms["dk"] += s * (t.transpose(-2, -1) @ q.abs()).unflatten(-3, (k.shape[-3], group)).sum(-3).max().item()
    return terms


def check_lse(backend, case, problem: K.AttentionProblem, backward: bool) -> list[K.Check]:
    """The output and the log-sum-exp (and, with ``backward``, dQ, dK, dV through both) of one problem; rows
    with no allowed key are judged by ``backend.lse_fully_masked`` (and make the problem forward only)."""
    dtype, device = case.dtype, case.device
    q, k, v, mask = problem.cast(dtype, device)
    q64, k64, v64, mask64 = q.double(), k.double(), v.double(), K.mask_to(mask, device, torch.float64)
    gen = torch.Generator().manual_seed(problem.seed + 1)
    d_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=gen, dtype=torch.float64).to(device, dtype)
    d_lse = torch.randn(q.shape[:-1], generator=gen, dtype=torch.float64).to(device, dtype)
    s = problem.scale
    with torch.no_grad():
        hidden = ~torch.isfinite(attention(q64, k64, v64, s, mask64, return_lse=True)[1])  # rows with no key
    backward = backward and not hidden.any()  # log 0 has no gradient
    oracle = _lse_call(attention, q64, k64, v64, s, mask64, d_out.double(), d_lse.double(), backward)
    naive = _lse_call(attention, q, k, v, s, mask, d_out, d_lse, backward)
    actual = _lse_call(backend.fn, q, k, v, s, mask, d_out, d_lse, backward)
    terms = lse_term_scales(q64, k64, v64, mask64, d_out.double(), d_lse.double(), s)
    seen = ~hidden
    checks = [_judge("out", *(x[seen] if x.shape == hidden.shape + x.shape[-1:] else x
                              for x in (actual[0], oracle[0], naive[0])), K.C_OUT, terms["out"],
                     K.recompute_floor(terms, "out"), dtype)]
    lse = actual[1]
    if not isinstance(lse, torch.Tensor) or lse.shape != hidden.shape:
        checks.append(_judge("lse", lse, oracle[1], naive[1], K.C_OUT, terms["logits"]))
    else:
        # floor: 2 ulps of max |S| + max |L|, the size of the terms L is summed from (rounding S costs eps |S|)
        checks.append(_judge("lse", lse[seen], oracle[1][seen], naive[1][seen], K.C_OUT, terms["logits"]))
        declared = backend.lse_fully_masked
        if hidden.any() and declared != "any":
            want = -math.inf if declared == "-inf" else math.inf
            got = lse[hidden].double()
            if not bool((got == want).all()):
                values = ", ".join(f"{x:g}" for x in got.unique()[:3].tolist())
                checks.append(K.Check("lse-fully-masked", math.inf, 0.0, 0.0, 0.0, math.inf, False,
                                      f"lse-fully-masked: rows with no allowed key give {values}, declared {declared}"))
    if backward:
        checks += _grad_parts(actual[1:], oracle[1:], naive[1:], terms, dtype)
    return checks


# ---- varlen -----------------------------------------------------------------------------------------


@dataclass
class PackedProblem:
    """Packed sequences in float64: q (total_q, H_q, d_k), k (total_k, H_kv, d_k), v (total_k, H_kv, d_v),
    ``lengths`` ((n_q, n_k) per sequence), a causal alignment (per sequence) or None, the softmax scale."""

    q: torch.Tensor = field(repr=False)
    k: torch.Tensor = field(repr=False)
    v: torch.Tensor = field(repr=False)
    lengths: tuple[tuple[int, int], ...]
    causal: str | None
    scale: float | None
    seed: int
    label: str = "drawn"
    spec: None = None  # no --problem syntax: the repro re-runs the case (its problems are seeded)
    shape: str = ""

    def __post_init__(self) -> None:
        self.shape = (f"lengths (n_q, n_k) {list(self.lengths)} H_q={self.q.shape[1]} H_kv={self.k.shape[1]} "
                      f"d_k={self.q.shape[-1]} d_v={self.v.shape[-1]} causal={self.causal} scale={self.scale}")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def cu_seqlens(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """int32 ``(n_seq + 1,)`` cumulative lengths of the queries and of the keys, from 0."""
        return tuple(torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device=device)
                     for n in zip(*self.lengths))


def make_packed(lengths, h_q: int, h_kv: int, d_k: int, d_v: int, seed: int, causal: str | None = None,
                scale: float | None = None, label: str = "drawn") -> PackedProblem:
    gen = torch.Generator().manual_seed(seed)
    total_q, total_k = (sum(n) for n in zip(*lengths))
    q = torch.randn((total_q, h_q, d_k), generator=gen, dtype=torch.float64)
    k = torch.randn((total_k, h_kv, d_k), generator=gen, dtype=torch.float64)
    v = torch.randn((total_k, h_kv, d_v), generator=gen, dtype=torch.float64)
    return PackedProblem(q, k, v, tuple(map(tuple, lengths)), causal, scale, seed, label)


def varlen_attention(q, k, v, scale=None, mask=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                     max_seqlen_k=None):
    """Attention within each packed sequence: sequence i is rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]`` of
    ``q (total_q, H_q, d_k)`` against rows ``cu_seqlens_k[i]:cu_seqlens_k[i + 1]`` of ``k``, ``v``; ``mask``
    (a causal alignment only) applies per sequence -> ``(total_q, H_q, d_v)``. The reference: unpack, run
    :func:`impl.attention.attention` per sequence, pack (``max_seqlen_*`` are hints it does not need)."""
    if cu_seqlens_q is None or cu_seqlens_k is None or len(cu_seqlens_q) != len(cu_seqlens_k):
        raise ValueError("varlen attention needs cu_seqlens_q and cu_seqlens_k of one length (n_seq + 1,)")
    if mask is not None and mask.features - {"causal-top-left", "causal-bottom-right"}:
        raise ValueError(f"varlen attention takes a causal mask only, not {sorted(mask.features)}")
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs = [attention(q[a:b].transpose(0, 1), k[c:d].transpose(0, 1), v[c:d].transpose(0, 1), scale,
                      mask).transpose(0, 1)  # (H, n, d) per sequence -> (n, H, d)
            for a, b, c, d in zip(cq, cq[1:], ck, ck[1:]) if b > a]
    return torch.cat(outs, 0) if outs else q.new_zeros((0, q.shape[1], v.shape[-1]))


def packed_problems(backend, device: str = "cpu") -> list[PackedProblem]:
    """``varlen-4/2`` (4 over 2 heads, self-attention lengths 7, 0, 19, 1), ``varlen-cross`` (n_q != n_k
    both ways: (3, 20), (0, 0), (11, 5), (9, 9), (3, 130): the last has more keys than a 64-wide tile while every
    sequence has fewer queries, so a key loop sized by the queries misses them) and ``varlen+A`` for each declared causal alignment
    (lengths (3, 20), (0, 0), (9, 9), (70, 71): a sequence across a 64-wide tile). Each has a sequence of length 0."""
    d, d_v = _dims(backend)
    shapes = [("varlen-4/2", ((7, 7), (0, 0), (19, 19), (1, 1)), (4, 2), None),
              ("varlen-cross", ((3, 20), (0, 0), (11, 5), (9, 9), (3, 130)), (2, 1), None)]
    shapes += [(f"varlen+{a}", ((3, 20), (0, 0), (9, 9), (70, 71)), (2, 1), a) for a in _alignments(backend, device)]
    return [make_packed(lengths, *_heads(backend, *heads), d, d_v, _seed(label), causal, label=label)
            for label, lengths, heads, causal in shapes]


def _draw_heads_dims_scale(draw, backend) -> tuple[int, int, int, int, float | None]:
    """``(H_q, H_kv, d_k, d_v, scale)`` of a drawn feature problem, within what ``backend`` declares: GQA groups
    1, 2 or 4 when it takes GQA, head dims in its range and alignment, the caller's scale 0.3 when it takes one."""
    group = draw(st.sampled_from((1, 2, 4) if backend.gqa else (1,)), label="group")
    h_kv = draw(st.integers(1, max(1, 4 // group)), label="H_kv")
    lo, hi = backend.head_dims
    m = backend.head_dim_multiple
    dims = st.integers(K._round_up(max(1, lo), m) // m, max(min(max(16, lo) + 8, hi) // m, 1)).map(lambda x: x * m)
    d_k = draw(dims, label="d_k")
    d_v = d_k if backend.equal_head_dims else draw(dims, label="d_v")
    scale = draw(st.sampled_from((None, K.SCALE) if backend.scale else (None,)), label="scale")
    return h_kv * group, h_kv, d_k, d_v, scale


@st.composite
def _packed(draw, backend, alignments: tuple[str, ...]):
    causal = draw(st.sampled_from((None, *alignments)), label="causal")
    count = draw(st.integers(1, 4), label="sequences")
    lengths = []
    for _ in range(count):
        n_q = draw(st.integers(0, 24), label="n_q")
        # a query with no key has no softmax; bottom-right causal hides rows unless n_k >= n_q
        n_k = 0 if n_q == 0 else draw(st.integers(n_q if causal == "bottom-right" else 1, 24), label="n_k")
        lengths.append((n_q, n_k))
    if not any(n_q for n_q, _ in lengths):
        lengths[0] = (1, 1)
    h_q, h_kv, d_k, d_v, scale = _draw_heads_dims_scale(draw, backend)
    return make_packed(lengths, h_q, h_kv, d_k, d_v, draw(st.integers(0, 2**31 - 1), label="seed"), causal,
                       scale)


def packed_strategy(backend, device: str = "cpu"):
    """1 to 4 sequences of 0 to 24 queries and keys (no causal mask or a declared alignment), GQA, the scale 0.3."""
    return _packed(backend, _alignments(backend, device))


def check_varlen(backend, case, problem: PackedProblem, backward: bool) -> list[K.Check]:
    dtype, device = case.dtype, case.device
    q, k, v = (t.to(device, dtype) for t in (problem.q, problem.k, problem.v))
    cu_q, cu_k = problem.cu_seqlens(device)
    feature = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(n for n, _ in problem.lengths),
                   max_seqlen_k=max(n for _, n in problem.lengths))
    mask = Mask(causal=problem.causal) if problem.causal else None
    d_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(problem.seed + 1),
                        dtype=torch.float64).to(device, dtype)
    s = problem.scale
    oracle = _call(varlen_attention, q.double(), k.double(), v.double(), s, mask, d_out.double(), backward, **feature)
    naive = _call(varlen_attention, q, k, v, s, mask, d_out, backward, **feature)
    actual = _call(backend.fn, q, k, v, s, mask, d_out, backward, **feature)
    cq, ck = cu_q.tolist(), cu_k.tolist()

    def unpacked(t: torch.Tensor, a: int, b: int) -> torch.Tensor:  # rows a:b of (total, H, d) -> (H, n, d)
        return t[a:b].transpose(0, 1).double()

    terms = _max_terms([K.attention_term_scales(unpacked(q, a, b), unpacked(k, c, e), unpacked(v, c, e), mask,
                                                unpacked(d_out, a, b), s)
                        for a, b, c, e in zip(cq, cq[1:], ck, ck[1:]) if b > a])
    checks = [_judge("out", actual[0], oracle[0], naive[0], K.C_OUT, terms["out"], K.recompute_floor(terms, "out"),
                     dtype)]
    if backward:
        checks += _grad_parts(actual, oracle, naive, terms, dtype)
    return checks


# ---- kvcache ----------------------------------------------------------------------------------------


@dataclass
class CacheProblem:
    """New queries q (B, H_q, n_q, d_k) over a cache k_cache (B, H_kv, L, d_k), v_cache (B, H_kv, L, d_v) of
    which the first ``seqlens[b]`` entries are valid (the rest stale), in float64; causal: bottom-right or None."""

    q: torch.Tensor = field(repr=False)
    k_cache: torch.Tensor = field(repr=False)
    v_cache: torch.Tensor = field(repr=False)
    seqlens: tuple[int, ...]
    causal: str | None
    scale: float | None
    seed: int
    label: str = "drawn"
    spec: None = None
    shape: str = ""

    def __post_init__(self) -> None:
        b, h_q, n_q, d_k = self.q.shape
        self.shape = (f"B={b} H_q={h_q} H_kv={self.k_cache.shape[1]} n_q={n_q} L_cache={self.k_cache.shape[2]} "
                      f"cache_seqlens={list(self.seqlens)} d_k={d_k} d_v={self.v_cache.shape[-1]} causal={self.causal} "
                      f"scale={self.scale}")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def make_cache(b: int, h_q: int, h_kv: int, n_q: int, cache_len: int, seqlens, d_k: int, d_v: int, seed: int,
               causal: str | None = None, scale: float | None = None, label: str = "drawn") -> CacheProblem:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn((b, h_q, n_q, d_k), generator=gen, dtype=torch.float64)
    k = torch.randn((b, h_kv, cache_len, d_k), generator=gen, dtype=torch.float64)
    v = torch.randn((b, h_kv, cache_len, d_v), generator=gen, dtype=torch.float64)
    valid = torch.arange(cache_len)[None, None, :, None] < torch.tensor(seqlens)[:, None, None, None]
    stale = lambda t: STALE * torch.randn(t.shape, generator=gen, dtype=torch.float64) + STALE  # noqa: E731
    k, v = torch.where(valid, k, stale(k)), torch.where(valid, v, stale(v))  # another sequence's old entries
    return CacheProblem(q, k, v, tuple(seqlens), causal, scale, seed, label)


def kvcache_attention(q, k_cache, v_cache, scale=None, mask=None, cache_seqlens=None):
    """Attention of the new queries ``q (B, H_q, n_q, d_k)`` over the valid prefix ``[:cache_seqlens[b]]`` of
    each sequence's cache ``(B, H_kv, L, d)``, bottom-right causal when ``mask`` says so -> ``(B, H_q, n_q, d_v)``.
    The reference: :func:`impl.attention.attention` on each sequence's valid entries."""
    if cache_seqlens is None or len(cache_seqlens) != q.shape[0]:
        raise ValueError("kvcache attention needs cache_seqlens of shape (B,)")
    if mask is not None and mask.features - {"causal-bottom-right"}:
        raise ValueError(f"kvcache attention takes bottom-right causal only, not {sorted(mask.features)}")
    return torch.cat([attention(q[b:b + 1], k_cache[b:b + 1, :, :n], v_cache[b:b + 1, :, :n], scale, mask)
                      for b, n in enumerate(cache_seqlens.tolist())], 0)


def cache_problems(backend, device: str = "cpu") -> list[CacheProblem]:
    """``kvcache-decode`` (B = 3, 4 over 2 heads, one query, a cache of 300 with 300, 137 and 1 valid entries: past
    one 128-entry split of a split-KV decoding kernel, whose splits must be merged with their maxima),
    ``kvcache-prefill`` (B = 2, 5 queries, cache 20, valid 20 and 6) and, when bottom-right causal is declared,
    ``kvcache-causal`` (B = 2, 4 queries, cache 70, valid 70 and 9: the causal offset is per sequence)."""
    d, d_v = _dims(backend)
    shapes = [("kvcache-decode", 3, (4, 2), 1, 300, (300, 137, 1), None),
              ("kvcache-prefill", 2, (2, 1), 5, 20, (20, 6), None)]
    if "causal-bottom-right" in _masks(backend, device):
        shapes.append(("kvcache-causal", 2, (2, 1), 4, 70, (70, 9), "bottom-right"))
    return [make_cache(b, *_heads(backend, *heads), n_q, cache_len, seqlens, d, d_v, _seed(label), causal, label=label)
            for label, b, heads, n_q, cache_len, seqlens, causal in shapes]


@st.composite
def _cached(draw, backend, causal_declared: bool):
    causal = draw(st.sampled_from((None, "bottom-right") if causal_declared else (None,)), label="causal")
    b = draw(st.integers(1, 3), label="B")
    n_q = draw(st.integers(1, 4), label="n_q")
    cache_len = draw(st.integers(n_q, 40), label="L_cache")
    seqlens = [draw(st.integers(n_q if causal else 1, cache_len), label="cache_seqlen") for _ in range(b)]
    h_q, h_kv, d_k, d_v, scale = _draw_heads_dims_scale(draw, backend)
    return make_cache(b, h_q, h_kv, n_q, cache_len, seqlens, d_k, d_v,
                      draw(st.integers(0, 2**31 - 1), label="seed"), causal, scale)


def cache_strategy(backend, device: str = "cpu"):
    """1 to 3 sequences, 1 to 4 new queries, caches of up to 40 entries with 1 to L valid, GQA, the scale 0.3."""
    return _cached(backend, "causal-bottom-right" in _masks(backend, device))


def check_kvcache(backend, case, problem: CacheProblem) -> list[K.Check]:
    dtype, device = case.dtype, case.device
    q, k, v = (t.to(device, dtype) for t in (problem.q, problem.k_cache, problem.v_cache))
    feature = dict(cache_seqlens=torch.tensor(problem.seqlens, dtype=torch.int32, device=device))
    mask = Mask(causal=problem.causal) if problem.causal else None
    d_out = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=dtype, device=device)  # forward only
    s = problem.scale
    oracle = _call(kvcache_attention, q.double(), k.double(), v.double(), s, mask, d_out.double(), False, **feature)
    naive = _call(kvcache_attention, q, k, v, s, mask, d_out, False, **feature)
    actual = _call(backend.fn, q, k, v, s, mask, d_out, False, **feature)
    terms = _max_terms([K.attention_term_scales(q[b:b + 1].double(), k[b:b + 1, :, :n].double(),
                                                v[b:b + 1, :, :n].double(), mask, d_out[b:b + 1].double(), s)
                        for b, n in enumerate(problem.seqlens)])
    return [_judge("out", actual[0], oracle[0], naive[0], K.C_OUT, terms["out"], K.recompute_floor(terms, "out"),
                   dtype)]
