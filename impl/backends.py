"""One registry of attention backends, each declaring what it supports.

Every backend is a function with the contract of :func:`impl.attention.attention`::

    fn(q, k, v, scale=None, mask=None) -> out
    q (B, H_q, n_q, d_k), k (B, H_kv, n_k, d_k), v (B, H_kv, n_k, d_v) -> (B, H_q, n_q, d_v)

and a :class:`Backend` entry saying, per device type, which dtypes and mask features it
supports and whether it has a backward pass (:class:`Support`); whether it supports
grouped-query attention (``H_kv < H_q``); which head dimensions (and whether ``d_v`` must equal
``d_k``, or be a multiple of some alignment); whether it takes the caller's ``scale``; and what a
fully masked row gives.
:func:`available` and :func:`supports` answer "can this run here?" with a reason, so that a test
or a benchmark skips visibly; :func:`declines` answers it for one problem, where the kernel's
own library has finer rules than a declaration can say (SDPA's CUDA kernels: ask torch)::

    for name, backend in BACKENDS.items():
        ok, reason = available(backend, "cuda", torch.float16)
        ok = ok and supports(backend, "cuda", Mask(causal="bottom-right").features, backward=True)[0]

Mask features (:attr:`impl.attention.Mask.features`): ``causal-top-left``,
``causal-bottom-right``, ``key-padding``, ``additive``.

Backends: ``reference`` (plain torch), ``tiled`` (the FlashAttention algorithm in plain torch,
16 x 16 tiles), ``sdpa-math`` / ``sdpa-flash`` / ``sdpa-efficient`` / ``sdpa-cudnn``
(``torch.nn.functional.scaled_dot_product_attention`` pinned to one kernel), ``flex``
(FlexAttention, compiled once per process), ``triton`` (our kernel, :mod:`impl.triton_attention`),
``flash-attn`` (the flash-attn package, optional).
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F

from impl.attention import Mask, attention, check_attention_inputs, default_scale, mask_bias
from impl.tiled_attention import flash_attention

if importlib.util.find_spec("triton") is not None:  # import it now: without CUDA it must set
    from impl import triton_attention  # noqa: F401  TRITON_INTERPRET=1 before torch.compile imports triton

BASE_MASKS = frozenset({"causal-top-left", "causal-bottom-right", "key-padding", "additive"})
# the features of fused kernels beyond masks (impl.attention.Mask): declared one by one, never assumed
KERNEL_FEATURES = frozenset({"window", "alibi", "softcap", "sink"})
ALL_MASKS = BASE_MASKS | KERNEL_FEATURES
# dropout is random: not a mask of the matrix's cases but a check of its own (claimcheck.kernel_dropout)
RANDOM_FEATURES = frozenset({"dropout"})
# the features that change the call (claimcheck.kernel_features): the log-sum-exp returned beside the output (lse),
# packed sequences of several lengths (varlen), attention over the valid prefix of a KV cache (kvcache)
CALL_FEATURES = frozenset({"lse", "varlen", "kvcache"})
KNOWN_MASKS = ALL_MASKS | RANDOM_FEATURES | CALL_FEATURES  # every feature a kernel may declare
_BIAS_FEATURES = BASE_MASKS | {"window", "alibi"}  # what an SDPA attn_mask tensor can carry
_FLEX_FEATURES = ALL_MASKS  # a mask_mod and a score_mod carry them all (a sink as one extra key: _flex)
F32_16 = frozenset({torch.float32, torch.float16, torch.bfloat16})
ALL_DTYPES = F32_16 | {torch.float64}


@dataclass(frozen=True)
class Support:
    """What a backend supports on one device type."""

    dtypes: frozenset
    masks: frozenset = BASE_MASKS  # the mask features (and kernel features) it takes
    backward: bool = True


@dataclass(frozen=True)
class Backend:
    """A named attention function and its declared capabilities (pure data)."""

    name: str
    fn: Callable
    devices: Mapping[str, Support]
    gqa: bool = True
    head_dims: tuple[int, int] = (1, 1 << 16)
    equal_head_dims: bool = False  # needs d_v = d_k
    requires: Callable[[str], str | None] = lambda device: None  # why it cannot run on this device type here
    # a row with no allowed key gives: "zero" (fused kernels), "nan" (the reference's 0/0), "any" (left
    # unspecified on purpose: never judged), None = not declared (nan or zero accepted, anything else fails)
    fully_masked: str | None = "zero"
    head_dim_multiple: int = 1  # d_k and d_v must be multiples of this (the kernel's alignment)
    # the kernel's own rule for one problem: (q, k, v, mask, backward) -> why it would not run it, or None
    declines: Callable[..., str | None] | None = None
    scale: bool = True  # takes the caller's softmax scale (False: only its default 1/sqrt(d_k) is checked, and said)
    # the forward gives bitwise-equal outputs for equal inputs, call after call (checked on every problem when True;
    # not declared: not checked, and said)
    deterministic: bool = False
    # with the lse feature, the log-sum-exp of a row with no allowed key: "-inf" (log 0, the reference's), "inf"
    # (flash-attn's, so that exp(S - L) = 0 in its backward), "any" (not judged)
    lse_fully_masked: str = "-inf"
    # never reads the keys and values behind key padding: NaN or inf there reaches no output (checked when True, on
    # padding-poisoned; not declared: not checked, as SDPA's kernels, whose 0 x NaN leaks, would fail it)
    padding_unread: bool = False
    doc: str = ""
    backward_note: str = ""  # how backward was decided when it was not declared (probed through autograd)


# ---- adapters ---------------------------------------------------------------------------------------


def _no_dropout(name: str, mask: Mask | None) -> None:
    if mask is not None and mask.dropout is not None:
        raise ValueError(f"{name} has no dropout: mask.dropout={mask.dropout!r}")


def _tiled(q, k, v, scale=None, mask=None, return_lse=False):
    _no_dropout("the tiled kernel", mask)
    return flash_attention(q, k, v, scale, mask, block_m=16, block_n=16, return_lse=return_lse)


def _sdpa_mask(q: torch.Tensor, k: torch.Tensor, mask: Mask | None) -> tuple[torch.Tensor | None, bool]:
    """``(attn_mask, is_causal)`` for SDPA: ``is_causal`` is top-left aligned, anything else a mask tensor."""
    features = (mask.features if mask is not None else frozenset()) - RANDOM_FEATURES  # dropout: dropout_p
    if not features:
        return None, False
    if features == {"causal-top-left"}:
        return None, True
    if features - _BIAS_FEATURES:
        raise ValueError(f"SDPA's attn_mask cannot carry {sorted(features - _BIAS_FEATURES)}")
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], q.dtype, q.device)
    while bias.dim() < q.dim():  # (H_q, n_q, n_k) of ALiBi: the CPU flash kernel takes 2-D or 4-D masks only
        bias = bias.unsqueeze(0)
    if not features & {"additive", "alibi"}:
        return bias == 0, False  # boolean: True = attend
    return bias, False


def _sdpa(kernel_name: str) -> Callable:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kernel = getattr(SDPBackend, kernel_name)

    def fn(q, k, v, scale=None, mask=None):
        group = check_attention_inputs(q, k, v, mask)
        attn_mask, is_causal = _sdpa_mask(q, k, mask)
        p, seed = mask.dropout if mask is not None and mask.dropout is not None else (0.0, None)
        # dropout draws from torch's global generator: seeded by the mask's seed inside a fork, so that the caller's
        # random state is left as it was and the same seed drops the same weights
        with sdpa_kernel(kernel), torch.random.fork_rng(devices=[q.device] if q.is_cuda else []):
            if seed is not None:
                torch.manual_seed(seed)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=is_causal,
                                                  scale=scale, enable_gqa=group > 1)

    fn.__name__ = f"sdpa_{kernel_name.lower()}"
    return fn


_SDPA_ELIGIBLE = {"FLASH_ATTENTION": "can_use_flash_attention", "EFFICIENT_ATTENTION": "can_use_efficient_attention",
                  "CUDNN_ATTENTION": "can_use_cudnn_attention"}


def _sdpa_declines(kernel_name: str) -> Callable[..., str | None]:
    """SDPA's own eligibility test for one CUDA problem (``torch.backends.cuda.can_use_*``), with the
    reasons torch gives; its rules (sequence lengths of a causal mask, alignment of head dimensions,
    grouped-query support, GPU generation) vary with the torch build and the GPU. On CPU: the flash kernel's NaN for
    scale 0 under is_causal (:func:`cpu_flash_scale_zero`)."""

    def declines(q, k, v, mask, backward: bool = False, scale: float | None = None) -> str | None:
        if q.device.type == "cuda":
            return sdpa_refusal(kernel_name, q, k, v, mask, backward)
        return cpu_flash_refusal(q, k, v, mask, scale) if kernel_name == "FLASH_ATTENTION" else None

    return declines


def cpu_flash_refusal(q, k, v, mask, scale: float | None = None) -> str | None:
    """Why torch's CPU flash kernel, pinned, refuses a problem or gets it wrong: it needs a unit stride on the head dim
    and a 2-D or 4-D ``attn_mask`` ("No available kernel" otherwise: SDPA's own dispatch falls back to the math
    kernel there), and :func:`cpu_flash_scale_zero`."""
    if q.device.type != "cpu":
        return None
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        return "torch's CPU flash kernel needs a unit stride on the head dim"
    if mask is not None and mask.bias is not None and mask.bias.dim() == 3 and mask.features == {"additive"}:
        return "torch's CPU flash kernel takes a 2-D or 4-D attn_mask, not a 3-D one"
    return cpu_flash_scale_zero(q, mask, scale)


def cpu_flash_scale_zero(q, mask, scale: float | None) -> str | None:
    """torch's CPU flash kernel returns NaN for the caller's scale 0 under ``is_causal`` (torch 2.13: the hidden
    scores, -inf, are multiplied by the scale, and -inf x 0 is NaN; ``tests/test_backends_registry.py`` pins it, so
    that a torch that mends it fails that test and this refusal goes). SDPA takes ``is_causal`` for a top-left causal
    mask alone (:func:`_sdpa_mask`)."""
    top_left_alone = mask is not None and mask.features - RANDOM_FEATURES == {"causal-top-left"}
    if scale == 0 and top_left_alone and q.device.type == "cpu":
        return "torch's CPU flash kernel gives NaN for scale 0 under is_causal (-inf x 0)"
    return None


def sdpa_refusal(kernel_name: str, q, k, v, mask, backward: bool = False) -> str | None:
    """Ask torch whether SDPA's ``kernel_name`` kernel takes this problem: None, or torch's reasons."""
    import warnings

    import torch.backends.cuda as sdpa_cuda

    ask = getattr(sdpa_cuda, _SDPA_ELIGIBLE[kernel_name], None)
    if ask is None or not hasattr(sdpa_cuda, "SDPAParams"):
        return None  # this torch cannot say: the kernel runs, and a refusal shows as its error
    group = check_attention_inputs(q, k, v, mask)
    attn_mask, is_causal = _sdpa_mask(q, k, mask)
    q_, k_, v_ = (t.detach().requires_grad_(backward) for t in (q, k, v))
    try:
        params = sdpa_cuda.SDPAParams(q_, k_, v_, attn_mask, 0.0, is_causal, group > 1)
    except TypeError:  # torch < 2.5: no enable_gqa
        if group > 1:
            return "this torch has no grouped-query SDPA (enable_gqa)"
        params = sdpa_cuda.SDPAParams(q_, k_, v_, attn_mask, 0.0, is_causal)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ok = ask(params, debug=True)
    if ok:
        return None
    reasons = "; ".join(dict.fromkeys(str(w.message).split(" (Triggered internally")[0].strip() for w in seen))
    return f"torch declines {kernel_name.lower()}: {reasons or 'no reason given'}"


# graphs of one process: a pytest-xdist worker may run the ci tier's shapes (8 of them, a sink's one key more
# each, forward and backward) in two or three dtypes
FLEX_GRAPHS = 256


@functools.cache
def compiled_flex_attention() -> Callable:
    """``torch.compile(flex_attention)``, built once per process (shapes static: one graph per shape).

    Every shape, dtype, mask structure and scale is one more graph, and past dynamo's default limit of 8
    recompiles a compiled function silently falls back to eager: the backend matrix would then judge the
    unfused path under FlexAttention's name. The limit is raised to :data:`FLEX_GRAPHS` and hitting it is an error.
    """
    import torch._dynamo.config as dynamo
    from torch.nn.attention.flex_attention import flex_attention

    dynamo.recompile_limit = max(dynamo.recompile_limit, FLEX_GRAPHS)
    dynamo.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention, dynamic=False)


def _flex(q, k, v, scale=None, mask=None):
    """FlexAttention: causal, key padding and a sliding window as one ``mask_mod`` (block mask); an additive bias,
    ALiBi and a softcap as one ``score_mod``.

    Both read their parameters from tensors (an absent feature is a neutral value: no causal flag, all keys kept, an
    unbounded window, a zero bias or slope, no cap), so every mask is the same compiled graph, and every problem with a
    bias, ALiBi or a softcap the same other one.

    A sink is one extra key (index ``n_k``) with a zero value that every query may attend to, whose score the
    ``score_mod`` replaces by the head's sink logit (uncapped, unbiased): its softmax term is ``exp(sink_h)`` and its
    output contribution 0, the contract's sink exactly; a row with no other key then puts all its mass there and
    returns 0. FlexAttention on CPU returns no log-sum-exp (``return_lse`` is GPU only in torch 2.13), so the
    other spelling, ``out * sigmoid(lse - sink)``, is not open here.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    group = check_attention_inputs(q, k, v, mask)
    _no_dropout("the FlexAttention adapter", mask)
    mask = mask or Mask()
    b, h_q, n_q, _ = q.shape
    n_k = k.shape[-2]
    dev = q.device
    causal = torch.tensor(mask.causal is not None, device=dev)
    offset = torch.tensor(n_k - n_q if mask.causal == "bottom-right" else 0, device=dev)
    keep = mask.key_padding if mask.key_padding is not None else torch.ones(b, n_k, dtype=torch.bool, device=dev)
    sinks = mask.sink is not None
    if sinks:  # the sink key, kept: appended to k (any content: its score is replaced) and v (zero: it adds nothing)
        k = torch.cat([k, k.new_zeros(k.shape[:-2] + (1, k.shape[-1]))], dim=-2)
        v = torch.cat([v, v.new_zeros(v.shape[:-2] + (1, v.shape[-1]))], dim=-2)
        keep = torch.cat([keep, keep.new_ones(b, 1)], dim=-1)
    left, right = mask.window if mask.window is not None else (None, None)
    unbounded = n_q + n_k  # farther than any key: no bound on that side
    diagonal = torch.tensor(n_k - n_q, device=dev)  # the window's and ALiBi's bottom-right diagonal
    left_t = torch.tensor(unbounded if left is None else left, device=dev)
    right_t = torch.tensor(unbounded if right is None else right, device=dev)
    sink_key = torch.tensor(n_k, device=dev)

    def mask_mod(bi, hi, qi, ki):
        centre = qi + diagonal
        allowed = (keep[bi, ki] & (~causal | (ki <= qi + offset)) & (ki >= centre - left_t) & (ki <= centre + right_t))
        return allowed | (ki == sink_key) if sinks else allowed

    block_mask = create_block_mask(mask_mod, b, None, n_q, n_k + sinks, device=dev.type)
    score_mod = None
    if mask.features & {"additive", "alibi", "softcap"}:
        full = q.shape[:-1] + (n_k,)  # a zero bias is materialised: inductor's CPU lowering rejects an expanded 0-d one
        bias = (mask.bias.to(q.dtype).expand(full) if mask.bias is not None
                else torch.zeros(full, dtype=q.dtype, device=dev))
        if sinks:  # a column for the sink key, so that every index the score_mod reads exists
            bias = torch.cat([bias, bias.new_zeros(full[:-1] + (1,))], dim=-1)
        slopes = mask.alibi.to(dev, q.dtype) if mask.alibi is not None else torch.zeros(h_q, dtype=q.dtype, device=dev)
        capped = torch.tensor(mask.softcap is not None, device=dev)
        cap = torch.tensor(mask.softcap or 1.0, dtype=q.dtype, device=dev)

        def score_mod(score, bi, hi, qi, ki):
            score = torch.where(capped, cap * torch.tanh(score / cap), score)
            return score + bias[bi, hi, qi, ki] - slopes[hi] * (qi + diagonal - ki).abs()
    if sinks:
        sink, scored = mask.sink.to(dev, q.dtype), score_mod

        def score_mod(score, bi, hi, qi, ki):  # the sink key's score is the head's sink logit, nothing else
            rest = score if scored is None else scored(score, bi, hi, qi, ki)
            return torch.where(ki == sink_key, sink[hi], rest)

    return compiled_flex_attention()(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale,
                                     enable_gqa=group > 1)


def _triton(q, k, v, scale=None, mask=None, return_lse=False):
    from impl.triton_attention import triton_attention

    features = mask.features if mask is not None else frozenset()
    if features - {"causal-top-left", "causal-bottom-right"}:
        raise ValueError(f"triton supports causal masks only, not {sorted(features)}")
    return triton_attention(q, k, v, scale, causal=mask.causal if mask is not None else None, return_lse=return_lse)


def _flash_attn(q, k, v, scale=None, mask=None):
    from flash_attn import flash_attn_func  # layout (B, n, H, d); causal is bottom-right aligned (>= 2.1)

    mask = mask or Mask()
    if mask.features - _FLASH_ATTN_FEATURES:
        raise ValueError(f"flash-attn takes {sorted(_FLASH_ATTN_FEATURES)}, not {sorted(mask.features - _FLASH_ATTN_FEATURES)}")
    left, right = mask.window if mask.window is not None else (None, None)
    out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                          softmax_scale=default_scale(q.shape[-1]) if scale is None else scale,
                          causal=mask.causal is not None,
                          window_size=(-1 if left is None else left, -1 if right is None else right),  # -1: unbounded
                          softcap=0.0 if mask.softcap is None else mask.softcap,  # 0.0: off
                          alibi_slopes=None if mask.alibi is None else mask.alibi.float())  # float32 (H,)
    return out.transpose(1, 2)


# flash_attn_func (>= 2.6): window_size and alibi_slopes measured from the bottom-right diagonal, as Mask's
_FLASH_ATTN_FEATURES = frozenset({"causal-bottom-right", "window", "alibi", "softcap"})


def _needs_module(module: str, extra: str) -> Callable[[str], str | None]:
    def check(device: str = "cpu") -> str | None:
        if importlib.util.find_spec(module) is None:
            return f"the {module} package is not installed ({extra})"
        return None

    return check


def _triton_requires(device: str = "cpu") -> str | None:
    """Triton decides once per process whether kernels are compiled (CUDA tensors only) or interpreted
    (numpy; CPU tensors, and CUDA tensors copied to the host): so CPU needs the interpreter."""
    missing = _needs_module("triton", "pip install 'transformer-claims[triton]'")()
    if missing:
        return missing
    from impl import triton_attention

    if device == "cpu" and not triton_attention.INTERPRET:
        if triton_attention.INTERPRETER_PROBLEM:
            return triton_attention.INTERPRETER_PROBLEM
        return ("the kernels are compiled for the GPU in this process (TRITON_INTERPRET unset); CPU tensors need "
                "Triton's interpreter: set TRITON_INTERPRET=1 before starting Python")
    if device == "cuda" and triton_attention.INTERPRET:
        return ("TRITON_INTERPRET=1: the kernels would run in Triton's numpy interpreter, not on the GPU; "
                "unset it to check the compiled kernels")
    return None


# ---- the registry -----------------------------------------------------------------------------------

_CUDA_16 = frozenset({torch.float16, torch.bfloat16})
_LSE_MASKS = ALL_MASKS | {"lse"}  # every mask, and the log-sum-exp with return_lse=True (differentiable)

BACKENDS: dict[str, Backend] = {b.name: b for b in [
    Backend("reference", attention, {"cpu": Support(ALL_DTYPES, _LSE_MASKS | RANDOM_FEATURES),
                                     "cuda": Support(ALL_DTYPES, _LSE_MASKS | RANDOM_FEATURES)},
            fully_masked="nan", deterministic=True,
            doc="impl.attention.attention: softmax(q k^T s + bias) v in plain torch"),
    Backend("tiled", _tiled, {"cpu": Support(ALL_DTYPES, _LSE_MASKS), "cuda": Support(ALL_DTYPES, _LSE_MASKS)},
            deterministic=True, doc="impl.tiled_attention.flash_attention with 16 x 16 tiles"),
    Backend("sdpa-math", _sdpa("MATH"), {"cpu": Support(ALL_DTYPES, _BIAS_FEATURES | RANDOM_FEATURES),
                                         "cuda": Support(ALL_DTYPES, _BIAS_FEATURES | RANDOM_FEATURES)},
            deterministic=True, doc="SDPA, math kernel (a window and ALiBi as an attn_mask tensor; dropout_p seeded "
                                    "by the mask's seed)"),
    Backend("sdpa-flash", _sdpa("FLASH_ATTENTION"),
            {"cpu": Support(ALL_DTYPES, _BIAS_FEATURES),  # the CPU flash kernel takes attn_mask and float64
             "cuda": Support(_CUDA_16, masks=frozenset({"causal-top-left"}))},
            head_dims=(1, 256), equal_head_dims=True, declines=_sdpa_declines("FLASH_ATTENTION"),
            deterministic=True, doc="SDPA, FlashAttention-2 kernel"),
    Backend("sdpa-efficient", _sdpa("EFFICIENT_ATTENTION"),
            {"cuda": Support(F32_16)}, fully_masked=None, head_dim_multiple=8, declines=_sdpa_declines("EFFICIENT_ATTENTION"),
            doc="SDPA, memory-efficient (xFormers) kernel; CUDA only"),
    Backend("sdpa-cudnn", _sdpa("CUDNN_ATTENTION"),
            {"cuda": Support(_CUDA_16, masks=frozenset({"causal-top-left", "additive", "key-padding"}))},
            head_dims=(8, 128), fully_masked=None, head_dim_multiple=8, declines=_sdpa_declines("CUDNN_ATTENTION"),
            doc="SDPA, cuDNN kernel; CUDA only"),
    Backend("flex", _flex,
            {"cpu": Support(F32_16, _FLEX_FEATURES, backward=False),  # inductor CPU: inference only
             "cuda": Support(ALL_DTYPES, _FLEX_FEATURES)},
            deterministic=True, doc="FlexAttention (torch.compile, one compiled function per process)"),
    Backend("triton", _triton,
            {"cpu": Support(F32_16, masks=frozenset({"causal-top-left", "causal-bottom-right", "lse"})),
             "cuda": Support(F32_16, masks=frozenset({"causal-top-left", "causal-bottom-right", "lse"}))},
            head_dims=(16, 128), equal_head_dims=True, requires=_triton_requires, deterministic=True,
            doc="impl.triton_attention (our kernel); on CPU under TRITON_INTERPRET=1, correctness only"),
    Backend("flash-attn", _flash_attn, {"cuda": Support(_CUDA_16, masks=_FLASH_ATTN_FEATURES)},
            head_dims=(1, 256), equal_head_dims=True, requires=_needs_module("flash_attn", "pip install 'transformer-claims[gpu]'"),
            doc="flash_attn.flash_attn_func (optional package)"),
]}


def available(backend: Backend, device: str, dtype: torch.dtype) -> tuple[bool, str]:
    """Can ``backend`` run on ``device`` (a device type: ``cpu``, ``cuda``) in ``dtype`` here?"""
    support = backend.devices.get(device)
    if support is None:
        return False, f"{backend.name} does not run on {device} (runs on: {', '.join(backend.devices)})"
    if device == "cuda" and not torch.cuda.is_available():
        return False, f"{backend.name} needs CUDA; this machine has none"
    if dtype not in support.dtypes:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in support.dtypes))
        return False, f"{backend.name} on {device} supports {names}, not {str(dtype).removeprefix('torch.')}"
    reason = backend.requires(device)
    if reason:
        return False, f"{backend.name}: {reason}"
    return True, ""


def supports(backend: Backend, device: str, mask_features: frozenset = frozenset(), gqa: bool = False,
             backward: bool = False, head_dim: int | None = None, value_dim: int | None = None) -> tuple[bool, str]:
    """Does ``backend`` declare support for these mask features, GQA, backward and head dimensions?"""
    support = backend.devices.get(device)
    if support is None:
        return False, f"{backend.name} does not run on {device}"
    missing = set(mask_features) - support.masks
    if missing:
        return False, f"{backend.name} on {device} does not declare the mask features {sorted(missing)} (not checked)"
    if gqa and not backend.gqa:
        return False, f"{backend.name} does not support grouped-query attention"
    if backward and not support.backward:
        return False, f"{backend.name} has no backward pass on {device}"
    lo, hi = backend.head_dims
    if head_dim is not None and not lo <= head_dim <= hi:
        return False, f"{backend.name} supports head dimensions {lo}..{hi}, not {head_dim}"
    if backend.equal_head_dims and value_dim is not None and head_dim is not None and value_dim != head_dim:
        return False, f"{backend.name} needs d_v = d_k, not d_v = {value_dim}, d_k = {head_dim}"
    m = backend.head_dim_multiple
    if any(d is not None and d % m for d in (head_dim, value_dim)):
        return False, f"{backend.name} needs head dimensions that are multiples of {m}, not d_k = {head_dim}, d_v = {value_dim}"
    return True, ""


def declines(backend: Backend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None,
             backward: bool = False, scale: float | None = None) -> str | None:
    """Why ``backend``'s own library would refuse this problem (its finer rules), or None; ``scale`` (the caller's)
    goes to a ``declines`` that names a ``scale`` parameter."""
    if backend.declines is None:
        return None
    takes_scale = "scale" in inspect.signature(backend.declines).parameters
    return backend.declines(q, k, v, mask, backward, **({"scale": scale} if takes_scale else {}))
