"""FLOP counts of attention, written out, for the TFLOP/s figures.

A query row that attends to ``c`` keys costs ``2 c d_k`` FLOPs for its scores ``q k^T`` and
``2 c d_v`` for ``P V`` (a multiply and an add per term); the softmax is not counted (the
convention of FlashAttention's and Triton's benchmarks). Without a mask ``c = n_k`` and the
forward pass costs ``4 b h n_q n_k d`` for ``d_k = d_v = d``. Under a causal mask ``c`` is
counted exactly per row, for either alignment of a non-square mask:

* ``top-left`` (torch SDPA's ``is_causal``): query ``i`` sees keys ``j <= i``, ``c_i = min(i + 1, n_k)``;
* ``bottom-right`` (flash-attn >= 2.1, decoding with a KV cache): query ``i`` sees keys
  ``j <= i + n_k - n_q``, ``c_i = clamp(i + 1 + n_k - n_q, 0, n_k)``.

The backward pass is counted as 2.5 forward passes: it recomputes ``S = Q K^T`` and computes
``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q`` -- five products against the
forward pass's two (FlashAttention-2, section 4).
"""
from __future__ import annotations

ALIGNMENTS = ("top-left", "bottom-right")
BACKWARD_PER_FORWARD = 2.5


def attended_pairs(n_q: int, n_k: int, causal: bool = False, alignment: str = "top-left") -> int:
    """Number of (query, key) pairs a query attends to, summed over the ``n_q`` queries."""
    if n_q < 0 or n_k < 0:
        raise ValueError(f"sequence lengths must be >= 0: got n_q={n_q}, n_k={n_k}")
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment={alignment!r}: expected one of {ALIGNMENTS}")
    if not causal:
        return n_q * n_k
    if alignment == "top-left":
        m = min(n_q, n_k)  # rows 0..m-1 see i + 1 keys, the remaining n_q - m rows see all n_k
        return m * (m + 1) // 2 + (n_q - m) * n_k
    # bottom-right: c_i = i + 1 + (n_k - n_q) <= n_k; rows with c_i <= 0 see nothing
    first = max(1, n_k - n_q + 1)  # the smallest positive c_i; the largest is c_{n_q - 1} = n_k
    return n_k * (n_k + 1) // 2 - (first - 1) * first // 2


def attention_flops(batch: int, heads: int, n_q: int, n_k: int, d_k: int, d_v: int | None = None,
                    causal: bool = False, alignment: str = "top-left", backward: bool = False) -> float:
    """FLOPs of the forward pass (``backward=False``) or of the backward pass alone (``backward=True``)."""
    d_v = d_k if d_v is None else d_v
    forward = 2 * batch * heads * attended_pairs(n_q, n_k, causal, alignment) * (d_k + d_v)
    return forward * BACKWARD_PER_FORWARD if backward else float(forward)
