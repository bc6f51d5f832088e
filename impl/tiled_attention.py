"""The FlashAttention algorithm in plain torch: tiled forward with an online softmax and a
backward pass that recomputes the scores from the log-sum-exp (FlashAttention-2 order).

References: Dao et al. 2022 (FlashAttention, Algorithm 1), Dao 2023 (FlashAttention-2,
Algorithms 1 and 2), Milakov & Gimelshein 2018 (online softmax). The full ``n_q x n_k`` score
matrix is never formed: only one ``block_m x block_n`` tile ``S_ij`` at a time.

Online softmax, for query tile ``i`` and key tiles ``j = 1..T_c`` (rows of ``S_ij = Q_i K_j^T s``)::

    m_i^(j) = max(m_i^(j-1), rowmax S_ij)
    l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum exp(S_ij - m_i^(j))
    O_i^(j) = exp(m_i^(j-1) - m_i^(j)) O_i^(j-1) + exp(S_ij - m_i^(j)) V_j
    O_i = O_i^(T_c) / l_i^(T_c),   L_i = m_i^(T_c) + log l_i^(T_c)

which equals ``softmax(S) V`` exactly in exact arithmetic (the factors ``exp(-m)`` cancel).
Backward: ``P_ij = exp(S_ij - L_i)``, ``D_i = rowsum(dO_i * O_i)``, ``dV_j += P_ij^T dO_i``,
``dS_ij = P_ij * (dO_i V_j^T - D_i)``, ``dQ_i += s dS_ij K_j``, ``dK_j += s dS_ij^T Q_i``.

Precision follows the fused kernels: for float16/bfloat16 inputs scores, softmax statistics and
accumulators are float32 and ``P`` (and ``dS``) are rounded to the input dtype before their
matrix products; float32 and float64 inputs are computed in their own precision.

Fully masked rows (no key allowed) give output 0 and log-sum-exp ``-inf`` (FlashAttention's
convention; the reference returns NaN), and zero gradients. Tiles that a causal mask hides
entirely are skipped (no reads, no FLOPs).
"""
from __future__ import annotations

import math

import torch

from impl.attention import Mask, check_attention_inputs, default_scale, mask_bias, repeat_kv
from impl.io_counter import IOCounter


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for 16-bit inputs (as fused kernels accumulate), else the input dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def query_tiles(n_q: int, block_m: int):
    """The query tiles ``range(i, i + B_r)`` of the outer loop (the last one may be shorter)."""
    return (range(start, min(start + block_m, n_q)) for start in range(0, n_q, block_m))


def tile_hidden(rows: range, cols: range, n_q: int, n_k: int, causal: str | None) -> bool:
    """True when a causal mask hides every entry of the tile ``rows x cols`` (its first key is
    past what its last query may see)."""
    if causal is None:
        return False
    offset = 0 if causal == "top-left" else n_k - n_q
    return cols.start > rows.stop - 1 + offset


def key_tiles(rows: range, n_q: int, n_k: int, block_n: int, causal: str | None = None):
    """The key tiles visited for query tile ``rows``: all of them, less those a causal mask hides."""
    for cols in query_tiles(n_k, block_n):
        if tile_hidden(rows, cols, n_q, n_k, causal):
            break  # later tiles are hidden too
        yield cols


def _masked_scores(q_i: torch.Tensor, k_j: torch.Tensor, scale: float, mask: Mask | None, n_q: int, n_k: int,
                   rows: range, cols: range, io: IOCounter | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(S_ij, T_ij)``: ``S_ij = Q_i K_j^T * scale + bias_ij`` in the dtype of ``q_i``, (..., block_m, block_n);
    with a softcap ``c``, ``S_ij = c T_ij + bias_ij`` with ``T_ij = tanh(Q_i K_j^T * scale / c)`` (the backward's
    chain rule needs it), else ``T_ij`` is None."""
    s, capped = q_i @ k_j.transpose(-2, -1) * scale, None
    if mask is not None and mask.softcap is not None:
        capped = torch.tanh(s / mask.softcap)
        s = capped * mask.softcap
    r, c = slice(rows.start, rows.stop), slice(cols.start, cols.stop)
    bias = mask_bias(mask, n_q, n_k, s.dtype, s.device, r, c, ndim=s.dim())
    if bias is None:
        return s, capped
    if io is not None:  # mask data read from slow memory (a causal mask is computed from indices)
        if mask.key_padding is not None:
            io.read(mask.key_padding[..., c])
        if mask.bias is not None:
            io.read(mask.bias[..., r, c])
    return s + bias, capped


def tiled_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: Mask | None,
                  block_m: int, block_n: int, io: IOCounter | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward pass on equal head counts: ``(O (..., n_q, d_v) in q's dtype, L (..., n_q) in the accumulator dtype)``."""
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    acc_t = accumulator_dtype(q.dtype)
    out = torch.empty(q.shape[:-1] + (d_v,), dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:-1], dtype=acc_t, device=q.device)
    causal = mask.causal if mask is not None else None
    for rows in query_tiles(n_q, block_m):
        q_i = q[..., rows.start:rows.stop, :]
        if io is not None:
            io.read(q_i)
        q_i = q_i.to(acc_t)
        m_i = torch.full(q_i.shape[:-1], -math.inf, dtype=acc_t, device=q.device)  # running row max
        l_i = torch.zeros_like(m_i)  # running row sum of exp(S - m)
        acc = torch.zeros(q_i.shape[:-1] + (d_v,), dtype=acc_t, device=q.device)  # unnormalised O_i
        for cols in key_tiles(rows, n_q, n_k, block_n, causal):
            k_j, v_j = k[..., cols.start:cols.stop, :], v[..., cols.start:cols.stop, :]
            if io is not None:
                io.read(k_j, v_j)
            s, _ = _masked_scores(q_i, k_j.to(acc_t), scale, mask, n_q, n_k, rows, cols, io)
            m_new = torch.maximum(m_i, s.amax(dim=-1))
            shift = torch.where(m_new == -math.inf, 0.0, m_new)  # rows masked so far: avoid -inf - -inf
            p = s.sub_(shift[..., None]).exp_()  # P_ij overwrites S_ij: one tile buffer, as in the kernels
            alpha = torch.exp(m_i - shift)  # rescales the old statistics; 0 while m_i = -inf
            l_i = alpha * l_i + p.sum(dim=-1)
            acc = alpha[..., None] * acc + p.to(v.dtype).to(acc_t) @ v_j.to(acc_t)
            m_i = m_new
            if io is not None:  # what Algorithm 1 keeps on chip, measured from the buffers themselves
                io.hold(q_i, k_j, v_j, p, acc, m_i, l_i)
        if mask is not None and mask.sink is not None:  # the sink: one more term of the row sum, with no value
            sink = mask.sink.to(q.device, acc_t)
            sink = (sink[:, None] if q.dim() >= 3 else sink.reshape(())).expand(m_i.shape)
            m_new = torch.maximum(m_i, sink)
            alpha = torch.exp(m_i - m_new)
            l_i = alpha * l_i + torch.exp(sink - m_new)
            acc = alpha[..., None] * acc
            m_i = m_new
        empty = l_i == 0  # fully masked rows: output 0, L = -inf
        o_i = acc / torch.where(empty, 1.0, l_i)[..., None]
        out[..., rows.start:rows.stop, :] = o_i.to(q.dtype)
        lse[..., rows.start:rows.stop] = m_i + torch.log(l_i)
        if io is not None:
            io.write(out[..., rows.start:rows.stop, :], lse[..., rows.start:rows.stop])
    return out, lse


def tiled_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                   d_out: torch.Tensor, scale: float, mask: Mask | None, block_m: int,
                   block_n: int, d_lse: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dQ, dK, dV)`` by recomputing ``P_ij = exp(S_ij - L_i)`` tile by tile; ``d_lse``, the
    gradient of a loss reaching the log-sum-exp L, adds ``P_ij dL_i`` to dS (dL_i / dS_ij = P_ij)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    acc_t = accumulator_dtype(q.dtype)
    low = q.dtype  # P and dS are rounded to the input precision before their products
    delta = (d_out.to(acc_t) * out.to(acc_t)).sum(dim=-1)  # D_i = rowsum(dO_i * O_i)
    if d_lse is not None:  # dS = P (dP - D + dL): D - dL takes D's place
        delta = delta - d_lse.to(acc_t)
    dq = torch.zeros(q.shape, dtype=acc_t, device=q.device)
    dk = torch.zeros(k.shape, dtype=acc_t, device=q.device)
    dv = torch.zeros(v.shape, dtype=acc_t, device=q.device)
    causal = mask.causal if mask is not None else None
    for cols in query_tiles(n_k, block_n):  # FlashAttention-2 backward: key tiles outside
        c = slice(cols.start, cols.stop)
        k_j, v_j = k[..., c, :].to(acc_t), v[..., c, :].to(acc_t)
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)
        for rows in query_tiles(n_q, block_m):
            if tile_hidden(rows, cols, n_q, n_k, causal):
                continue
            r = slice(rows.start, rows.stop)
            q_i, do_i = q[..., r, :].to(acc_t), d_out[..., r, :].to(acc_t)
            s, capped = _masked_scores(q_i, k_j, scale, mask, n_q, n_k, rows, cols, None)
            l_i = lse[..., r, None]
            p = torch.where(l_i == -math.inf, 0.0, torch.exp(s - l_i))  # fully masked rows: P = 0
            dv_j += p.to(low).to(acc_t).transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - delta[..., r, None])
            if capped is not None:  # d(c tanh(x / c)) / dx = 1 - tanh^2
                ds = ds * (1 - capped * capped)
            ds = ds.to(low).to(acc_t)
            dq[..., r, :] += scale * (ds @ k_j)
            dk_j += scale * (ds.transpose(-2, -1) @ q_i)
        dk[..., c, :], dv[..., c, :] = dk_j, dv_j
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, mask, block_m, block_n):
        out, lse = tiled_forward(q, k, v, scale, mask, block_m, block_n)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (scale, mask, block_m, block_n)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_backward(q, k, v, out, lse, d_out.contiguous(), *ctx.args, d_lse=d_lse)
        return dq, dk, dv, None, None, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
                    mask: Mask | None = None, block_m: int = 64, block_n: int = 64, return_lse: bool = False):
    """Tiled exact attention: the same contract as :func:`impl.attention.attention`.

    ``q (..., H_q, n_q, d_k)``, ``k (..., H_kv, n_k, d_k)``, ``v (..., H_kv, n_k, d_v)`` ->
    ``(..., H_q, n_q, d_v)`` (and the log-sum-exp ``(..., H_q, n_q)`` with ``return_lse``).
    ``block_m`` (B_r) query rows and ``block_n`` (B_c) key columns per tile, any positive sizes.
    Differentiable in q, k and v (not in ``mask.bias``, the ALiBi slopes or the sinks).
    """
    if block_m < 1 or block_n < 1:
        raise ValueError(f"block sizes must be positive: got block_m={block_m}, block_n={block_n}")
    group = check_attention_inputs(q, k, v, mask)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    out, lse = _TiledAttention.apply(q, repeat_kv(k, group), repeat_kv(v, group), scale, mask, block_m, block_n)
    return (out, lse) if return_lse else out
