"""A zoo of attention kernels that are wrong in one way each, as real kernels go wrong.

Each entry is a function with the contract of :func:`impl.attention.attention` and a
``claims_capabilities`` attribute (what ``claims kernel`` reads), plus the case and the check of
:mod:`claimcheck.kernel` that must catch it (``"gqa-4/2:out"``: the output on the fixed 4-over-2
head problem; ``"fully-masked-key-padding"``: the fully-masked-rows case). The kernels are small
edits of the plain reference, in float32 and one low precision, so the zoo runs in seconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import torch

from impl.attention import Mask, attention, default_scale, mask_bias, repeat_kv

FORWARD = {"dtypes": ["float32", "float16"], "backward": False, "fully_masked": None}
BACKWARD = {**FORWARD, "backward": True}
CAUSAL = ("causal-top-left", "causal-bottom-right")  # declared with a feature: the matrix then combines the two
BASE = ["causal-top-left", "causal-bottom-right", "key-padding", "additive"]  # the masks every kernel takes
BLOCK = 16  # key tile of the tiled variants
BIAS_3D_CHECK = "batch-3:error"  # batch-3 is the fixed additive problem whose bias is 3-D with B != 1 (H_q = 6, B = 3)
WIDE_BLOCK = 64  # the key tile of most fused forwards: a bug in it shows only past 64 keys


@dataclass(frozen=True)
class Wrong:
    """A wrong kernel, what is wrong with it, and the case and check that must reject it."""

    name: str
    fn: Callable
    bug: str
    case: str  # e.g. "float32-causal-top-left"
    check: str  # e.g. "gqa-4/2:out", "large-logits:out", "fully-masked-key-padding", "gqa-4/2:error" (it crashed)
    diagnosis: str = ""  # what the verdict must say the kernel does instead (a part of it), when it can say


def _heads(q, k, v):
    """k, v repeated to q's heads: query head h reads key/value head h // group."""
    group = q.shape[-3] // k.shape[-3]
    return repeat_kv(k, group), repeat_kv(v, group)


def _scores(q, k, scale, mask):
    """Scaled scores plus the mask's bias: (B, H_q, n_q, n_k)."""
    scale = default_scale(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], s.dtype, s.device)
    return s if bias is None else s + bias


def _softmax_v(s, v):
    return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v


def wrong_scale(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, 1.0 / q.shape[-1], mask), v)  # 1/d instead of 1/sqrt(d)


def softmax_over_queries(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, mask)
    return torch.softmax(s.float(), dim=-2).nan_to_num().to(v.dtype) @ v  # normalises columns, not rows


def causal_off_by_one(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    if mask is not None and mask.causal:
        n_q, n_k = q.shape[-2], k.shape[-2]
        offset = (0 if mask.causal == "top-left" else n_k - n_q) + 1  # sees one future key
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + offset
        s = _scores(q, k, scale, Mask(None, mask.key_padding, mask.bias)).masked_fill(~allowed, -math.inf)
        return _softmax_v(s, v)
    return _softmax_v(_scores(q, k, scale, mask), v)


def causal_always_top_left(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    if mask is not None and mask.causal:
        mask = Mask("top-left", mask.key_padding, mask.bias)  # ignores the bottom-right alignment
    return _softmax_v(_scores(q, k, scale, mask), v)


def _tiled(q, k, v, scale, mask, rescale=True, tail=True, normalise=True, block=BLOCK, max_from_zero=False,
           state=torch.float32):
    """Online softmax over key tiles of ``block`` in float32 (the FlashAttention forward), with switchable bugs;
    ``state``: the dtype the row sum and the accumulator are kept in between tiles."""
    k, v = _heads(q, k, v)
    s_all = _scores(q.float(), k.float(), scale, mask)
    m = torch.full(s_all.shape[:-1], 0.0 if max_from_zero else -math.inf)  # 0: rows of negative scores underflow
    l = torch.zeros(s_all.shape[:-1])
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],))
    n_k = k.shape[-2]
    stop = n_k if tail else n_k - n_k % block  # without the tail: the last partial tile is dropped
    for j in range(0, stop, block):
        s = s_all[..., j:j + block]
        m_new = torch.maximum(m, s.amax(-1))
        shift = torch.where(m_new == -math.inf, 0.0, m_new)
        p = torch.exp(s - shift[..., None])
        alpha = torch.exp(m - shift) if rescale else torch.ones_like(m)  # without rescaling: stale sums
        l = (alpha * l + p.sum(-1)).to(state).float()
        acc = (alpha[..., None] * acc + p @ v[..., j:j + block, :].float()).to(state).float()
        m = m_new
    out = acc / l[..., None] if normalise else acc
    return out.to(q.dtype)


def online_softmax_without_rescaling(q, k, v, scale=None, mask=None):
    return _tiled(q, k, v, scale, mask, rescale=False)


def online_softmax_64_without_rescaling(q, k, v, scale=None, mask=None):
    return _tiled(q, k, v, scale, mask, rescale=False, block=WIDE_BLOCK)  # right for up to 64 keys, one tile


def running_max_from_zero(q, k, v, scale=None, mask=None):
    """The running row max starts at 0, not -inf: right while a row has a score near or above 0, but a row of
    scores all below about -103 gives exp(s - 0) = 0 in float32 for every key, and 0 / 0."""
    return _tiled(q, k, v, scale, mask, max_from_zero=True)


def dropped_tail_block(q, k, v, scale=None, mask=None):
    return _tiled(q, k, v, scale, mask, tail=False)


def missing_normalisation(q, k, v, scale=None, mask=None):
    return _tiled(q, k, v, scale, mask, normalise=False)  # returns sum_j exp(s_j - m) v_j, not divided by l


def float16_accumulation(q, k, v, scale=None, mask=None):
    """Every product and sum in float16, whatever the inputs' precision."""
    k, v = _heads(q, k, v)
    h = torch.float16
    m = mask if mask is None or mask.bias is None else Mask(mask.causal, mask.key_padding, mask.bias.to(h))
    s = _scores(q.to(h), k.to(h), scale, m)
    p = torch.softmax(s, dim=-1)
    return (p @ v.to(h)).to(q.dtype)


def scale_ignored(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, None, mask), v)  # always 1/sqrt(d), whatever the caller passed


def causal_dropped_for_one_query(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    if mask is not None and mask.causal and q.shape[-2] == 1:  # "one query sees every key": true bottom-right only
        mask = Mask(None, mask.key_padding, mask.bias)
    return _softmax_v(_scores(q, k, scale, mask), v)


def padding_dropped_under_causal(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    if mask is not None and mask.causal:
        mask = Mask(mask.causal, None, mask.bias)  # the causal path forgets the key padding
    return _softmax_v(_scores(q, k, scale, mask), v)


def mean_of_v_on_fully_masked_rows(q, k, v, scale=None, mask=None):
    """Masks by adding the dtype's most negative finite number instead of -inf: right wherever a row
    keeps a key, but a row with none gets equal weights, the mean of V over the keys it must not see."""
    k, v = _heads(q, k, v)
    s = _scores(q.float(), k.float(), scale, None)
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], torch.float32, q.device)
    if bias is not None:
        s = s + bias.nan_to_num(neginf=0.0)  # the finite part of the bias (none for boolean masks)
        s = s.masked_fill(torch.isinf(bias), torch.finfo(torch.float32).min)
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


def gqa_modulo(q, k, v, scale=None, mask=None):
    h_q, h_kv = q.shape[-3], k.shape[-3]
    index = torch.arange(h_q) % h_kv  # should be h // (h_q / h_kv)
    k, v = k[:, index], v[:, index]
    return _softmax_v(_scores(q, k, scale, mask), v)


def no_max_subtraction(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    e = torch.exp(_scores(q.float(), k.float(), scale, mask))  # overflows to inf past a score of 88.7
    return (e / e.sum(-1, keepdim=True) @ v.float()).to(q.dtype)


def mask_after_softmax(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, None)
    p = torch.softmax(s.float(), dim=-1)
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], torch.float32, q.device)
    if bias is not None:
        p = p * torch.isfinite(bias)  # masked weights zeroed, not renormalised
    return p.to(v.dtype) @ v


def key_padding_ignored(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    if mask is not None:
        mask = Mask(mask.causal, None, mask.bias)
    return _softmax_v(_scores(q, k, scale, mask), v)


def bias_before_scale(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], q.dtype, q.device)
    s = q @ k.transpose(-2, -1)
    s = (s if bias is None else s + bias) * scale  # the bias is scaled with the scores
    return _softmax_v(s, v)


def nan_on_fully_masked_rows(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, scale, mask), v)  # correct, but a fully masked row is NaN, declared zero


class _WrongLse(torch.autograd.Function):
    """A correct forward; the backward recomputes P = exp(S - L) with L missing its row max."""

    @staticmethod
    def forward(ctx, q, k, v, scale, mask):
        s = _scores(q.float(), k.float(), scale, mask)
        m = s.amax(-1, keepdim=True)
        lse_wrong = torch.log(torch.exp(s - m).sum(-1, keepdim=True))  # forgot + m
        ctx.save_for_backward(q, k, v, lse_wrong)
        ctx.args = (scale, mask)
        return (torch.softmax(s, -1) @ v.float()).to(q.dtype)

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, lse = ctx.saved_tensors
        scale, mask = ctx.args
        scale = default_scale(q.shape[-1]) if scale is None else scale
        s = _scores(q.float(), k.float(), scale, mask)
        p = torch.exp(s - lse)
        do = d_out.float()
        dv = p.transpose(-2, -1) @ do
        dp = do @ v.float().transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq, dk = scale * ds @ k.float(), scale * ds.transpose(-2, -1) @ q.float()
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def wrong_lse_in_backward(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)  # autograd sums the repeated heads' gradients back over each group
    return _WrongLse.apply(q, k, v, scale, mask)


class _FirstHeadOnly(torch.autograd.Function):
    """repeat_kv whose backward keeps the first query head's gradient of each group instead of the sum."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return repeat_kv(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad[:, ::ctx.group].contiguous(), None


def dkdv_not_summed_over_the_group(q, k, v, scale=None, mask=None):
    group = q.shape[-3] // k.shape[-3]
    k, v = _FirstHeadOnly.apply(k, group), _FirstHeadOnly.apply(v, group)
    return _softmax_v(_scores(q, k, scale, mask), v)


def scales_q_in_place(q, k, v, scale=None, mask=None):
    """Folds the scale into q in place (``q *= scale``): a right output, and the caller's q corrupted."""
    q.mul_(default_scale(q.shape[-1]) if scale is None else scale)
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, 1.0, mask), v)


def drops_keys_past_1024(q, k, v, scale=None, mask=None):
    """A split-K bound off by one split: the keys past the first 1024 are never read (nor their mask)."""
    n = 1024
    if mask is not None:
        mask = Mask(mask.causal, None if mask.key_padding is None else mask.key_padding[..., :n],
                    None if mask.bias is None else mask.bias[..., :n])
    k, v = _heads(q, k[..., :n, :], v[..., :n, :])
    return _softmax_v(_scores(q, k, default_scale(q.shape[-1]) if scale is None else scale, mask), v)


def first_64_head_dims(q, k, v, scale=None, mask=None):
    """Scores from the first 64 dims of each head only (a head-dim loop that never advances past one tile)."""
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q[..., :64], k[..., :64], default_scale(q.shape[-1]) if scale is None else scale,
                              mask), v)


def keys_in_a_new_order_each_call(q, k, v, scale=None, mask=None):
    """Sums over the keys in an order that changes from call to call (as atomics or a split-K reduction
    order do): as accurate as the reference, but not bitwise the same twice, while declaring it is."""
    k, v = _heads(q, k, v)
    if mask is None or not mask.features:  # a mask's columns would have to move with the keys: unmasked only
        order = torch.randperm(k.shape[-2])
        k, v = k[..., order, :], v[..., order, :]
    return _softmax_v(_scores(q, k, scale, mask), v)


def sixteen_bit_running_state(q, k, v, scale=None, mask=None):
    """A 64-wide online softmax whose row sum and accumulator are stored in the inputs' dtype between tiles: exact in
    float32, an ulp of rounding a tile in float16 (seen only over many tiles of values that do not cancel)."""
    return _tiled(q, k, v, scale, mask, block=WIDE_BLOCK, state=q.dtype)


def causal_row_within_its_tile(q, k, v, scale=None, mask=None):
    """The causal mask compares a key with the query's index within its 128-row tile: right up to 128 queries."""
    k, v = _heads(q, k, v)
    if mask is None or not mask.causal:
        return _softmax_v(_scores(q, k, scale, mask), v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    offset = 0 if mask.causal == "top-left" else n_k - n_q
    allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] % 128 + offset
    s = _scores(q, k, scale, Mask(None, mask.key_padding, mask.bias)).masked_fill(~allowed, -math.inf)
    return _softmax_v(s, v)


def head_shift_by_log2_group(q, k, v, scale=None, mask=None):
    """Query head h reads key/value head h >> ceil(log2 group): right for groups 1, 2, 4, 8; a group of 3 sends
    query head 3 of 6 to key/value head 0."""
    heads = torch.arange(q.shape[-3]) >> (q.shape[-3] // k.shape[-3] - 1).bit_length()
    return _softmax_v(_scores(q, k[..., heads, :, :], scale, mask), v[..., heads, :, :])


def scale_or_default(q, k, v, scale=None, mask=None):
    """``scale = scale or 1/sqrt(d)``: the caller's scale 0 (uniform weights) becomes the default."""
    return _plain(q, k, v, scale or None, mask)


def bias_rows_read_as_batch(q, k, v, scale=None, mask=None):
    """A 3-D bias read as (B, n_q, n_k) and given a heads axis; the contract broadcasts it as (H_q, n_q, n_k)."""
    if mask is not None and mask.bias is not None and mask.bias.dim() == 3:
        mask = dataclasses.replace(mask, bias=mask.bias[:, None])
    return _plain(q, k, v, scale, mask)


def softcap_after_the_bias(q, k, v, scale=None, mask=None):
    """The finite bias added before c tanh(s / c), not after (its -inf entries still hide their keys)."""
    k, v = _heads(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask.bias is not None:
        s = s + mask.bias.nan_to_num(neginf=0.0)
    s = mask.softcap * torch.tanh(s / mask.softcap)
    rest = dataclasses.replace(mask, softcap=None, bias=None if mask.bias is None else
                               torch.where(torch.isneginf(mask.bias), mask.bias, 0.0))
    bias = mask_bias(rest, q.shape[-2], k.shape[-2], s.dtype, s.device)
    return _softmax_v(s if bias is None else s + bias, v)


def _softmax_backward(ctx, d_out):
    """``(q, k, v, P, dO, dS)`` in float32 from what the forward saved: dS = P (dP - rowsum(dP P)), dP = dO V^T."""
    q, k, v, p = ctx.saved_tensors
    do = d_out.float()
    dp = do @ v.float().transpose(-2, -1)
    return q, k, v, p, do, p * (dp - (dp * p).sum(-1, keepdim=True))


class _DkDvWholeRowTilesOnly(torch.autograd.Function):
    """The right forward; dK and dV summed over the whole 128-row query tiles only (n_q // 128 of them, at least
    one): the last partial tile's queries are missing from both past 128 queries."""

    @staticmethod
    def forward(ctx, q, k, v, scale, mask):
        p = torch.softmax(_scores(q.float(), k.float(), scale, mask), dim=-1).nan_to_num()
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = default_scale(q.shape[-1]) if scale is None else scale
        return (p @ v.float()).to(q.dtype)

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, p, do, ds = _softmax_backward(ctx, d_out)
        rows = slice(0, 128 * max(1, q.shape[-2] // 128))
        dk = ds[..., rows, :].transpose(-2, -1) @ q[..., rows, :].float() * ctx.scale
        dv = p[..., rows, :].transpose(-2, -1) @ do[..., rows, :]
        return (ds @ k.float() * ctx.scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def dkdv_whole_row_tiles_only(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)  # autograd sums the group's dK, dV back onto each key/value head
    return _DkDvWholeRowTilesOnly.apply(q, k, v, scale, mask)


class _DqKeysInANewOrder(torch.autograd.Function):
    """The right forward and gradients, dQ summed over the keys in a new order each call (as atomic adds do)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, mask):
        out = _DkDvWholeRowTilesOnly.forward(ctx, q, k, v, scale, mask)
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, p, do, ds = _softmax_backward(ctx, d_out)
        dq = torch.zeros(q.shape, dtype=torch.float32)
        for j in torch.randperm(k.shape[-2]).tolist():  # one float32 add a key, in this call's order
            dq += ds[..., j, None] * k[..., j, None, :].float()
        dq = dq * ctx.scale
        dk = ds.transpose(-2, -1) @ q.float() * ctx.scale
        return dq.to(q.dtype), dk.to(k.dtype), (p.transpose(-2, -1) @ do).to(v.dtype), None, None


def dq_keys_in_a_new_order_each_call(q, k, v, scale=None, mask=None):
    """Declares bitwise-equal results; its forward is, its dQ is not."""
    k, v = _heads(q, k, v)
    return _DqKeysInANewOrder.apply(q, k, v, scale, mask)


def unit_head_dim_stride(q, k, v, scale=None, mask=None):
    """Honours the batch, head and token strides but takes the head dim's as 1 (a pointer walked with a hard-coded
    unit stride): right whenever the last dim is contiguous."""
    q, k, v = (t.as_strided(t.shape, (*t.stride()[:-1], 1), t.storage_offset()) for t in (q, k, v))
    return _plain(q, k, v, scale, mask)


def _plain(q, k, v, scale, mask):
    """The right answer for the features the zoo's kernels take (no softcap or sink)."""
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, scale, mask), v)


def _features(mask: Mask, **changes) -> Mask:
    """``mask`` with some fields changed (the features a wrong kernel gets wrong)."""
    return dataclasses.replace(mask, **changes)


def window_from_the_top_left(q, k, v, scale=None, mask=None):
    """The window measured from the top-left diagonal (j - i), not the bottom-right one (j - i - (n_k - n_q))."""
    if mask is None or mask.window is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = _scores(q, k, scale, _features(mask, window=None))
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    left, right = mask.window
    inside = torch.ones(n_q, n_k, dtype=torch.bool)
    if left is not None:
        inside &= j >= i - left
    if right is not None:
        inside &= j <= i + right
    inside[:, 0] |= ~inside.any(-1)  # keep a key in every row
    return _softmax_v(s.masked_fill(~inside, -math.inf), v)


def window_left_bound_ignored(q, k, v, scale=None, mask=None):
    if mask is None or mask.window is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, scale, _features(mask, window=(None, mask.window[1]))), v)


def alibi_slopes_in_reverse(q, k, v, scale=None, mask=None):
    """Head h gets the slope of head H - 1 - h (a flipped slope table)."""
    if mask is None or mask.alibi is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, scale, _features(mask, alibi=mask.alibi.flip(0))), v)


def alibi_without_the_offset(q, k, v, scale=None, mask=None):
    """ALiBi distance |i - j|: the n_k - n_q offset of the bottom-right diagonal is lost."""
    if mask is None or mask.alibi is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = _scores(q, k, scale, _features(mask, alibi=None))
    distance = (torch.arange(n_q)[:, None] - torch.arange(n_k)[None, :]).abs().to(s.dtype)
    return _softmax_v(s - mask.alibi.to(s.dtype)[:, None, None] * distance, v)


def softcap_before_the_scale(q, k, v, scale=None, mask=None):
    """c tanh(q k^T / c) * scale: the cap applied to the unscaled scores."""
    if mask is None or mask.softcap is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    s = mask.softcap * torch.tanh(q @ k.transpose(-2, -1) / mask.softcap) * scale
    return _softmax_v(s, v)


def sink_ignored(q, k, v, scale=None, mask=None):
    k, v = _heads(q, k, v)
    return _softmax_v(_scores(q, k, scale, _features(mask, sink=None)), v)


def first_heads_sink_for_all(q, k, v, scale=None, mask=None):
    """Every head uses head 0's sink logit."""
    if mask is None or mask.sink is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, _features(mask, sink=None))
    sink = mask.sink[0].to(s.dtype).expand(s.shape[:-1] + (1,))
    return torch.softmax(torch.cat([s, sink], -1).float(), -1)[..., :-1].to(v.dtype) @ v


def sink_dropped_under_causal(q, k, v, scale=None, mask=None):
    """The sink key kept only where no causal mask comes with it (a causal mask_mod that hides the extra key)."""
    if mask is None or mask.sink is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    if mask.causal is not None:
        mask = _features(mask, sink=None)
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, _features(mask, sink=None))
    if mask.sink is None:
        return _softmax_v(s, v)
    sink = mask.sink.to(s.dtype)[:, None, None].expand(s.shape[:-1] + (1,))
    return torch.softmax(torch.cat([s, sink], -1).float(), -1)[..., :-1].to(v.dtype) @ v


def softcap_after_the_mask(q, k, v, scale=None, mask=None):
    """c tanh(s / c) applied after the masks: a hidden score of -inf becomes -c, so hidden keys get weight."""
    if mask is None or mask.softcap is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, _features(mask, softcap=None))
    return _softmax_v(mask.softcap * torch.tanh(s / mask.softcap), v)


def _dropped(q, k, v, scale, mask, keep_of) -> torch.Tensor:
    """The right weights with a dropout mask ``keep_of(weights shape, p, seed)`` and the division by 1 - p."""
    k, v = _heads(q, k, v)
    w = torch.softmax(_scores(q, k, scale, mask).float(), dim=-1)
    if mask is not None and mask.dropout is not None:
        p, seed = mask.dropout
        w = w * keep_of(w.shape, p, seed) / (1 - p)
    return w.to(v.dtype) @ v


def _keep(shape, p, seed):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) >= p


def dropout_without_rescaling(q, k, v, scale=None, mask=None):
    """Drops the weights but never divides the kept ones by 1 - p (the output shrinks by 1 - p on average)."""
    p = mask.dropout[0] if mask is not None and mask.dropout is not None else 0.0
    return _dropped(q, k, v, scale, mask, _keep) * (1 - p)


def dropout_keeps_with_probability_p(q, k, v, scale=None, mask=None):
    """Keeps each weight with probability p instead of 1 - p (the rate read the wrong way round)."""
    return _dropped(q, k, v, scale, mask, lambda shape, p, seed: _keep(shape, 1 - p, seed))


def dropout_mask_shared_across_heads(q, k, v, scale=None, mask=None):
    """One dropout mask of (n_q, n_k) for every batch and head."""
    return _dropped(q, k, v, scale, mask, lambda shape, p, seed: _keep(shape[-2:], p, seed).expand(shape))


def dropout_ignores_the_seed(q, k, v, scale=None, mask=None):
    """Draws the mask from torch's global generator: a new mask every call, whatever the seed."""
    return _dropped(q, k, v, scale, mask, lambda shape, p, seed: torch.rand(shape) >= p)


def bshd_layout(q, k, v, scale=None, mask=None):
    """A kernel that takes (B, n, H, d), as flash-attn does, checked without declaring it."""
    return _plain(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale, mask).transpose(1, 2)


def bshd_output(q, k, v, scale=None, mask=None):
    """Takes (B, H, n, d) and returns (B, n, H, d), as transformers' attention functions do."""
    return _plain(q, k, v, scale, mask).transpose(1, 2)


def key_padding_true_means_ignore(q, k, v, scale=None, mask=None):
    """Reads key padding True as "this key is padding" (nn.MultiheadAttention's key_padding_mask)."""
    if mask is None or mask.key_padding is None:
        return _plain(q, k, v, scale, mask)
    return _plain(q, k, v, scale, _features(mask, key_padding=~mask.key_padding))


def returns_out_and_lse(q, k, v, scale=None, mask=None):
    """Returns ``(out, lse)``, as many fused kernels do, checked as if it returned the tensor."""
    return _plain(q, k, v, scale, mask), torch.zeros(q.shape[:-1])


def ignores_strides(q, k, v, scale=None, mask=None):
    """Reads q, k, v as if they were contiguous (a raw pointer and its own strides): right on every
    contiguous input, wrong on a transposed or packed view."""
    q, k, v = (t.as_strided(t.shape, torch.empty(t.shape).stride(), t.storage_offset()) for t in (q, k, v))
    return _plain(q, k, v, scale, mask)


def lse_without_the_row_max(q, k, v, scale=None, mask=None, return_lse=False):
    """Returns log(sum_j exp(s_j - m)) as the log-sum-exp: the online softmax's log l, the max m never added back."""
    out = _plain(q, k, v, scale, mask)
    if not return_lse:
        return out
    kk, _ = _heads(q, k, v)
    s = _scores(q.float(), kk.float(), scale, mask)
    m = s.amax(-1, keepdim=True)
    return out, torch.log(torch.exp(s - m).sum(-1))


def lse_without_gradient(q, k, v, scale=None, mask=None, return_lse=False):
    """A right log-sum-exp, detached from autograd (marked non-differentiable): a loss of it reaches no input."""
    out = _plain(q, k, v, scale, mask)
    if not return_lse:
        return out
    kk, _ = _heads(q, k, v)
    return out, torch.logsumexp(_scores(q.float(), kk.float(), scale, mask), -1).detach()


def varlen_across_boundaries(q, k, v, scale=None, mask=None, cu_seqlens_q=None, cu_seqlens_k=None, **_):
    """Packed sequences attended as one: every token sees the keys of the other sequences in the pack."""
    if cu_seqlens_q is None:
        return _plain(q, k, v, scale, mask)
    q, k, v = (t.transpose(0, 1)[None] for t in (q, k, v))  # (total, H, d) -> (1, H, total, d): one sequence
    return _plain(q, k, v, scale, mask)[0].transpose(0, 1)


def kvcache_past_seqlens(q, k_cache, v_cache, scale=None, mask=None, cache_seqlens=None):
    """Attends to the whole cache, the stale entries past cache_seqlens too (the lengths never read)."""
    return _plain(q, k_cache, v_cache, scale, mask)


def window_zero_taken_as_unbounded(q, k, v, scale=None, mask=None):
    """Tests the window's bounds for truth (``if left:``): a bound of 0, the diagonal itself, is no bound."""
    if mask is None or mask.window is None:  # right where the feature is absent
        return _plain(q, k, v, scale, mask)
    left, right = mask.window
    return _plain(q, k, v, scale, _features(mask, window=(left or None, right or None)))


def causal_window_as_right_bound_0(q, k, v, scale=None, mask=None):
    """A causal mask with a window folded into the window's right bound 0, from the bottom-right diagonal: right for
    bottom-right causal, not for top-left with n_q != n_k."""
    if mask is not None and mask.window is not None and mask.causal is not None:
        mask = _features(mask, causal=None, window=(mask.window[0], 0))
    return _plain(q, k, v, scale, mask)


def window_hidden_by_the_most_negative_float(q, k, v, scale=None, mask=None):
    """Keys outside the window get the dtype's most negative number, not -inf: a row whose window holds no key is the
    mean of V."""
    if mask is None or mask.window is None:
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    s = _scores(q, k, scale, _features(mask, window=None))
    inside = torch.isfinite(_scores(q.new_zeros(q.shape), k, scale, Mask(window=mask.window)))
    return _softmax_v(s.masked_fill(~inside, torch.finfo(s.dtype).min), v)


def alibi_positions_from_the_padding(q, k, v, scale=None, mask=None):
    """ALiBi positions counted over the real keys only (cumsum of the padding mask, as BLOOM builds them), with the
    offset n_valid - n_q: right without padding, wrong for every key after a padded one."""
    if mask is None or mask.alibi is None or mask.key_padding is None:
        return _plain(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    s = _scores(q, k, scale, _features(mask, alibi=None))
    keys = (mask.key_padding.cumsum(-1) - 1)[:, None, None, :]  # (B, 1, 1, n_k): each key's rank among the real
    rows = torch.arange(n_q)[:, None] + (mask.key_padding.sum(-1) - n_q)[:, None, None, None]  # (B, 1, n_q, 1)
    return _softmax_v(s - mask.alibi.to(s.dtype)[:, None, None] * (rows - keys).abs().to(s.dtype), v)


def row_max_from_the_first_tile(q, k, v, scale=None, mask=None):
    """Subtracts the max of the first 64 keys only: a later key far above them overflows exp (inf / inf)."""
    k, v = _heads(q, k, v)
    s = _scores(q.float(), k.float(), scale, mask)
    p = torch.exp(s - s[..., :WIDE_BLOCK].amax(-1, keepdim=True))
    return ((p @ v.float()) / p.sum(-1, keepdim=True)).to(q.dtype)


def bias_2d_read_as_batch_keys(q, k, v, scale=None, mask=None):
    """A 2-D bias whose first dim equals B read as a per-sequence (B, n_k) bias, not (n_q, n_k)."""
    if mask is not None and mask.bias is not None and mask.bias.dim() == 2 and mask.bias.shape[0] == q.shape[0]:
        mask = _features(mask, bias=mask.bias[:, None, None, :])
    return _plain(q, k, v, scale, mask)


def padded_values_read_as_zero_weight(q, k, v, scale=None, mask=None):
    """Declares that it never reads the keys and values behind the padding, but masks the scores and multiplies the
    padded values by a weight of 0: 0 x NaN is NaN, 0 x inf too."""
    return _plain(q, k, v, scale, mask)


def alibi_standard_slopes(q, k, v, scale=None, mask=None):
    """Recomputes Press et al.'s slopes 2^(-8 h / H) from the head count instead of taking the caller's."""
    if mask is not None and mask.alibi is not None:
        h = q.shape[-3]
        mask = _features(mask, alibi=2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=torch.float64) / h))
    return _plain(q, k, v, scale, mask)


def _with_sink(s, mask):
    """The scores with the sink logits as one more column."""
    return torch.cat([s, mask.sink.to(s.dtype)[:, None, None].expand(s.shape[:-1] + (1,))], -1)


def softcap_caps_the_sink(q, k, v, scale=None, mask=None):
    """The sink appended as one more score column before the softcap (a score_mod over an extra key): capped too."""
    if mask is None or mask.sink is None or mask.softcap is None:  # right with a sink or a softcap alone
        return _right(q, k, v, scale, mask)
    k, v = _heads(q, k, v)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    s = _with_sink(q @ k.transpose(-2, -1) * scale, mask)
    s = mask.softcap * torch.tanh(s / mask.softcap)  # the sink's column with the scores
    bias = mask_bias(_features(mask, softcap=None, sink=None), q.shape[-2], k.shape[-2], s.dtype, s.device)
    if bias is not None:
        s = s + torch.nn.functional.pad(bias.expand(s.shape[:-1] + (k.shape[-2],)), (0, 1))
    return torch.softmax(s.float(), -1)[..., :-1].to(v.dtype) @ v


def lse_without_the_sink(q, k, v, scale=None, mask=None, return_lse=False):
    """The right output; the log-sum-exp taken before the sink's term joins the row sum."""
    out = _right(q, k, v, scale, mask)
    if not return_lse:
        return out
    kk, _ = _heads(q, k, v)
    return out, torch.logsumexp(_scores(q.float(), kk.float(), scale, _features(mask, sink=None)), -1).to(q.dtype)


def _right(q, k, v, scale, mask):
    """The right answer for every feature (the reference in float32)."""
    return attention(q.float(), k.float(), v.float(), scale, mask).to(q.dtype)


def dropout_stream_b_plus_h(q, k, v, scale=None, mask=None):
    """Slice (b, h)'s dropout stream seeded by seed + b + h (not seed + b H + h): (b, h + 1) and (b + 1, h) draw the
    same mask."""
    def keep_of(shape, p, seed):
        return torch.stack([torch.stack([_keep(shape[-2:], p, seed + b + h) for h in range(shape[1])])
                            for b in range(shape[0])])
    return _dropped(q, k, v, scale, mask, keep_of)


def varlen_keys_sized_by_the_queries(q, k, v, scale=None, mask=None, cu_seqlens_q=None, cu_seqlens_k=None,
                                     max_seqlen_q=None, **_):
    """The key loop runs over 64-wide tiles sized by max_seqlen_q: keys past 64 ceil(max_seqlen_q / 64) are never read."""
    if cu_seqlens_q is None:
        return _plain(q, k, v, scale, mask)
    reach = WIDE_BLOCK * -(-int(max_seqlen_q) // WIDE_BLOCK)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs = [_plain(q[a:b].transpose(0, 1), k[c:min(d, c + reach)].transpose(0, 1),
                   v[c:min(d, c + reach)].transpose(0, 1), scale, mask).transpose(0, 1)
            for a, b, c, d in zip(cq, cq[1:], ck, ck[1:]) if b > a]
    return torch.cat(outs, 0) if outs else q.new_zeros((0, q.shape[1], v.shape[-1]))


def kvcache_splits_merged_without_their_maxima(q, k_cache, v_cache, scale=None, mask=None, cache_seqlens=None):
    """Split-KV decoding over 128-entry splits of the valid cache, each normalised by its own max; the merge weights
    split s by its row sum l_s alone, missing exp(m_s - m): right for one split."""
    outs = []
    for b, n in enumerate(cache_seqlens.tolist()):
        qb, kb, vb = q[b:b + 1], *_heads(q[b:b + 1], k_cache[b:b + 1, :, :n], v_cache[b:b + 1, :, :n])
        s = _scores(qb.float(), kb.float(), scale, mask)
        num = den = 0.0
        for c in range(0, n, 128):
            part = s[..., c:c + 128]
            m = part.amax(-1, keepdim=True).clamp(min=-1e30)
            p = torch.exp(part - m)
            num, den = num + p @ vb[..., c:c + 128, :].float(), den + p.sum(-1, keepdim=True)
        outs.append((num / den).to(q.dtype))
    return torch.cat(outs, 0)


_WORKSPACE: dict = {}


def output_in_a_reused_workspace(q, k, v, scale=None, mask=None):
    """Writes the output into a module-level workspace and returns a view of it: the next call overwrites it."""
    out = _plain(q, k, v, scale, mask)
    buffer = _WORKSPACE.get(out.dtype)
    if buffer is None or buffer.numel() < out.numel():
        buffer = _WORKSPACE[out.dtype] = torch.empty(max(out.numel(), 1 << 16), dtype=out.dtype)
    view = buffer[:out.numel()].view(out.shape)
    view.copy_(out)
    return view


def bias_read_as_contiguous(q, k, v, scale=None, mask=None):
    """Reads the additive bias with contiguous strides whatever its own (a raw pointer): right for a contiguous bias."""
    if mask is not None and mask.bias is not None and not mask.bias.is_contiguous():
        bias = mask.bias
        mask = _features(mask, bias=bias.as_strided(bias.shape, torch.empty(bias.shape, device="meta").stride(),
                                                    bias.storage_offset()))
    return _plain(q, k, v, scale, mask)


def _declare(fn: Callable, **caps) -> Callable:
    fn.claims_capabilities = caps
    return fn


ZOO = [
    Wrong("wrong-scale", _declare(wrong_scale, **FORWARD), "scores scaled by 1/d, not 1/sqrt(d)", "float32-none",
          "gqa-4/2:out"),
    Wrong("softmax-over-queries", _declare(softmax_over_queries, **FORWARD), "softmax over the wrong axis",
          "float32-none", "gqa-4/2:out"),
    Wrong("causal-off-by-one", _declare(causal_off_by_one, **FORWARD), "causal mask lets each query see one future key",
          "float32-causal-top-left", "gqa-4/2:out"),
    Wrong("causal-alignment", _declare(causal_always_top_left, **FORWARD), "bottom-right causal treated as top-left",
          "float32-causal-bottom-right", "gqa-4/2:out"),
    Wrong("online-softmax-without-rescaling", _declare(online_softmax_without_rescaling, **FORWARD),
          "old accumulators not rescaled by exp(m_old - m_new)", "float32-none", "gqa-4/2:out"),
    Wrong("online-softmax-64-without-rescaling", _declare(online_softmax_64_without_rescaling, **FORWARD),
          "no rescaling across 64-wide key tiles (exact up to 64 keys)", "float32-none", "tiles-128:out"),
    Wrong("running-max-from-zero", _declare(running_max_from_zero, **FORWARD),
          "the online softmax's running max starts at 0, not -inf", "float32-none", "negative-logits:out"),
    Wrong("dropped-tail-block", _declare(dropped_tail_block, **FORWARD), "the last partial key tile is skipped",
          "float32-none", "gqa-4/2:out"),
    Wrong("missing-normalisation", _declare(missing_normalisation, **FORWARD), "the output is not divided by l",
          "float32-none", "gqa-4/2:out"),
    Wrong("float16-accumulation", _declare(float16_accumulation, **FORWARD),
          "products and sums in float16 for float32 inputs", "float32-none", "gqa-4/2:out"),
    Wrong("gqa-modulo", _declare(gqa_modulo, **FORWARD), "query head h reads key/value head h % H_kv",
          "float32-none", "gqa-4/2:out"),
    Wrong("scale-ignored", _declare(scale_ignored, **FORWARD), "the caller's scale is ignored (always 1/sqrt(d))",
          "float32-none", "scale-0.3:out"),
    Wrong("causal-dropped-for-one-query", _declare(causal_dropped_for_one_query, **FORWARD),
          "a single query attends to every key under top-left causal", "float32-causal-top-left", "decode:out"),
    Wrong("padding-dropped-under-causal", _declare(padding_dropped_under_causal, **FORWARD),
          "key padding dropped when a causal mask comes with it", "float32-key-padding", "padding+top-left:out"),
    Wrong("no-max-subtraction", _declare(no_max_subtraction, **FORWARD), "exp(S) without subtracting the row max",
          "float32-none", "large-logits:out"),
    Wrong("mask-after-softmax", _declare(mask_after_softmax, **FORWARD), "masked weights zeroed after the softmax",
          "float32-causal-top-left", "gqa-4/2:out"),
    Wrong("key-padding-ignored", _declare(key_padding_ignored, **FORWARD), "the key padding mask is dropped",
          "float32-key-padding", "gqa-4/2:out"),
    Wrong("bias-before-scale", _declare(bias_before_scale, **FORWARD), "the additive bias is multiplied by the scale",
          "float32-additive", "gqa-4/2:out"),
    Wrong("nan-on-fully-masked-rows", _declare(nan_on_fully_masked_rows, **{**FORWARD, "fully_masked": "zero"}),
          "fully masked rows give NaN while the kernel declares 0", "float32-fully-masked", "fully-masked-key-padding"),
    Wrong("mean-of-v-on-fully-masked-rows", _declare(mean_of_v_on_fully_masked_rows, **FORWARD),
          "masked by the most negative float, not -inf: a fully masked row is the mean of V (nothing declared)",
          "float32-fully-masked", "fully-masked-key-padding"),
    Wrong("wrong-lse-in-backward", _declare(wrong_lse_in_backward, **BACKWARD),
          "the backward recomputes P with a log-sum-exp missing the row max", "float32-none", "gqa-4/2:dq"),
    Wrong("dkdv-not-summed-over-the-group", _declare(dkdv_not_summed_over_the_group, **BACKWARD),
          "dK, dV of a shared head keep one query head's share", "float32-none", "gqa-4/2:dk"),
    Wrong("scales-q-in-place", _declare(scales_q_in_place, **FORWARD),
          "the scale folded into the caller's q in place (the output is right)", "float32-none", "gqa-4/2:inputs"),
    Wrong("drops-keys-past-1024", _declare(drops_keys_past_1024, **FORWARD),
          "keys past the first 1024 never read (exact up to 1024 keys)", "float32-none", "keys-1025:out"),
    Wrong("keys-in-a-new-order-each-call", _declare(keys_in_a_new_order_each_call, **FORWARD, deterministic=True),
          "declares bitwise-equal outputs, sums the keys in a new order each call", "float32-none",
          "gqa-4/2:determinism"),
    Wrong("sixteen-bit-running-state", _declare(sixteen_bit_running_state, **FORWARD),
          "row sum and accumulator kept in the inputs' dtype between 64-wide tiles", "float16-none", "keys-8193:out"),
    Wrong("causal-row-within-its-tile", _declare(causal_row_within_its_tile, **FORWARD),
          "the causal mask uses the query's index within its 128-row tile", "float32-causal-top-left",
          "tiles-128:out"),
    Wrong("head-shift-by-log2-group", _declare(head_shift_by_log2_group, **FORWARD),
          "query head h reads key/value head h >> ceil(log2 group) (right for power-of-two groups)", "float32-none",
          "batch-3:out"),
    Wrong("scale-or-default", _declare(scale_or_default, **FORWARD), "the caller's scale 0 taken for the default",
          "float32-none", "scale-0:out"),
    Wrong("bias-rows-read-as-batch", _declare(bias_rows_read_as_batch, **FORWARD),
          "a 3-D bias read as (B, n_q, n_k), not (H_q, n_q, n_k)", "float32-additive", BIAS_3D_CHECK),
    Wrong("softcap-after-the-bias", _declare(softcap_after_the_bias, **FORWARD, masks=[*BASE, "softcap"]),
          "the finite bias added inside the softcap", "float32-softcap", "softcap+bias:out"),
    Wrong("dkdv-whole-row-tiles-only", _declare(dkdv_whole_row_tiles_only, **BACKWARD),
          "dK, dV leave out the last partial 128-row query tile", "float32-none", "tiles-128:dk"),
    Wrong("dq-keys-in-a-new-order-each-call", _declare(dq_keys_in_a_new_order_each_call, **BACKWARD,
                                                       deterministic=True),
          "declares bitwise-equal results; dQ sums the keys in a new order each call", "float32-none",
          "gqa-4/2:determinism"),
    Wrong("unit-head-dim-stride", _declare(unit_head_dim_stride, **FORWARD),
          "reads the head dim with stride 1 whatever its stride", "float32-none", "strided-head-dim:out"),
    Wrong("window-zero-taken-as-unbounded", _declare(window_zero_taken_as_unbounded, **FORWARD, masks=[*BASE, "window"]),
          "a window bound of 0 read as no bound (`if left:`)", "float32-window", "gqa-4/2:out"),
    Wrong("causal-window-as-right-bound-0", _declare(causal_window_as_right_bound_0, **FORWARD,
                                                     masks=[*BASE, "window"]),
          "a causal mask with a window taken as the window (left, 0) from the bottom-right diagonal",
          "float32-window", "window+top-left:out"),
    Wrong("window-hidden-by-the-most-negative-float", _declare(window_hidden_by_the_most_negative_float, **FORWARD,
                                                               masks=[*BASE, "window"]),
          "keys outside the window get finfo.min, not -inf (a row the window empties is the mean of V)",
          "float32-fully-masked", "fully-masked-window"),
    Wrong("row-max-from-the-first-tile", _declare(row_max_from_the_first_tile, **FORWARD),
          "the row max of the first 64 keys only", "float32-none", "decode-late-max:out"),
    Wrong("bias-2d-read-as-batch-keys", _declare(bias_2d_read_as_batch_keys, **FORWARD),
          "a 2-D bias with as many rows as sequences read as (B, n_k)", "float32-additive", "rows-as-many-as-batch:out"),
    Wrong("padded-values-read-as-zero-weight", _declare(padded_values_read_as_zero_weight, **FORWARD,
                                                        padding_unread=True),
          "declares padded keys unread, multiplies their values by a weight of 0", "float32-key-padding",
          "padding-poisoned:out"),
    Wrong("alibi-positions-from-the-padding", _declare(alibi_positions_from_the_padding, **FORWARD,
                                                       masks=[*BASE, "alibi"]),
          "ALiBi positions counted over the unpadded keys (BLOOM's)", "float32-alibi", "alibi+padding:out"),
    Wrong("alibi-standard-slopes", _declare(alibi_standard_slopes, **FORWARD, masks=[*BASE, "alibi"]),
          "the standard slopes 2^(-8h/H) in place of the caller's", "float32-alibi", "gqa-4/2:out"),
    Wrong("softcap-caps-the-sink", _declare(softcap_caps_the_sink, **FORWARD, masks=[*BASE, "softcap", "sink"]),
          "the sink logit bent by the softcap with the scores", "float32-softcap", "softcap+sink:out"),
    Wrong("lse-without-the-sink", _declare(lse_without_the_sink, **FORWARD, masks=[*BASE, "sink", "lse"]),
          "the log-sum-exp leaves out the sink's term", "float32-lse", "lse-sink:lse"),
    Wrong("dropout-stream-b-plus-h", _declare(dropout_stream_b_plus_h, **FORWARD, masks=[*BASE, "dropout"]),
          "slice (b, h)'s dropout stream seeded by seed + b + h", "float32-dropout", "dropout:independent"),
    Wrong("varlen-keys-sized-by-the-queries", _declare(varlen_keys_sized_by_the_queries, **FORWARD,
                                                       masks=[*BASE, "varlen"]),
          "a sequence's key loop sized by max_seqlen_q", "float32-varlen", "varlen-cross:out"),
    Wrong("kvcache-splits-merged-without-their-maxima", _declare(kvcache_splits_merged_without_their_maxima, **FORWARD,
                                                                 masks=[*BASE, "kvcache"]),
          "split-KV decoding merges 128-entry splits by their row sums alone", "float32-kvcache", "kvcache-decode:out"),
    Wrong("output-in-a-reused-workspace", _declare(output_in_a_reused_workspace, **FORWARD),
          "returns a view of a workspace its next call overwrites", "float32-none", "gqa-4/2:reuse"),
    Wrong("bias-read-as-contiguous", _declare(bias_read_as_contiguous, **FORWARD),
          "a non-contiguous bias read with contiguous strides", "float32-additive", "gqa-4/2:out"),
    Wrong("first-64-head-dims", _declare(first_64_head_dims, **FORWARD),
          "scores from the first 64 dims of a head only (exact up to d = 64)", "float32-none", "head-128:out"),
    Wrong("window-from-the-top-left", _declare(window_from_the_top_left, **FORWARD, masks=["window"]),
          "the sliding window measured from the top-left diagonal when n_q != n_k", "float32-window", "gqa-4/2:out"),
    Wrong("window-left-bound-ignored", _declare(window_left_bound_ignored, **FORWARD, masks=["window"]),
          "only the window's right bound applied", "float32-window", "gqa-4/2:out"),
    Wrong("alibi-slopes-in-reverse", _declare(alibi_slopes_in_reverse, **FORWARD, masks=["alibi"]),
          "head h given the ALiBi slope of head H - 1 - h", "float32-alibi", "gqa-4/2:out"),
    Wrong("alibi-without-the-offset", _declare(alibi_without_the_offset, **FORWARD, masks=["alibi"]),
          "ALiBi distance |i - j| without the bottom-right offset n_k - n_q", "float32-alibi", "gqa-4/2:out"),
    Wrong("softcap-before-the-scale", _declare(softcap_before_the_scale, **FORWARD, masks=["softcap"]),
          "the logit softcap applied to q k^T before the softmax scale", "float32-softcap", "gqa-4/2:out"),
    Wrong("sink-ignored", _declare(sink_ignored, **FORWARD, masks=["sink"]),
          "the attention sinks left out of the softmax", "float32-sink", "gqa-4/2:out"),
    Wrong("first-heads-sink-for-all", _declare(first_heads_sink_for_all, **FORWARD, masks=["sink"]),
          "every head uses head 0's sink logit", "float32-sink", "gqa-4/2:out"),
    Wrong("sink-dropped-under-causal", _declare(sink_dropped_under_causal, **FORWARD, masks=["sink", *CAUSAL]),
          "the sink left out when a causal mask comes with it", "float32-sink", "sink+top-left:out"),
    Wrong("softcap-after-the-mask", _declare(softcap_after_the_mask, **FORWARD, masks=["softcap", *CAUSAL]),
          "the softcap applied after the causal mask (hidden keys get exp(-cap))", "float32-softcap",
          "softcap+top-left:out"),
    Wrong("dropout-without-rescaling", _declare(dropout_without_rescaling, **FORWARD, masks=["dropout"]),
          "kept weights not divided by 1 - p", "float32-dropout", "dropout:values"),
    Wrong("dropout-keeps-with-probability-p", _declare(dropout_keeps_with_probability_p, **FORWARD, masks=["dropout"]),
          "each weight kept with probability p, not 1 - p", "float32-dropout", "dropout:keep-rate"),
    Wrong("dropout-mask-shared-across-heads", _declare(dropout_mask_shared_across_heads, **FORWARD, masks=["dropout"]),
          "one dropout mask for every batch and head", "float32-dropout", "dropout:independent"),
    Wrong("dropout-ignores-the-seed", _declare(dropout_ignores_the_seed, **FORWARD, masks=["dropout"]),
          "the mask drawn from the global generator, not from the seed", "float32-dropout", "dropout:reproducible"),
    Wrong("bshd-layout", _declare(bshd_layout, **FORWARD), "takes (B, n, H, d), layout not declared", "float32-none",
          "gqa-4/2:error", "--layout bshd"),
    Wrong("bshd-output", _declare(bshd_output, **FORWARD), "returns (B, n, H, d), output layout not declared",
          "float32-none", "gqa-4/2:out", "--out-layout bshd"),
    Wrong("key-padding-true-means-ignore", _declare(key_padding_true_means_ignore, **FORWARD),
          "key padding True read as ignore, padding convention not declared", "float32-key-padding", "gqa-4/2:out",
          "--padding true-means-ignore"),
    Wrong("returns-out-and-lse", _declare(returns_out_and_lse, **FORWARD),
          "returns (out, lse), output index not declared", "float32-none", "gqa-4/2:error", "--output-index 0"),
    Wrong("ignores-strides", _declare(ignores_strides, **FORWARD), "reads non-contiguous q, k, v as contiguous",
          "float32-none", "non-contiguous:out"),
    Wrong("lse-without-the-row-max", _declare(lse_without_the_row_max, **FORWARD, masks=[*BASE, "lse"]),
          "the log-sum-exp returned as log l, without the row max m", "float32-lse", "lse-gqa-4/2:lse"),
    Wrong("lse-without-gradient", _declare(lse_without_gradient, **BACKWARD, masks=[*BASE, "lse"]),
          "the log-sum-exp detached: no gradient reaches q and k through it", "float32-lse", "lse-gqa-4/2:dq"),
    Wrong("varlen-across-boundaries", _declare(varlen_across_boundaries, **FORWARD, masks=[*BASE, "varlen"]),
          "packed sequences attended as one (tokens see other sequences' keys)", "float32-varlen", "varlen-4/2:out"),
    Wrong("kvcache-past-seqlens", _declare(kvcache_past_seqlens, **FORWARD, masks=[*BASE, "kvcache"]),
          "the whole KV cache read, the stale entries past cache_seqlens too", "float32-kvcache",
          "kvcache-decode:out"),
]
