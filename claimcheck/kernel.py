"""Check an attention kernel against the float64 reference: the backend matrix, shared by
``claims kernel`` and ``properties/test_backends.py`` (one matrix, not two).

A kernel is any function with the contract of :func:`impl.attention.attention`::

    fn(q, k, v, scale=None, mask=None) -> out
    q (B, H_q, n_q, d_k), k (B, H_kv, n_k, d_k), v (B, H_kv, n_k, d_v) -> (B, H_q, n_q, d_v)

described by an :class:`impl.backends.Backend` entry (its declared capabilities). The matrix is
one *case* per declared dtype x mask kind (:func:`matrix`), plus one fully-masked-rows case; the
features that change the call (``lse``, ``varlen``, ``kvcache``) are cases of their own, whose problems,
references and checks live in :mod:`claimcheck.kernel_features` (run only when declared).
Every case sees

* fixed problems (:func:`fixed_problems`), in every dtype, as many as its :class:`Tier` holds:
  ``smoke`` has shared key/value heads 4 over 2 and 8 over 2, lengths that are not multiples of a
  16-wide tile, ``n_q < n_k`` and ``n_q > n_k``, a large-logit problem whose largest score is ~110
  (past ``exp``'s float32 overflow at 88.7), a caller's ``scale`` of 0.3, non-contiguous q, k, v (a
  transposed view and a packed QKV tensor: :mod:`claimcheck.conventions`) and, in the key-padding
  case, key padding under each declared causal alignment; ``ci`` (the default of ``claims
  kernel``) adds kernel-scale shapes: keys across a 64-wide tile, one query against 130 keys
  (decode), 1025 keys, a single key, a batch of three, head dims 128 and 256; ``full`` adds lengths on both sides of the 64- and
  128-wide tiles up to 1025 and head dims from 32 to 256 (59 and 111 among them);
* problems drawn by Hypothesis (:func:`problem_strategy`), seeded per case, shrunk on failure.

Each problem is judged by the error-ratio rule (DESIGN.md; FlashAttention's tests): the kernel's
error against the float64 reference may be at most ``C_OUT`` (outputs) or ``C_GRAD`` (gradients)
times the error of the naive reference computed in the same precision, plus a rounding floor.
A problem is fully described by its :class:`ProblemSpec`, which prints as a one-line repro.

A problem the kernel's own library refuses (``Backend.declines``: for SDPA's CUDA kernels, torch's
``can_use_*`` eligibility checks) is listed in the case's ``declined``, not run, and never counts
as a pass; a case whose every problem is refused is ``declined`` (a skip, with the reason).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import zlib
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import torch
from hypothesis import HealthCheck, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from claimcheck import conventions
from impl.attention import ALIGNMENTS, Mask, attention, default_scale, repeat_kv, scores, with_sink
from impl.backends import BASE_MASKS, KNOWN_MASKS, Backend, Support, declines
from impl.softmax import stable_softmax

EPS = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
MASK_KINDS = ("none", "causal-top-left", "causal-bottom-right", "key-padding", "additive",
              "window", "alibi", "softcap", "sink")  # the last four: the features of fused kernels (impl.attention.Mask)
# the mask kinds whose fixed and drawn problems also come under each declared causal alignment: a kernel that takes
# them with a causal mask must combine the two (a sink key or key padding a causal mask_mod drops, a softcap or ALiBi
# applied to a causally masked score); a window is left alone (a window under top-left causal can hide whole rows)
CAUSAL_JOINS = ("key-padding", "sink", "softcap", "alibi", "window")
PADDING_JOINS = ("sink", "softcap", "alibi")  # the features a key padding mask also comes with (``{kind}+padding``)
C_OUT = 2.0  # FlashAttention's tests: output error <= 2 x the same-precision PyTorch reference's error
C_GRAD = 3.0  # ... and 3 x for gradients: the backward recomputes P from L, adding a few roundings
FLOOR_ULPS = 2.0  # floor: 2 ulps of the size of the summed terms (one rounding of the result, one of a term)
LARGE_LOGIT = 110.0  # largest score of the large-logit problem: exp(110) overflows float32 (max ~ exp(88.72))
# largest score of the negative-logit problem: every exp(s) of a row underflows float32 (smallest ~ exp(-103.3)), so
# only a kernel that subtracts the row's own max (from -inf, not from 0) gets its weights
NEGATIVE_LOGIT = -110.0
TILE = 16  # the smallest tile of the fused kernels here; fixed lengths (17, 33, 9, 13) miss its multiples
WIDE_TILE = 64  # the key tile of most fused kernels' forward: tiles-128 and decode cross it (131 and 130 keys)
ROW_TILE = 128  # the query (row) tile of most fused kernels: tiles-128's 137 and 131 queries cross it
SCALE = 0.3  # the caller's scale of the scale problem: neither 1/sqrt(d) nor 1/d for any integer d
FULLY_MASKED = "fully-masked"  # the mask kind of the fully-masked-rows case
DROPOUT = "dropout"  # the mask kind of the dropout case (claimcheck.kernel_dropout), one a declared dtype
# the features that change the call, cases of their own when declared (their problems and checks: kernel_features)
FEATURE_KINDS = ("lse", "varlen", "kvcache")
CASE_KINDS = (*MASK_KINDS, *FEATURE_KINDS)  # every case of the matrix but the fully-masked one
FULLY_MASKED_CONVENTIONS = ("nan", "zero")  # what a row with no allowed key may give (check_fully_masked)
LONG_KEYS = 1025  # past 1024: a 16-bit accumulator of the row sum or of P V loses digits there
# 128 tiles of 64 keys: a running state (row sum, P V) kept in 16 bits between tiles gains an ulp of rounding a tile,
# which shows against the rule's floor of 2 ulps of the result only over this many tiles (at 1025 keys it is 2 ulps)
VERY_LONG_KEYS = 8193
V_OFFSET = 1.0  # keys-8193's values have mean 1, as real values do: its output is O(1), not O(1/sqrt(n)) from cancelling

WIDE_HEADS = (128, 256)  # the head dims of the ci tier: kernels specialise at 64, 128 and 256
SWEEP_LENGTHS = (63, 64, 65, 127, 128, 129, 191, 257, 1023, 1025)  # full tier: both sides of 64- and 128-wide tiles
SWEEP_HEAD_DIMS = (32, 59, 64, 96, 111, 128, 192, 256)  # full tier: kernel specialisations and odd ones


@dataclass(frozen=True)
class Tier:
    """How much of the matrix a run checks: which fixed problems every case sees, and how many drawn ones.

    ``groups``: ``base`` (small shapes that still exercise every feature of the contract: GQA both ways,
    n_q < n_k and n_q > n_k, 16-wide tiles, large logits, the caller's scale, padding under causal),
    ``kernel-scale`` (64-wide tiles, decode, 1025 keys, one key, a batch of 3, head dims 128 and 256),
    ``sweep`` (every length of :data:`SWEEP_LENGTHS`, n_q = n_k, and every head dim of :data:`SWEEP_HEAD_DIMS`).
    ``slow``: for a backend whose CPU path is slow, the dtypes the property suite checks it in at this tier
    (FlexAttention compiles a graph per dtype, mask structure and shape, about 50 s for float32 in a fresh
    cache; Triton runs in its interpreter, about 3 s a case); a backend not named is checked in every dtype.
    ``claims kernel`` checks every dtype at every tier.
    """

    name: str
    groups: tuple[str, ...]
    examples: int  # drawn problems per case (``claims kernel``'s default; the property suite uses its profile's)
    slow: tuple[tuple[str, tuple[str, ...]], ...]  # (backend, dtypes) pairs
    doc: str

    def dtypes_for(self, backend: str) -> tuple[str, ...] | None:
        """The dtypes the property suite checks ``backend`` in at this tier (None: every dtype)."""
        return dict(self.slow).get(backend)


TIERS = {t.name: t for t in (
    Tier("smoke", ("base",), 2, (("flex", ()), ("triton", ("float32",))), "small shapes with every feature of "
         "the contract; the property suite leaves FlexAttention's CPU compiles to the ci tier and checks Triton's "
         "interpreter in float32 only (the default of pytest properties/)"),
    Tier("ci", ("base", "kernel-scale"), 10, (), "smoke plus kernel-scale shapes: 64-wide tiles, decode, "
         f"{LONG_KEYS} keys, one key, a batch of 3, head dims {' and '.join(map(str, WIDE_HEADS))}, in every dtype (the default of "
         "claims kernel, and the kernel part of make test)"),
    Tier("full", ("base", "kernel-scale", "sweep"), 40, (), "ci plus lengths "
         f"{', '.join(map(str, SWEEP_LENGTHS))} and head dims {', '.join(map(str, SWEEP_HEAD_DIMS))}"),
)}
DEFAULT_TIER = "ci"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- problems ---------------------------------------------------------------------------------------


_OPTIONAL = ("max_logit", "scale", "causal", "strides", "v_offset", "bias", "sink", "padding", "spike", "bias_rank",
             "poison")  # ProblemSpec fields printed only when set
_TEXT = ("causal", "strides")  # ProblemSpec fields that are words, not numbers


@dataclass(frozen=True)
class ProblemSpec:
    """Everything that makes one attention problem: shapes, mask kind, seed and logit regime.

    ``logit_scale`` multiplies q (a peaked softmax); ``max_logit``, when set, rescales q instead
    so that the largest allowed score is exactly that value; a negative one shifts every score down instead
    (q and k get a shared last coordinate, k's 1 and q's -shift / scale), so that every score is at most it. ``scale`` is the softmax scale passed
    to the kernel (None: its default 1/sqrt(d_k)); ``causal`` an alignment combined with the
    mask of a kind in :data:`CAUSAL_JOINS` (key padding, a sink, a softcap, ALiBi, a window); ``strides`` lays q, k, v out as non-contiguous views
    (:func:`claimcheck.conventions.strided_views`: ``bshd`` or ``packed``); ``v_offset`` is added to every value
    (a common mean: the output no longer cancels); ``bias``, the standard deviation of a finite additive bias
    (B, H_q, n_q, n_k) given with a softcap (which bends the scaled scores before any bias is added); ``sink``, that
    of sink logits (H_q,) given with a softcap (which bends the scores, never the sink); ``padding``, the share of
    keys hidden by a key padding mask given with a sink, a softcap or ALiBi (whose positions stay the keys' own);
    ``spike``, a key whose score is :data:`LARGE_LOGIT` while the others stay O(1) (one query); ``bias_rank``, the
    number of dimensions of the additive bias (drawn when None); ``poison`` (1): the kernel is given inf keys and NaN
    values behind the key padding, the references the clean ones (:func:`check_problem`).
    """

    mask: str = "none"
    B: int = 1
    H_q: int = 1
    H_kv: int = 1
    n_q: int = 1
    n_k: int = 1
    d_k: int = 16
    d_v: int = 16
    seed: int = 0
    logit_scale: float = 1.0
    max_logit: float | None = None
    scale: float | None = None
    causal: str | None = None
    strides: str | None = None
    v_offset: float | None = None
    bias: float | None = None
    sink: float | None = None
    padding: float | None = None
    spike: int | None = None
    bias_rank: int | None = None
    poison: int | None = None

    def __post_init__(self) -> None:
        if self.poison is not None and self.mask != "key-padding":
            raise ValueError(f"poison={self.poison}: the key-padding mask only, not {self.mask}")
        if self.bias_rank is not None and not (self.mask == "additive" and self.bias_rank in (2, 3, 4)):
            raise ValueError(f"bias_rank={self.bias_rank}: 2, 3 or 4, with the additive mask only (not {self.mask})")
        if self.spike is not None and not (self.n_q == 1 and self.H_q == self.H_kv and 0 <= self.spike < self.n_k):
            raise ValueError(f"spike={self.spike}: one query, H_q = H_kv and a key index below n_k = {self.n_k}")
        if self.padding is not None and self.mask not in PADDING_JOINS:
            raise ValueError(f"padding={self.padding} combines with the {', '.join(PADDING_JOINS)} masks only, "
                             f"not {self.mask}")
        for name in ("bias", "sink"):
            if getattr(self, name) is not None and self.mask != "softcap":
                raise ValueError(f"{name}={getattr(self, name)} combines with the softcap mask only, not {self.mask}")
        if self.strides not in (None, *conventions.STRIDES):
            raise ValueError(f"strides={self.strides!r}: expected one of {', '.join(conventions.STRIDES)}")
        if self.causal not in (None, *ALIGNMENTS):
            raise ValueError(f"causal={self.causal!r}: expected one of {', '.join(ALIGNMENTS)}")
        if self.causal and self.mask not in CAUSAL_JOINS:
            raise ValueError(f"causal={self.causal} combines with the {', '.join(CAUSAL_JOINS)} masks only, "
                             f"not {self.mask}")

    def __str__(self) -> str:  # the --problem syntax of `claims kernel`
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if f.name != "mask" and not (f.name in _OPTIONAL and getattr(self, f.name) is None))

    @classmethod
    def parse(cls, text: str, mask: str = "none") -> "ProblemSpec":
        """``"B=1,H_q=4,...,seed=3"`` (the format of ``str``) -> a spec; ``ValueError`` naming the bad part."""
        types = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {"mask": mask}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            if not sep or name not in types or name == "mask":
                raise ValueError(f"bad problem field {part!r}: expected NAME=VALUE with NAME one of "
                                 f"{', '.join(n for n in types if n != 'mask')}")
            try:
                values[name] = (raw if name in _TEXT else float(raw) if name in ("logit_scale", *_OPTIONAL)
                                else int(raw))
            except ValueError:
                raise ValueError(f"bad problem field {part!r}: {raw!r} is not a number") from None
        return cls(**values)


@dataclass
class AttentionProblem:
    """One attention input in float64: q (B, H_q, n_q, d_k), k (B, H_kv, n_k, d_k), v (B, H_kv, n_k, d_v)."""

    q: torch.Tensor = field(repr=False)
    k: torch.Tensor = field(repr=False)
    v: torch.Tensor = field(repr=False)
    mask_kind: str
    mask: Mask = field(repr=False)
    seed: int
    shape: str = ""
    spec: ProblemSpec | None = None
    label: str = "drawn"

    def __post_init__(self) -> None:
        b, hq, nq, dk = self.q.shape
        self.shape = f"B={b} H_q={hq} H_kv={self.k.shape[1]} n_q={nq} n_k={self.k.shape[2]} d_k={dk} d_v={self.v.shape[-1]}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis prints every field of a dataclass, ``repr=False`` or not: a failing example would
        print each tensor whole (34 kB, and a HypothesisWarning). The spec and shape say the problem."""
        printer.text(repr(self))

    @property
    def gqa(self) -> bool:
        return self.k.shape[1] != self.q.shape[1]

    @property
    def scale(self) -> float | None:
        """The softmax scale the kernel is given (None: its default, 1/sqrt(d_k))."""
        return self.spec.scale if self.spec is not None else None

    def cast(self, dtype: torch.dtype, device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor,
                                                                                   torch.Tensor, Mask]:
        """q, k, v and the mask in ``dtype`` on ``device`` (the float bias too; boolean padding keeps its dtype);
        q, k, v non-contiguous views when the spec says ``strides``."""
        q, k, v = self.q.to(device, dtype), self.k.to(device, dtype), self.v.to(device, dtype)
        if self.spec is not None and self.spec.strides:
            q, k, v = conventions.strided_views(q, k, v, self.spec.strides)
        return q, k, v, mask_to(self.mask, device, dtype)


def mask_to(m: Mask, device: str | torch.device, dtype: torch.dtype | None = None) -> Mask:
    """``m`` on ``device``, its float bias in ``dtype`` when given (boolean padding keeps its dtype); ALiBi
    slopes and sinks in ``dtype`` too, but float32 for a 16-bit one (flash-attn takes float32 slopes)."""
    param_t = dtype if dtype in (None, torch.float32, torch.float64) else torch.float32
    return dataclasses.replace(m, key_padding=None if m.key_padding is None else m.key_padding.to(device),
                               bias=None if m.bias is None else m.bias.to(device, dtype),
                               alibi=None if m.alibi is None else m.alibi.to(device, param_t),
                               sink=None if m.sink is None else m.sink.to(device, param_t))


def make_mask(kind: str, b: int, h_q: int, n_q: int, n_k: int, gen: torch.Generator,
              causal: str | None = None, bias_rank: int | None = None) -> Mask:
    """A mask of ``kind`` that leaves every query at least one key (no fully masked row); ``causal``
    adds that alignment to key padding, a sink, a softcap, ALiBi or a window (bottom-right needs ``n_k >= n_q``)."""
    if kind == "none":
        return Mask()
    if kind in ("causal-top-left", "causal-bottom-right"):
        return Mask(causal=kind.removeprefix("causal-"))
    if kind == "key-padding":
        keep = torch.rand((b, n_k), generator=gen) < 0.7
        keep[:, 0] = True  # at least one real key per sequence (every causal row sees key 0)
        return Mask(causal=causal, key_padding=keep)
    if kind == "additive":
        bias = torch.randn((b, h_q, n_q, n_k), generator=gen, dtype=torch.float64)
        hidden = torch.rand((b, h_q, n_q, n_k), generator=gen) < 0.2
        hidden[..., 0] = False  # every row keeps a finite entry
        bias = bias.masked_fill(hidden, -math.inf)
        # the contract broadcasts the bias to (B, H_q, n_q, n_k): also give it as (H_q, n_q, n_k) and (n_q, n_k), whose
        # leading axis a kernel could misread (a 3-D bias read as (B, n_q, n_k))
        rank = int(torch.randint(2, 5, (1,), generator=gen))
        bias = bias[(0,) * (4 - (bias_rank or rank))]
        if int(torch.randint(0, 2, (1,), generator=gen)):  # half of them a view of transposed storage: not contiguous
            bias = bias.transpose(-1, -2).contiguous().transpose(-1, -2)
        return Mask(bias=bias)
    if kind == "window":
        # right >= n_q - n_k keeps a key in the first row (i = 0: i + o + right >= 0), so in every row
        left = int(torch.randint(0, n_k, (1,), generator=gen))
        right = int(torch.randint(max(0, n_q - n_k), max(0, n_q - n_k) + n_k, (1,), generator=gen))
        unbounded = int(torch.randint(0, 4, (1,), generator=gen))  # 0: no left bound, 1: no right bound
        # a bound of 0 one time in three on each side (the smallest right bound that keeps a key in the first row):
        # ``if left:`` reads 0 as no bound
        if int(torch.randint(0, 3, (1,), generator=gen)) == 0:
            left = 0
        if int(torch.randint(0, 3, (1,), generator=gen)) == 0:
            right = max(0, n_q - n_k)
        if causal == "top-left":  # keys i + o - left .. i under the causal mask: left >= o keeps every row a key
            left = max(left, n_k - n_q)
        return Mask(causal=causal, window=(None if unbounded == 0 else left, None if unbounded == 1 else right))
    if kind == "alibi":  # Press et al.'s slopes 2^(-8 h / H_q), h = 1..H_q, each moved by a factor in [e^-0.5, e^0.5]:
        # the caller's slopes, not the standard ones a kernel could compute for itself
        standard = 2.0 ** (-8.0 * torch.arange(1, h_q + 1, dtype=torch.float64) / h_q)
        return Mask(causal=causal, alibi=standard * torch.exp(torch.rand((h_q,), generator=gen, dtype=torch.float64)
                                                              - 0.5))
    if kind == "softcap":  # caps of 1..5: the scores of these problems (about 1..4 in size) bend under tanh
        return Mask(causal=causal, softcap=1.0 + 4.0 * float(torch.rand((1,), generator=gen)))
    if kind == "sink":
        return Mask(causal=causal, sink=2.0 * torch.randn((h_q,), generator=gen, dtype=torch.float64))
    raise ValueError(f"unknown mask kind {kind!r}; expected one of {MASK_KINDS}")


def make_problem(spec: ProblemSpec, label: str = "drawn") -> AttentionProblem:
    """The float64 problem of ``spec``: values from ``torch.randn`` seeded by ``spec.seed``."""
    s = spec
    if s.H_kv < 1 or s.H_q % s.H_kv:
        raise ValueError(f"H_kv = {s.H_kv} must divide H_q = {s.H_q}")
    gen = torch.Generator().manual_seed(s.seed)
    q = torch.randn((s.B, s.H_q, s.n_q, s.d_k), generator=gen, dtype=torch.float64) * s.logit_scale
    k = torch.randn((s.B, s.H_kv, s.n_k, s.d_k), generator=gen, dtype=torch.float64)
    v = torch.randn((s.B, s.H_kv, s.n_k, s.d_v), generator=gen, dtype=torch.float64)
    mask = make_mask(s.mask, s.B, s.H_q, s.n_q, s.n_k, gen, s.causal, s.bias_rank)
    if s.v_offset is not None:
        v = v + s.v_offset
    if s.spike is not None:  # k_spike along q: its score q . k_spike * scale is LARGE_LOGIT
        sc = default_scale(s.d_k) if s.scale is None else s.scale
        k[:, :, s.spike] = q[:, :, 0] * (LARGE_LOGIT / (sc * (q[:, :, 0] ** 2).sum(-1, keepdim=True)))
    if s.bias is not None:
        mask = dataclasses.replace(mask, bias=s.bias * torch.randn((s.B, s.H_q, s.n_q, s.n_k), generator=gen,
                                                                 dtype=torch.float64))
    if s.sink is not None:
        mask = dataclasses.replace(mask, sink=s.sink * torch.randn((s.H_q,), generator=gen, dtype=torch.float64))
    if s.padding is not None:
        keep = torch.rand((s.B, s.n_k), generator=gen) >= s.padding
        keep[:, 0] = True  # every query keeps key 0
        mask = dataclasses.replace(mask, key_padding=keep)
    if s.max_logit is not None and s.max_logit < 0:  # shift every score: the largest allowed one is max_logit
        q[..., -1], k[..., -1] = 0.0, 1.0
        sc = scores(q, k, s.scale, _finite_mask(mask))
        shift = sc[torch.isfinite(sc)].max().item() - s.max_logit
        q[..., -1] = -shift / (default_scale(s.d_k) if s.scale is None else s.scale)
    elif s.max_logit is not None:  # rescale q so that the largest allowed score q k^T * scale is max_logit
        sc = scores(q, k, s.scale, _finite_mask(mask))
        q = q * (s.max_logit / sc[torch.isfinite(sc)].max().item())
    return AttentionProblem(q, k, v, s.mask, mask, s.seed, spec=s, label=label)


def _finite_mask(mask: Mask) -> Mask:
    """The mask without the finite part of its bias (keeps its -inf entries), ALiBi or softcap, to size the
    scores q k^T (ALiBi only lowers them; a softcap bounds them, whatever q's size)."""
    bias = None if mask.bias is None else torch.where(torch.isinf(mask.bias), mask.bias, 0.0)
    return dataclasses.replace(mask, bias=bias, alibi=None, softcap=None)


def fixed_problem(kind: str, seed: int, b: int = 1, h_q: int = 4, h_kv: int = 2, n_q: int = 24, n_k: int = 40,
                  d: int = 16, max_logit: float | None = None, scale: float | None = None,
                  causal: str | None = None) -> AttentionProblem:
    """A problem of one fixed shape (for compiled backends: one shape, one compile)."""
    return make_problem(ProblemSpec(kind, b, h_q, h_kv, n_q, n_k, d, d, seed, 1.0, max_logit, scale, causal),
                        label="fixed")


def fixed_problems(backend: Backend, mask_kind: str, device: str | None = None,
                   tier: str = DEFAULT_TIER) -> list[AttentionProblem]:
    """See :func:`_fixed_problems`; built once per declared shape (callers only read the tensors).

    ``device`` (default: the first declared) decides which causal alignments join the key padding.
    """
    return list(_fixed_problems(backend.head_dims, backend.equal_head_dims, backend.gqa, mask_kind,
                                backend.head_dim_multiple, backend.scale, _padded_alignments(backend, mask_kind, device),
                                get_tier(tier).groups, conventions.of(backend.fn).strided,
                                _softcap_joins(backend, mask_kind, device),
                                _padding_joins(backend, mask_kind, device), backend.padding_unread)[0])


def undeclared_problems(backend: Backend, tier: str = DEFAULT_TIER) -> list[tuple[str, str]]:
    """``(label, why)`` of the tier's fixed problems outside what ``backend`` declares (a head dim out of its
    range or off its alignment): not run, and listed by ``claims kernel``."""
    return list(_fixed_problems(backend.head_dims, backend.equal_head_dims, backend.gqa, "none",
                                backend.head_dim_multiple, backend.scale, (), get_tier(tier).groups,
                                conventions.of(backend.fn).strided)[1])


def get_tier(name: str) -> Tier:
    try:
        return TIERS[name]
    except KeyError:
        raise ValueError(f"tier {name!r}: expected one of {', '.join(TIERS)}") from None


def _padded_alignments(backend: Backend, mask_kind: str, device: str | None = None) -> tuple[str, ...]:
    """The causal alignments ``backend`` declares on ``device`` (else its first device), for key padding, a sink, a
    softcap, ALiBi or a window under a causal mask (:data:`CAUSAL_JOINS`)."""
    if mask_kind not in CAUSAL_JOINS or not backend.devices:
        return ()
    return tuple(a for a in ALIGNMENTS if f"causal-{a}" in _declared_masks(backend, device))


def _declared_masks(backend: Backend, device: str | None = None) -> frozenset:
    """The masks ``backend`` declares on ``device`` (else on its first device)."""
    return (backend.devices.get(device) or next(iter(backend.devices.values()))).masks


def _softcap_joins(backend: Backend, mask_kind: str, device: str | None = None) -> tuple[str, ...]:
    """What the softcap case also combines with, each in a problem of its own: a finite additive bias and a sink, when
    ``backend`` declares them too."""
    if mask_kind != "softcap" or not backend.devices:
        return ()
    masks = _declared_masks(backend, device)
    return tuple(j for j, feature in (("bias", "additive"), ("sink", "sink")) if feature in masks)


def _padding_joins(backend: Backend, mask_kind: str, device: str | None = None) -> bool:
    """Whether the sink, softcap or ALiBi case also gets a problem with key padding: when ``backend`` declares it."""
    if mask_kind not in PADDING_JOINS or not backend.devices:
        return False
    return "key-padding" in _declared_masks(backend, device)


def _round_up(d: int, multiple: int) -> int:
    return -(-d // multiple) * multiple


# the non-contiguous fixed problems, by label: how q, k, v are laid out (claimcheck.conventions.strided_views)
STRIDED = {"non-contiguous": "bshd", "packed-qkv": "packed", "strided-head-dim": "head-dim"}

LATE_KEY = 100  # decode-late-max's spike: in the second 64-wide tile, 110 above the first tile's scores (past 88.7)
REUSE_PROBLEM = "gqa-4/2"  # the problem after which the kernel is called again, to see that its first output stays

# the fixed problems with more than a shape (ProblemSpec's optional fields), by label
_EXTRAS = {f"keys-{VERY_LONG_KEYS}": {"v_offset": V_OFFSET}, "softcap+bias": {"bias": 1.0}, "softcap+sink": {"sink": 2.0},
           **{f"{kind}+padding": {"padding": 0.3} for kind in PADDING_JOINS}, "decode-late-max": {"spike": LATE_KEY},
           "padding-poisoned": {"poison": 1}}
_ADDITIVE_EXTRAS = {"rows-as-many-as-batch": {"bias_rank": 2}}  # only where the case's mask is additive

# one seed per fixed problem, by label: a problem is the same tensors in every tier
_FIXED_SEEDS = {label: 1000 + i for i, label in enumerate(
    ("gqa-4/2", "gqa-8/2", "large-logits", "scale-0.3", "tiles-128", "decode", "padding+top-left", "padding+bottom-right",
     f"keys-{LONG_KEYS}", *(f"head-{w}" for w in sorted({*WIDE_HEADS, *SWEEP_HEAD_DIMS})),
     *(f"len-{n}" for n in SWEEP_LENGTHS), "len-65x129", "len-129x65", "one-key", "batch-3", *STRIDED,
     *(f"{kind}+{a}" for kind in ("sink", "softcap", "alibi") for a in ALIGNMENTS), "negative-logits", "scale-0",
     f"keys-{VERY_LONG_KEYS}", "softcap+bias", "strided-head-dim", "softcap+sink",
     *(f"window+{a}" for a in ALIGNMENTS), *(f"{kind}+padding" for kind in PADDING_JOINS), "decode-late-max",
     "rows-as-many-as-batch", "padding-poisoned"))}


@functools.lru_cache(maxsize=None)
def _fixed_problems(head_dims: tuple[int, int], equal_head_dims: bool, gqa: bool, mask_kind: str, multiple: int = 1,
                    takes_scale: bool = True, padded_alignments: tuple[str, ...] = (), groups: tuple[str, ...] = ("base",),
                    strided: bool = True, softcap_joins: tuple[str, ...] = (), padding_join: bool = False,
                    padding_unread: bool = False
                    ) -> tuple[tuple[AttentionProblem, ...], tuple[tuple[str, str], ...]]:
    """``(problems, undeclared)``: the problems every case of ``backend`` sees in a tier of ``groups``
    (labels name them in verdicts), and ``(label, why)`` of those outside the declared head dims.

    Group ``base``:

    ``gqa-4/2``: 4 query heads over 2 key/value heads, n_q = 9 < n_k = 20; ``gqa-8/2``: 8 over 2,
    n_q = 9 > n_k = 5 (for bottom-right causal, whose first n_q - n_k rows would see no key, 5 < 9
    instead: the fully-masked case covers those rows); ``large-logits``: 2 over 1, n_q = n_k = 19,
    q rescaled so the largest allowed score is 110; ``negative-logits``: the same shape with every score
    shifted to at most -110 (every exp(s) underflows float32 unless the row max is subtracted); ``scale-0.3``: 2 over 1, 7 x 11, the caller's
    scale 0.3 and ``scale-0``: the same with the caller's scale 0 (uniform weights; ``scale or 1/sqrt(d)`` takes it
    for the default), both left out when the kernel declares no ``scale`` argument. In the key-padding case,
    ``padding+top-left`` and ``padding+bottom-right`` (the shape of ``gqa-4/2``) add each declared
    causal alignment to the padding; in the sink, softcap and ALiBi cases ``sink+top-left`` and so on add it to
    the feature, and ``softcap+bias`` and ``softcap+sink`` (when additive biases or sinks are declared too) add a finite
    bias of standard deviation 1 that must come after the cap, or sink logits the cap must leave alone; the sink,
    softcap and ALiBi cases get ``sink+padding`` and so on when key padding is declared (30% of the keys hidden), and
    the key-padding case ``padding-poisoned`` (B = 2, 9 x 20: the kernel's padded keys inf and values NaN) when the
    kernel declares ``padding_unread``. ``non-contiguous``: B = 2, 4 over 2 heads, 9 x 20, q, k, v transposed
    views of (B, n, H, d) storage; ``packed-qkv``: 2 heads, 13 x 13, q, k, v views of one (B, n, 3, H, d)
    tensor (both with the last dim contiguous); ``strided-head-dim``: the shape of ``non-contiguous``, q, k, v views
    of (B, H, d, n) storage whose last dim has stride n (all three listed as undeclared for a kernel declared
    contiguous only); ``rows-as-many-as-batch``: B = 2, 2 over 1 heads, 2 x 7, its additive bias (n_q, n_k): with as
    many rows as sequences, a kernel that reads a 2-D bias as (B, n_k) gets no error, only a wrong answer.

    Group ``kernel-scale``: ``tiles-128``: one head, n_q = 137 > n_k = 131 (131 > 137 for bottom-right
    causal), keys across 64- and 128-wide tiles and queries across a 128-row one (a causal mask or a backward loop
    that uses a row's index within its tile, or drops the partial last row tile, shows only there); ``decode``: one
    head, one query against 130 keys (across 64- and 128-wide tiles); ``decode-late-max``: the same with key 100 scoring
    110 and the others O(1) (a row max taken from the first tile alone overflows exp); ``keys-1025``: 2 over 1 heads, 3 queries
    against 1025 keys (65 tiles of 16, 9 of 128: a 16-bit accumulator loses digits); ``keys-8193``: one head, 3 queries
    against 8193 keys whose values have mean 1 (a running row sum or P V kept in 16 bits between 64-wide tiles loses an ulp a
    tile: 128 tiles); ``one-key``: 5 queries (1 under bottom-right causal) and a single key (the softmax is 1, dK is
    0); ``batch-3``: B = 3 sequences of distinct contents, 6 over 2 heads (a group of 3: a head mapping that shifts
    by log2 of the group is right for 1, 2, 4 and 8 only), 13 x 21 (batch and head strides); ``head-128`` (n_q = 33, n_k = 65) and
    ``head-256`` (17 x 33): one head of that width, d_v = d_k (kernels specialise their tiles there).

    Group ``sweep``: ``len-L`` for every L of :data:`SWEEP_LENGTHS` (one head, n_q = n_k = L), ``len-65x129``
    and ``len-129x65`` (n_q != n_k both ways; 129 x 65 becomes 65 x 129 under bottom-right causal) and
    ``head-D`` for every D of :data:`SWEEP_HEAD_DIMS` (one head, 65 x 65, d_v = d_k).

    Without GQA support, H_kv = H_q. The lengths of ``base`` miss every multiple of 16; the keys of
    ``gqa-4/2`` and ``large-logits`` span two 16-wide tiles (an online softmax must rescale), those of
    ``tiles-128`` and ``decode`` 64- and 128-wide ones (three and two 64-wide tiles). Head dimensions: 16 (or the
    smallest declared), and d_v = d_k + 8 unless d_v must equal d_k; both rounded up to the declared
    alignment. A wide or swept head dim outside the declared range or off the alignment is not rounded
    (the point is that width): it is listed in ``undeclared`` instead.
    """
    lo, hi = head_dims
    d = min(_round_up(max(16, lo), multiple), hi)
    step = _round_up(8, multiple)
    d_v = d if equal_head_dims or d + step > hi else d + step
    bottom_right = mask_kind == "causal-bottom-right"
    n_q, n_k = (5, 9) if bottom_right else (9, 5)
    long_q, long_k = (131, 137) if bottom_right else (137, 131)
    # label, B, H_q, H_kv, n_q, n_k, d_k, d_v, max logit, scale, causal (with the padding)
    shapes = []
    if "base" in groups:
        shapes += [("gqa-4/2", 1, 4, 2, 9, 20, d, d, None, None, None),
                   ("gqa-8/2", 1, 8, 2, n_q, n_k, d, d_v, None, None, None),
                   ("large-logits", 1, 2, 1, 19, 19, d, d, LARGE_LOGIT, None, None),
                   ("negative-logits", 1, 2, 1, 19, 19, d, d, NEGATIVE_LOGIT, None, None),
                   ("scale-0.3", 1, 2, 1, 7, 11, d, d_v, None, SCALE, None),
                   ("scale-0", 1, 2, 1, 7, 11, d, d_v, None, 0.0, None)]
        joined = "padding" if mask_kind == "key-padding" else mask_kind
        shapes += [(f"{joined}+{a}", 1, 4, 2, 9, 20, d, d, None, None, a) for a in ALIGNMENTS]
        shapes += [(f"softcap+{j}", 1, 4, 2, 9, 20, d, d, None, None, None) for j in softcap_joins]
        if padding_join:
            shapes.append((f"{mask_kind}+padding", 1, 4, 2, 9, 20, d, d, None, None, None))
        if padding_unread and mask_kind == "key-padding":
            shapes.append(("padding-poisoned", 2, 4, 2, 9, 20, d, d_v, None, None, None))
        shapes += [("non-contiguous", 2, 4, 2, 9, 20, d, d_v, None, None, None),
                   ("packed-qkv", 1, 2, 2, 13, 13, d, d, None, None, None),
                   ("strided-head-dim", 2, 4, 2, 9, 20, d, d_v, None, None, None),
                   ("rows-as-many-as-batch", 2, 2, 1, 2, 7, d, d_v, None, None, None)]
    if "kernel-scale" in groups:
        shapes += [("tiles-128", 1, 1, 1, long_q, long_k, d, d, None, None, None),
                   ("decode", 1, 1, 1, 1, 130, d, d_v, None, None, None),
                   ("decode-late-max", 1, 1, 1, 1, 130, d, d_v, None, None, None),
                   (f"keys-{LONG_KEYS}", 1, 2, 1, 3, LONG_KEYS, d, d_v, None, None, None),
                   (f"keys-{VERY_LONG_KEYS}", 1, 1, 1, 3, VERY_LONG_KEYS, d, d_v, None, None, None),
                   ("one-key", 1, 2, 1, 1 if bottom_right else 5, 1, d, d_v, None, None, None),
                   ("batch-3", 3, 6, 2, 13, 21, d, d_v, None, None, None)]
        shapes += [(f"head-{w}", 1, 1, 1, 33 if w == 128 else 17, 65 if w == 128 else 33, w, w, None, None, None)
                   for w in WIDE_HEADS]
    if "sweep" in groups:
        shapes += [(f"len-{n}", 1, 1, 1, n, n, d, d_v, None, None, None) for n in SWEEP_LENGTHS]
        shapes += [("len-65x129", 1, 1, 1, 65, 129, d, d_v, None, None, None),
                   ("len-129x65", 1, 1, 1, *((65, 129) if bottom_right else (129, 65)), d, d_v, None, None, None)]
        shapes += [(f"head-{w}", 1, 1, 1, 65, 65, w, w, None, None, None) for w in SWEEP_HEAD_DIMS]
    problems, undeclared, seen = [], [], set()
    for label, b, h_q, h_kv, nq, nk, dk, dv, big, scale, causal in shapes:
        if label in seen or (scale is not None and not takes_scale) or (causal is not None
                                                                        and causal not in padded_alignments):
            continue
        seen.add(label)
        if label in STRIDED and not strided:
            undeclared.append((label, "non-contiguous q, k, v: the kernel is declared contiguous only"))
            continue
        if label.startswith("head-") and not (lo <= dk <= hi and dk % multiple == 0):
            undeclared.append((label, f"head dim {dk} outside the declared {lo}..{hi}"
                                      + (f" in steps of {multiple}" if multiple > 1 else "")))
            continue
        spec = ProblemSpec(mask_kind, b, h_q, h_kv if gqa else h_q, nq, nk, dk, dv, seed=_FIXED_SEEDS[label],
                           max_logit=big, scale=scale, causal=causal, strides=STRIDED.get(label),
                           **_EXTRAS.get(label, {}), **(_ADDITIVE_EXTRAS.get(label, {}) if mask_kind == "additive" else {}))
        problems.append(make_problem(spec, label=label))
    return tuple(problems), tuple(undeclared)


@st.composite
def attention_problems(draw, mask_kinds=MASK_KINDS, gqa: bool = True, max_batch: int = 2, max_heads: int = 4,
                       min_n: int = 1, max_n: int = 40, min_d: int = 1, max_d: int = 16, same_dv: bool = False,
                       logit_scale: tuple[float, ...] = (1.0, 4.0), d_multiple: int = 1,
                       scales: tuple[float | None, ...] = (None,),
                       padded_alignments: tuple[str, ...] = ()) -> AttentionProblem:
    """A float64 attention problem; ``logit_scale`` multiplies q to make the softmax peaked; head
    dimensions are multiples of ``d_multiple`` in ``[min_d, max_d]``; the kernel's ``scale`` is one
    of ``scales`` (None: its default); key padding, a sink, a softcap or ALiBi may come with one of ``padded_alignments``."""
    kind = draw(st.sampled_from(mask_kinds), label="mask")
    causal = (draw(st.sampled_from((None, *padded_alignments)), label="causal")
              if kind in CAUSAL_JOINS and padded_alignments else None)
    b = draw(st.integers(1, max_batch), label="B")
    # the group first, from a list that does not depend on another draw: each then shrinks on its own
    group = draw(st.sampled_from([g for g in (1, 2, 4) if g <= max_heads] if gqa else [1]), label="group")
    h_kv = draw(st.integers(1, max(1, max_heads // group)), label="H_kv")
    n_q = draw(st.integers(min_n, max_n), label="n_q")
    # bottom-right causal with n_q > n_k hides whole rows: keep n_k >= n_q for that mask
    hides_rows = kind == "causal-bottom-right" or causal == "bottom-right"
    n_k = draw(st.integers(n_q if hides_rows else min_n, max(max_n, n_q)), label="n_k")
    lo_m = _round_up(min_d, d_multiple) // d_multiple
    hi_m = max(max_d // d_multiple, lo_m)
    d_k = d_multiple * draw(st.integers(lo_m, hi_m), label="d_k")
    d_v = d_k if same_dv else d_multiple * draw(st.integers(lo_m, hi_m), label="d_v")
    seed_ = draw(st.integers(0, 2**31 - 1), label="seed")
    temperature = draw(st.sampled_from(logit_scale), label="logit_scale")
    scale = draw(st.sampled_from(scales), label="scale") if len(scales) > 1 else scales[0]
    return make_problem(ProblemSpec(kind, b, h_kv * group, h_kv, n_q, n_k, d_k, d_v, seed_, temperature,
                                    scale=scale, causal=causal))


def problem_strategy(backend: Backend, mask_kind: str, device: str = "cpu"):
    """The drawn problems of one case: odd sizes, GQA (groups 1, 2, 4) when declared, head dims in range,
    the default scale or 0.3 (when the kernel takes ``scale``), key padding, a sink, a softcap or ALiBi alone or
    under a declared causal alignment.

    Interpreted Triton runs one numpy program per 16 rows and head, so its grids are kept small.
    """
    lo, hi = backend.head_dims
    m = backend.head_dim_multiple
    small = backend.name == "triton" and device == "cpu"
    return attention_problems(mask_kinds=(mask_kind,), gqa=backend.gqa, min_d=max(1, lo),
                              max_d=min(max(16, lo) + max(8, 2 * m), hi), same_dv=backend.equal_head_dims,
                              max_batch=1 if small else 2, max_heads=4, max_n=33 if small else 40, d_multiple=m,
                              scales=(None, SCALE) if backend.scale else (None,),
                              padded_alignments=_padded_alignments(backend, mask_kind, device))


# ---- the error-ratio rule ---------------------------------------------------------------------------


def max_abs_error(x: torch.Tensor, reference: torch.Tensor) -> float:
    return (x.double() - reference.double()).abs().max().item() if x.numel() else 0.0


def attention_term_scales(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None,
                          d_out: torch.Tensor, scale: float | None = None) -> dict[str, float]:
    """The size of the terms each attention result is summed from, for rounding floors (float64).

    Any algorithm computing ``A B`` rounds by up to ``gamma_n |A| |B|`` (Higham, Accuracy and
    Stability, 3.5): so ``out = P V`` is summed from terms of size ``P |V|``, ``dV = P^T dO`` from
    ``P^T |dO|``, and ``dQ = s dS K``, ``dK = s dS^T Q`` with ``dS = P (dP - D)`` from terms of size
    ``T = P (|dO| |V|^T + |D|)`` times ``|K|`` or ``|Q|``: dQ and dK can cancel to exactly 0 (one
    key) while their terms, and so any algorithm's rounding, stay of that size.
    ``logits``: ``max |S| + max |L|`` (L the log-sum-exp), the size of the exponent of
    ``P = exp(S - L)`` when a backward recomputes P.
    Shapes as :func:`impl.attention.attention`; returns the largest entry of each bound.
    """
    q, k, v, d_out = (t.double() for t in (q, k, v, d_out))
    group = q.shape[-3] // k.shape[-3]
    s = default_scale(q.shape[-1]) if scale is None else scale
    kk, vv = repeat_kv(k, group), repeat_kv(v, group)
    m = None if mask is None else mask_to(mask, q.device, torch.float64)
    logits = scores(q, k, s, m)  # (..., H_q, n_q, n_k)
    row = with_sink(logits, m)  # a sink is one more term of each row's softmax
    p = stable_softmax(row)[..., : logits.shape[-1]].nan_to_num()
    lse = torch.logsumexp(row, dim=-1)
    finite = torch.isfinite(logits)
    out = p @ vv
    delta = (d_out * out).sum(-1, keepdim=True).abs()
    t = p * (d_out.abs() @ vv.abs().transpose(-2, -1) + delta)

    def per_kv_head(x: torch.Tensor) -> torch.Tensor:  # a K/V head's gradient sums over its group
        return x.unflatten(-3, (k.shape[-3], group)).sum(-3)

    return {
        "out": (p @ vv.abs()).max().item(),
        "dq": s * (t @ kk.abs()).max().item(),
        "dk": s * per_kv_head(t.transpose(-2, -1) @ q.abs()).max().item(),
        "dv": per_kv_head(p.transpose(-2, -1) @ d_out.abs()).max().item(),
        "logits": logits[finite].abs().max().item() + lse[torch.isfinite(lse)].abs().max().item(),
    }


@dataclass(frozen=True)
class Check:
    """One output or gradient of one problem under the rule ``error <= c * naive_error + floor``."""

    part: str  # out, dq, dk, dv, or inputs (the kernel wrote into a tensor it was given)
    error: float
    naive_error: float
    floor: float
    c: float
    ratio: float  # error / naive error (the naive error taken as at least half an ulp of the terms)
    ok: bool
    message: str = ""


def within_reference_error(actual: torch.Tensor, oracle64: torch.Tensor, naive: torch.Tensor, c: float,
                           part: str = "out", floor_ulps: float = 4.0, scale: float | None = None,
                           extra_floor: float = 0.0) -> Check:
    """Judge ``err(actual) <= c * err(naive) + floor`` against the float64 oracle (see ``properties/assertions.py``)."""
    err = max_abs_error(actual, oracle64)
    ref_err = max_abs_error(naive, oracle64)
    if scale is None:
        scale = max(oracle64.abs().max().item(), 1.0) if oracle64.numel() else 1.0
    floor = floor_ulps * EPS[actual.dtype] * scale + extra_floor
    # the ratio to the naive error, which cannot beat half an ulp of the terms' size (storing them); terms of size 0
    # (dQ and dK under the caller's scale 0 are exactly 0) leave only an exact answer at ratio 0
    unit = max(ref_err, 0.5 * EPS[actual.dtype] * scale)
    ratio = err / unit if unit > 0 else (0.0 if err == 0 else math.inf)
    ok = err <= c * ref_err + floor  # False for NaN
    return Check(part, err, ref_err, floor, c, ratio if ratio == ratio else math.inf, ok,
                 "" if ok else f"{part}: error {err:.3g} exceeds {c:g} x the naive same-precision error "
                               f"{ref_err:.3g} + floor {floor:.3g}")


def _outputs(fn: Callable, q, k, v, mask, d_out, backward: bool, scale: float | None = None) -> tuple[torch.Tensor, ...]:
    """``(out,)`` or ``(out, dq, dk, dv)`` for the loss ``sum(out * d_out)``."""
    if not backward:
        with torch.no_grad():
            return (fn(q, k, v, scale, mask),)
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, scale, mask)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), (q, k, v)))


def check_problem(fn: Callable, dtype: torch.dtype, problem: AttentionProblem, backward: bool,
                  device: str = "cpu", deterministic: bool = False) -> list[Check]:
    """The rule for the output (and, with ``backward``, the gradients) of ``fn`` on one problem.

    Exceptions raised by ``fn`` propagate: a crash is not a wrong answer. On a ``poison`` problem the kernel's keys
    and values behind the key padding are inf and NaN, the references' the problem's own: what the kernel must not read.
    """
    q, k, v, mask = problem.cast(dtype, device)
    # the oracle is exact for the inputs the kernel is given: rounding q, k to bfloat16 moves a score
    # of 110 by ~0.4 (every algorithm pays it, so it would only add noise to both errors)
    q64, k64, v64, mask64 = q.double(), k.double(), v.double(), mask_to(mask, device, torch.float64)
    d_out = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(problem.seed + 1),
                        dtype=torch.float64).to(device, dtype)
    s = problem.scale
    oracle = _outputs(attention, q64, k64, v64, mask64, d_out.double(), backward, s)
    naive = _outputs(attention, q, k, v, mask, d_out, backward, s)
    if problem.spec is not None and problem.spec.poison:  # the kernel alone gets inf keys and NaN values behind padding
        hidden = ~mask.key_padding.to(device)[:, None, :, None]  # (B, 1, n_k, 1)
        k, v = k.masked_fill(hidden, math.inf), v.masked_fill(hidden, math.nan)
    given = _inputs(q, k, v, mask, d_out)
    kept = {name: t.clone() for name, t in given.items()}
    actual = _outputs(fn, q, k, v, mask, d_out, backward, s)
    # a kernel computes out of place: writing into q, k, v, the mask or the incoming gradient corrupts the caller's
    # tensors (and the checks after it, which read the same ones)
    changed = [name for name, t in given.items() if not _unchanged(t, kept[name])]
    # floors scale with the size of the summed terms, not of the result (dK = 0 for one key)
    terms = attention_term_scales(q64, k64, v64, mask64, d_out.double(), s)
    checks = []
    for part, a, o, n, c in zip(("out", "dq", "dk", "dv"), actual, oracle, naive, (C_OUT, C_GRAD, C_GRAD, C_GRAD)):
        if not isinstance(a, torch.Tensor) or a.shape != o.shape or a.dtype != dtype:
            got = f"{tuple(a.shape)} {dtype_name(a.dtype)}" if isinstance(a, torch.Tensor) else type(a).__name__
            checks.append(Check(part, math.inf, 0.0, 0.0, c, math.inf, False,
                                f"{part}: wrong shape or dtype: got {got}, expected {tuple(o.shape)} {dtype_name(dtype)}"
                                + (conventions.shape_hint(tuple(a.shape), tuple(o.shape)) if isinstance(a, torch.Tensor)
                                   else "")))
            continue
        checks.append(within_reference_error(a, o, n, c, part, floor_ulps=FLOOR_ULPS, scale=terms[part],
                                             extra_floor=recompute_floor(terms, part)))
    if changed:
        checks.append(Check("inputs", math.inf, 0.0, 0.0, 0.0, math.inf, False,
                            f"inputs: the kernel wrote into {', '.join(changed)} (they must be left unmodified)"))
    elif deterministic and isinstance(actual[0], torch.Tensor):
        # the backward too: an atomic-add dQ (or a split-KV reduction) can vary from call to call with a forward that
        # does not
        again = _outputs(fn, q, k, v, mask, d_out, backward, s)
        for part, first, second in zip(("out", "dq", "dk", "dv"), actual, again):
            comparable = isinstance(second, torch.Tensor) and second.shape == first.shape
            if not (comparable and torch.equal(torch.nan_to_num(second), torch.nan_to_num(first))):
                differ = (second != first).sum().item() if comparable else "all"
                checks.append(Check("determinism", math.inf, 0.0, 0.0, 0.0, math.inf, False,
                                    f"determinism: a second call on the same inputs differs in {differ} of "
                                    f"{first.numel()} values of {part} (the kernel declares bitwise-equal outputs)"))
                break
    if not changed and problem.label == REUSE_PROBLEM and isinstance(actual[0], torch.Tensor):
        # the output is the caller's: a kernel returning a view of a workspace it writes into again on its next call
        # corrupts it after the fact, which a check of each call on its own never sees
        first = actual[0].clone()
        gen = torch.Generator().manual_seed(problem.seed + 2)
        with torch.no_grad():
            fn(*(torch.randn(t.shape, generator=gen, dtype=torch.float64).to(device, dtype) for t in (q, k, v)), s, mask)
        if not torch.equal(torch.nan_to_num(actual[0]), torch.nan_to_num(first)):
            checks.append(Check("reuse", math.inf, 0.0, 0.0, 0.0, math.inf, False,
                                "reuse: a second call on other inputs changed the first call's output (it returns "
                                "storage the kernel writes into again)"))
    return checks


def _unchanged(now: torch.Tensor, before: torch.Tensor) -> bool:
    """Bitwise the same values, NaN equal to NaN (a poisoned input's NaN must stay NaN, not compare unequal)."""
    if not now.is_floating_point():
        return torch.equal(now, before)
    return now.shape == before.shape and bool(((now == before) | (now.isnan() & before.isnan())).all())


def _inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask, d_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """The tensors a kernel is handed, by name (the mask's when it has them)."""
    named = {"q": q, "k": k, "v": v, "d_out": d_out}
    if mask.key_padding is not None:
        named["key_padding"] = mask.key_padding
    if mask.bias is not None:
        named["bias"] = mask.bias
    return named


def recompute_floor(terms: dict[str, float], part: str) -> float:
    """The rounding of the scores every algorithm pays, for ``part`` (out, dq, dk, dv) of one problem.

    Every backend rounds S to (at least) float32, moving P by up to |S| eps32 relative and the result
    by that times its terms; the naive reference suffers it too but may be luckier on one example.
    FlashAttention-style backwards also recompute P = exp(S - L), adding |L| eps32 (``terms["logits"]``
    is max |S| + max |L|, :func:`attention_term_scales`). Against 16-bit naive errors it is negligible.
    """
    return EPS[torch.float32] * terms["logits"] * terms[part]


# ---- fully masked rows ------------------------------------------------------------------------------


def fully_masked_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, Mask, slice]]:
    """(mask kind, q, k, v, mask, hidden rows): every key hidden from some query rows (float32).

    Key padding and the -inf bias use the shape of :func:`fixed_problem` (q 24 x 16 over 4 heads,
    k and v 40 x 16 over 2), so a compiled backend reuses its graphs; bottom-right causal alignment
    needs n_q > n_k (20 queries, 12 keys: the first 8 see nothing), and so does a sliding window (0, 0) from the
    bottom-right diagonal (the same 8 rows; a kernel that hides the window's keys with a finite number gives them the
    mean of V).
    """
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, h, n, 16), generator=gen) for h, n in ((4, 24), (2, 40), (2, 40)))
    bias = torch.zeros((1, 4, 24, 40))
    bias[..., :8, :] = -math.inf
    q2, k2, v2 = (torch.randn((1, 2, n, 16), generator=gen) for n in (20, 12, 12))
    return [("key-padding", q, k, v, Mask(key_padding=torch.zeros(1, 40, dtype=torch.bool)), slice(None)),
            ("additive", q, k, v, Mask(bias=bias), slice(0, 8)),
            ("causal-bottom-right", q2, k2, v2, Mask(causal="bottom-right"), slice(0, 8)),
            ("window", q2, k2, v2, Mask(window=(0, 0)), slice(0, 8))]


@dataclass(frozen=True)
class MaskedRows:
    """What one kernel gave on the rows of one fully-masked problem."""

    mask: str
    seen: str  # "nan", "zero", "other", "not supported" (message: why) or "not run: why"
    ok: bool
    message: str = ""
    visible_error: float | None = None  # relative error of the rows that do see keys
    judged: bool = True  # False: no convention declared, or "any" (the value is named, not judged)
    detail: str = ""  # what an "other" value is, when recognised (the mean of V)


def check_fully_masked(backend: Backend, device: str = "cpu", skip: Callable[[str], str | None] = lambda kind: None
                       ) -> list[MaskedRows]:
    """Each fully-masked problem: the hidden rows follow ``backend.fully_masked`` and the visible rows
    agree with the float64 reference. ``skip(kind)`` may give a reason not to run one.

    A row with no allowed key has no softmax (0/0). Two conventions answer it, and a kernel may declare
    either (:data:`FULLY_MASKED_CONVENTIONS`): ``nan``, the formula's own answer (the float64 reference),
    and ``zero``, the fused kernels' (FlashAttention, FlexAttention, SDPA's CPU kernels guard the row
    sum l = 0 and return O = 0). Any other value is computed from
    keys the mask hides -- the mean of V when masking adds a large finite negative instead of -inf, so
    every hidden key gets the same weight -- and no reference gives it: a kernel that declares nothing
    passes with nan or zero (named, not judged) and fails with anything else; ``any`` declares on
    purpose that the kernel leaves these rows unspecified (named, never judged).
    """
    from impl.backends import supports

    rows = []
    for kind, q, k, v, mask, hidden in fully_masked_cases():
        ok, reason = supports(backend, device, mask.features, gqa=q.shape[1] != k.shape[1], head_dim=16, value_dim=16)
        if not ok or skip(kind):
            rows.append(MaskedRows(kind, "not supported" if not ok else f"not run: {skip(kind)}", True, reason))
            continue
        dq, dk, dv, dev_mask = q.to(device), k.to(device), v.to(device), mask_to(mask, device)
        refused = declines(backend, dq, dk, dv, dev_mask)
        if refused:
            rows.append(MaskedRows(kind, "not supported", True, refused))
            continue
        with torch.no_grad():
            out = backend.fn(dq, dk, dv, None, dev_mask).cpu()
        got = out[..., hidden, :]
        seen = "nan" if torch.isnan(got).all() else "zero" if (got == 0).all() else "other"
        detail = _other_value(got, v, q.shape[1] // v.shape[1]) if seen == "other" else ""
        declared = backend.fully_masked
        problems = []
        if declared in FULLY_MASKED_CONVENTIONS and seen != declared:
            problems.append(f"fully masked rows give {detail or seen}, declared {declared}")
        elif declared is None and seen not in FULLY_MASKED_CONVENTIONS:
            problems.append(f"fully masked rows give {detail or 'other'}, neither nan nor zero (nothing declared)")
        err = None
        if hidden != slice(None):  # the rows that see keys agree with the reference
            m64 = mask if mask.bias is None else Mask(bias=mask.bias.double())
            ref = attention(q.double(), k.double(), v.double(), mask=m64)
            err = relative_error(out[..., 8:, :], ref[..., 8:, :])
            # float32 over <= 40 keys and 16 dims: a few dozen roundings of 6e-8 each; 1e-5 is ~80 float32 epsilons
            if not err <= 1e-5:
                problems.append(f"rows with allowed keys are wrong next to fully masked rows (relative error {err:.3g})")
        rows.append(MaskedRows(kind, seen, not problems, "; ".join(problems), err,
                               judged=declared in FULLY_MASKED_CONVENTIONS
                               or (declared is None and seen not in FULLY_MASKED_CONVENTIONS), detail=detail))
    return rows


def _other_value(got: torch.Tensor, v: torch.Tensor, group: int) -> str:
    """``"the mean of V"`` when the hidden rows ``got`` (B, H_q, rows, d_v) are the mean over every key
    of their key/value head (uniform weights), else ``"other"``."""
    mean = repeat_kv(v.double().mean(-2, keepdim=True), group).expand(got.shape)
    # float32 means of <= 40 values of size ~3: a few dozen roundings of 6e-8 each; 1e-5 is ~80 float32 epsilons
    return "the mean of V" if relative_error(got, mean) <= 1e-5 else "other"


def relative_error(x: torch.Tensor, reference: torch.Tensor) -> float:
    """``max |x - ref| / max |ref|`` (``inf`` when they disagree on a non-finite entry)."""
    x, reference = x.double(), reference.double()
    finite = torch.isfinite(reference)
    if not torch.equal(finite, torch.isfinite(x)) or not torch.equal(x[~finite].nan_to_num(), reference[~finite].nan_to_num()):
        return math.inf
    if not finite.any():
        return 0.0
    scale = max(reference[finite].abs().max().item(), torch.finfo(torch.float64).tiny)
    return (x[finite] - reference[finite]).abs().max().item() / scale


# ---- the matrix -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a dtype and a mask kind (or the fully-masked-rows case) on one device."""

    dtype: torch.dtype
    mask: str
    device: str = "cpu"

    @property
    def name(self) -> str:
        return f"{dtype_name(self.dtype)}-{self.mask}"

    def features(self) -> frozenset:
        return frozenset() if self.mask in ("none", FULLY_MASKED) else frozenset({self.mask})


def case_seed(backend_name: str, case: Case, base: int = 0) -> int:
    """A seed of its own for every case (stable across runs and processes: crc32, not ``hash``)."""
    return (zlib.crc32(f"{backend_name}|{case.device}|{case.name}".encode()) + base) % 2**32


def matrix(backend: Backend, device: str = "cpu", dtypes=None, masks=None) -> tuple[list[Case], list[tuple[Case, str]]]:
    """``(cases to run, [(case, why not)])``: every dtype x mask kind, the dropout case of each dtype, then the
    fully-masked case.

    ``dtypes``/``masks`` restrict the matrix (default: float32, float16, bfloat16 and every mask kind).
    A case the backend does not declare, or cannot run here, is listed with the reason.
    """
    from impl.backends import available, supports

    run, skipped = [], []
    dtypes = list(dtypes or (torch.float32, torch.float16, torch.bfloat16))
    for dtype in dtypes:
        for kind in [m for m in (masks or CASE_KINDS) if m not in (FULLY_MASKED, DROPOUT)]:
            case = Case(dtype, kind, device)
            ok, reason = available(backend, device, dtype)
            if ok:
                ok, reason = supports(backend, device, case.features())
            (run.append(case) if ok else skipped.append((case, reason)))
    if masks is None or DROPOUT in masks:  # random: a check of its own, in every declared dtype
        from claimcheck.kernel_dropout import head_dim

        for dtype in dtypes:
            case = Case(dtype, DROPOUT, device)
            ok, reason = available(backend, device, dtype)
            if ok:
                ok, reason = supports(backend, device, case.features())
            if ok and head_dim(backend) is None:
                ok, reason = False, f"the dropout problem needs a head dim of 32 or more; declared {backend.head_dims}"
            (run.append(case) if ok else skipped.append((case, reason)))
    if masks is None or FULLY_MASKED in masks:
        case = Case(torch.float32 if torch.float32 in dtypes else dtypes[0], FULLY_MASKED, device)
        ok, reason = available(backend, device, case.dtype)
        hiding = ("key-padding", "additive", "causal-bottom-right")  # the masks that can hide a whole row
        if ok and not any(supports(backend, device, frozenset({m}))[0] for m in hiding):
            ok, reason = False, f"{backend.name} declares none of the masks that hide whole rows ({', '.join(hiding)})"
        (run.append(case) if ok else skipped.append((case, reason)))
    return run, skipped


@dataclass
class CaseResult:
    """The verdict of one case: pass, fail (a problem broke the rule), error (the kernel raised), or
    declined (the kernel's own library refused every problem: ``declined`` says why)."""

    case: Case
    status: str = "pass"
    checks: list[tuple[AttentionProblem, Check]] = field(default_factory=list)
    masked_rows: list[MaskedRows] = field(default_factory=list)
    dropout: list = field(default_factory=list)  # the dropout case's checks (claimcheck.kernel_dropout.DropoutCheck)
    failing: AttentionProblem | None = None
    failed_checks: list[str] = field(default_factory=list)  # "label:part" of every failing fixed or drawn check
    message: str = ""
    error: BaseException | None = None
    problems: int = 0
    declined: list[tuple[str, str]] = field(default_factory=list)  # (problem, reason) the kernel refused
    diagnosis: str | None = None  # the nearby semantics the failing output matches (:func:`diagnose`)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "declined")

    @property
    def worst(self) -> tuple[float, str]:
        """``(worst error ratio, "part, label")`` over every problem of the case."""
        if not self.checks:
            return 0.0, "-"
        p, c = max(self.checks, key=lambda pc: pc[1].ratio)
        return c.ratio, f"{c.part}, {p.label}"


class _Broken(AssertionError):
    """A drawn problem broke the rule (raised inside Hypothesis so that it shrinks the problem)."""


def run_case(backend: Backend, case: Case, examples: int = 10, base_seed: int | None = 0,
             shrink: bool = True, tier: str = DEFAULT_TIER) -> CaseResult:
    """Run one case: the fixed problems of ``tier``, then ``examples`` drawn ones (seeded per case unless
    ``base_seed`` is None; the first failure is shrunk unless ``shrink`` is False)."""
    if case.mask == DROPOUT:
        from claimcheck.kernel_dropout import run_dropout_case

        return run_dropout_case(backend, case)
    result = CaseResult(case)
    if case.mask == FULLY_MASKED:
        try:
            result.masked_rows = check_fully_masked(backend, case.device)
        except Exception as exc:  # noqa: BLE001  the kernel crashed: an error, not a wrong answer
            result.status, result.error, result.message = "error", exc, f"{type(exc).__name__}: {exc}"
            return result
        bad = [r for r in result.masked_rows if not r.ok]
        result.problems = len(result.masked_rows)
        if bad:
            result.status = "fail"
            result.failed_checks = [f"fully-masked-{r.mask}" for r in bad]
            by_message: dict[str, list[str]] = {}
            for r in bad:
                by_message.setdefault(r.message, []).append(r.mask)
            result.message = "; ".join(f"{', '.join(masks)}: {message}" for message, masks in by_message.items())
            if backend.fully_masked is None and any(r.seen == "other" for r in bad):
                result.message += ("; that value comes from keys the mask hides and no reference gives it (the "
                                   "reference: NaN, fused kernels: 0); declare fully_masked 'any' if the kernel "
                                   "leaves these rows unspecified on purpose")
        return result
    backward = backend.devices[case.device].backward

    feature = case.mask in FEATURE_KINDS  # a call of its own: claimcheck.kernel_features plans the case
    if feature:
        from claimcheck import kernel_features

        plan = kernel_features.plan(backend, case, tier, examples)
        fixed, strategy, examples = plan.fixed, plan.strategy, plan.examples
    else:
        fixed, strategy = fixed_problems(backend, case.mask, case.device, tier), problem_strategy(backend, case.mask,
                                                                                                 case.device)

    def refused(problem: AttentionProblem) -> str | None:
        return _refusal(backend, result, problem, backward)

    def judge(problem: AttentionProblem) -> list[Check]:
        checks = (plan.check(problem) if feature else
                  check_problem(backend.fn, case.dtype, problem, backward, case.device, backend.deterministic))
        result.problems += 1
        result.checks.extend((problem, c) for c in checks)
        return checks

    def fail(problem: AttentionProblem, checks: list[Check]) -> None:
        result.status, result.failing = "fail", problem
        result.message = _summary(checks)
        if not feature and any(c.part == "out" and not c.ok for c in checks):
            result.diagnosis = _diagnosis(backend, case, problem)

    for problem in fixed:
        if refused(problem):
            continue
        try:
            checks = judge(problem)
        except Exception as exc:  # noqa: BLE001
            result.status, result.error, result.failing = "error", exc, problem
            result.message = f"{type(exc).__name__}: {exc}"
            result.failed_checks.append(f"{problem.label}:error")
            if not feature:
                result.diagnosis = convention_diagnosis(backend.fn, case.dtype, problem, case.device)
            return result
        bad = [c for c in checks if not c.ok]
        result.failed_checks += [f"{problem.label}:{c.part}" for c in bad]
        if bad and result.failing is None:
            fail(problem, checks)
    if examples <= 0:
        return _declined_only(result)
    state: dict[str, Any] = {}

    def search(problem: AttentionProblem) -> None:
        state["problem"] = problem
        if refused(problem):
            reject()  # Hypothesis draws another; if it finds none, Unsatisfiable below
        checks = judge(problem)
        if not all(c.ok for c in checks):
            state["broken"] = (problem, checks)
            raise _Broken()

    phases = ("explicit", "reuse", "generate", "target", "shrink") if shrink else ("explicit", "reuse", "generate")
    test = settings(max_examples=examples, deadline=None, database=None, derandomize=False, phases=phases,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False)(
        given(strategy)(search))
    if base_seed is not None:
        test = seed(case_seed(backend.name, case, base_seed))(test)
    try:
        test()
    except Unsatisfiable:  # every drawn problem was declined: what was checked stands, the refusals are listed
        pass
    except (_Broken, BaseExceptionGroup) as exc:
        if "broken" not in state:
            raise exc from None
        problem, checks = state["broken"]  # the last failure Hypothesis replayed: the shrunk one
        result.failed_checks += [f"drawn:{c.part}" for c in checks if not c.ok]
        if result.failing is None:
            fail(problem, checks)
    except Exception as exc:  # noqa: BLE001  the kernel (or our harness) raised on a drawn problem
        if result.status == "pass":
            result.status, result.error, result.failing = "error", exc, state.get("problem")
            result.message = f"{type(exc).__name__}: {exc}"
    return _declined_only(result)


def _refusal(backend: Backend, result: CaseResult, problem: AttentionProblem, backward: bool) -> str | None:
    """The kernel library's own refusal of ``problem`` in ``result``'s case, listed in ``result.declined``
    (never run, never counted as a pass)."""
    if backend.declines is None or not isinstance(problem, AttentionProblem):  # packed or cached: not asked
        return None
    q, k, v, mask = problem.cast(result.case.dtype, result.case.device)
    reason = declines(backend, q, k, v, mask, backward, problem.scale)
    if reason:
        result.declined.append((f"{problem.label} {problem.shape}", reason))
    return reason


def _declined_only(result: CaseResult) -> CaseResult:
    """A case whose every problem the kernel refused is ``declined`` (with the first reason), not a pass."""
    if result.status == "pass" and result.problems == 0 and result.declined:
        result.status = "declined"
        result.message = (f"the kernel's library declined all {len(result.declined)} problems: "
                          f"{result.declined[0][1]}")
    return result


def run_matrix(backend: Backend, device: str = "cpu", dtypes=None, masks=None, examples: int | None = None,
               base_seed: int | None = 0, shrink: bool = True,
               on_result: Callable[[CaseResult], None] = lambda r: None,
               tier: str = DEFAULT_TIER) -> tuple[list[CaseResult], list]:
    """Every case of :func:`matrix` at ``tier`` (``examples`` drawn problems a case, default the tier's);
    ``on_result`` sees each verdict as it comes."""
    cases, skipped = matrix(backend, device, dtypes, masks)
    examples = get_tier(tier).examples if examples is None else examples
    results = []
    for case in cases:
        results.append(run_case(backend, case, examples, base_seed, shrink, tier))
        on_result(results[-1])
    return results, skipped


def tier_counts(backend: Backend, device: str = "cpu", dtypes=None, masks=None, examples: int | None = None,
                tier: str = DEFAULT_TIER) -> dict[str, int]:
    """What a run of ``tier`` checks, counted before it runs: cases, fixed problems (over every case),
    drawn problems (at most ``examples`` a case), the dropout cases (one problem each) and the fully-masked
    rows case."""
    cases, _ = matrix(backend, device, dtypes, masks)
    examples = get_tier(tier).examples if examples is None else examples
    judged = [c for c in cases if c.mask not in (FULLY_MASKED, DROPOUT)]
    dropout = sum(c.mask == DROPOUT for c in cases)
    from claimcheck import kernel_features

    plans = {c: kernel_features.plan(backend, c, tier, examples) for c in judged if c.mask in FEATURE_KINDS}
    fixed = sum(len(plans[c].fixed) if c in plans else len(fixed_problems(backend, c.mask, device, tier))
                for c in judged)
    drawn = sum(plans[c].examples if c in plans else examples for c in judged)
    return {"cases": len(cases), "fixed": fixed, "drawn": drawn, "dropout": dropout,
            "fully_masked": len(cases) - len(judged) - dropout}


# ---- a user's function ------------------------------------------------------------------------------


CAPABILITY_KEYS = ("devices", "dtypes", "masks", "gqa", "backward", "head_dims", "equal_head_dims", "fully_masked",
                   "head_dim_multiple", "declines", "scale", "deterministic", "lse_fully_masked", "padding_unread",
                   *conventions.KEYS)


def load_function(spec: str) -> Callable:
    """``"package.module:function"`` -> the function (``ValueError`` / ``ImportError`` saying why not)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected module:function (e.g. mypkg.attn:my_attention)")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def declared_backend(fn: Callable, name: str, device: str | None = None, **overrides: Any) -> Backend:
    """A :class:`Backend` for a user's function: capabilities from ``fn.claims_capabilities`` (a dict
    of :data:`CAPABILITY_KEYS`), then ``overrides`` (None = not given). Defaults: CPU, float32, float16
    and bfloat16, every mask (causal both ways, key padding, additive; the kernel features window, alibi,
    softcap and sink only when declared), GQA, backward checked whenever autograd works through the kernel
    (:func:`probe_backward`; ``backward=False`` turns it off), any head dimension, the caller's ``scale`` taken, fully
    masked rows not declared (nan or zero named, any other value fails: :func:`check_fully_masked`).
    ``declines``, if given, is the kernel's own rule for one problem, ``(q, k, v, mask, backward) ->
    reason or None``: the problems it refuses are listed in the verdict, not checked, and never pass.
    """
    features = frozenset(overrides.pop("features", None) or ())  # --feature: added to the declared masks
    declared = dict(getattr(fn, "claims_capabilities", None) or {})
    unknown = set(declared) - set(CAPABILITY_KEYS)
    if unknown:
        raise ValueError(f"{name}.claims_capabilities has unknown keys {sorted(unknown)}; known: {', '.join(CAPABILITY_KEYS)}")
    declared.update({k: v for k, v in overrides.items() if v is not None})
    devices = [device] if device else list(declared.get("devices") or ["cpu"])
    try:
        dtypes = frozenset(DTYPES[d] if isinstance(d, str) else d for d in declared.get("dtypes") or
                           ("float32", "float16", "bfloat16"))
    except KeyError as exc:
        raise ValueError(f"unknown dtype {exc.args[0]!r}; known: {', '.join(DTYPES)}") from None
    masks = frozenset(declared.get("masks", BASE_MASKS)) | features  # window, alibi, softcap, sink only when declared
    if masks - KNOWN_MASKS:
        raise ValueError(f"unknown mask features {sorted(masks - KNOWN_MASKS)}; known: {', '.join(sorted(KNOWN_MASKS))}")
    lse_fully_masked = declared.get("lse_fully_masked", "-inf")
    if lse_fully_masked not in ("-inf", "inf", "any"):
        raise ValueError(f"lse_fully_masked={lse_fully_masked!r}: expected '-inf' (log 0, the reference's), 'inf' "
                         "(flash-attn's) or 'any' (not judged)")
    lo, hi = declared.get("head_dims") or (1, 1 << 16)
    fully_masked = declared.get("fully_masked")
    if fully_masked not in (None, *FULLY_MASKED_CONVENTIONS, "any"):
        raise ValueError(f"fully_masked={fully_masked!r}: expected 'nan' (the reference's 0/0), 'zero' (the fused "
                         f"kernels' convention), 'any' (left unspecified on purpose) or None (not declared)")
    multiple = declared.get("head_dim_multiple", 1)
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"head_dim_multiple={multiple!r}: expected a positive integer")
    refuses = declared.get("declines")
    if refuses is not None and not callable(refuses):
        raise ValueError(f"declines={refuses!r}: expected a function (q, k, v, mask, backward) -> reason or None")
    fn = conventions.adapt(fn, conventions.Conventions.from_declaration(declared), name)  # layout, padding, output
    backward, note = declared.get("backward"), ""
    if backward is None:  # not declared: checked whenever autograd reaches the inputs through the kernel
        backward, note = probe_backward(fn, devices[0], sorted(dtypes, key=str)[0] if torch.float32 not in dtypes
                                        else torch.float32, max(int(lo), 1), multiple, declared.get("declines"))
    support = Support(dtypes, masks, backward=bool(backward))
    return Backend(name, fn, {d: support for d in devices}, gqa=bool(declared.get("gqa", True)),
                   head_dims=(int(lo), int(hi)), equal_head_dims=bool(declared.get("equal_head_dims", False)),
                   fully_masked=fully_masked, head_dim_multiple=multiple, declines=refuses,
                   scale=bool(declared.get("scale", True)), deterministic=bool(declared.get("deterministic", False)),
                   lse_fully_masked=lse_fully_masked, padding_unread=bool(declared.get("padding_unread", False)),
                   doc=f"{name} (checked by claims kernel)", backward_note=note)


def probe_backward(fn: Callable, device: str, dtype: torch.dtype, min_d: int = 1, multiple: int = 1,
                   declines: Callable[..., str | None] | None = None) -> tuple[bool, str]:
    """Whether autograd reaches q, k and v through ``fn`` (one small problem: B = 1, one head, 8 queries and keys,
    the smallest head dim the kernel takes from 16 up), and how that was decided: the default when a kernel
    declares nothing about its backward, so that gradients are checked wherever they exist and a kernel without
    them is reported as such, never skipped in silence."""
    if device == "cuda" and not torch.cuda.is_available():
        return False, "not declared, and not probed: CUDA is not available here"
    d = _round_up(max(16, min_d), multiple)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, 1, 8, d), generator=gen).to(device, dtype).requires_grad_() for _ in range(3))
    refused = declines(q, k, v, None, True) if declines is not None else None
    if refused:
        return False, f"not declared, and not probed: the kernel declines the probe problem ({refused})"
    try:
        out = fn(q, k, v, None, None)
        if isinstance(out, tuple):
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            return False, "not declared; autograd does not reach the inputs (the output has no grad_fn)"
        grads = torch.autograd.grad(out.float().sum(), (q, k, v), allow_unused=True)
    except Exception as exc:  # the probe's own answer: this kernel has no usable backward here
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        return False, f"not declared; autograd through the kernel fails ({type(exc).__name__}: {first})"
    missing = [name for name, g in zip("qkv", grads) if g is None]
    if missing:
        return False, f"not declared; autograd does not reach {', '.join(missing)}"
    return True, "not declared; autograd reaches q, k and v (probed), so the gradients are checked"


def resolve(spec: str, device: str | None = None, **overrides: Any) -> Backend:
    """A registry backend by name (``triton``), or a user's ``module:function`` with its capabilities."""
    from impl.backends import BACKENDS

    if ":" not in spec:
        if spec not in BACKENDS:
            raise ValueError(f"{spec!r} is neither module:function nor a backend of the registry "
                             f"({', '.join(BACKENDS)})")
        backend = BACKENDS[spec]
        if any(v is not None for v in overrides.values()):
            raise ValueError(f"{spec} is a registry backend: its capabilities are its declaration in impl/backends.py")
        return backend
    return declared_backend(load_function(spec), spec, device, **overrides)


def repro(spec: str, backend: Backend, case: Case, problem: AttentionProblem | None, tier: str = DEFAULT_TIER) -> str:
    """The one-line command that re-runs ``problem`` of ``case`` (or the whole case, at ``tier``)."""
    line = f"claims kernel {spec} --device {case.device} --dtype {dtype_name(case.dtype)} --mask {case.mask}"
    if ":" in spec and backend.devices[case.device].backward:
        line += " --backward"
    if conventions.of(backend.fn).options():
        line += " " + conventions.of(backend.fn).options()
    if problem is not None and problem.spec is not None and case.mask not in FEATURE_KINDS:
        line += f" --problem '{problem.spec}'"
    elif tier != DEFAULT_TIER:
        line += f" --tier {tier}"
    return line


def run_problem(backend: Backend, case: Case, spec: ProblemSpec) -> CaseResult:
    """One problem of one case (the repro of a failure)."""
    result = CaseResult(case)
    problem = make_problem(spec, label="given")
    backward = backend.devices[case.device].backward
    if spec.scale is not None and not backend.scale:
        result.declined.append((f"{problem.label} {problem.shape}", "the kernel declares no scale argument"))
        return _declined_only(result)
    if _refusal(backend, result, problem, backward):
        return _declined_only(result)
    try:
        checks = check_problem(backend.fn, case.dtype, problem, backward, case.device, backend.deterministic)
    except Exception as exc:  # noqa: BLE001
        result.status, result.error, result.failing, result.message = "error", exc, problem, f"{type(exc).__name__}: {exc}"
        result.diagnosis = convention_diagnosis(backend.fn, case.dtype, problem, case.device)
        return result
    result.problems = 1
    result.checks = [(problem, c) for c in checks]
    bad = [c for c in checks if not c.ok]
    if bad:
        result.status, result.failing = "fail", problem
        result.failed_checks = [f"given:{c.part}" for c in bad]
        result.message = _summary(checks)
        if any(c.part == "out" for c in bad):
            result.diagnosis = _diagnosis(backend, case, problem)
    return result


def _diagnosis(backend: Backend, case: Case, problem: AttentionProblem) -> str | None:
    """:func:`convention_diagnosis`, then :func:`diagnose`, where a crash of the extra call (or of an
    alternative) is no diagnosis."""
    found = convention_diagnosis(backend.fn, case.dtype, problem, case.device)
    if found:
        return found
    try:
        return diagnose(backend.fn, case.dtype, problem, case.device)
    except Exception:  # noqa: BLE001  the verdict stands without it
        return None


def convention_diagnosis(fn: Callable, dtype: torch.dtype, problem: AttentionProblem, device: str = "cpu") -> str | None:
    """For a kernel that failed or crashed on ``problem``: the first other calling convention
    (:func:`claimcheck.conventions.alternatives`: layout, output layout, padding, output index) under which
    the same function passes every check of the problem, named with the declaration that selects it."""
    for label, other in conventions.alternatives(fn):
        try:
            if all(c.ok for c in check_problem(other, dtype, problem, False, device)):
                return f"the reference when called with {label}"
        except Exception:  # noqa: BLE001  not this convention
            continue
    return None


# ---- what a failing kernel computes instead ---------------------------------------------------------

Semantics = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float | None, Mask], torch.Tensor]


def nearby_semantics(problem: AttentionProblem) -> list[tuple[str, Semantics]]:
    """``(what the kernel would implement, that attention as a function of q, k, v, scale, mask)`` for the
    conventions a kernel commonly gets wrong, those that differ on ``problem``: the other causal alignment,
    no causal mask, key padding ignored or inverted (True meaning "ignore"), the bias's values ignored or
    added before the scale, scale 1 or 1/d or always 1/sqrt(d) or 1/sqrt(d_v), query head h reading key/value head
    h % H_kv, the softmax taken over the queries."""
    m, d = problem.mask, problem.q.shape[-1]
    given = default_scale(d) if problem.scale is None else problem.scale
    out: list[tuple[str, Semantics]] = []
    if m.causal is not None:
        other = "bottom-right" if m.causal == "top-left" else "top-left"
        out.append((f"{other} causal alignment (declared {m.causal})",
                    lambda q, k, v, s, mask: attention(q, k, v, s, dataclasses.replace(mask, causal=other))))
        out.append(("no causal mask", lambda q, k, v, s, mask: attention(q, k, v, s,
                                                                        dataclasses.replace(mask, causal=None))))
    if m.key_padding is not None:
        out.append(("key padding ignored", lambda q, k, v, s, mask: attention(
            q, k, v, s, dataclasses.replace(mask, key_padding=None))))
        if (~m.key_padding).any(-1).all():  # every sequence keeps a key under the inverted reading
            out.append(("key padding inverted (True read as: ignore this key)", lambda q, k, v, s, mask: attention(
                q, k, v, s, dataclasses.replace(mask, key_padding=~mask.key_padding))))
    if m.bias is not None:
        out.append(("the bias's finite values ignored (only its -inf entries kept)", lambda q, k, v, s, mask: attention(
            q, k, v, s, dataclasses.replace(
                mask, bias=torch.where(torch.isfinite(mask.bias), torch.zeros_like(mask.bias), mask.bias)))))
        out.append(("the bias added before the scale", lambda q, k, v, s, mask: attention(
            q, k, v, s, dataclasses.replace(mask, bias=mask.bias * given))))
    d_v = problem.v.shape[-1]
    for label, value in (("scale 1", 1.0), (f"scale 1/d = 1/{d}", 1.0 / d),
                         (f"the default scale 1/sqrt(d) = {default_scale(d):.4g}, not the caller's {given:g}",
                          default_scale(d)),
                         (f"the scale 1/sqrt(d_v) = 1/sqrt({d_v}), from the values' head dim, not d_k = {d}",
                          default_scale(d_v))):
        if not math.isclose(value, given):
            out.append((label, lambda q, k, v, s, mask, value=value: attention(q, k, v, value, mask)))
    h_q, h_kv = problem.q.shape[1], problem.k.shape[1]
    if h_kv > 1 and h_q > h_kv:
        heads = torch.arange(h_q) % h_kv
        out.append(("query head h reading key/value head h % H_kv (not h // group)",
                    lambda q, k, v, s, mask: attention(q, k[:, heads], v[:, heads], s, mask)))
    if not m.features and problem.q.shape[2] > 1:
        out.append(("the softmax taken over the queries", lambda q, k, v, s, mask: torch.softmax(
            scores(q, k, s).transpose(-1, -2), -1).transpose(-1, -2) @ repeat_kv(v, h_q // h_kv)))
    return out


def diagnose(fn: Callable, dtype: torch.dtype, problem: AttentionProblem, device: str = "cpu") -> str | None:
    """The first of :func:`nearby_semantics` that the kernel's output on ``problem`` satisfies under the
    error-ratio rule (against that semantics in float64, its naive same-precision error the yardstick),
    or None. For a problem that failed: it calls the kernel once more."""
    q, k, v, mask = problem.cast(dtype, device)
    q64, k64, v64, mask64 = q.double(), k.double(), v.double(), mask_to(mask, device, torch.float64)
    with torch.no_grad():
        declared = attention(q64, k64, v64, problem.scale, mask64)
        candidates = [(label, semantics(q64, k64, v64, problem.scale, mask64), semantics(q, k, v, problem.scale, mask))
                      for label, semantics in nearby_semantics(problem)]  # before the kernel sees the tensors
        got = fn(q, k, v, problem.scale, mask)
    if not isinstance(got, torch.Tensor) or not torch.isfinite(got).all():
        return None
    for label, oracle, naive in candidates:
        if oracle.shape != got.shape or not torch.isfinite(oracle).all():
            continue
        if within_reference_error(declared.to(dtype), oracle, naive, C_OUT, floor_ulps=FLOOR_ULPS).ok:
            continue  # the rule cannot tell this semantics from the declared one here (one key: every softmax is 1)
        if within_reference_error(got, oracle, naive, C_OUT, floor_ulps=FLOOR_ULPS).ok:
            return label
    return None


def _summary(checks: list[Check]) -> str:
    """The first broken check's message, and which other parts broke."""
    bad = [c for c in checks if not c.ok]
    others = ", ".join(c.part for c in bad[1:])
    return bad[0].message + (f" (also {others})" if others else "")

