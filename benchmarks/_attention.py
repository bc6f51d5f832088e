"""The attention backends as the benchmarks call them: ``kernel(...)`` or a skip with the reason.

Backends and their declared capabilities come from the project's registry
(:data:`impl.backends.BACKENDS`); a combination the registry does not declare, or that cannot
run on this machine, raises ``NotImplementedError`` with the registry's reason (asv's skip).
Three adjustments for timing, each made here rather than in the registry:

* ``tiled`` runs :func:`impl.tiled_attention.flash_attention` with ``TILED_BLOCK`` x
  ``TILED_BLOCK`` tiles: the registry's 16 x 16 tiles exercise the algorithm's bookkeeping in
  the property tests, but in plain torch every tile costs Python overhead, so a benchmark of
  them would time the interpreter;
* ``flex`` builds its block mask once per shape, in setup: the registry's adapter builds it on
  every call (it accepts any :class:`impl.attention.Mask`), and ``create_block_mask`` evaluates
  the mask over all ``n_q x n_k`` pairs, an O(n^2) cost that is not FlexAttention's own (and,
  as in the registry, it always passes one: without a block mask FlexAttention on CPU
  materialises the n x n scores);
* ``triton`` is not timed on CPU: ``TRITON_INTERPRET=1`` runs the kernel in Python, a
  correctness mode; ``tiled`` is timed on CUDA up to n = 4096 (:data:`MAX_LENGTH`).

asv benchmarks the project's history with today's benchmarks: on a commit without
``impl.backends`` every attention benchmark skips (the softmax and RoPE ones still run).
"""
from __future__ import annotations

from typing import Callable

import torch

from benchmarks._common import safe_import

with safe_import() as _registry:
    from impl import backends as _backends
    from impl.attention import Mask

#: All backends benchmarked, in the registry's order (asv parameters are static).
BACKENDS = ("reference", "tiled", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn",
            "flex", "triton", "flash-attn")
#: The backends run on CPU (the others are CUDA-only, or not timed on CPU). ``flex`` compiles
#: every shape (5-10 s each on CPU), so the CPU grids of many shapes leave it out.
CPU_BACKENDS = ("reference", "tiled", "sdpa-math", "sdpa-flash", "flex")
CPU_EAGER_BACKENDS = ("reference", "tiled", "sdpa-math", "sdpa-flash")
#: The backends whose first call compiles (a benchmark warms them up in setup).
COMPILED = ("flex", "triton")
#: Tile size of the ``tiled`` backend in benchmarks (``block_m = block_n``).
TILED_BLOCK = 128
#: Longest sequence timed per (backend, device): ``tiled`` launches about ten kernels per tile
#: from Python, so at n = 16384 on CUDA one call takes seconds and a short GPU lease runs out.
MAX_LENGTH = {("tiled", "cuda"): 4096}


def max_length(backend: str, device: str) -> float:
    """The longest sequence benchmarked for ``backend`` on ``device`` (``inf``: no cap)."""
    return MAX_LENGTH.get((backend, device), float("inf"))


Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def kernel(backend: str, device: str, dtype: torch.dtype, causal: bool, backward: bool,
           shape: tuple[int, int, int, int]) -> Kernel:
    """``fn(q, k, v) -> out`` for ``q, k, v`` of ``shape = (b, h, n, d)``, causal when asked.

    Raises ``NotImplementedError`` with the reason when the backend does not run here.
    """
    if _registry.error:
        raise NotImplementedError(f"impl.backends is not in this commit ({_registry.error})")
    if backend not in _backends.BACKENDS:
        raise NotImplementedError(f"backend {backend!r} is not in impl.backends.BACKENDS")
    if shape[2] > max_length(backend, device):
        raise NotImplementedError(f"{backend} on {device} is benchmarked up to n = {max_length(backend, device)}")
    if device == "cpu" and backend == "triton":
        raise NotImplementedError("triton on CPU runs under TRITON_INTERPRET=1, in Python: not timed")
    entry = _backends.BACKENDS[backend]
    ok, reason = _backends.available(entry, device, dtype)
    if not ok:
        raise NotImplementedError(reason)
    mask = None
    if causal:  # square inputs (n_q = n_k): top-left and bottom-right alignments are one mask
        support = entry.devices.get(device)
        top_left = support is None or "causal-top-left" in support.masks
        mask = Mask(causal="top-left" if top_left else "bottom-right")
    features = mask.features if mask is not None else frozenset()
    ok, reason = _backends.supports(entry, device, features, backward=backward, head_dim=shape[-1])
    if not ok:
        raise NotImplementedError(reason)
    if backend == "tiled":
        from impl.tiled_attention import flash_attention

        return lambda q, k, v: flash_attention(q, k, v, None, mask, block_m=TILED_BLOCK, block_n=TILED_BLOCK)
    if backend == "flex":
        return _flex_kernel(causal, shape, device)
    return lambda q, k, v: entry.fn(q, k, v, None, mask)


def _flex_kernel(causal: bool, shape: tuple[int, int, int, int], device: str) -> Kernel:
    from torch.nn.attention.flex_attention import create_block_mask

    def causal_mod(b, h, i, j):  # top-left: query i sees keys j <= i
        return j <= i

    def full_mod(b, h, i, j):
        return j >= 0

    # Always a block mask, as in the registry's adapter: without one, FlexAttention on CPU
    # (torch 2.13) materialises the n x n scores (peak memory ~ n^2, measured).
    n = shape[2]
    block_mask = create_block_mask(causal_mod if causal else full_mod, None, None, n, n, device=device)
    flex = _backends.compiled_flex_attention()
    return lambda q, k, v: flex(q, k, v, block_mask=block_mask)
