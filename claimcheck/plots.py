"""Plots for the report, drawn with matplotlib and returned as inline SVG text.

Figures recorded by the evidence follow naming conventions that say how to draw them:

* ``error_ratio[backend=...,dtype=...,...]``: a float or a list of floats, a distribution of
  error ratios (a backend's error over the same-precision naive reference's error), drawn as
  one box-and-points row per figure;
* ``series[key]`` with value ``{"n": [...], "y": [...]}``: a scaling measurement, drawn on
  log-log axes, with ``fit[key]`` (``{"exponent": e, "ci95": [lo, hi]}``) in its legend.

Benchmark results (asv) with a numeric parameter are drawn as value against that parameter.
Each SVG gets a distinct ``svg.hashsalt`` so that several can sit in one page without clashing ids.
"""
from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any

_BRACKETED = re.compile(r"^(?P<family>[A-Za-z_][\w.-]*)\[(?P<key>.*)\]$")
MAX_SERIES_PER_PLOT = 8


@dataclass(frozen=True)
class Plot:
    title: str
    svg: str


def split_name(name: str) -> tuple[str, str] | None:
    """``'series[attention,cpu]'`` -> ``('series', 'attention,cpu')``; None for a plain name."""
    m = _BRACKETED.match(name)
    return (m["family"], m["key"]) if m else None


def figure_plots(figures: list[dict], salt: str) -> list[Plot]:
    """The plots for one test's recorded figures (an empty list when none follows a convention)."""
    ratios: list[tuple[str, list[float]]] = []
    series: dict[str, dict] = {}
    fits: dict[str, dict] = {}
    for fig in figures:
        parts = split_name(str(fig.get("name", "")))
        if not parts:
            continue
        family, key = parts
        value = fig.get("value")
        if family == "error_ratio":
            values = _floats(value if isinstance(value, list) else [value])
            if values:
                ratios.append((key, values))
        elif family == "series" and isinstance(value, dict):
            n, y = _floats(value.get("n")), _floats(value.get("y"))
            if n and len(n) == len(y):
                series[key] = {"n": n, "y": y}
        elif family == "fit" and isinstance(value, dict):
            fits[key] = value
    plots = []
    if ratios:
        plots.append(Plot("error ratios (backend error / same-precision reference error)",
                          _error_ratio_svg(ratios, f"{salt}-ratios")))
    keys = list(series)
    for start in range(0, len(keys), MAX_SERIES_PER_PLOT):
        chunk = keys[start:start + MAX_SERIES_PER_PLOT]
        plots.append(Plot("scaling (log-log)", _series_svg({k: series[k] for k in chunk}, fits, f"{salt}-series{start}")))
    return plots


def benchmark_plot(name: str, runs: list[Any], salt: str) -> Plot | None:
    """Value against the first numeric parameter of an asv benchmark, one line per other combination."""
    lines: dict[str, tuple[list[float], list[float]]] = {}
    unit = None
    for run in runs:
        numeric = [i for i, values in enumerate(run.params) if len(values) > 1 and all(_is_number(v) for v in values)]
        if not numeric:
            continue
        axis = numeric[0]
        unit = run.unit
        for combo, value in run.rows():
            if value is None or not value > 0:  # failed, skipped (NaN) or not plottable on a log axis
                continue
            others = [f"{n}={v}" for i, (n, v) in enumerate(zip(run.param_names, combo)) if i != axis]
            label = ", ".join(others + ([run.machine] if len(runs) > 1 else [])) or run.machine
            xs, ys = lines.setdefault(label, ([], []))
            xs.append(float(combo[axis]))
            ys.append(value)
        xlabel = run.param_names[axis]
    if not lines:
        return None
    fig, ax = _figure()
    for label, (xs, ys) in list(lines.items())[:12]:
        order = sorted(range(len(xs)), key=xs.__getitem__)
        ax.plot([xs[i] for i in order], [ys[i] for i in order], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(unit or "value")
    ax.set_title(name, fontsize=9)
    ax.legend(fontsize=7)
    return Plot(f"benchmark {name}", _svg(fig, salt))


def _error_ratio_svg(ratios: list[tuple[str, list[float]]], salt: str) -> str:
    fig, ax = _figure(height=0.6 + 0.35 * len(ratios))
    labels = [k for k, _ in ratios]
    data = [v for _, v in ratios]
    try:  # matplotlib >= 3.10 says orientation=; older releases only know vert=
        ax.boxplot(data, orientation="horizontal", widths=0.5, showfliers=False)
    except TypeError:
        ax.boxplot(data, vert=False, widths=0.5, showfliers=False)
    for i, values in enumerate(data, start=1):
        jitter = [i + 0.15 * (((j * 0.618) % 1) - 0.5) for j in range(len(values))]
        ax.scatter(values, jitter, s=6, alpha=0.6)
    ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
    positive = [x for v in data for x in v if x > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_xscale("log")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("error ratio")
    return _svg(fig, salt)


def _series_svg(series: dict[str, dict], fits: dict[str, dict], salt: str) -> str:
    fig, ax = _figure()
    for key, s in series.items():
        label = key
        fit = fits.get(key)
        if fit and _is_number(fit.get("exponent")):
            label += f": slope {float(fit['exponent']):.3g}"
            ci = fit.get("ci95")
            if isinstance(ci, list) and len(ci) == 2 and all(_is_number(c) for c in ci):
                label += f" [{float(ci[0]):.3g}, {float(ci[1]):.3g}]"
        pts = [(n, y) for n, y in zip(s["n"], s["y"]) if n > 0 and y > 0]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("y")
    ax.legend(fontsize=7)
    return _svg(fig, salt)


def _figure(height: float = 3.2):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, max(1.6, min(height, 9.0))), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig: Any, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 8}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG is inlined in HTML


def _floats(values: Any) -> list[float]:
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if _is_number(v)]


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            return math.isfinite(float(value))
        except ValueError:
            return False
    return False
