"""What the report says about the attention backends: which run on this machine, and their errors.

Two sources: the backend registry's own answer to "can this run here?" (:mod:`impl.backends`, when
the project's implementations are importable), and the error-ratio figures the evidence recorded
(``error_ratio[backend=...,dtype=...,...]``: a backend's error against the float64 reference over
the naive same-precision reference's error).
"""
from __future__ import annotations

import re
import statistics
from typing import Any

_FIGURE = re.compile(r"^error_ratio\[(?P<body>[^\]]*)\]$")


def _fields(body: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in body.split(",") if "=" in part)


def error_ratios(tests: list[dict]) -> dict[tuple[str, str], list[float]]:
    """``(backend, dtype) -> ratios`` from every recorded ``error_ratio[backend=..,dtype=..]`` figure."""
    found: dict[tuple[str, str], list[float]] = {}
    for test in tests:
        for fig in test.get("figures") or []:
            m = _FIGURE.match(str(fig.get("name", "")))
            value = fig.get("value")
            if not m or not isinstance(value, (int, float)):
                continue
            f = _fields(m.group("body"))
            if "backend" in f and "dtype" in f:
                found.setdefault((f["backend"], f["dtype"]), []).append(float(value))
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


def summary(tests: list[dict]) -> dict[str, Any]:
    """The report's ``backends`` entry: availability and the error-ratio distribution per backend, dtype."""
    ratios = error_ratios(tests)
    distribution = []
    for (backend, dtype), values in sorted(ratios.items()):
        values = sorted(values)
        distribution.append({
            "backend": backend, "dtype": dtype, "cases": len(values),
            "median": statistics.median(values), "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
            "max": values[-1],
        })
    return {"availability": availability(), "error_ratio": distribution}
