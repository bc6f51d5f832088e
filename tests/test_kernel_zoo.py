"""The backend matrix proves its own strength: it rejects every kernel of the zoo with the check
aimed at its bug, and accepts every correct backend (the matrix of ``claims kernel`` and of
``properties/test_backends.py``, :mod:`claimcheck.kernel`, in float32 and float16).

The zoo's kill rate is written to ``results/kernel-zoo.json`` for the report's backends section.
On a GPU machine the same zoo runs on CUDA tensors too (``results/kernel-zoo-cuda.json``); without
one those cells skip, saying so.
"""
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from claimcheck import kernel
from impl.backends import BACKENDS, available
from tests.kernel_zoo import ZOO, gqa_modulo, no_max_subtraction

ROOT = Path(__file__).resolve().parent.parent
ZOO_DTYPES = (torch.float32, torch.float16)  # float32 and one low precision: the zoo runs in seconds
CORRECT = ("reference", "tiled", "sdpa-math", "sdpa-flash", "triton")
# interpreted Triton costs ~0.2 s a problem: float32, with and without a causal mask (the property suite runs
# its whole matrix); FlexAttention is not run here: every new shape is a ~4 s CPU compile
NARROW = {"triton": dict(dtypes=(torch.float32,), masks=("none", "causal-bottom-right", "lse", kernel.FULLY_MASKED))}


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                reason="the zoo on CUDA needs CUDA; this machine has none"))]


def _rejections(backend, device: str = "cpu", diagnoses: dict | None = None, **narrow) -> dict[str, list[str]]:
    """``case name -> failing checks`` of the zoo matrix (one drawn example a case, unshrunk); ``diagnoses``,
    when given, gets ``case name -> what the verdict says the kernel does instead``."""
    results, _ = kernel.run_matrix(backend, device, narrow.get("dtypes", ZOO_DTYPES), narrow.get("masks"),
                                   examples=1, base_seed=0, shrink=False)
    if diagnoses is not None:
        diagnoses.update({r.case.name: r.diagnosis or "" for r in results if not r.ok})
    return {r.case.name: (r.failed_checks or [f"error: {r.message}"]) for r in results if not r.ok}


@pytest.mark.parametrize("device", DEVICES)
def test_every_zoo_kernel_is_rejected_by_the_check_aimed_at_its_bug(device):
    assert len(ZOO) >= 12 and len({w.name for w in ZOO}) == len(ZOO)
    rows, missed = [], []
    for wrong in ZOO:
        diagnoses: dict[str, str] = {}
        rejected = _rejections(kernel.declared_backend(wrong.fn, wrong.name, device), device, diagnoses)
        caught = wrong.check in rejected.get(wrong.case, [])
        rows.append({"kernel": wrong.name, "bug": wrong.bug, "case": wrong.case, "check": wrong.check,
                     "caught": caught, "rejected": bool(rejected), "failing_cases": sorted(rejected)})
        if not caught:
            missed.append(f"{wrong.name}: expected {wrong.case} / {wrong.check}; failing: {rejected}")
        elif wrong.diagnosis not in diagnoses.get(wrong.case, ""):  # the verdict names what it does instead
            missed.append(f"{wrong.name}: {wrong.case} diagnosed {diagnoses.get(wrong.case)!r}, expected "
                          f"{wrong.diagnosis!r}")
    out = ROOT / "results" / ("kernel-zoo.json" if device == "cpu" else f"kernel-zoo-{device}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"kernels": rows, "total": len(rows), "killed": sum(r["caught"] for r in rows),
                               "device": device, "dtypes": [kernel.dtype_name(d) for d in ZOO_DTYPES]}, indent=1) + "\n")
    assert not missed, "\n".join(missed)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", CORRECT)
def test_every_correct_backend_passes_the_zoo_matrix(name, device):
    backend = BACKENDS[name]
    ok, reason = available(backend, device, torch.float32)
    if not ok:
        pytest.skip(reason)
    assert _rejections(backend, device, **NARROW.get(name, {}) if device == "cpu" else {}) == {}


@pytest.mark.parametrize("name", [b for b in BACKENDS if "cpu" in BACKENDS[b].devices])
@pytest.mark.parametrize("wrong,check", [(gqa_modulo, "gqa-4/2:out"), (no_max_subtraction, "large-logits:out")])
def test_grouped_query_and_overflow_bugs_are_caught_under_every_backends_declaration(name, wrong, check):
    """The bugs the old matrix missed under ``triton``'s declaration (head dims 16..128, causal masks
    only): each backend's declared shapes still meet 4-over-2 heads and scores past float32's exp overflow."""
    impostor = replace(BACKENDS[name], fn=wrong, requires=lambda device: None)
    results, _ = kernel.run_matrix(impostor, "cpu", (torch.float32,), ("none",), examples=0)
    assert check in results[0].failed_checks, results[0].failed_checks


def test_the_report_shows_the_kill_rates_saved_by_the_zoo_and_the_mutants(tmp_path):
    from claimcheck.backends_status import strength
    from claimcheck.html import _strength

    assert strength(tmp_path) == {"zoo": None, "mutants": None, "gallery": None}
    assert "not measured" in _strength(strength(tmp_path))
    (tmp_path / "kernel-gallery").mkdir()
    (tmp_path / "kernel-gallery" / "sdpa.json").write_text(json.dumps({
        "kernel": "sdpa", "command": "claims kernel impl.gallery:sdpa", "accepted": True, "summary": "6 of 6 cases passed",
        "diagnosis": None}))
    (tmp_path / "kernel-gallery" / "top-left.json").write_text(json.dumps({
        "kernel": "top-left", "command": "claims kernel x", "accepted": False, "summary": "0 of 1 cases passed",
        "diagnosis": "bottom-right causal alignment (declared top-left)"}))
    gallery = _strength(strength(tmp_path))
    assert "<th>sdpa</th><td>accepted</td>" in gallery and "<th>top-left</th><td>REJECTED</td>" in gallery
    assert "the output matches: bottom-right causal alignment (declared top-left)" in gallery
    (tmp_path / "kernel-zoo.json").write_text(json.dumps({"kernels": [
        {"kernel": "gqa-modulo", "bug": "h % H_kv", "case": "float32-none", "check": "gqa-4/2:out", "caught": True},
        {"kernel": "other", "bug": "b", "case": "float32-none", "check": "drawn:out", "caught": False}]}))
    (tmp_path / "mutants.json").write_text(json.dumps({"scope": "properties/", "mutants": [
        {"name": "a", "description": "x", "outcome": "killed"}, {"name": "b", "description": "y", "outcome": "survived"},
        {"name": "c", "description": "z", "outcome": "equivalent"}]}))
    saved = strength(tmp_path)
    assert (saved["zoo"]["killed"], saved["zoo"]["total"]) == (1, 2)
    assert (saved["mutants"]["killed"], saved["mutants"]["equivalent"], saved["mutants"]["survived"]) == (1, 1, ["b: y"])
    page = _strength(saved)
    assert "<b>1 of 2</b> known-wrong kernels" in page and "SURVIVED" in page and "<b>1 of 2</b> killed" in page
