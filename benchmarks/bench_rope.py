"""RoPE application: the element-wise forms against the ``d x d`` rotation-matrix product.

Forms (:mod:`impl.rope`): ``interleaved`` (RoFormer's pairs ``(x_2i, x_2i+1)``), ``half-split``
(``x cos + rotate_half(x) sin``, GPT-NeoX / LLaMA), ``complex`` (RoFormer eq. 34), each O(d) per
vector, and ``matrix``: the block-diagonal ``R_{Theta,m}`` of foundations.txt line 252 built
per position (in setup) and applied as a matrix-vector product, O(d^2) per vector.
:class:`RopeScaling` fits the exponent of time in d: about 1 for the element-wise forms, above
1 (towards 2) for the matrix form.
"""
import torch

from benchmarks._common import (DTYPES, best_time, randn, require_device, safe_import, synchronize,
                                synchronized)
from benchmarks._fit import scaling_exponent

with safe_import() as _rope:
    from impl import rope

FORMS = ("interleaved", "half-split", "complex", "matrix")


def _rope_call(device, form, batch_heads, n, d, dtype):
    """The synchronised call applying RoPE of ``form`` to ``x (batch_heads, n, d)`` at positions 0..n-1."""
    if _rope.error:
        raise NotImplementedError(f"impl.rope is not in this commit ({_rope.error})")
    if form == "complex" and dtype not in ("float32", "float64"):
        raise NotImplementedError(f"the complex form needs float32 or float64 (torch.view_as_complex), not {dtype}")
    x = randn((batch_heads, n, d), DTYPES[dtype], device, seed=0)
    theta = rope.rope_frequencies(d).to(device)
    positions = torch.arange(n, device=device)
    if form == "matrix":
        r = torch.stack([rope.rotation_matrix(m, theta) for m in range(n)]).to(DTYPES[dtype])  # (n, d, d)
        fn = lambda: torch.einsum("mij,bmj->bmi", r, x)  # R_{Theta,m} x_m: (batch_heads, n, d)
    else:
        apply = {"interleaved": rope.rope_interleaved, "half-split": rope.rope_half_split,
                 "complex": rope.rope_complex}[form]
        fn = lambda: apply(x, positions, theta)
    call = synchronized(fn, device)
    call()
    synchronize(device)
    return call


class RopeApply:
    """RoPE on ``(8 x n x d)`` (8 heads of n positions); the matrix form holds n d x d matrices."""

    version = "1"
    params = [["cpu", "cuda"], list(FORMS), [256, 2048], [64, 128], ["float32", "bfloat16"]]
    param_names = ["device", "form", "n", "d", "dtype"]

    def setup(self, device, form, n, d, dtype):
        require_device(device)
        self.call = _rope_call(device, form, 8, n, d, dtype)

    def time_rope(self, device, form, n, d, dtype):
        self.call()


class RopeScaling:
    """Fitted exponent p of ``time ~ d^p`` at 1024 positions x 128 vectors each, d from 64 to 512, float32.

    Sizes keep every tensor of the element-wise forms past the caches (16 MiB and up): below
    that, cache and allocator thresholds make their CPU times jump by 10x at one d and the fit
    reads 2 for an O(d) computation. Measured on CPU: about 1.0 for the element-wise forms;
    about 1.5 for ``matrix``, whose FLOPs grow as d^2 but whose matrix products get more
    efficient with d (its local exponent rises towards 2 with d, and at d <= 128 it is the
    faster form on CPU).
    """

    version = "1"
    params = [["cpu", "cuda"], list(FORMS)]
    param_names = ["device", "form"]
    head_dims = (64, 128, 256, 512)

    def setup(self, device, form):
        require_device(device)
        self.device, self.form = device, form
        self._call(self.head_dims[0])

    def track_time_exponent_in_d(self, device, form):
        return scaling_exponent(lambda d: best_time(self._call(d), repeat=3), self.head_dims)

    def _call(self, d):
        return _rope_call(self.device, self.form, 128, 1024, d, "float32")
