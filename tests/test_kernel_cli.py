"""``claims kernel`` and ``pytest --backend``: a user's attention function through the backend matrix.

Exit codes as for ``claims``: 0 every case passed, 1 a case failed, 2 a usage or input error.
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from claimcheck.cli import main
from claimcheck.kernel import ProblemSpec

ROOT = Path(__file__).resolve().parent.parent
NARROW = ["--dtype", "float32", "--mask", "none", "--examples", "1"]


def _run(capsys, *argv) -> tuple[int, str]:
    code = main(["kernel", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def test_a_correct_function_passes_every_case(capsys):
    code, out = _run(capsys, "impl.attention:attention", "--dtype", "float32", "--dtype", "float16", "--examples", "1",
                     "--backward", "--fully-masked", "nan")
    assert code == 0, out
    assert "11 of 11 cases passed" in out and "worst error ratio" in out and "FAIL" not in out


def test_a_wrong_function_fails_with_the_problem_and_a_repro_that_fails_again(capsys):
    code, out = _run(capsys, "tests.kernel_zoo:gqa_modulo", *NARROW)
    assert code == 1, out
    assert "FAIL  float32-none" in out and "gqa-4/2:out" in out
    assert "problem (gqa-4/2): B=1 H_q=4 H_kv=2 n_q=9 n_k=20" in out
    assert "the output matches: query head h reading key/value head h % H_kv (not h // group)" in out
    repro = re.search(r"repro: claims kernel (.*)", out).group(1)
    code, again = _run(capsys, *shlex.split(repro))
    assert code == 1 and "given:out" in again, again


def test_kernel_features_are_checked_only_when_declared_and_the_undeclared_ones_are_listed(capsys):
    code, out = _run(capsys, "impl.attention:attention", "--tier", "smoke", "--dtype", "float32", "--examples", "1",
                     "--feature", "window", "--feature", "sink")
    assert code == 0, out
    assert re.search(r"ok +float32-window", out) and re.search(r"ok +float32-sink", out), out
    assert "float32-alibi" in out and "does not declare the mask features ['alibi'] (not checked)" in out
    code, out = _run(capsys, "tests.kernel_zoo:window_left_bound_ignored", "--tier", "smoke", "--dtype", "float32",
                     "--examples", "1", "--feature", "window", "--mask", "window")
    assert code == 1 and "FAIL  float32-window" in out, out


def test_a_drawn_failure_is_shrunk_and_printed_with_its_seed(capsys):
    # the fixed problems all have d_k = 16; a kernel wrong only for d_k < 16 is caught by the drawn ones
    code, out = _run(capsys, "tests.test_kernel_cli:wrong_below_16", "--dtype", "float32", "--mask", "none",
                     "--examples", "20")
    assert code == 1, out
    assert "drawn:out" in out and "shrunk" in out and "seed=" in out
    spec = ProblemSpec.parse(re.search(r"--problem '([^']*)'", out).group(1))
    assert spec.d_k < 16 and spec.n_q == 1 and spec.H_q == 1  # shrunk towards the smallest problem


def wrong_below_16(q, k, v, scale=None, mask=None):
    from impl.attention import attention

    out = attention(q, k, v, scale, mask)
    return out * 1.01 if q.shape[-1] < 16 else out


def test_capabilities_are_read_from_the_functions_attribute(capsys):
    code, out = _run(capsys, "tests.kernel_zoo:wrong_lse_in_backward", *NARROW)
    assert code == 1 and "backward yes" in out and "gqa-4/2:dq" in out, out
    code, out = _run(capsys, "tests.kernel_zoo:wrong_lse_in_backward", *NARROW, "--no-backward")
    assert code == 0 and "backward no" in out, out  # the forward is right


def test_a_kernel_that_ignores_the_scale_fails_on_the_scale_problem_and_its_repro_passes_the_scale(capsys):
    code, out = _run(capsys, "tests.kernel_zoo:scale_ignored", *NARROW)
    assert code == 1 and "scale-0.3:out" in out and "scale 0.3" in out, out
    repro = re.search(r"repro: claims kernel (.*)", out).group(1)
    assert "scale=0.3" in repro
    code, again = _run(capsys, *shlex.split(repro))
    assert code == 1 and "given:out" in again, again


def test_a_kernel_without_a_scale_argument_is_checked_at_its_default_and_the_verdict_says_so(capsys):
    code, out = _run(capsys, "tests.kernel_zoo:scale_ignored", *NARROW, "--no-scale")
    assert code == 0 and "scale no" in out and "only its default 1/sqrt(d_k) was checked" in out, out


def test_fully_masked_rows_not_declared_are_named_and_fail_only_with_a_value_no_reference_gives(capsys):
    code, out = _run(capsys, "impl.attention:attention", "--mask", "fully-masked")
    assert code == 0 and "key-padding: nan" in out and "not judged: no convention declared" in out, out
    code, out = _run(capsys, "tests.kernel_zoo:mean_of_v_on_fully_masked_rows", "--mask", "fully-masked")
    assert code == 1 and "key-padding: the mean of V" in out and "no reference gives it" in out, out
    code, out = _run(capsys, "tests.kernel_zoo:mean_of_v_on_fully_masked_rows", "--mask", "fully-masked",
                     "--fully-masked", "any")
    assert code == 0 and "not judged: declared any" in out, out
    code, out = _run(capsys, "tests.kernel_zoo:mean_of_v_on_fully_masked_rows", "--mask", "fully-masked",
                     "--fully-masked", "zero")
    assert code == 1 and "give the mean of V, declared zero" in out, out


@pytest.mark.parametrize("argv,needle", [
    (["nosuchmodule:fn"], "No module named 'nosuchmodule'"),
    (["impl.attention"], "neither module:function nor a backend"),
    (["impl.attention:nosuch"], "has no attribute 'nosuch'"),
    (["impl.attention:attention", "--head-dims", "8"], "expected LO-HI"),
    (["impl.attention:attention", "--problem", "B=1", "--dtype", "float32"], "exactly one --mask"),
    (["impl.attention:attention", "--mask", "none", "--dtype", "float32", "--problem", "Q=1"], "bad problem field"),
    (["triton", "--gqa"], "registry backend"),
    (["tests.test_kernel_cli:declares_the_mean_of_v"], "expected 'nan'"),
])
def test_usage_errors_exit_2_saying_why(capsys, argv, needle):
    code, out = _run(capsys, *argv)
    assert code == 2 and needle in out, out


def declares_the_mean_of_v(q, k, v, scale=None, mask=None):
    raise AssertionError("never called: its declaration is refused")


declares_the_mean_of_v.claims_capabilities = {"fully_masked": "mean"}  # not a convention: nan, zero or any


def test_a_problem_spec_prints_as_it_parses():
    spec = ProblemSpec("additive", 2, 4, 2, 9, 20, 16, 24, 7, 4.0, 110.0)
    assert ProblemSpec.parse(str(spec), "additive") == spec
    spec = ProblemSpec("key-padding", 1, 2, 1, 7, 11, 16, 16, 3, 1.0, None, 0.3, "bottom-right")
    assert ProblemSpec.parse(str(spec), "key-padding") == spec and "scale=0.3,causal=bottom-right" in str(spec)
    assert ProblemSpec.parse(str(ProblemSpec("sink", causal="top-left")), "sink").causal == "top-left"
    with pytest.raises(ValueError, match="combines with the key-padding, sink, softcap, alibi, window masks only, not none"):
        ProblemSpec("none", causal="top-left")
    # a window under top-left causal is drawn with a left bound that keeps every row a key
    spec = ProblemSpec("window", 1, 2, 1, 9, 20, 16, 16, 5, causal="top-left")
    assert ProblemSpec.parse(str(spec), "window") == spec
    with pytest.raises(ValueError, match="padding=0.3 combines with the sink, softcap, alibi masks only, not window"):
        ProblemSpec("window", padding=0.3)


def test_the_pytest_option_runs_the_same_matrix_on_a_given_function(tmp_path):
    env = {**os.environ, "CI": "true", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", "properties/test_backends.py", "-p", "no:xdist", "-q",
           "--backend", "tests.kernel_zoo:gqa_modulo", "-k", "float32-none or fully_masked",
           "--claims-results", str(tmp_path / "results.json")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "tests.kernel_zoo:gqa_modulo-cpu-float32-none" in proc.stdout and "gqa-4/2:out" in proc.stdout


def test_the_run_prints_its_tier_counts_and_what_the_kernel_cannot_take_before_it_starts(capsys):
    code, out = _run(capsys, "impl.attention:attention", "--dtype", "float32", "--mask", "none", "--examples", "1",
                     "--head-dims", "16-128", "--tier", "smoke")
    assert code == 0, out
    assert "tier smoke: 1 cases, 10 fixed and up to 1 drawn problems" in out
    assert "non-contiguous q, k, v checked (problems non-contiguous, packed-qkv, strided-head-dim)" in out
    code, out = _run(capsys, "impl.attention:attention", "--dtype", "float32", "--mask", "none", "--examples", "1",
                     "--tier", "smoke", "--no-strided")
    assert code == 0 and "tier smoke: 1 cases, 7 fixed" in out, out
    assert "not in this kernel's matrix: packed-qkv (non-contiguous q, k, v: the kernel is declared contiguous only)" in out
    code, out = _run(capsys, "impl.attention:attention", "--dtype", "float32", "--mask", "none", "--examples", "1",
                     "--head-dims", "16-128")
    assert code == 0, out
    assert "tier ci: 1 cases, 18 fixed and up to 1 drawn problems" in out
    assert "not in this kernel's matrix: head-256 (head dim 256 outside the declared 16..128)" in out
    assert out.index("tier ci") < out.index("ok    float32-none")


def test_bench_times_only_a_kernel_that_passes(capsys):
    narrow = ["--dtype", "float32", "--mask", "none", "--examples", "1", "--tier", "smoke", "--bench"]
    code, out = _run(capsys, "impl.attention:attention", *narrow)
    assert code == 0 and re.search(r"--bench float32 B=1 H=8 n=1024 d=64: [\d.]+ ms, torch SDPA [\d.]+ ms", out), out
    code, out = _run(capsys, "tests.kernel_zoo:gqa_modulo", *narrow)
    assert code == 1 and "speed not measured: a kernel that fails the matrix" in out and " ms, torch SDPA" not in out


def test_a_feature_that_changes_the_call_is_its_own_case_and_a_failure_prints_its_problem_whole(capsys):
    code, out = _run(capsys, "impl.attention:attention", "--dtype", "float32", "--examples", "3", "--feature", "lse",
                     "--mask", "lse", "--mask", "varlen", "--backward")
    assert code == 0 and re.search(r"ok +float32-lse", out), out
    assert "float32-varlen" in out and "does not declare the mask features ['varlen'] (not checked)" in out
    code, out = _run(capsys, "tests.kernel_zoo:kvcache_past_seqlens", "--dtype", "float32", "--mask", "kvcache",
                     "--examples", "1")
    assert code == 1 and "FAIL  float32-kvcache" in out and "kvcache-decode:out" in out, out
    assert "problem (kvcache-decode): B=3 H_q=4 H_kv=2 n_q=1 L_cache=300 cache_seqlens=[300, 137, 1]" in out
    assert "--mask kvcache" in out and "--problem" not in out.split("repro:")[1]  # the case, re-run whole
    code, out = _run(capsys, "tests.kernel_zoo:kvcache_past_seqlens", "--dtype", "float32", "--mask", "kvcache",
                     "--problem", "B=1")
    assert code == 2 and "no problem syntax" in out, out
