"""Attention: forward, forward + backward, and the scaling of time and peak memory in n.

Parameters: backend (:mod:`benchmarks._attention`) x sequence length n x head dim d x dtype x
causal (top-left). Inputs are ``(b, h, n, d)`` with FlashAttention's benchmark convention: a
fixed number of tokens ``b * n`` and a fixed model width ``h * d``, so every point does
comparable work. Tracked figures per point: TFLOP/s from the FLOP count of
:mod:`benchmarks._flops`, and the peak memory of one call counting its inputs
(:func:`benchmarks._common.peak_bytes`).

:class:`AttentionScaling` measures several n internally and reports the fitted log-log
exponents (:mod:`benchmarks._fit`) of time and of peak memory in n: evidence for the
complexity claims (standard attention: time and memory ~ n^2; FlashAttention: time ~ n^2,
memory ~ n). :class:`LinearAttentionScaling` does the same for the two orders of the product
of linear attention (:mod:`impl.linear_attention`): ``phi(Q) (phi(K)^T V)`` ~ n,
``(phi(Q) phi(K)^T) V`` ~ n^2.

CPU classes keep their grids small (``asv run --quick`` in minutes: float32 only, FlexAttention
only in :class:`AttentionScaling`, since each of its shapes compiles); the ``*Cuda`` classes run
the same benchmarks on CUDA, float16 and bfloat16, up to 16k tokens, and skip on machines
without CUDA.
"""
import torch

from benchmarks._attention import BACKENDS, COMPILED, CPU_BACKENDS, CPU_EAGER_BACKENDS, kernel, max_length
from benchmarks._common import (DTYPES, best_time, peak_bytes, randn, require_device, safe_import, synchronize,
                                synchronized, tensor_bytes)
from benchmarks._fit import scaling_exponent
from benchmarks._flops import BACKWARD_PER_FORWARD, attention_flops

with safe_import() as _linear:
    from impl import linear_attention


def _attention_call(backend, device, dtype, causal, backward, shape):
    """``(call, flops, input_bytes)``: the synchronised call to time, its FLOPs and its inputs' bytes."""
    fn = kernel(backend, device, DTYPES[dtype], causal, backward, shape)
    q, k, v = (randn(shape, DTYPES[dtype], device, seed) for seed in range(3))
    b, h, n, d = shape
    flops = attention_flops(b, h, n, n, d, causal=causal)
    if not backward:
        return synchronized(lambda: fn(q, k, v), device), flops, tensor_bytes(q, k, v)
    for t in (q, k, v):
        t.requires_grad_(True)
    d_out = randn(shape, DTYPES[dtype], device, seed=3)
    call = synchronized(lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), d_out), device)
    return call, flops * (1 + BACKWARD_PER_FORWARD), tensor_bytes(q, k, v, d_out)


def _warm_up(call, device, backend):
    """Run ``call`` once where the first call differs (CUDA: lazy initialisation, kernel choice,
    autotuning; flex and triton: compilation). Out of memory, and torch's "No available kernel"
    for an SDPA kernel this GPU lacks, are skips. Eager CPU kernels are not warmed: their first
    call is like the others, and skipping it halves a quick run."""
    if device == "cpu" and backend not in COMPILED:
        return
    try:
        call()
    except torch.cuda.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        raise NotImplementedError(f"out of memory on {device}: {str(exc).splitlines()[0]}") from None
    except RuntimeError as exc:  # torch's own answer that an SDPA kernel cannot run on this GPU
        if "No available kernel" not in str(exc):
            raise
        raise NotImplementedError(f"{backend}: {str(exc).splitlines()[0]}") from None
    synchronize(device)


class _Attention:
    """Shared setup; subclasses set the device, the grid and whether the backward pass runs."""

    version = "1"  # asv's benchmark version: bump when what a benchmark measures changes
    param_names = ["backend", "n", "d", "dtype", "causal"]
    device = "cpu"
    tokens = 4096  # b * n
    model_dim = 256  # h * d
    backward = False

    def setup(self, backend, n, d, dtype, causal):
        require_device(self.device)
        shape = (max(1, self.tokens // n), self.model_dim // d, n, d)
        self.call, self.flops, self.input_bytes = _attention_call(
            backend, self.device, dtype, causal, self.backward, shape)
        _warm_up(self.call, self.device, backend)

    def track_tflops(self, *params):
        return self.flops / best_time(self.call, repeat=2) / 1e12

    track_tflops.unit = "TFLOP/s"

    def track_peak_bytes(self, *params):
        return self.input_bytes + peak_bytes(self.call, self.device)

    track_peak_bytes.unit = "bytes"


class AttentionForward(_Attention):
    """Forward pass ``softmax(q k^T / sqrt(d)) v`` on CPU."""

    params = [CPU_EAGER_BACKENDS, [256, 1024, 4096], [64], ["float32"], [False, True]]

    def time_forward(self, *params):
        self.call()


class AttentionForwardBackward(_Attention):
    """Forward pass and the gradients of q, k, v on CPU."""

    params = [CPU_EAGER_BACKENDS, [256, 1024, 2048], [64], ["float32"], [False, True]]
    backward = True

    def time_forward_backward(self, *params):
        self.call()


class AttentionForwardCuda(AttentionForward):
    """:class:`AttentionForward` on CUDA, 16k tokens, model width 2048, up to n = 16384."""

    params = [BACKENDS, [1024, 4096, 16384], [64, 128], ["float16", "bfloat16"], [False, True]]
    device = "cuda"
    tokens = 16384
    model_dim = 2048


class AttentionForwardBackwardCuda(AttentionForwardBackward):
    """:class:`AttentionForwardBackward` on CUDA, 16k tokens, model width 2048, up to n = 16384, bfloat16
    (the training dtype; the forward class also times float16)."""

    params = [BACKENDS, [1024, 4096, 16384], [64, 128], ["bfloat16"], [False, True]]
    device = "cuda"
    tokens = 16384
    model_dim = 2048


class AttentionScaling:
    """Fitted exponents p of ``cost ~ n^p`` over ``sizes[pass]`` at fixed b, h, d (non-causal), on CPU.

    ``pass`` is ``forward`` or ``forward+backward`` (shorter lengths: the plain-torch backward
    passes are slow on CPU). Time: the fastest of a few calls at each n.
    Peak memory: one call, counting its inputs (so a kernel whose memory is linear in n reads
    about 1, one that stores the n x n scores about 2).
    """

    version = "1"
    params = [CPU_BACKENDS, ["forward", "forward+backward"]]
    param_names = ["backend", "pass"]
    device = "cpu"
    sizes = {"forward": (512, 1024, 2048, 4096), "forward+backward": (256, 512, 1024, 2048)}
    batch, heads, head_dim, dtype = 1, 4, 64, "float32"
    repeat = 2  # timed calls per n at least (the fastest counts)
    timeout = 600

    def setup(self, backend, pass_):
        require_device(self.device)
        self.backend, self.backward = backend, pass_ == "forward+backward"
        self.ns = [n for n in self.sizes[pass_] if n <= max_length(backend, self.device)]
        self._prepare(self.ns[0])  # a skip (NotImplementedError) surfaces here, before any fit

    def track_time_exponent(self, backend, pass_):
        return scaling_exponent(self._time, self.ns)

    def track_peak_memory_exponent(self, backend, pass_):
        return scaling_exponent(self._peak_bytes, self.ns)

    def _prepare(self, n):
        """``(call, input_bytes)`` at length n (warmed up where the first call differs)."""
        shape = (self.batch, self.heads, n, self.head_dim)
        call, _, input_bytes = _attention_call(self.backend, self.device, self.dtype, False, self.backward, shape)
        _warm_up(call, self.device, self.backend)
        return call, input_bytes

    def _time(self, n):
        return best_time(self._prepare(n)[0], repeat=self.repeat)

    def _peak_bytes(self, n):
        call, input_bytes = self._prepare(n)
        return input_bytes + peak_bytes(call, self.device)


class AttentionScalingCuda(AttentionScaling):
    """:class:`AttentionScaling` on CUDA: n from 1024 to 16384 (``tiled``: to 4096), 16 heads of dim 128, float16."""

    params = [BACKENDS, ["forward", "forward+backward"]]
    device = "cuda"
    sizes = {"forward": (1024, 2048, 4096, 8192, 16384), "forward+backward": (1024, 2048, 4096, 8192, 16384)}
    batch, heads, head_dim, dtype = 1, 16, 128, "float16"
    repeat = 5

    # Declared again (not only inherited) so that claims.yaml can name them: the registry check
    # reads benchmark names from class bodies.
    def track_time_exponent(self, backend, pass_):
        return scaling_exponent(self._time, self.ns)

    def track_peak_memory_exponent(self, backend, pass_):
        return scaling_exponent(self._peak_bytes, self.ns)


class LinearAttentionScaling:
    """Fitted exponents p of ``cost ~ n^p`` for linear attention computed in either order, on CPU.

    One sequence of n tokens, feature dimension d = d_v = 64, float32, features ``elu + 1``
    computed in setup. ``linear``: ``phi(Q) (phi(K)^T V)`` (the d x d_v state first);
    ``quadratic-form``: ``(phi(Q) phi(K)^T) V`` (the n x n matrix first); ``normalized``: the
    linear order divided by ``phi(q_t)^T sum_j phi(k_j)`` (Katharopoulos et al. 2020, eq. 6).
    At the smallest n the linear order takes well under a millisecond, so call overhead pulls its
    time exponent below 1.
    """

    version = "1"
    params = [["linear", "quadratic-form", "normalized"]]
    param_names = ["order"]
    sizes = (1024, 2048, 4096, 8192)
    head_dim = 64

    def setup(self, order):
        if _linear.error:
            raise NotImplementedError(f"impl.linear_attention is not in this commit ({_linear.error})")
        self.fn = {"linear": linear_attention.linear_attention,
                   "quadratic-form": linear_attention.quadratic_form_linear_attention,
                   "normalized": linear_attention.normalized_linear_attention}[order]

    def track_time_exponent(self, order):
        return scaling_exponent(lambda n: best_time(self._prepare(n)[0], repeat=3), self.sizes)

    def track_peak_memory_exponent(self, order):
        return scaling_exponent(self._peak_bytes, self.sizes)

    def _prepare(self, n):
        """``(call, input_bytes)`` at length n."""
        phi_q, phi_k, v = (randn((n, self.head_dim), torch.float32, "cpu", seed) for seed in range(3))
        phi_q, phi_k = linear_attention.elu_plus_one(phi_q), linear_attention.elu_plus_one(phi_k)
        fn = self.fn
        return (lambda: fn(phi_q, phi_k, v)), tensor_bytes(phi_q, phi_k, v)

    def _peak_bytes(self, n):
        call, input_bytes = self._prepare(n)
        return input_bytes + peak_bytes(call, "cpu")


class AttentionAccuracy:
    """Accuracy as history, beside speed: each backend's worst error ratio per dtype on the backend matrix's
    fixed problems (:mod:`claimcheck.kernel`, tier ``smoke``, every mask kind it declares; the ratio of its
    error against the float64 reference to the naive same-precision reference's; the matrix allows 2 x for
    outputs and 3 x for gradients plus a rounding floor, so a ratio above that can pass where both errors
    are at the floor). A numerical regression then shows in ``asv publish`` like a slowdown.
    Deterministic: fixed problems only, no drawn ones."""

    version = "1"
    params = [CPU_EAGER_BACKENDS, ["float32", "float16", "bfloat16"]]
    param_names = ["backend", "dtype"]
    device = "cpu"
    timeout = 600

    def setup(self, backend, dtype):
        require_device(self.device)
        from claimcheck import kernel as matrix
        from impl.backends import BACKENDS as REGISTRY, available

        ok, why = available(REGISTRY[backend], self.device, DTYPES[dtype])
        if not ok:
            raise NotImplementedError(why)
        masks = [m for m in matrix.MASK_KINDS]
        results, _ = matrix.run_matrix(REGISTRY[backend], self.device, [DTYPES[dtype]], masks, examples=0,
                                       tier="smoke")
        if not results:
            raise NotImplementedError(f"{backend} declares no case in {dtype} on {self.device}")
        self.worst = max(r.worst[0] for r in results)

    def track_worst_error_ratio(self, backend, dtype):
        return self.worst

    track_worst_error_ratio.unit = "error / naive same-precision error"


class AttentionAccuracyCuda(AttentionAccuracy):
    """:class:`AttentionAccuracy` on CUDA, every registry backend that declares it."""

    params = [BACKENDS, ["float32", "float16", "bfloat16"]]
    device = "cuda"

    def track_worst_error_ratio(self, backend, dtype):  # spelled out: claims check reads names from class bodies
        return self.worst

    track_worst_error_ratio.unit = "error / naive same-precision error"
