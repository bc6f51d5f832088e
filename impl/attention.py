"""Reference scaled dot-product attention in plain torch (float64-capable).

``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (foundations.txt line 11; Vaswani et al.
2017, eq. 1), with an explicit ``scale``, masks, ``n_q != n_k`` and grouped-query attention.

Shapes (``...`` are batch dimensions, the same for q, k and v):

* ``q (..., H_q, n_q, d_k)``, ``k (..., H_kv, n_k, d_k)``, ``v (..., H_kv, n_k, d_v)``;
* ``H_kv`` divides ``H_q``: query head ``h`` reads key/value head ``h // (H_q / H_kv)``
  (multi-head attention: ``H_kv = H_q``; multi-query: ``H_kv = 1``; grouped-query: in between;
  Shazeer 2019, Ainslie et al. 2023);
* 2-D inputs ``(n, d)`` have no head dimension.

Masks (:class:`Mask`) say which keys a query may attend to and add biases to the scaled scores:

* causal, with an explicit alignment when ``n_q != n_k``: ``"top-left"`` lets query ``i`` see
  keys ``j <= i``; ``"bottom-right"`` lets it see ``j <= i + n_k - n_q`` (the last query sees
  every key, as in decoding with a KV cache);
* boolean key padding ``(..., n_k)``: ``True`` marks a real key, ``False`` a padded one;
* an additive float bias broadcastable to ``(..., H_q, n_q, n_k)`` (``-inf`` masks);
* a sliding window ``(left, right)``: query ``i`` sees keys ``i + o - left <= j <= i + o + right``
  with ``o = n_k - n_q`` (measured from the bottom-right diagonal, as flash-attn's ``window_size``;
  ``None`` = unbounded on that side);
* ALiBi slopes ``(H_q,)``: the bias ``-slope_h |i + o - j|`` (Press et al. 2022; flash-attn's
  ``alibi_slopes``, the same ``o``);
* a logit softcap ``c``: the scaled scores ``s`` become ``c tanh(s / c)`` before any bias is added
  (Gemma 2's attention softcap; flash-attn's ``softcap``);
* attention sinks ``(H_q,)``: one extra logit per head in every row's softmax, with no value
  (``exp(s_j) / (exp(sink_h) + sum_j' exp(s_j'))``: the mass it takes is dropped; gpt-oss's sinks).

Fused kernels name these features ``window``, ``alibi``, ``softcap`` and ``sink``
(:attr:`Mask.features`).

A fully masked row has no softmax (0/0): the reference returns NaN there and a log-sum-exp of
``-inf``; fused kernels differ (some return 0), which ``properties/test_backends.py`` records. With a
sink no row is empty: the sink takes all the mass of a row with no allowed key, whose output is 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from impl.softmax import stable_softmax

ALIGNMENTS = ("top-left", "bottom-right")


@dataclass(frozen=True)
class Mask:
    """Which keys each query may attend to, and an additive bias; every field optional.

    ``causal``: ``None``, ``"top-left"`` or ``"bottom-right"``; ``key_padding``: bool
    ``(..., n_k)``, True = attend; ``bias``: float, broadcastable to ``(..., H_q, n_q, n_k)``.
    """

    causal: str | None = None
    key_padding: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    window: tuple[int | None, int | None] | None = None  # (left, right), from the bottom-right diagonal
    alibi: torch.Tensor | None = None  # slopes (H_q,)
    softcap: float | None = None
    sink: torch.Tensor | None = None  # one logit per query head (H_q,)
    # (p, seed): each attention weight zeroed with probability p and the rest divided by 1 - p; the seed alone decides
    # which (the same seed, the same weights dropped, call after call)
    dropout: tuple[float, int] | None = None

    def __post_init__(self) -> None:
        if self.causal not in (None, *ALIGNMENTS):
            raise ValueError(f"causal={self.causal!r}: expected None, 'top-left' or 'bottom-right'")
        if self.window is not None:
            if len(self.window) != 2 or any(w is not None and (not isinstance(w, int) or w < 0) for w in self.window):
                raise ValueError(f"window={self.window!r}: expected (left, right), each a non-negative int or None")
        if self.softcap is not None and not self.softcap > 0:
            raise ValueError(f"softcap={self.softcap!r}: expected a positive number")
        for name in ("alibi", "sink"):
            t = getattr(self, name)
            if t is not None and (t.dim() != 1 or not t.dtype.is_floating_point):
                raise ValueError(f"{name} must be a float tensor of shape (H_q,): got {t.dtype} {tuple(t.shape)}")
        if self.dropout is not None:
            ok = len(self.dropout) == 2 and isinstance(self.dropout[1], int) and 0 <= self.dropout[0] < 1
            if not ok:
                raise ValueError(f"dropout={self.dropout!r}: expected (p, seed) with 0 <= p < 1 and an int seed")

    @property
    def features(self) -> frozenset[str]:
        """The mask features used: ``causal-top-left``, ``causal-bottom-right``, ``key-padding``, ``additive``."""
        used = set()
        if self.causal:
            used.add(f"causal-{self.causal}")
        if self.key_padding is not None:
            used.add("key-padding")
        if self.bias is not None:
            used.add("additive")
        for name in ("window", "alibi", "softcap", "sink", "dropout"):
            if getattr(self, name) is not None:
                used.add(name)
        return frozenset(used)

    @property
    def keys_masked(self) -> bool:
        """Whether some key is hidden or biased (causal, padding, additive, window or ALiBi): a bias is needed."""
        return bool(self.features - {"softcap", "sink", "dropout"})


NO_MASK = Mask()


def causal_allowed(rows: torch.Tensor, cols: torch.Tensor, n_q: int, n_k: int, alignment: str) -> torch.Tensor:
    """Bool ``(len(rows), len(cols))``: may query ``rows[a]`` attend to key ``cols[b]``?

    ``top-left``: ``j <= i``; ``bottom-right``: ``j <= i + (n_k - n_q)``.
    """
    offset = 0 if alignment == "top-left" else n_k - n_q
    return cols[None, :] <= rows[:, None] + offset


def window_allowed(rows: torch.Tensor, cols: torch.Tensor, n_q: int, n_k: int,
                   window: tuple[int | None, int | None]) -> torch.Tensor:
    """Bool ``(len(rows), len(cols))``: is key ``cols[b]`` inside the window ``(left, right)`` of query ``rows[a]``?

    ``i + o - left <= j <= i + o + right`` with ``o = n_k - n_q``; a side that is ``None`` is unbounded.
    """
    left, right = window
    centre = rows[:, None] + (n_k - n_q)
    allowed = torch.ones((len(rows), len(cols)), dtype=torch.bool, device=rows.device)
    if left is not None:
        allowed &= cols[None, :] >= centre - left
    if right is not None:
        allowed &= cols[None, :] <= centre + right
    return allowed


def mask_bias(mask: Mask | None, n_q: int, n_k: int, dtype: torch.dtype, device: torch.device | str,
              rows: slice = slice(None), cols: slice = slice(None), ndim: int = 4) -> torch.Tensor | None:
    """The additive bias of ``mask`` (0 where allowed, ``-inf`` where masked, plus ``mask.bias``).

    Returns ``None`` for no mask, else a tensor broadcastable to ``(..., H_q, r, c)`` where
    ``r, c`` are the lengths of the ``rows`` and ``cols`` slices of ``(n_q, n_k)`` (a tile), with
    at most ``ndim`` dimensions (the number of dimensions of q).
    """
    if mask is None or not mask.keys_masked:
        return None
    r = torch.arange(n_q, device=device)[rows]
    c = torch.arange(n_k, device=device)[cols]
    bias = torch.zeros((len(r), len(c)), dtype=dtype, device=device)
    if mask.causal:
        bias = bias.masked_fill(~causal_allowed(r, c, n_q, n_k, mask.causal), -math.inf)
    if mask.window is not None:
        bias = bias.masked_fill(~window_allowed(r, c, n_q, n_k, mask.window), -math.inf)
    if mask.alibi is not None:  # (H_q, r, c): -slope_h |i + o - j|
        distance = (r[:, None] + (n_k - n_q) - c[None, :]).abs().to(dtype)
        bias = bias - mask.alibi.to(device, dtype)[:, None, None] * distance
    if mask.key_padding is not None:
        keep = mask.key_padding[..., cols].to(device)  # (..., c)
        bias = bias.masked_fill(~keep[..., None, None, :], -math.inf)  # (..., 1, r, c)
    if mask.bias is not None:
        bias = bias + mask.bias.to(dtype)[..., rows, cols]
    while bias.dim() > ndim:  # 2-D q has no head dimension: drop the broadcast heads axis
        bias = bias.squeeze(0)
    return bias


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None = None) -> int:
    """Raise ``ValueError`` naming the expected shapes unless q, k, v (and mask) fit; return ``H_q / H_kv``."""
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v must have the same number (>= 2) of dimensions (..., n, d): "
                         f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype) or not q.dtype.is_floating_point:
        raise ValueError(f"q, k, v must share one floating dtype: got {q.dtype}, {k.dtype}, {v.dtype}")
    lead = q.shape[:-3] if q.dim() >= 3 else ()
    heads_q = q.shape[-3] if q.dim() >= 3 else 1
    n_q, d_k = q.shape[-2:]
    n_k = k.shape[-2]
    heads_kv = k.shape[-3] if q.dim() >= 3 else 1
    head_pat = "H_kv, " if q.dim() >= 3 else ""
    want_k = f"({', '.join(map(str, lead)) + ', ' if lead else ''}{head_pat}n_k, {d_k})"
    if k.shape[:-3] != lead or k.shape[-1] != d_k:
        raise ValueError(f"k has shape {tuple(k.shape)}; for q {tuple(q.shape)} it must be {want_k}")
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"v has shape {tuple(v.shape)}; for k {tuple(k.shape)} it must be "
                         f"{tuple(k.shape[:-1]) + ('d_v',)}")
    if heads_q % heads_kv:
        raise ValueError(f"H_kv = {heads_kv} key/value heads must divide H_q = {heads_q} query heads "
                         f"(q {tuple(q.shape)}, k {tuple(k.shape)})")
    if mask is not None:
        if mask.key_padding is not None:
            kp = mask.key_padding
            if kp.dtype != torch.bool or tuple(kp.shape) != tuple(lead) + (n_k,):
                raise ValueError(f"key_padding must be a bool tensor of shape {tuple(lead) + (n_k,)} "
                                 f"(..., n_k): got {kp.dtype} {tuple(kp.shape)}")
        if mask.bias is not None:
            full = tuple(q.shape[:-1]) + (n_k,)
            try:
                ok = torch.broadcast_shapes(mask.bias.shape, full) == torch.Size(full)
            except RuntimeError:
                ok = False
            if not ok or not mask.bias.dtype.is_floating_point:
                raise ValueError(f"bias must be a float tensor broadcastable to {full} (..., H_q, n_q, n_k): "
                                 f"got {mask.bias.dtype} {tuple(mask.bias.shape)}")
        for name in ("alibi", "sink"):
            t = getattr(mask, name)
            if t is not None and tuple(t.shape) != (heads_q,):
                raise ValueError(f"{name} must have one value per query head, shape ({heads_q},) (H_q,): "
                                 f"got {tuple(t.shape)}")
    return heads_q // heads_kv


def repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """``(..., H_kv, n, d) -> (..., H_kv * group, n, d)``: head ``h`` of the result is ``x[..., h // group]``."""
    return x if group == 1 else x.repeat_interleave(group, dim=-3)


def default_scale(d_k: int) -> float:
    """``1 / sqrt(d_k)`` (foundations.txt line 34)."""
    return 1.0 / math.sqrt(d_k)


def scores(q: torch.Tensor, k: torch.Tensor, scale: float | None = None, mask: Mask | None = None) -> torch.Tensor:
    """Scaled, masked scores ``S = q k^T * scale + bias``: (..., H_q, n_q, n_k)."""
    group = check_attention_inputs(q, k, k, mask)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    s = q @ repeat_kv(k, group).transpose(-2, -1) * scale
    if mask is not None and mask.softcap is not None:
        s = mask.softcap * torch.tanh(s / mask.softcap)
    bias = mask_bias(mask, q.shape[-2], k.shape[-2], s.dtype, s.device, ndim=q.dim())
    return s if bias is None else s + bias


def with_sink(s: torch.Tensor, mask: Mask | None) -> torch.Tensor:
    """The scores with the sink logits as one extra last column (``(..., H_q, n_q, n_k + 1)``), or ``s`` unchanged."""
    if mask is None or mask.sink is None:
        return s
    sink = mask.sink.to(s.device, s.dtype)
    sink = sink[:, None, None] if s.dim() >= 3 else sink.reshape(1, 1)
    return torch.cat([s, sink.expand(s.shape[:-1] + (1,))], dim=-1)


def attention_weights(q: torch.Tensor, k: torch.Tensor, scale: float | None = None,
                      mask: Mask | None = None) -> torch.Tensor:
    """``A = softmax(S)`` row-wise: (..., H_q, n_q, n_k); a fully masked row is NaN. With sinks the rows
    sum to less than 1 (the sink's share is dropped)."""
    s = scores(q, k, scale, mask)
    return stable_softmax(with_sink(s, mask))[..., : s.shape[-1]]


def dropout_keep(shape: tuple[int, ...], p: float, seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Bool ``shape``: which weights dropout keeps, each with probability ``1 - p``, drawn from a CPU generator seeded
    by ``seed`` alone (the same on every device and call)."""
    return (torch.rand(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) >= p).to(device)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
              mask: Mask | None = None, return_lse: bool = False):
    """``softmax(q k^T * scale + bias) v``: (..., H_q, n_q, d_v), computed in the inputs' dtype.

    With ``return_lse`` also the natural log-sum-exp of each row of scores, (..., H_q, n_q)
    (``-inf`` for a fully masked row; with sinks the sink logit is one of the row's terms). With dropout
    ``(p, seed)`` the weights are multiplied by :func:`dropout_keep` ``/ (1 - p)`` before ``v``.
    """
    group = check_attention_inputs(q, k, v, mask)
    s = with_sink(scores(q, k, scale, mask), mask)
    n_k = k.shape[-2]
    weights = stable_softmax(s)[..., :n_k]
    if mask is not None and mask.dropout is not None:
        p, seed = mask.dropout
        weights = weights * dropout_keep(weights.shape, p, seed, weights.device) / (1 - p)
    out = weights @ repeat_kv(v, group)
    if not return_lse:
        return out
    return out, torch.logsumexp(s, dim=-1)
