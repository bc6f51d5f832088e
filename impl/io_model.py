"""An IO model of attention: element reads and writes of slow memory (HBM) with an on-chip
buffer (SRAM) of ``M`` elements, the cost model of Dao et al. 2022 (FlashAttention, section 3.2).

* :func:`standard_attention_io` runs Algorithm 0 of that paper (standard attention: S and P are
  written to and read back from HBM) and counts ``4 n_q n_k + 2 n_q d_k + n_k d_k + n_k d_v + n_q d_v``
  element accesses: Theta(n d + n^2) (Theorem 2).
* :func:`flash_attention_io` walks the tiled algorithm of :mod:`impl.tiled_attention` with the
  largest square tile that fits in ``M`` (:func:`flash_block_size`) and counts its accesses:
  Q and O once, K and V once per query tile, so Theta(n^2 d^2 / M) for ``d <= M <= n d``
  (Theorem 2; Proposition 3: no exact algorithm does asymptotically better over that range).

Both run on ``meta`` tensors by default: the loops and the counts are exact, no arithmetic is done.
"""
from __future__ import annotations

import torch

from impl.attention import Mask
from impl.io_counter import IOCounter, OnChipOverflow  # noqa: F401  (the model's counter, re-exported)
from impl.tiled_attention import key_tiles, query_tiles, tiled_forward


def tile_working_set(block_m: int, block_n: int, d_k: int, d_v: int) -> int:
    """Elements on chip per program in the tiled forward: Q_i, K_j, V_j, S_ij/P_ij, O_i, m_i, l_i."""
    return block_m * d_k + block_n * d_k + block_n * d_v + block_m * block_n + block_m * d_v + 2 * block_m


def flash_block_size(M: int, d_k: int, d_v: int | None = None) -> int:
    """The largest square tile ``b`` whose working set fits in ``M`` elements (about ``M / (4 d)``)."""
    d_v = d_k if d_v is None else d_v
    if tile_working_set(1, 1, d_k, d_v) > M:
        raise OnChipOverflow(f"M = {M} elements cannot hold one row tile for d_k={d_k}, d_v={d_v} "
                             f"(needs at least {tile_working_set(1, 1, d_k, d_v)})")
    b = 1
    while tile_working_set(b + 1, b + 1, d_k, d_v) <= M:
        b += 1
    return b


def _meta(n: int, d: int) -> torch.Tensor:
    return torch.empty((1, 1, n, d), device="meta")


def standard_attention_io(n_q: int, n_k: int, d_k: int, d_v: int | None = None) -> IOCounter:
    """Count Algorithm 0 (standard attention) of Dao et al. 2022 on one head.

    1. read Q, K; write S = Q K^T.  2. read S; write P = softmax(S).  3. read P, V; write O = P V.
    """
    d_v = d_k if d_v is None else d_v
    io = IOCounter()
    q, k, v = _meta(n_q, d_k), _meta(n_k, d_k), _meta(n_k, d_v)
    io.read(q, k)
    s = q @ k.transpose(-2, -1)
    io.write(s)
    io.read(s)
    p = torch.softmax(s, dim=-1)
    io.write(p)
    io.read(p, v)
    o = p @ v
    io.write(o)
    return io


def flash_attention_io(n_q: int, n_k: int, d_k: int, M: int, d_v: int | None = None,
                       causal: str | None = None) -> IOCounter:
    """Count the tiled forward of :mod:`impl.tiled_attention` on one head with tiles sized for ``M``.

    Walks the algorithm's own tile schedule (:func:`impl.tiled_attention.query_tiles`,
    :func:`~impl.tiled_attention.key_tiles`): per query tile, read ``Q_i`` once and ``K_j, V_j``
    per visited key tile, write ``O_i`` and ``L_i`` once. :func:`tiled_forward_io` counts the
    same by running the algorithm itself (slower; the two must agree).
    """

    d_v = d_k if d_v is None else d_v
    b = flash_block_size(M, d_k, d_v)
    io = IOCounter(M=M)
    for rows in query_tiles(n_q, b):
        io.reads += len(rows) * d_k
        for cols in key_tiles(rows, n_q, n_k, b, causal):
            io.reads += len(cols) * (d_k + d_v)
            io.on_chip(tile_working_set(len(rows), len(cols), d_k, d_v))
        io.writes += len(rows) * (d_v + 1)
    return io


def tiled_forward_io(n_q: int, n_k: int, d_k: int, M: int | None, d_v: int | None = None,
                     causal: str | None = None, block: int | None = None) -> IOCounter:
    """Count by running :func:`impl.tiled_attention.tiled_forward` on ``meta`` tensors, instrumented.

    Tiles of ``block`` (default :func:`flash_block_size`); the on-chip peak is measured from the
    buffers the algorithm holds (:meth:`IOCounter.hold`), so it checks the tile-size choice
    instead of repeating it; :class:`OnChipOverflow` when they exceed ``M`` (``M=None``: measure
    only, with an explicit ``block``).
    """

    d_v = d_k if d_v is None else d_v
    b = flash_block_size(M, d_k, d_v) if block is None else block
    io = IOCounter(M=M)
    tiled_forward(_meta(n_q, d_k), _meta(n_k, d_k), _meta(n_k, d_v), scale=1.0, mask=Mask(causal=causal),
                  block_m=b, block_n=b, io=io)
    return io
