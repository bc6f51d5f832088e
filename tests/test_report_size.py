"""The report stays light: page size, per-claim size, duplicate ids, plots per question, `claims show` length.

Sizes and counts are deterministic (the plots are drawn with fixed salts, gzip without a time
stamp), so they are asserted here; rendering *time* is tracked by the asv benchmark
``benchmarks/bench_report.py``, not by a test. Targets (issue 14): index.html <= 3 MB, no claim
over 200 KB of HTML once its panel is open, no duplicate element id even with every panel open,
one set of plots per question, `claims show` <= 80 lines by default.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from claimcheck import html, report
from claimcheck.cli import SHOW_LINES, render_claim_text
from claimcheck.references import default_path, load_references
from claimcheck.registry import load_registry
from claimcheck.sources import load_sources

REPO = Path(__file__).resolve().parents[1]
PAGE_LIMIT = 3_000_000
PANEL_LIMIT = 200_000
CASES = 300  # parametrized cases of one heavy test (the real flash-attention backend matrix has ~120)
SERIES = 40


def heavy_results(results: dict) -> dict:
    """The sample results with ``flash-attention.exact`` resting on a 300-case parametrized test, each case
    recording eight error-ratio distributions, and a 40-series scaling test."""
    cases = []
    for i in range(CASES):
        figures = [{"name": f"error_ratio[backend=b{j},dtype=float32,mask=m{i % 5},out]",
                    "value": [0.5 + ((i * 7 + j * 3 + k) % 17) / 10 for k in range(20)]} for j in range(8)]
        cases.append({"nodeid": f"properties/test_flash.py::test_backend_matrix[case{i}]", "claims": ["flash-attention.exact"],
                      "kind": "property", "outcome": "skipped" if i % 10 == 0 else "passed",
                      "message": "needs cuda" if i % 10 == 0 else None, "counterexample": None,
                      "figures": figures, "examples": 5, "seconds": 0.01})
    series = [{"name": f"series[time vs n, variant {i}]", "value": {"n": [64, 128, 256, 512], "y": [1.0, 4.1, 16.3, 65.0]}}
              for i in range(SERIES)]
    series += [{"name": f"fit[time vs n, variant {i}]", "value": {"exponent": 2.0, "ci95": [1.9, 2.1]}} for i in range(SERIES)]
    cases.append({"nodeid": "properties/test_flash.py::test_scaling", "claims": ["flash-attention.exact"],
                  "kind": "property", "outcome": "passed", "message": None, "counterexample": None,
                  "figures": series, "examples": None, "seconds": 0.5})
    row = next(r for r in results["claims"] if r["id"] == "flash-attention.exact")
    row["evidence_run"] = row["evidence_run"] + [c["nodeid"] for c in cases]
    results["tests"] = results["tests"] + cases
    return results


@pytest.fixture
def heavy(tiny_project):
    results = heavy_results(json.loads(tiny_project.results_path.read_text()))
    data = report.build(load_registry(tiny_project.root / "claims.yaml"), load_sources(tiny_project.root), results, None)
    return data, html.render(data)


def panels(page: str) -> dict[str, str]:
    """Every claim's panel, opened (its packed measurements put back)."""
    return {m[1]: html.unpack(page, m[0]) for m in re.finditer(r'<article class="claim" id="claim-([^"]+)".*?</article>', page, re.S)}


def duplicate_ids(page: str) -> list[str]:
    """Ids that occur more than once in the page with every panel open."""
    opened = page[:page.index('<div id="panels">')] + "".join(panels(page).values())
    return [i for i, n in Counter(re.findall(r'\sid="([^"]+)"', opened)).items() if n > 1]


def test_a_heavy_claim_stays_under_the_panel_limit_with_one_set_of_plots_per_question(heavy):
    data, page = heavy
    flash = panels(page)["flash-attention.exact"]
    assert len(flash.encode()) < PANEL_LIMIT
    # the matrix test: one error-ratio plot (11 worst rows and the pooled rest); the scaling test: 40 series,
    # 8 per plot; the original two-case test of the sample: one more error-ratio plot
    assert flash.count("<svg") == 1 + SERIES // 8 + 1
    assert "the 11 worst of 40 cases, the rest pooled" in flash
    # the passing cases share one row, the skipped ones one row per reason
    assert f"&times; {CASES - CASES // 10} parametrized cases" in flash and f"&times; {CASES // 10} parametrized cases" in flash
    assert flash.count("<tr") < 40
    assert "error_ratio[...]</code> &times; 2400" in flash and "worst <code>" in flash


def test_no_element_id_repeats_even_with_every_panel_open(heavy):
    _, page = heavy
    assert duplicate_ids(page) == []
    assert 'id="figure_1"' not in page and "figure_1" not in "".join(panels(page).values())


def test_claims_show_is_short_by_default_and_complete_with_full(heavy):
    data, _ = heavy
    by_id = {c["id"]: c for c in data["claims"]}
    short = render_claim_text(by_id["flash-attention.exact"], by_id)
    full = render_claim_text(by_id["flash-attention.exact"], by_id, full=True)
    assert len(short.splitlines()) <= SHOW_LINES < len(full.splitlines())
    assert f"x {CASES - CASES // 10} cases" in short and "needs cuda" in short
    assert "test_backend_matrix[case299]" in full


def test_the_math_is_mathml_with_its_source_kept(tiny_project):
    from claimcheck import mathml

    quote = mathml.math_html(r"所有指数都在 $(0,1]$ 范围内")
    assert quote.startswith("所有指数都在 <span class=\"math\" data-tex=\"(0,1]\"") and "<math>" in quote
    whole = mathml.math_html(r"\text{softmax}(x_i)=\frac{e^{x_i}}{\sum_j e^{x_j}}", whole=True)
    assert "<mfrac>" in whole and 'data-tex="\\text{softmax}' in whole
    broken = mathml.math_html(r"\frac{Q{K}^T}{\sqrt{d_k}}\cdot c(n)\right)V", whole=True)
    assert broken.startswith('<code class="tex"')  # the converter fails: the source is shown
    old, new = mathml.formula_change("A_ij = exp(S_ij) / sum_k exp(S_ik).",
                                     "A_ij = exp(S_ij / sqrt(d_k)) / sum_k exp(S_ik / sqrt(d_k)).")
    assert "<del>" not in old and new.count("<ins>") == 2 and "sqrt" in new


@pytest.fixture(scope="module")
def real_page():
    """This repository's report from its saved evidence results (made by `make test` before this runs)."""
    path = REPO / "results" / "claims-results.json"
    if not path.exists():
        pytest.skip("no saved results (run the property suite first: make test does)")
    results = json.loads(path.read_text(encoding="utf-8"))
    data = report.build(load_registry(REPO / "claims.yaml"), load_sources(REPO), results, None,
                        references=load_references(default_path(REPO)))  # as `claims report` builds it
    return data, html.render(data)


def test_this_repositorys_report_meets_the_size_targets(real_page):
    data, page = real_page
    assert len(page.encode()) <= PAGE_LIMIT
    sizes = {cid: len(p.encode()) for cid, p in panels(page).items()}
    assert len(sizes) == len(data["claims"])
    assert max(sizes.values()) <= PANEL_LIMIT, max(sizes, key=sizes.get)
    assert duplicate_ids(page) == []
    by_id = {c["id"]: c for c in data["claims"]}
    longest = max(by_id, key=lambda i: len(render_claim_text(by_id[i], by_id).splitlines()))
    assert len(render_claim_text(by_id[longest], by_id).splitlines()) <= SHOW_LINES, longest
