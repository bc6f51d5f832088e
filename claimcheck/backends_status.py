"""What the report says about the attention backends: which run on this machine, and their errors.

Three sources: the backend registry's own answer to "can this run here?" (:mod:`impl.backends`, when
the project's implementations are importable), the error-ratio figures the evidence recorded
(``error_ratio[backend=...,dtype=...,...]``: a backend's error against the float64 reference over
the naive same-precision reference's error), and the suite's strength as last measured: the kernel
zoo's kill rate (``results/kernel-zoo.json``, written by ``tests/test_kernel_zoo.py``), the mutant
score of ``impl/`` (``results/mutants.json``, written by ``make mutants``) and the verdicts of the gallery
of real kernels (``results/kernel-gallery/*.json``, written by ``tests/test_gallery.py``).
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from claimcheck.runrecord import read_json

_FIGURE = re.compile(r"^error_ratio\[(?P<body>[^\]]*)\]$")


def _fields(body: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in body.split(",") if "=" in part)


def error_ratios(tests: list[dict]) -> dict[tuple[str, str], list[float]]:
    """``(backend, dtype) -> ratios`` from every recorded ``error_ratio[backend=..,dtype=..]`` figure;
    a figure naming a device other than the CPU counts under ``backend (device)``: a GPU kernel's
    rounding is not the CPU kernel's."""
    found: dict[tuple[str, str], list[float]] = {}
    for test in tests:
        for fig in test.get("figures") or []:
            m = _FIGURE.match(str(fig.get("name", "")))
            value = fig.get("value")
            if not m or not isinstance(value, (int, float)):
                continue
            f = _fields(m.group("body"))
            if "backend" in f and "dtype" in f:
                name = f["backend"] if f.get("device", "cpu") == "cpu" else f'{f["backend"]} ({f["device"]})'
                found.setdefault((name, f["dtype"]), []).append(float(value))
    return found


def availability() -> list[dict[str, Any]]:
    """Each backend x device x dtype on this machine: runs, or the reason it cannot."""
    try:
        import torch

        from impl.backends import BACKENDS, available
    except Exception as exc:  # the implementations are not importable: say so rather than guess
        return [{"backend": "-", "device": "-", "dtype": "-", "runs": False, "reason": f"impl.backends: {exc}"}]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for name, backend in BACKENDS.items():
        for device in devices:
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                ok, reason = available(backend, device, dtype)
                rows.append({"backend": name, "device": device, "dtype": str(dtype).removeprefix("torch."),
                             "runs": bool(ok), "reason": None if ok else reason})
    return rows


def strength(results_dir: Path | None) -> dict[str, Any]:
    """The kernel zoo's and the mutants' kill rates, from their saved JSON (None where not measured)."""
    zoo = read_json(results_dir / "kernel-zoo.json") if results_dir else None
    mutants = read_json(results_dir / "mutants.json") if results_dir else None
    out: dict[str, Any] = {"zoo": None, "mutants": None, "gallery": None}
    gallery = [read_json(p) for p in sorted((results_dir / "kernel-gallery").glob("*.json"))] if results_dir else []
    if any(isinstance(g, dict) for g in gallery):
        out["gallery"] = [g for g in gallery if isinstance(g, dict)]
    if zoo and isinstance(zoo.get("kernels"), list):
        out["zoo"] = {"killed": sum(bool(k.get("caught")) for k in zoo["kernels"]), "total": len(zoo["kernels"]),
                      "kernels": [{"kernel": k.get("kernel"), "bug": k.get("bug"), "caught_by": f'{k.get("case")} / '
                                   f'{k.get("check")}', "caught": bool(k.get("caught"))} for k in zoo["kernels"]]}
    if mutants and isinstance(mutants.get("mutants"), list):
        rows = mutants["mutants"]
        out["mutants"] = {"killed": sum(m.get("outcome") == "killed" for m in rows),
                          "equivalent": sum(m.get("outcome") == "equivalent" for m in rows), "total": len(rows),
                          "survived": [f'{m.get("name")}: {m.get("description")}' for m in rows
                                       if m.get("outcome") == "survived"],
                          "scope": mutants.get("scope")}
    return out


def summary(tests: list[dict], results_dir: Path | None = None) -> dict[str, Any]:
    """The report's ``backends`` entry: availability, the error-ratio distribution per backend and dtype,
    and the suite's kill rates (from ``results_dir``)."""
    ratios = error_ratios(tests)
    distribution = []
    for (backend, dtype), values in sorted(ratios.items()):
        values = sorted(values)
        distribution.append({
            "backend": backend, "dtype": dtype, "cases": len(values),
            "median": statistics.median(values), "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
            "max": values[-1],
        })
    return {"availability": availability(), "error_ratio": distribution, "strength": strength(results_dir)}
