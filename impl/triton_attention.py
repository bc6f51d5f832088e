"""Our FlashAttention kernel in Triton: forward and backward, causal or not, GQA, odd lengths.

Dao 2023 (FlashAttention-2), laid out like Triton's fused-attention tutorial
(``python/tutorials/06-fused-attention.py``): the inner loop, the kernels, the launcher
(a ``torch.autograd.Function``) and one public name, :func:`triton_attention`.

* ``q (B, H_q, n_q, d)``, ``k, v (B, H_kv, n_k, d)`` with ``H_kv | H_q``; ``16 <= d <= 128``
  (any d in that range: tiles are padded to the next power of two and the padding masked);
  any ``n_q``, ``n_k`` (boundary tiles are masked); float32, float16, bfloat16.
* ``causal``: ``None``, ``"top-left"`` (key ``j <= i``) or ``"bottom-right"`` (``j <= i + n_k - n_q``).
* The forward stores ``O`` and the log-sum-exp in base-2 units ``L / ln 2``; the backward
  recomputes ``P = exp2(S / ln 2 - L / ln 2)`` tile by tile (one kernel for dK, dV over key
  tiles, one for dQ over query tiles). Keeping ``L`` in base 2 avoids converting it back and
  forth: with logits of size 20 each conversion would cost ~1e-6 relative in float32 ``P``.
* Fully masked rows give ``O = 0``, ``L = -inf`` and zero gradients.

Where it runs. On CUDA, with autotuned tile sizes. Without CUDA, importing this module sets
``TRITON_INTERPRET=1`` (read by Triton when a kernel is decorated) so the kernels run in
Triton's numpy interpreter on CPU tensors, for correctness only. Two interpreter deviations
(Triton 3.x) are worked around, not hidden: ``tl.dot`` on bfloat16 operands returns garbage,
so bfloat16 tiles are upcast to float32 before each product (exact: a bf16 x bf16 product is
exact in fp32); and float32 -> bfloat16 conversion truncates instead of rounding to nearest, so
bfloat16 results are written in float32 and rounded by torch.
"""
from __future__ import annotations

import os
import sys

import torch

# Triton decides at import (triton.language's own helpers) and at each @triton.jit whether to
# interpret: without CUDA the variable must be set before triton is first imported anywhere.
_TRITON_IMPORTED_FIRST = "triton" in sys.modules and not os.environ.get("TRITON_INTERPRET")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") and not _TRITON_IMPORTED_FIRST
INTERPRETER_PROBLEM = ("triton was imported before TRITON_INTERPRET=1 was set, so its language helpers are "
                       "compiled-mode only; import impl.triton_attention (or set the variable) before "
                       "anything imports triton" if _TRITON_IMPORTED_FIRST and not torch.cuda.is_available() else None)
RCP_LN2 = 1.4426950408889634  # 1 / ln(2): exp(x) = exp2(x / ln 2)
LN2 = 0.6931471805599453  # ln(2): ln(x) = log2(x) * ln 2
HEAD_DIMS = (16, 128)  # inclusive range of supported head dimensions
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ALIGNMENTS = {None: 0, "top-left": 1, "bottom-right": 2}


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,  #
                    offs_m, offs_d, qk_scale, N_K, HEAD_DIM, CAUSAL_OFFSET, hi,  #
                    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                    DOT_PRECISION: tl.constexpr):
    """Online softmax over key tiles [0, hi): returns the unnormalised acc, l_i, m_i (log2 units)."""
    d_valid = offs_d < HEAD_DIM
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_valid = offs_n < N_K
        k_t = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                      mask=d_valid[:, None] & n_valid[None, :], other=0.0)  # (BLOCK_D, BLOCK_N) = K_j^T
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=n_valid[:, None] & d_valid[None, :], other=0.0)  # (BLOCK_N, BLOCK_D)
        if UPCAST:
            k_t = k_t.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, k_t, input_precision=DOT_PRECISION) * qk_scale  # S_ij / ln 2
        allowed = n_valid[None, :]
        if CAUSAL:
            allowed = allowed & (offs_n[None, :] <= offs_m[:, None] + CAUSAL_OFFSET)
        qk = tl.where(allowed, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet: avoid -inf - -inf
        p = tl.math.exp2(qk - shift[:, None])
        alpha = tl.math.exp2(m_i - shift)  # rescales the old statistics
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, Out, LSE, sm_scale,  #
              stride_qb, stride_qh, stride_qm, stride_qd,  #
              stride_kb, stride_kh, stride_kn, stride_kd,  #
              stride_vb, stride_vh, stride_vn, stride_vd,  #
              stride_ob, stride_oh, stride_om, stride_od,  #
              H_Q, GROUP, N_Q, N_K, HEAD_DIM, CAUSAL_OFFSET,  #
              BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr, DOT_PRECISION: tl.constexpr):
    tl.static_assert(BLOCK_D >= 16)
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H_Q
    off_h = off_bh % H_Q
    off_hkv = off_h // GROUP  # grouped-query attention: GROUP query heads share one K/V head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < N_Q
    d_valid = offs_d < HEAD_DIM
    q = tl.load(Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=m_valid[:, None] & d_valid[None, :], other=0.0)  # stays on chip
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = N_K
    if CAUSAL:  # keys past the tile's last row (+ offset) are hidden: skip their tiles
        hi = tl.minimum(N_K, tl.maximum((start_m + 1) * BLOCK_M + CAUSAL_OFFSET, 0))
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q,  #
                                    K + off_b * stride_kb + off_hkv * stride_kh,
                                    V + off_b * stride_vb + off_hkv * stride_vh,  #
                                    stride_kn, stride_kd, stride_vn, stride_vd,  #
                                    offs_m, offs_d, sm_scale * RCP_LN2, N_K, HEAD_DIM, CAUSAL_OFFSET, hi,  #
                                    BLOCK_N, CAUSAL, UPCAST, DOT_PRECISION)
    empty = l_i == 0.0  # fully masked rows: O = 0, L = -inf
    l_safe = tl.where(empty, 1.0, l_i)
    acc = acc / l_safe[:, None]
    lse2 = tl.where(empty, float("-inf"), m_i + tl.math.log2(l_safe))  # L / ln 2
    tl.store(LSE + off_bh * N_Q + offs_m, lse2, mask=m_valid)
    tl.store(Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             acc.to(Out.dtype.element_ty), mask=m_valid[:, None] & d_valid[None, :])


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, sm_scale,  #
                   stride_qb, stride_qh, stride_qm, stride_qd,  #
                   stride_kb, stride_kh, stride_kn, stride_kd,  #
                   H_Q, GROUP, N_Q, N_K, HEAD_DIM, CAUSAL_OFFSET,  #
                   BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
                   CAUSAL: tl.constexpr, UPCAST: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """dK_j, dV_j of one key tile for one query head (summed over the group by the launcher).

    Q, DO share strides; K, V share strides; DK, DV are (B, H_q, N_K, HEAD_DIM) contiguous fp32.
    """
    start_n = tl.program_id(0) * BLOCK_N
    off_bh = tl.program_id(1)
    off_b = off_bh // H_Q
    off_h = off_bh % H_Q
    off_hkv = off_h // GROUP
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    n_valid = offs_n < N_K
    d_valid = offs_d < HEAD_DIM
    kv_off = off_b * stride_kb + off_hkv * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    kv_mask = n_valid[:, None] & d_valid[None, :]
    k = tl.load(K + kv_off, mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
    v = tl.load(V + kv_off, mask=kv_mask, other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    lo = 0
    if CAUSAL:  # query rows i < start_n - offset see none of these keys
        lo = tl.maximum(start_n - CAUSAL_OFFSET, 0) // BLOCK_M * BLOCK_M
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    do_base = DO + off_b * stride_qb + off_h * stride_qh
    for start_m in range(lo, N_Q, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        m_valid = offs_m < N_Q
        q_t = tl.load(q_base + offs_m[None, :] * stride_qm + offs_d[:, None] * stride_qd,
                      mask=d_valid[:, None] & m_valid[None, :], other=0.0)  # (BLOCK_D, BLOCK_M) = Q_i^T
        do = tl.load(do_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                     mask=m_valid[:, None] & d_valid[None, :], other=0.0)  # (BLOCK_M, BLOCK_D)
        if UPCAST:
            q_t = q_t.to(tl.float32)
            do = do.to(tl.float32)
        lse = tl.load(LSE + off_bh * N_Q + offs_m, mask=m_valid, other=float("-inf"))
        delta = tl.load(Delta + off_bh * N_Q + offs_m, mask=m_valid, other=0.0)
        allowed = n_valid[:, None] & m_valid[None, :] & (lse[None, :] != float("-inf"))
        if CAUSAL:
            allowed = allowed & (offs_n[:, None] <= offs_m[None, :] + CAUSAL_OFFSET)
        lse2 = tl.where(lse == float("-inf"), 0.0, lse)  # L / ln 2; rows without keys are masked below
        qk_t = tl.dot(k, q_t, input_precision=DOT_PRECISION) * (sm_scale * RCP_LN2)  # S_ij^T / ln 2
        # P_ij^T = exp(S_ij - L_i)^T; masked entries get exponent -inf (not exp2 of a large number, then dropped)
        p_t = tl.math.exp2(tl.where(allowed, qk_t - lse2[None, :], float("-inf")))
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)  # (dO_i V_j^T)^T
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t), dk, input_precision=DOT_PRECISION)
    out_off = off_bh * N_K * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DK + out_off, dk * sm_scale, mask=kv_mask)
    tl.store(DV + out_off, dv, mask=kv_mask)


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, Delta, DQ, sm_scale,  #
                 stride_qb, stride_qh, stride_qm, stride_qd,  #
                 stride_kb, stride_kh, stride_kn, stride_kd,  #
                 H_Q, GROUP, N_Q, N_K, HEAD_DIM, CAUSAL_OFFSET,  #
                 BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
                 CAUSAL: tl.constexpr, UPCAST: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """dQ_i of one query tile: sum over key tiles of s dS_ij K_j; DQ is (B, H_q, N_Q, HEAD_DIM) fp32."""
    start_m = tl.program_id(0) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = off_bh // H_Q
    off_h = off_bh % H_Q
    off_hkv = off_h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < N_Q
    d_valid = offs_d < HEAD_DIM
    q_off = off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q_mask = m_valid[:, None] & d_valid[None, :]
    q = tl.load(Q + q_off, mask=q_mask, other=0.0)
    do = tl.load(DO + q_off, mask=q_mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse = tl.load(LSE + off_bh * N_Q + offs_m, mask=m_valid, other=float("-inf"))
    delta = tl.load(Delta + off_bh * N_Q + offs_m, mask=m_valid, other=0.0)
    lse2 = tl.where(lse == float("-inf"), 0.0, lse)  # L / ln 2
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = N_K
    if CAUSAL:
        hi = tl.minimum(N_K, tl.maximum(start_m + BLOCK_M + CAUSAL_OFFSET, 0))
    kv_base = off_b * stride_kb + off_hkv * stride_kh
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_valid = offs_n < N_K
        kv_t_off = kv_base + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
        kv_t_mask = d_valid[:, None] & n_valid[None, :]
        k_t = tl.load(K + kv_t_off, mask=kv_t_mask, other=0.0)  # (BLOCK_D, BLOCK_N)
        v_t = tl.load(V + kv_t_off, mask=kv_t_mask, other=0.0)
        if UPCAST:
            k_t = k_t.to(tl.float32)
            v_t = v_t.to(tl.float32)
        allowed = m_valid[:, None] & n_valid[None, :] & (lse[:, None] != float("-inf"))
        if CAUSAL:
            allowed = allowed & (offs_n[None, :] <= offs_m[:, None] + CAUSAL_OFFSET)
        qk = tl.dot(q, k_t, input_precision=DOT_PRECISION) * (sm_scale * RCP_LN2)
        p = tl.math.exp2(tl.where(allowed, qk - lse2[:, None], float("-inf")))  # masked: exp2(-inf) = 0, no overflow
        dp = tl.dot(do, v_t, input_precision=DOT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k_t.dtype), tl.trans(k_t), dq, input_precision=DOT_PRECISION)
    tl.store(DQ + off_bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq * sm_scale, mask=q_mask)


def _configs() -> list:
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
            for bm in (64, 128) for bn in (32, 64) for s in (2, 3, 4) for w in (4, 8)
            if not (bm * bn < 128 * 128 and w == 8)]


_KEY = ["N_Q", "N_K", "HEAD_DIM", "CAUSAL", "UPCAST"]
_attn_fwd_tuned = triton.autotune(_configs(), key=_KEY)(_attn_fwd)
INTERPRETER_BLOCK = 16  # the smallest tile tl.dot accepts; fixed under the interpreter (no tuning)
BWD_BLOCK = 32  # backward tiles on CUDA


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: str | None) -> int:
    """Raise ``ValueError`` naming the expected shapes unless the inputs fit; return ``H_q / H_kv``."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"triton_attention needs 4-D q (B, H_q, n_q, d), k and v (B, H_kv, n_k, d): got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    b, h_q, _, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k and v must both be (B={b}, H_kv, n_k, d={d}) for q {tuple(q.shape)}: got "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if h_q % k.shape[1]:
        raise ValueError(f"H_kv = {k.shape[1]} key/value heads must divide H_q = {h_q} query heads")
    if not HEAD_DIMS[0] <= d <= HEAD_DIMS[1]:
        raise ValueError(f"head dimension d = {d} is outside the supported range {HEAD_DIMS[0]}..{HEAD_DIMS[1]}")
    if q.dtype not in DTYPES or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k, v must share one dtype of {DTYPES}: got {q.dtype}, {k.dtype}, {v.dtype}")
    if causal not in ALIGNMENTS:
        raise ValueError(f"causal={causal!r}: expected None, 'top-left' or 'bottom-right'")
    if q.device.type != "cuda" and not INTERPRET:
        raise RuntimeError(INTERPRETER_PROBLEM or "Triton kernels need CUDA tensors, or TRITON_INTERPRET=1 set "
                           "before triton is imported")
    return h_q // k.shape[1]


def _meta(q: torch.Tensor, causal: str | None) -> dict:
    """Compile-time parameters shared by the three kernels."""
    upcast = INTERPRET and q.dtype == torch.bfloat16  # the interpreter's bf16 tl.dot is broken
    fp32_dots = q.dtype == torch.float32 or upcast
    return dict(BLOCK_D=max(16, triton.next_power_of_2(q.shape[-1])), CAUSAL=causal is not None, UPCAST=upcast,
                DOT_PRECISION="ieee" if fp32_dots else "tf32")  # tf32 is ignored for 16-bit operands


def _causal_offset(causal: str | None, n_q: int, n_k: int) -> int:
    return n_k - n_q if causal == "bottom-right" else 0


def _forward(q, k, v, scale, causal, group):
    b, h_q, n_q, d = q.shape
    n_k = k.shape[2]
    meta = _meta(q, causal)
    out_dtype = torch.float32 if meta["UPCAST"] else q.dtype  # the interpreter truncates fp32 -> bf16
    out = torch.empty((b, h_q, n_q, d), dtype=out_dtype, device=q.device)
    lse2 = torch.empty((b, h_q, n_q), dtype=torch.float32, device=q.device)
    args = (q, k, v, out, lse2, scale, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            h_q, group, n_q, n_k, d, _causal_offset(causal, n_q, n_k))
    if q.device.type == "cuda":
        grid = lambda cfg: (triton.cdiv(n_q, cfg["BLOCK_M"]), b * h_q)  # noqa: E731
        _attn_fwd_tuned[grid](*args, **meta)
    else:
        grid = (triton.cdiv(n_q, INTERPRETER_BLOCK), b * h_q)
        _attn_fwd[grid](*args, BLOCK_M=INTERPRETER_BLOCK, BLOCK_N=INTERPRETER_BLOCK, **meta)
    return out.to(q.dtype), lse2


def _backward(q, k, v, out, lse2, d_out, d_lse2, scale, causal, group):
    b, h_q, n_q, d = q.shape
    n_k = k.shape[2]
    meta = _meta(q, causal)
    block = BWD_BLOCK if q.device.type == "cuda" else INTERPRETER_BLOCK
    delta = (d_out.float() * out.float()).sum(-1)  # D_i = rowsum(dO_i * O_i)
    if d_lse2 is not None:  # dL_i / dS_ij = P_ij: dS = P (dP - D + dL), so D - dL takes D's place (dL = d_lse2 / ln 2)
        delta = delta - d_lse2.float() * RCP_LN2
    delta = delta.contiguous()
    dq = torch.empty((b, h_q, n_q, d), dtype=torch.float32, device=q.device)
    dk = torch.empty((b, h_q, n_k, d), dtype=torch.float32, device=q.device)  # per query head
    dv = torch.empty_like(dk)
    common = (scale, *q.stride(), *k.stride(), h_q, group, n_q, n_k, d, _causal_offset(causal, n_q, n_k))
    _attn_bwd_dkdv[(triton.cdiv(n_k, block), b * h_q)](q, k, v, d_out, lse2, delta, dk, dv, *common,
                                                      BLOCK_M=block, BLOCK_N=block, **meta)
    _attn_bwd_dq[(triton.cdiv(n_q, block), b * h_q)](q, k, v, d_out, lse2, delta, dq, *common,
                                                    BLOCK_M=block, BLOCK_N=block, **meta)
    h_kv = h_q // group
    dk = dk.view(b, h_kv, group, n_k, d).sum(2)  # a K/V head's gradient sums over its query heads
    dv = dv.view(b, h_kv, group, n_k, d).sum(2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _TritonAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, causal):
        group = _check(q, k, v, causal)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out, lse2 = _forward(q, k, v, scale, causal, group)  # lse2 = L / ln 2
        ctx.save_for_backward(q, k, v, out, lse2)
        ctx.args = (scale, causal, group)
        return out, lse2

    @staticmethod
    def backward(ctx, d_out, d_lse2):
        q, k, v, out, lse2 = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse2, d_out.contiguous(), d_lse2, *ctx.args)
        return dq, dk, dv, None, None


def triton_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
                     causal: str | None = None, return_lse: bool = False):
    """FlashAttention in Triton: ``softmax(q k^T * scale + causal mask) v``, differentiable in q, k, v.

    ``q (B, H_q, n_q, d)``, ``k, v (B, H_kv, n_k, d)`` -> ``(B, H_q, n_q, d)`` (and the natural
    log-sum-exp ``(B, H_q, n_q)`` float32 with ``return_lse``, differentiable too: a loss of the
    log-sum-exp reaches q and k); ``scale`` defaults to ``1/sqrt(d)``.
    """
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    out, lse2 = _TritonAttention.apply(q, k, v, scale, causal)
    return (out, lse2 * LN2) if return_lse else out
