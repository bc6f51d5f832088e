"""Plots for the report, drawn with matplotlib and returned as compact inline SVG text.

Figures recorded by the evidence follow naming conventions that say how to draw them:

* ``error_ratio[backend=...,dtype=...,...]``: a float or a list of floats, a distribution of
  error ratios (a backend's error over the same-precision naive reference's error), drawn as
  one box row per figure; more than ``MAX_RATIO_ROWS`` rows are summarised into the worst ones
  and one pooled row of the rest, and long rows are drawn as their quantiles;
* ``series[Y vs X, qualifiers]`` with value ``{"n": [...], "y": [...]}`` (optionally ``"x_label"``
  and ``"y_label"``): a scaling measurement, drawn on log-log axes when its values are positive,
  with the line fitted by ``fit[...]`` (``{"exponent": e, "ci95": [lo, hi]}``, optionally
  ``"claimed": e0``) and the claimed law (``claimed_exponent``) beside it. Series of different
  quantities Y go on different plots: one quantity per axis.

Benchmark results (asv) with a numeric parameter are drawn as value against that parameter.
Legends sit below the axes, never over the data. Each SVG has its ids salted (only those it
references are kept), so that many can sit in one page without a duplicate id.
"""
from __future__ import annotations

import hashlib
import io
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any

_BRACKETED = re.compile(r"^(?P<family>[A-Za-z_][\w.-]*)\[(?P<key>.*)\]$")
MAX_SERIES_PER_PLOT = 8
MAX_RATIO_ROWS = 12  # rows of an error-ratio plot; beyond, the worst 11 and one pooled row
QUANTILES = 21  # points drawn for a long row of error ratios (its 0%, 5%, ..., 100% quantiles)
MIN_RATIO_VALUES = 10  # fewer error ratios in a question are read off its figures table: a plot adds nothing
RATIO_LABEL = "error ratio (backend / reference error, dimensionless)"
UNITS = (  # (word in the quantity, unit): the first match labels the axis
    ("flop", "FLOPs"), ("bytes", "bytes"), ("memory", "bytes"), ("time", "s"), ("seconds", "s"),
    ("tokens", "tokens"), ("entropy", "nats"),
)
X_NAMES = {"n": "sequence length n (tokens)", "d": "dimension d", "d_k": "head dimension d_k",
           "depth": "depth (layers)", "width": "width (units)"}


@dataclass(frozen=True)
class Plot:
    title: str
    svg: str


def split_name(name: str) -> tuple[str, str] | None:
    """``'series[attention,cpu]'`` -> ``('series', 'attention,cpu')``; None for a plain name."""
    m = _BRACKETED.match(name)
    return (m["family"], m["key"]) if m else None


def figure_plots(figures: list[dict], salt: str, claimed_exponent: float | None = None) -> list[Plot]:
    """The plots for one question's recorded figures (an empty list when none follows a convention)."""
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
                series[key] = {**value, "n": n, "y": y}
        elif family == "fit" and isinstance(value, dict):
            fits[key] = value
    plots = []
    if sum(len(v) for _, v in ratios) >= MIN_RATIO_VALUES:
        shown, note = summarise_ratios(ratios)
        plots.append(Plot("error ratios (backend error / same-precision reference error)" + note,
                          _error_ratio_svg(shown, f"{salt}-ratios")))
    by_quantity: dict[str, list[str]] = {}
    for key in series:
        by_quantity.setdefault(axis_labels(key, series[key])[1], []).append(key)
    for q, (quantity, keys) in enumerate(by_quantity.items()):
        for start in range(0, len(keys), MAX_SERIES_PER_PLOT):
            chunk = keys[start:start + MAX_SERIES_PER_PLOT]
            plots.append(Plot(f"{quantity}: scaling",
                              _series_svg({k: series[k] for k in chunk}, fits, claimed_exponent, f"{salt}-s{q}-{start}")))
    return plots


def summarise_ratios(ratios: list[tuple[str, list[float]]]) -> tuple[list[tuple[str, list[float]]], str]:
    """At most ``MAX_RATIO_ROWS`` rows: the worst rows (largest maximum) and the rest pooled; a note says so."""
    if len(ratios) <= MAX_RATIO_ROWS:
        return ratios, ""
    ranked = sorted(ratios, key=lambda kv: -max(kv[1]))
    worst, rest = ranked[:MAX_RATIO_ROWS - 1], ranked[MAX_RATIO_ROWS - 1:]
    pooled = [x for _, v in rest for x in v]
    return worst + [(f"the other {len(rest)} cases, pooled", pooled)], \
        f"; the {len(worst)} worst of {len(ratios)} cases, the rest pooled"


def quantiles(values: list[float], k: int = QUANTILES) -> list[float]:
    """``k`` evenly spaced quantiles (linear interpolation), min and max included."""
    s = sorted(values)
    if len(s) <= k:
        return s
    out = []
    for i in range(k):
        pos = i * (len(s) - 1) / (k - 1)
        lo = int(pos)
        out.append(s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo))
    return out


def axis_labels(key: str, value: dict | None = None) -> tuple[str, str]:
    """(x label, y label) of ``series[Y vs X, qualifiers]``: explicit labels first, units inferred."""
    value = value or {}
    head = key.split(",")[0]
    y, _, x = head.partition(" vs ")
    x, y = x.strip() or "n", y.strip() or head.strip()
    first, _, rest = x.partition(" ")
    x_label = value.get("x_label") or (X_NAMES[first] + (f", {rest.strip('() ')}" if rest else "") if first in X_NAMES else x)
    y_label = value.get("y_label") or _with_unit(y)
    return str(x_label), str(y_label)


def _with_unit(quantity: str) -> str:
    low = quantity.lower()
    for word, unit in UNITS:
        if word in low:
            return quantity if unit.lower() in low and word != "memory" else f"{quantity} ({unit})"
    return f"{quantity} (dimensionless)"


def benchmark_plot(name: str, runs: list[Any], salt: str) -> Plot | None:
    """Value against the first numeric parameter of an asv benchmark, one line per other combination."""
    lines: dict[str, tuple[list[float], list[float]]] = {}
    unit = None
    xlabel = ""
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
    for label, (xs, ys) in list(lines.items())[:MAX_SERIES_PER_PLOT]:
        order = sorted(range(len(xs)), key=xs.__getitem__)
        ax.plot([xs[i] for i in order], [ys[i] for i in order], marker="o", markersize=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(X_NAMES.get(xlabel, xlabel))
    ax.set_ylabel(f"{name.split('_', 1)[-1].replace('_', ' ')} ({unit})" if unit else "value")
    title = name + (f" (first {MAX_SERIES_PER_PLOT} of {len(lines)} parameter combinations)"
                    if len(lines) > MAX_SERIES_PER_PLOT else "")
    _legend_below(fig, ax)
    return Plot(f"benchmark {title}", _svg(fig, salt))


def _error_ratio_svg(ratios: list[tuple[str, list[float]]], salt: str) -> str:
    fig, ax = _figure(height=0.9 + 0.3 * len(ratios))
    labels = [k for k, _ in ratios]
    data = [v for _, v in ratios]
    try:  # matplotlib >= 3.10 says orientation=; older releases only know vert=
        ax.boxplot(data, orientation="horizontal", widths=0.5, showfliers=False)
    except TypeError:
        ax.boxplot(data, vert=False, widths=0.5, showfliers=False)
    for i, values in enumerate(data, start=1):
        shown = quantiles(values)
        jitter = [i + 0.15 * (((j * 0.618) % 1) - 0.5) for j in range(len(shown))]
        ax.scatter(shown, jitter, s=6, alpha=0.6, color="tab:blue")
    ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=6)
    ax.invert_yaxis()  # the first (worst) row on top
    positive = [x for v in data for x in v if x > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_xscale("log")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel(RATIO_LABEL)
    _plain_ticks(ax)
    _margins(fig, ax)
    return _svg(fig, salt)


DENSE_POINTS = 60  # more points than this in a series: drawn as a line, not as markers


def _series_svg(series: dict[str, dict], fits: dict[str, dict], claimed: float | None, salt: str) -> str:
    fig, ax = _figure()
    logy = all(y > 0 for s in series.values() for y in s["y"])
    claimed_drawn = False
    for i, (key, s) in enumerate(series.items()):
        color = f"C{i % 10}"
        pts = [(n, y) for n, y in zip(s["n"], s["y"]) if n > 0 and (y > 0 or not logy)]
        if not pts:
            continue
        qualifiers = key.split(",", 1)[1].strip() if "," in key else key.split(" vs ")[0]
        # a long series (a training curve of hundreds of steps) is one line: a marker a point would be ~100 bytes
        # of SVG each, and the page's panels have a size budget (tests/test_report_size.py)
        style = dict(linestyle="-", linewidth=1) if len(pts) > DENSE_POINTS else dict(marker="o", markersize=3,
                                                                                       linestyle="none")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, label=f"measured: {qualifiers}", **style)
        fit = fits.get(key) or fits.get(_fit_key(key, fits))
        if not (fit and _is_number(fit.get("exponent")) and logy and len(pts) >= 2):
            continue
        e = float(fit["exponent"])
        ci = fit.get("ci95")
        label = f"fitted n^{e:.3g}"
        if isinstance(ci, list) and len(ci) == 2 and all(_is_number(c) for c in ci):
            label += f" [95%: {float(ci[0]):.3g}, {float(ci[1]):.3g}]"
        xs = [p[0] for p in pts]
        ax.plot(xs, _power_line(pts, e), color=color, linewidth=1, label=label)
        c0 = fit.get("claimed", claimed)
        if _is_number(c0):
            ax.plot(xs, _power_line(pts, float(c0)), color=color, linewidth=1, linestyle="--",
                    label=None if claimed_drawn else f"claimed n^{float(c0):.3g}")
            claimed_drawn = True
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    x_label, y_label = axis_labels(next(iter(series)), next(iter(series.values())))
    ax.set_xlabel(x_label)
    ax.set_ylabel(textwrap.fill(y_label, 40))
    _legend_below(fig, ax)
    return _svg(fig, salt)


def _fit_key(key: str, fits: dict[str, dict]) -> str | None:
    """The fit recorded for a series under a slightly different name (same quantity, first words)."""
    head = key.split(" vs ")[0].strip().lower()
    return next((k for k in fits if k.lower().startswith(head)), None) if len(fits) == 1 or head else None


def _power_line(pts: list[tuple[float, float]], exponent: float) -> list[float]:
    """``C n^exponent`` through the points' geometric centre (C by least squares in log space)."""
    log_c = sum(math.log(y) - exponent * math.log(n) for n, y in pts) / len(pts)
    return [math.exp(log_c + exponent * math.log(n)) for n, _ in pts]


def _plain_ticks(ax: Any) -> None:
    """Tick labels as plain numbers (``100``, ``1e+04``): matplotlib's default for log axes is mathtext
    (``10^{2}``), which cost most of the drawing time; no minor ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            lo, hi = sorted(axis.get_view_interval())
            decades = math.log10(hi / lo) if lo > 0 and hi > 0 else 9.0
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.minorticks_off()  # a log axis's minor ticks are a third of the drawing time


def _legend_below(fig: Any, ax: Any) -> None:
    """The legend in a band below the axes (never over the data), the figure grown to hold it."""
    _plain_ticks(ax)
    handles, labels = ax.get_legend_handles_labels()
    ncols = 2 if len(labels) > 3 else 1
    rows = -(-len(labels) // ncols)
    width, height = fig.get_size_inches()
    band = 0.13 * rows + 0.05 if handles else 0.0  # inches: 6-point lines
    fig.set_size_inches(width, height + band)
    _margins(fig, ax, bottom_inches=0.5 + band)
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), fontsize=6, ncols=ncols,
                   frameon=False)


def _margins(fig: Any, ax: Any, bottom_inches: float = 0.5) -> None:
    """Fixed margins, the left one sized for the longest y tick label (a fixed layout: matplotlib's
    constrained layout draws every figure twice and costs half the report's rendering time)."""
    width, height = fig.get_size_inches()
    longest = max((len(t.get_text()) for t in ax.get_yticklabels()), default=0)  # set labels only (no draw)
    left = min(0.55, (0.5 + 0.05 * max(longest, 7)) / width)
    fig.subplots_adjust(left=left, right=0.97, top=1 - 0.15 / height, bottom=bottom_inches / height)


def _figure(height: float = 3.0):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, max(1.6, min(height, 6.0))))
    return fig, fig.add_subplot()


_ID = re.compile(r'\sid="([^"]+)"')
_TAG = re.compile(r'(["#])(p[0-9a-f]{10})-')
_NUMBER = re.compile(r"(?<![\w#-])(-?\d+\.\d{2})\d+")


def _svg(fig: Any, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 8}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return compact_svg(text[text.index("<svg"):], salt)  # no XML prolog or doctype: the SVG is inlined in HTML


def salt_tag(salt: str) -> str:
    """The prefix ``compact_svg`` gives the ids of an SVG drawn with ``salt``."""
    return "p" + hashlib.sha1(salt.encode()).hexdigest()[:10]


def resalt(svg: str, salt: str) -> str:
    """The same SVG with its ids renamed for ``salt`` (a second copy elsewhere in a page)."""
    return _TAG.sub(lambda m: f"{m[1]}{salt_tag(salt + m[2])}-", svg)


def compact_svg(svg: str, salt: str) -> str:
    """Drop the ids nothing references (``figure_1``, ``axes_1``, ...), salt the rest, round coordinates
    to two decimals and drop the metadata block: the same picture in a third of the text."""
    referenced = set(re.findall(r'url\(#([^)]+)\)', svg)) | set(re.findall(r'href="#([^"]+)"', svg))
    tag = salt_tag(salt)

    def rename(m: re.Match) -> str:
        return f' id="{tag}-{m[1]}"' if m[1] in referenced else ""
    svg = _ID.sub(rename, svg)
    for ref in referenced:
        svg = svg.replace(f"url(#{ref})", f"url(#{tag}-{ref})").replace(f'href="#{ref}"', f'href="#{tag}-{ref}"')
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = _NUMBER.sub(r"\1", svg)
    return re.sub(r">\s+<", "><", svg)


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
