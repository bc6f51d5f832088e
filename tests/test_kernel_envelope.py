"""What a kernel cannot run is said, never passed: per-device requirements, declared alignments, and
the problems a kernel's own library refuses (:func:`impl.backends.declines`).

On a GPU machine the same matrix meets rules a declaration cannot state (SDPA's flash kernel takes
no causal mask with n_q != n_k; the memory-efficient one needs aligned head dimensions; what each
supports moves with the torch build and the GPU): the matrix asks the kernel's library, lists the
problems it refuses, checks the rest, and calls a case whose every problem was refused a skip.
"""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from claimcheck import cli, kernel
from impl import backends
from impl.attention import Mask, attention
from impl.backends import BACKENDS, available, supports

ROOT = Path(__file__).resolve().parent.parent


def _recording(seen: list, wrong: bool = False):
    def fn(q, k, v, scale=None, mask=None):
        seen.append((q.shape[1], k.shape[1]))
        out = attention(q, k, v, scale, mask)
        return out * 1.01 if wrong else out
    return fn


def _refuse_shared_heads(q, k, v, mask, backward=False):
    return "shared key/value heads are not supported" if q.shape[1] != k.shape[1] else None


def test_problems_the_library_declines_are_listed_and_never_run():
    seen: list = []
    backend = kernel.declared_backend(_recording(seen), "no-gqa-here", backward=False,  # one call a problem
                                      declines=_refuse_shared_heads)
    result = kernel.run_case(backend, kernel.Case(torch.float32, "none"), examples=4, base_seed=0)
    assert result.status == "pass"
    assert {label.split()[0] for label, _ in result.declined} >= {"gqa-4/2", "gqa-8/2"}
    assert all(reason == "shared key/value heads are not supported" for _, reason in result.declined)
    assert seen and all(h_q == h_kv for h_q, h_kv in seen)  # the kernel never saw a refused problem
    assert result.problems == len(seen)


def test_a_case_whose_every_problem_is_declined_is_a_skip_not_a_pass():
    seen: list = []
    backend = kernel.declared_backend(_recording(seen, wrong=True), "refuses-all",
                                      declines=lambda *a, **k: "no kernel for this GPU")
    result = kernel.run_case(backend, kernel.Case(torch.float16, "none"), examples=3, base_seed=0)
    assert result.status == "declined" and result.problems == 0 and not seen
    assert "declined all" in result.message and "no kernel for this GPU" in result.message


def test_a_wrong_kernel_that_declines_some_problems_is_still_caught_on_the_rest():
    backend = kernel.declared_backend(_recording([], wrong=True), "wrong", declines=_refuse_shared_heads)
    result = kernel.run_case(backend, kernel.Case(torch.float32, "none"), examples=2, base_seed=0, shrink=False)
    shared = {p.label for p in kernel.fixed_problems(backend, "none") if p.gqa}
    assert shared == {"gqa-4/2", "gqa-8/2", "large-logits", "negative-logits", "scale-0.3", "scale-0", "keys-1025",
                      "one-key",
                      "batch-3", "non-contiguous", "strided-head-dim", "rows-as-many-as-batch"}  # the others: one head, or as many key/value heads as query heads
    assert {label.split()[0] for label, _ in result.declined} & {p.label for p in kernel.fixed_problems(backend, "none")} == shared
    assert result.status == "fail" and "drawn:out" in result.failed_checks
    assert {"tiles-128:out", "decode:out"} <= set(result.failed_checks)


def test_fully_masked_rows_the_library_declines_are_not_supported_with_its_reason():
    backend = kernel.declared_backend(attention, "refuses-all", declines=lambda *a, **k: "mask not supported")
    rows = kernel.check_fully_masked(backend)
    # the window's row is outside the declaration (no window declared), the others the library's own refusal
    assert rows and all(r.seen == "not supported" and r.message == ("mask not supported" if r.mask != "window" else
                                                                    r.message) for r in rows)
    assert {r.mask for r in rows if r.message == "mask not supported"} == {"key-padding", "additive",
                                                                            "causal-bottom-right"}


def test_declared_alignment_shapes_every_problem_and_is_checked_by_supports():
    backend = kernel.declared_backend(attention, "aligned", head_dim_multiple=8)
    dims = [(p.q.shape[-1], p.v.shape[-1]) for p in kernel.fixed_problems(backend, "none")]
    seen: list = []

    def fn(q, k, v, scale=None, mask=None):
        seen.append((q.shape[-1], v.shape[-1]))
        return attention(q, k, v, scale, mask)

    kernel.run_case(kernel.declared_backend(fn, "aligned", head_dim_multiple=8), kernel.Case(torch.float32, "none"),
                    examples=6, base_seed=0)
    assert all(d % 8 == 0 for pair in dims + seen for d in pair)
    assert supports(backend, "cpu", head_dim=12)[1].endswith("multiples of 8, not d_k = 12, d_v = None")
    assert supports(backend, "cpu", head_dim=16, value_dim=24)[0]
    with pytest.raises(ValueError, match="head_dim_multiple"):
        kernel.declared_backend(attention, "bad", head_dim_multiple=0)
    with pytest.raises(ValueError, match="declines"):
        kernel.declared_backend(attention, "bad", declines="yes")


@pytest.mark.parametrize("name", ["sdpa-flash", "sdpa-efficient", "sdpa-cudnn"])
def test_sdpa_asks_torch_only_about_cuda_tensors(name):
    """torch's can_use_* answer for CUDA tensors; CPU tensors are the CPU kernels' business (no refusal)."""
    q, k = torch.randn(1, 4, 9, 16), torch.randn(1, 2, 20, 16)
    assert BACKENDS[name].declines(q, k, k, None, False) is None


def test_a_refusal_carries_torchs_own_reasons(monkeypatch):
    """What torch warns while it checks (its debug mode) is the reason a refused problem is listed with."""
    import warnings

    import torch.backends.cuda as sdpa_cuda

    def refuse(params, debug=False):
        warnings.warn("Flash attention does not support the is_causal flag when seqlen_q != seqlen_k. "
                      "(Triggered internally at sdp_utils.cpp:1)")
        return False

    monkeypatch.setattr(sdpa_cuda, "can_use_flash_attention", refuse)
    q, k = torch.randn(1, 2, 9, 16), torch.randn(1, 2, 20, 16)
    reason = backends.sdpa_refusal("FLASH_ATTENTION", q, k, k, Mask(causal="top-left"))
    assert reason == ("torch declines flash_attention: Flash attention does not support the is_causal flag when "
                      "seqlen_q != seqlen_k.")
    monkeypatch.setattr(sdpa_cuda, "can_use_flash_attention", lambda params, debug=False: True)
    assert backends.sdpa_refusal("FLASH_ATTENTION", q, k, k, None) is None


def test_a_cuda_only_backend_says_why_it_cannot_run_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for name in ("sdpa-efficient", "sdpa-cudnn", "flash-attn"):
        ok, reason = available(BACKENDS[name], "cuda", torch.float16)
        assert not ok and "needs CUDA" in reason


def test_triton_needs_the_interpreter_for_cpu_tensors_and_the_compiler_for_cuda(monkeypatch):
    """Triton interprets or compiles for the whole process: each device type says when it cannot run."""
    triton_attention = pytest.importorskip("impl.triton_attention")
    monkeypatch.setattr(triton_attention, "INTERPRET", False)
    monkeypatch.setattr(triton_attention, "INTERPRETER_PROBLEM", None)
    assert "TRITON_INTERPRET=1" in backends._triton_requires("cpu")
    assert backends._triton_requires("cuda") is None
    monkeypatch.setattr(triton_attention, "INTERPRET", True)
    assert backends._triton_requires("cpu") is None
    assert "numpy interpreter, not on the GPU" in backends._triton_requires("cuda")


def test_the_cli_lists_what_the_library_declined(capsys, tmp_path, monkeypatch):
    (tmp_path / "refusing_attn.py").write_text(
        "from impl.attention import attention\n"
        "def fn(q, k, v, scale=None, mask=None):\n    return attention(q, k, v, scale, mask)\n"
        "fn.claims_capabilities = {'declines': lambda q, k, v, mask, backward: "
        "'needs H_q = H_kv' if q.shape[1] != k.shape[1] else None}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["kernel", "refusing_attn:fn", "--dtype", "float32", "--mask", "none", "--examples", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "declined: needs H_q = H_kv" in out and "may decline problems" in out


def test_the_backend_matrix_has_a_cell_for_every_declared_device(tmp_path):
    """On a machine without a GPU the CUDA cells are collected and skip with that reason (never vanish)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "properties/test_backends.py", "-p", "no:xdist", "-q",
                          "-rs", "-k", "reference-cuda-float32-none or sdpa-efficient-cuda-float16-causal",
                          "-p", "no:randomly", "--claims-results", str(tmp_path / "claims-results.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    if not torch.cuda.is_available():
        assert "needs CUDA; this machine has none" in out.stdout and " skipped" in out.stdout, out.stdout[-2000:]
        assert "passed" not in out.stdout.splitlines()[-1]


def test_backward_is_checked_by_default_wherever_autograd_reaches_the_inputs():
    def dk_unscaled(q, k, v, scale=None, mask=None):  # right forward; dK misses the softmax scale
        s = 1 / q.shape[-1] ** 0.5 if scale is None else scale
        k2 = k.detach() + (k - k.detach()) / s if s else k  # the gradient through k times 1 / scale (0: dK is 0)
        return attention(q, k2, v, scale, mask)

    backend = kernel.declared_backend(dk_unscaled, "dk-unscaled")
    assert backend.devices["cpu"].backward and "autograd reaches q, k and v" in backend.backward_note
    result = kernel.run_case(backend, kernel.Case(torch.float32, "none"), examples=0, base_seed=0, shrink=False)
    assert result.status == "fail" and any(c.endswith(":dk") for c in result.failed_checks)
    assert all(not c.endswith(":out") for c in result.failed_checks)

    def no_autograd(q, k, v, scale=None, mask=None):
        with torch.no_grad():
            return attention(q, k, v, scale, mask)

    silent = kernel.declared_backend(no_autograd, "forward-only")
    assert not silent.devices["cpu"].backward and "no grad_fn" in silent.backward_note
    assert not kernel.declared_backend(dk_unscaled, "opted-out", backward=False).devices["cpu"].backward


def test_a_kernel_declaring_the_padding_unread_is_given_inf_keys_and_nan_values_there():
    def skips_the_padding(q, k, v, scale=None, mask=None):  # zeroes what the padding hides before any product
        if mask is not None and mask.key_padding is not None:
            hidden = ~mask.key_padding[:, None, :, None]
            k, v = k.masked_fill(hidden, 0.0), v.masked_fill(hidden, 0.0)
        return attention(q, k, v, scale, mask)

    plain = kernel.declared_backend(attention, "plain")
    assert "padding-poisoned" not in {p.label for p in kernel.fixed_problems(plain, "key-padding")}
    skips_the_padding.claims_capabilities = {"padding_unread": True}
    backend = kernel.declared_backend(skips_the_padding, "skips")
    assert "padding-poisoned" in {p.label for p in kernel.fixed_problems(backend, "key-padding")}
    assert kernel.run_case(backend, kernel.Case(torch.float32, "key-padding"), examples=0, base_seed=0).ok
    leaks = kernel.declared_backend(attention, "leaks", padding_unread=True)  # the reference: 0 x NaN is NaN
    result = kernel.run_case(leaks, kernel.Case(torch.float32, "key-padding"), examples=0, base_seed=0, shrink=False)
    assert not result.ok and "padding-poisoned:out" in result.failed_checks
