"""A gallery of real attention kernels, each adapted to ``claims kernel`` in a few lines.

Each adapter calls a library's own attention function the way its users call it, and declares in
``claims_capabilities`` what that function takes, in the library's own conventions (applied around
it by :mod:`claimcheck.conventions`: layout, key-padding meaning, tuple outputs). An adapter only
translates the contract's :class:`impl.attention.Mask` into the library's mask arguments::

    claims kernel impl.gallery:sdpa                   # torch SDPA, its own choice of CPU kernel
    claims kernel impl.gallery:sdpa_math              # ... pinned to the math kernel; sdpa_flash: the CPU flash kernel
    claims kernel impl.gallery:sdpa_packed            # ... packed sequences (a document mask) and a KV cache through it
    claims kernel impl.gallery:flex_attention         # FlexAttention, compiled (the registry's flex adapter)
    claims kernel impl.gallery:multihead_attention    # nn.MultiheadAttention, identity projections
    claims kernel impl.gallery:transformers_sdpa      # transformers' sdpa_attention_forward (optional package)
    claims kernel impl.gallery:transformers_eager     # ... eager_attention_forward
    claims kernel impl.gallery:transformers_flex      # ... flex_attention_forward (torch.compile)

transformers is an optional extra (``pip install 'transformer-claims[transformers]'``); without it its
adapters raise ``ImportError`` saying so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from impl.attention import Mask, default_scale, mask_bias
from impl.backends import FLEX_GRAPHS, cpu_flash_refusal, cpu_flash_scale_zero

# ---- torch -----------------------------------------------------------------------------------------


def _sdpa_call(q, k, v, scale, mask: Mask | None):
    """SDPA as users call it: ``is_causal`` for a top-left causal mask alone, else one ``attn_mask``:
    boolean (True = attend) for key padding and causal masks, float for an additive bias."""
    mask = mask or Mask()
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = None if mask.key_padding is None else mask.key_padding[:, None, None, :]  # (B, 1, 1, n_k)
    if mask.causal == "bottom-right" or (mask.causal and (allowed is not None or mask.bias is not None)):
        tril = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q if mask.causal == "bottom-right"
                                                                             else 0)
        allowed = tril if allowed is None else allowed & tril
    attn_mask = allowed
    if mask.bias is not None:
        attn_mask = mask.bias if allowed is None else mask.bias.masked_fill(~allowed, -math.inf)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale,
                                          is_causal=mask.causal == "top-left" and attn_mask is None,
                                          enable_gqa=k.shape[1] != q.shape[1])


def sdpa(q, k, v, scale=None, mask=None):
    """``torch.nn.functional.scaled_dot_product_attention``, torch choosing the kernel."""
    return _sdpa_call(q, k, v, scale, mask)


def _pinned(kernel_name: str):
    def fn(q, k, v, scale=None, mask=None):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, kernel_name)):
            return _sdpa_call(q, k, v, scale, mask)

    fn.__name__ = f"sdpa_{kernel_name.lower()}"
    fn.__doc__ = f"SDPA pinned to its {kernel_name} kernel (``torch.nn.attention.sdpa_kernel``)."
    return fn


sdpa_math = _pinned("MATH")
sdpa_flash = _pinned("FLASH_ATTENTION")  # the CPU flash kernel (the efficient and cuDNN kernels are CUDA only)

# SDPA's CPU kernels guard a row with no allowed key and return 0 (the registry's sdpa-math, sdpa-flash)
_SDPA = {"dtypes": ["float32", "float16", "bfloat16"], "backward": True, "fully_masked": "zero"}
for _fn in (sdpa, sdpa_math, sdpa_flash):
    _fn.claims_capabilities = dict(_SDPA)
sdpa_flash.claims_capabilities["equal_head_dims"] = True  # the flash kernel needs d_v = d_k
# torch dispatches a CPU problem with is_causal to the flash kernel (and one it cannot take to the math kernel)
sdpa.claims_capabilities["declines"] = lambda q, k, v, mask, backward=False, scale=None: \
    cpu_flash_scale_zero(q, mask, scale)
sdpa_flash.claims_capabilities["declines"] = lambda q, k, v, mask, backward=False, scale=None: \
    cpu_flash_refusal(q, k, v, mask, scale)


def _document_mask(cu_q: torch.Tensor, cu_k: torch.Tensor, causal: str | None) -> torch.Tensor:
    """Bool (total_q, total_k): query i and key j are in one packed sequence (attention-gym's document mask),
    and under a causal mask the key's position in it is at most the query's (+ n_k - n_q for bottom-right)."""
    n_q, n_k = cu_q.diff().long(), cu_k.diff().long()
    seq = torch.arange(len(n_q), device=cu_q.device)
    doc_q, doc_k = seq.repeat_interleave(n_q), seq.repeat_interleave(n_k)  # (total_q,), (total_k,)
    pos_q = torch.arange(len(doc_q), device=cu_q.device) - cu_q[:-1].long()[doc_q]  # position within its sequence
    pos_k = torch.arange(len(doc_k), device=cu_q.device) - cu_k[:-1].long()[doc_k]
    allowed = doc_q[:, None] == doc_k[None, :]
    if causal is not None:
        offset = (n_k - n_q)[doc_q] if causal == "bottom-right" else torch.zeros_like(doc_q)
        allowed &= pos_k[None, :] <= (pos_q + offset)[:, None]
    return allowed


def sdpa_packed(q, k, v, scale=None, mask=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                max_seqlen_k=None, cache_seqlens=None):
    """SDPA as users run packed sequences and a KV cache through it: packed q, k, v (total, H, d) as one row
    under a block-diagonal document mask (varlen); a cache (B, H, L, d) under a mask of its valid prefix,
    bottom-right causal when asked (kvcache); any other call as :func:`sdpa`."""
    if cu_seqlens_q is not None:
        allowed = _document_mask(cu_seqlens_q, cu_seqlens_k, mask.causal if mask is not None else None)
        out = F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)), attn_mask=allowed,
                                             scale=scale, enable_gqa=k.shape[1] != q.shape[1])  # (1, H, total, d)
        return out[0].transpose(0, 1)
    if cache_seqlens is not None:
        n_q, cache_len = q.shape[-2], k.shape[-2]
        j, i = torch.arange(cache_len, device=q.device), torch.arange(n_q, device=q.device)
        lengths = cache_seqlens.long()[:, None, None, None]  # (B, 1, 1, 1)
        allowed = j < lengths  # (B, 1, 1, L): the valid prefix
        if mask is not None and mask.causal == "bottom-right":
            allowed = allowed & (j[None, :] <= i[:, None] + lengths - n_q)  # (B, 1, n_q, L)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale,
                                              enable_gqa=k.shape[1] != q.shape[1])
    return _sdpa_call(q, k, v, scale, mask)


sdpa_packed.claims_capabilities = {**_SDPA, "masks": ["causal-top-left", "causal-bottom-right", "key-padding",
                                                      "additive", "varlen", "kvcache"]}


def flex_attention(q, k, v, scale=None, mask=None):
    """FlexAttention (``torch.compile``), through the registry's adapter (:func:`impl.backends._flex`: the
    masks as one ``mask_mod``, a bias, ALiBi and a softcap as one ``score_mod``, a sink as one extra key)."""
    from impl.backends import _flex

    return _flex(q, k, v, scale, mask)


flex_attention.claims_capabilities = {  # as the registry's flex declares it on CPU
    "dtypes": ["float32", "float16", "bfloat16"], "backward": False, "deterministic": True, "fully_masked": "zero",
    "masks": ["causal-top-left", "causal-bottom-right", "key-padding", "additive", "window", "alibi", "softcap",
              "sink"]}


def multihead_attention(q, k, v, scale=None, mask=None):
    """``torch.nn.MultiheadAttention`` computing plain attention: every projection the identity, no bias.

    Its own conventions, declared: inputs (B, n, H d) with ``batch_first`` (so the (B, n, H, d) layout,
    heads merged here); ``key_padding_mask`` True = ignore the key; an ``attn_mask`` that is True where
    attention is *not* allowed, or a float bias of shape (B H, n_q, n_k); the scale fixed at 1/sqrt(d);
    returns ``(out, weights)``; one head count for q, k and v, d_v = d_k.
    """
    mask = mask or Mask()
    b, n_q, h, d = q.shape
    n_k = k.shape[1]
    e = h * d
    mha = torch.nn.MultiheadAttention(e, h, bias=False, batch_first=True, device=q.device, dtype=q.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(e).repeat(3, 1))  # (3E, E): W_q = W_k = W_v = I
        mha.out_proj.weight.copy_(torch.eye(e))
    mha.requires_grad_(False).eval()
    attn_mask = None
    if mask.causal:
        hidden = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu(
            1 + (n_k - n_q if mask.causal == "bottom-right" else 0))  # True = not allowed
        attn_mask = hidden
    if mask.bias is not None:  # (B, H, n_q, n_k) -> (B H, n_q, n_k), added to the scores
        bias = mask.bias.expand(b, h, n_q, n_k).reshape(b * h, n_q, n_k)
        attn_mask = bias if attn_mask is None else bias.masked_fill(attn_mask, -math.inf)
    out, _ = mha(q.flatten(2), k.flatten(2), v.flatten(2), key_padding_mask=mask.key_padding,
                 attn_mask=attn_mask, need_weights=False)
    return out.unflatten(-1, (h, d)), None  # (B, n_q, H, d), and the weights it did not compute


multihead_attention.claims_capabilities = {
    "dtypes": ["float32", "float16", "bfloat16"], "backward": True, "gqa": False, "equal_head_dims": True,
    "scale": False, "layout": "bshd", "padding": "true-means-ignore", "output": 0,
    "fully_masked": "zero",  # its slow path calls SDPA, whose CPU kernels return 0 for a row with no allowed key
}

# ---- transformers ----------------------------------------------------------------------------------


@dataclass
class _Module:
    """What transformers' attention functions read from the layer calling them."""

    num_key_value_groups: int
    is_causal: bool = False
    training: bool = False


def _transformers(name: str):
    try:
        from transformers.integrations import flex_attention, sdpa_attention
        from transformers.models.llama import modeling_llama
    except ImportError as exc:
        raise ImportError(f"impl.gallery:{name} needs transformers (pip install 'transformer-claims[transformers]'): "
                          f"{exc}") from None
    return {"sdpa": sdpa_attention.sdpa_attention_forward, "eager": modeling_llama.eager_attention_forward,
            "flex": flex_attention.flex_attention_forward}[name]


def _allowed(mask: Mask, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """Bool (B or 1, H or 1, n_q, n_k), True = attend, of the mask's keys hidden (causal, padding, -inf bias)."""
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], torch.float32, q.device)
    return None if bias is None else bias > -math.inf


def transformers_sdpa(q, k, v, scale=None, mask=None):
    """``transformers.integrations.sdpa_attention.sdpa_attention_forward``, masks as transformers builds them.

    transformers' causal masks are bottom-right aligned (query i sits at position n_k - n_q + i of the
    cache). Where it can, it passes no mask and relies on the layer's ``is_causal`` instead
    (``masking_utils._ignore_causal_mask_sdpa``: a causal mask alone, and n_q = 1 or n_q = n_k), and
    ``sdpa_attention_forward`` then switches causality off for a single query (``is_causal = q_len > 1
    and ...``: one query sees every key) and uses SDPA's own top-left ``is_causal`` otherwise; every
    other mask is an explicit boolean ``attention_mask`` (True = attend), here (B, H, n_q, n_k).
    Returns ``(out (B, n, H, d), None)``.
    """
    mask = mask or Mask()
    n_q, n_k = q.shape[-2], k.shape[-2]
    causal_alone = mask.causal is not None and mask.features == {f"causal-{mask.causal}"}
    skip_mask = causal_alone and n_q in (1, n_k)
    module = _Module(q.shape[1] // k.shape[1], is_causal=skip_mask)
    attention_mask = None if skip_mask or not mask.features else _allowed(mask, q, k)
    if mask.bias is not None:  # a float mask is added to the scores
        attention_mask = mask_bias(mask, n_q, n_k, q.dtype, q.device)
    return _transformers("sdpa")(module, q, k, v, attention_mask, scaling=scale)


def transformers_eager(q, k, v, scale=None, mask=None):
    """``eager_attention_forward`` (Llama's), with the float mask transformers' ``eager_mask`` builds: 0
    where allowed, the dtype's most negative number where not (plus an additive bias). Returns
    ``(out (B, n, H, d), weights)``."""
    mask = mask or Mask()
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], q.dtype, q.device)
    attention_mask = None if bias is None else bias.clamp(min=torch.finfo(q.dtype).min)
    return _transformers("eager")(_Module(q.shape[1] // k.shape[1]), q, k, v, attention_mask,
                                  scaling=default_scale(q.shape[-1]) if scale is None else scale)


def transformers_flex(q, k, v, scale=None, mask=None):
    """``flex_attention_forward``: causal masks and key padding as a ``BlockMask`` (transformers'
    ``flex_attention_mask``), an additive bias as its per-head ``position_bias``, the softcap as its
    ``softcap``. Returns ``(out (B, n, H, d), None)`` on CPU (no log-sum-exp there)."""
    import torch._dynamo.config as dynamo
    from torch.nn.attention.flex_attention import create_block_mask

    # past dynamo's limit of 8 recompiles transformers' compiled flex_attention silently runs eager (the unfused
    # path) under FlexAttention's name: raised, and hitting it made an error, as for the registry's flex
    dynamo.recompile_limit = max(dynamo.recompile_limit, FLEX_GRAPHS)
    dynamo.fail_on_recompile_limit_hit = True
    mask = mask or Mask()
    b, _, n_q, _ = q.shape
    n_k = k.shape[-2]
    allowed = _allowed(Mask(causal=mask.causal, key_padding=mask.key_padding), q, k)
    block_mask = None
    if allowed is not None:
        allowed = allowed.expand(b, 1, n_q, n_k)

        def mask_mod(bi, hi, qi, ki):
            return allowed[bi, 0, qi, ki]

        block_mask = create_block_mask(mask_mod, b, None, n_q, n_k, device=q.device.type)
    position_bias = None if mask.bias is None else mask.bias.expand(q.shape[:-1] + (n_k,)).to(q.dtype)
    return _transformers("flex")(_Module(q.shape[1] // k.shape[1]), q, k, v, block_mask, scaling=scale,
                                 softcap=mask.softcap, position_bias=position_bias)


# transformers' masks leave a row with no allowed key unspecified: its eager mask gives such a row equal
# weights (the mean of V), and the rows are padding whose outputs it never reads
_TRANSFORMERS = {"dtypes": ["float32", "float16", "bfloat16"], "out_layout": "bshd", "output": 0,
                 "masks": ["causal-bottom-right", "key-padding", "additive"], "fully_masked": "any"}
transformers_sdpa.claims_capabilities = {**_TRANSFORMERS, "backward": True}
transformers_eager.claims_capabilities = {**_TRANSFORMERS, "backward": True}
transformers_flex.claims_capabilities = {**_TRANSFORMERS, "masks": [*_TRANSFORMERS["masks"], "softcap"],
                                         "backward": False}  # inductor's CPU FlexAttention: inference only

GALLERY = ("sdpa", "sdpa_math", "sdpa_flash", "sdpa_packed", "flex_attention", "multihead_attention",
           "transformers_sdpa", "transformers_eager", "transformers_flex")  # every kernel of the gallery, by name
COMPILED = ("flex_attention", "transformers_flex")  # one CPU compile (~5 s) for every new shape
