"""Machinery shared by the benchmarks: devices, seeded inputs, timing and peak memory.

Device handling follows scipy's ``XPBenchmark`` (scipy/benchmarks/benchmarks/common.py): a
benchmark names its device, :func:`require_device` probes it in ``setup`` and raises
``NotImplementedError`` (asv's skip) with the reason when it is absent, and every timed call on
CUDA ends with ``torch.cuda.synchronize()`` so that asv times the kernels, not their launch.

Peak memory of one call, counting its inputs (:func:`peak_bytes`):

* CUDA: ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``;
* CPU: the allocations and frees that torch's CPU allocator reports to the profiler
  (``profile_memory=True``), summed in time order; worker threads of ``at::parallel_for``
  inherit the profiler, so buffers that fused kernels allocate inside them are counted.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable, Iterator

import torch

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class safe_import:
    """``with safe_import() as imported: from impl.x import y`` -- ``imported.error`` is the
    ImportError text, or None. asv runs today's benchmarks against old commits, where a module
    may not exist yet: its benchmarks must then skip, not break the whole suite (scipy's idiom)."""

    def __enter__(self) -> "safe_import":
        self.error: str | None = None
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if kind is not None and issubclass(kind, ImportError):
            self.error = f"{kind.__name__}: {value}"
            return True
        return False


def require_device(device: str) -> None:
    """Return if torch can compute on ``device``; else raise ``NotImplementedError`` (asv's skip)."""
    if device == "cpu":
        return
    if device != "cuda":
        raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
    if not torch.cuda.is_available():
        raise NotImplementedError("needs a CUDA device: torch.cuda.is_available() is False")


def synchronize(device: str) -> None:
    """Wait for the work queued on ``device`` (a no-op on CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def synchronized(fn: Callable[[], object], device: str) -> Callable[[], object]:
    """``fn`` followed by a device synchronisation: the callable that timed bodies call."""
    if device != "cuda":
        return fn

    def call() -> object:
        result = fn()
        torch.cuda.synchronize()
        return result

    return call


def randn(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    """Standard normal tensor drawn on the CPU from ``seed`` (the same numbers on every device)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Bytes held by the tensors' elements."""
    return sum(t.numel() * t.element_size() for t in tensors)


def best_time(fn: Callable[[], object], repeat: int = 3, min_time: float = 0.1) -> float:
    """Fastest wall-clock time of ``fn()`` in seconds over at least ``repeat`` calls, and more
    (up to 100) until ``min_time`` seconds have been spent: short calls get many tries, since
    the minimum is the figure least disturbed by other load. ``fn`` synchronises itself."""
    best, spent, calls = float("inf"), 0.0, 0
    while calls < repeat or (spent < min_time and calls < 100):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return best


def peak_bytes(fn: Callable[[], object], device: str) -> int:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated when it started."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    return _cpu_peak_bytes(fn)


def _cpu_peak_bytes(fn: Callable[[], object]) -> int:
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # kineto logs every profiler start and stop on stderr
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()  # > 0 for an allocation, < 0 for a free
        peak = max(peak, live)
    return peak


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
