"""Every asv benchmark runs once, at its first (smallest) parameter combination.

A broken benchmark fails here, in CI, rather than in a long ``asv run``. Benchmarks that sweep
sizes internally (``track_*_exponent``) run their sweep's first two sizes. A benchmark whose
setup raises ``NotImplementedError`` (asv's skip: no CUDA, a backend absent here) is skipped
with its reason. Also checked: the invariants the suite's tools rely on (explicit versions,
names the registry check can see) and the CUDA runner's behaviour without CUDA.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _runner  # noqa: E402

SUITES = _runner.discover()
SWEEPS = ("sizes", "head_dims", "lengths")  # class attributes holding an internal sweep


def _shrink_sweeps(instance: object) -> None:
    """Keep the first two points of each internal sweep (a fit needs two)."""
    for attr in SWEEPS:
        sweep = getattr(instance, attr, None)
        if isinstance(sweep, dict):
            setattr(instance, attr, {k: tuple(v)[:2] for k, v in sweep.items()})
        elif sweep is not None:
            setattr(instance, attr, tuple(sweep)[:2])


def test_every_bench_module_has_benchmarks():
    found = {s.module for s in SUITES}
    assert found == set(_runner.bench_modules()), f"bench modules without a benchmark: {set(_runner.bench_modules()) - found}"


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_benchmark_runs_at_its_first_parameters(suite):
    combo = tuple(p[0] for p in suite.params)
    instance = suite.cls()
    _shrink_sweeps(instance)
    try:
        instance.setup(*combo)
    except NotImplementedError as exc:
        pytest.skip(f"{suite.name}{combo}: {exc}")
    for method in suite.methods:
        value = getattr(instance, method)(*combo)
        if method.startswith("track_"):
            assert isinstance(value, (int, float)) and math.isfinite(value), f"{suite.name}.{method} gave {value!r}"


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_benchmark_declares_version_and_params(suite):
    # an explicit version makes asv's results and benchmarks/cuda_run.py's agree
    assert isinstance(getattr(suite.cls, "version", None), str), f"{suite.name} needs a `version = \"1\"` attribute"
    assert len(suite.param_names) == len(suite.params), f"{suite.name}: param_names and params differ in length"


def test_registry_check_sees_the_methods_each_class_defines():
    # claimcheck reads benchmark names from class bodies (ast): evidence may name those methods
    from claimcheck.collect import benchmarks

    names = benchmarks(ROOT)
    for suite in SUITES:
        for method in set(suite.methods) & set(vars(suite.cls)):
            assert f"benchmarks/{suite.module}.py::{suite.cls.__name__}.{method}" in names


def test_only_bench_modules_hold_names_asv_would_collect():
    # asv imports every module of benchmarks/ and runs any time_/track_/... function it finds
    from claimcheck.collect import benchmarks

    stray = sorted(n for n in benchmarks(ROOT) if not n.startswith("benchmarks/bench_"))
    assert not stray, f"helpers named like benchmarks (asv would run them): {stray}"


def test_cuda_run_without_cuda_exits_with_a_clear_message():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cuda_run.py"), "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "CUDA is not available" in proc.stderr and "--device cpu" in proc.stderr


def test_cuda_run_on_cpu_writes_asv_results_and_a_summary(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cuda_run.py"), "--device", "cpu", "--bench", r"Softmax\.",
         "--max-combos", "1", "--out", str(out), "--machine", "smoke", "--commit", "f" * 40],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (result_file,) = (out / "smoke").glob("ffffffff-*.json")
    data = json.loads(result_file.read_text())
    assert data["version"] == 2 and data["commit_hash"] == "f" * 40
    row = data["results"]["bench_softmax.Softmax.time_softmax"]
    assert row[0][0] > 0 and all(v is None for v in row[0][1:])  # only the first combination ran
    assert json.loads((out / "benchmarks.json").read_text())["bench_softmax.Softmax.time_softmax"]["version"] == "1"
    assert (out / "smoke" / "machine.json").exists()
    assert "bench_softmax.Softmax.time_softmax" in (out / "summary-smoke-ffffffff.txt").read_text()


def test_cuda_run_interrupts_a_benchmark_running_past_budget_and_grace(tmp_path):
    # the first AttentionScaling point sweeps the reference up to n = 4096: seconds on any machine
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cuda_run.py"), "--device", "cpu", "--bench", r"AttentionScaling\.",
         "--max-combos", "1", "--budget", "0.2", "--grace", "0.5", "--out", str(out), "--machine", "smoke",
         "--commit", "e" * 40],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "interrupted" in proc.stdout and "not run" in proc.stdout
    assert list((out / "smoke").glob("eeeeeeee-*.json"))  # the (empty) results file is still written


KERNEL_CASES = [(b, c) for b in ("reference", "tiled", "sdpa-math", "sdpa-flash") for c in (False, True)]
KERNEL_CASES.append(("flex", True))  # one compile (seconds): the causal block mask is the part to check


@pytest.mark.parametrize("backend, causal", KERNEL_CASES, ids=[f"{b}-{'causal' if c else 'full'}" for b, c in KERNEL_CASES])
def test_benchmarked_kernel_computes_attention(backend, causal):
    # the benchmarks' own wrappers (tile size, flex block masks, mask alignment) time the right thing
    import torch

    from benchmarks._attention import kernel
    from impl.attention import Mask, attention

    shape = (1, 2, 160, 32)  # n = 160: the last 128-tile is partial
    try:
        fn = kernel(backend, "cpu", torch.float32, causal, False, shape)
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(3))
    expected = attention(q, k, v, mask=Mask(causal="top-left") if causal else None)
    got = fn(q.float(), k.float(), v.float()).double()
    # float32 rounding of convex combinations of unit-normal values: errors ~1e-7, a wrong mask ~1e-1
    assert (got - expected).abs().max() < 1e-4
