"""report/index.html as text: self-contained, every claim present, values shown readably, plots inline.

The page's behaviour in a real browser is tested in test_html_browser.py.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from claimcheck import html, report
from claimcheck.asv_results import load_asv_results
from claimcheck.registry import load_registry
from claimcheck.sources import load_sources

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def data(tiny_project):
    results = json.loads(tiny_project.results_path.read_text())
    return report.build(load_registry(tiny_project.root / "claims.yaml"), load_sources(tiny_project.root), results,
                        load_asv_results(tiny_project.root))


@pytest.fixture
def page(data):
    return html.render(data)


class Elements(HTMLParser):
    """Every start tag with its attributes; ids checked for uniqueness."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def elements(page: str) -> list[tuple[str, dict]]:
    parser = Elements()
    parser.feed(page)
    return parser.tags


def panel(page: str, cid: str) -> str:
    """A claim's panel as the reader sees it once open: its packed measurements put back (as report.js does)."""
    start = page.index(f'<article class="claim" id="claim-{cid}"')
    return html.unpack(page, page[start:page.index("</article>", start)])


def test_page_fetches_nothing_from_the_network(page):
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    for tag, attrs in elements(page):
        for name in ("src", "href", "action", "data"):
            value = attrs.get(name) or ""
            assert not re.match(r"^(https?:)?//", value), f"<{tag} {name}={value!r}> fetches from the network"
        assert not (tag == "link" and attrs.get("rel") == "stylesheet"), "style sheets must be inline"
        assert not (tag == "script" and "src" in attrs), "scripts must be inline"


def test_every_claim_has_a_row_and_a_panel_and_every_link_resolves(page, data):
    tags = elements(page)
    html_ids = {a["id"] for t, a in tags if "id" in a}
    for c in data["claims"]:
        assert f"row-{c['id']}" in html_ids and f"claim-{c['id']}" in html_ids
    for t, a in tags:
        href = a.get("href") or ""
        if t == "a" and href.startswith("#"):
            assert href[1:] in html_ids, f"link to a missing target {href}"
    page_ids = [a["id"] for _, a in tags if a.get("id", "").startswith(("row-", "claim-", "f-"))]
    assert len(page_ids) == len(set(page_ids))


def test_panel_shows_quote_beside_statement_verdict_status_and_why(page):
    p = panel(page, "spectral.eigenvalues-positive")
    assert '<blockquote lang="zh">正实部</blockquote>' in p
    assert "Every eigenvalue of a softmax attention matrix has a non-negative real part." in p
    assert 'badge v-fails">fails' in p and 'badge s-refuted">refuted' in p
    assert "<b>Why:</b> counterexample found; correction held (1 property)" in p
    assert "Correction" in p and "unit disc" in p


def test_counterexample_matrix_is_a_table_with_its_eigenvalues(page):
    p = panel(page, "spectral.eigenvalues-positive")
    assert '<table class="matrix">' in p and "2 x 2" in p
    assert "eigenvalues (computed for this report): 1, -1" in p
    assert "an eigenvalue has a negative real part" in p and "shrunk by Hypothesis" in p
    assert "Falsifying example" in p


def test_evidence_outcomes_show_hypothesis_example_counts_and_what_did_not_run(page):
    p = panel(page, "spectral.eigenvalues-positive")
    assert "test_eigenvalues_have_nonnegative_real_part" in p and '<td class="num">12</td>' in p
    gap = panel(page, "spectral.gap-bound")
    assert "test_gap_in_range" in gap and "did not run" in gap
    assert 'id="partial"' in page and "1 piece(s) of evidence did not run" in page


def test_error_ratio_and_scaling_figures_are_plotted_inline(page):
    flash = panel(page, "flash-attention.exact")
    assert flash.count("<svg") == 2  # the error-ratio distributions and the benchmark
    assert "backend=tiled,dtype=float32,mask=none,out" in flash and "max_abs_error" in flash
    scaling = panel(page, "complexity.quadratic-time")
    assert scaling.count("<svg") == 1 and "fitted n^2 [95%: 1.98, 2.02]" in scaling


def test_benchmark_results_are_shown_under_their_claim(page):
    flash = panel(page, "flash-attention.exact")
    assert "Benchmarks (asv)" in flash and "cpu-box" in flash and "commit bbbb2222" in flash
    assert "90 µs" in flash and "failed" in flash


def test_claims_link_to_the_claims_they_rest_on_with_status_propagated(page):
    gap = panel(page, "spectral.gap-bound")
    assert 'Rests on refuted claim(s): <a href="#claim-spectral.eigenvalues-positive">' in gap
    assert '<a href="#claim-spectral.trace-is-n">spectral.trace-is-n</a>' in gap
    row = page[page.index('<tr id="row-spectral.gap-bound"'):]
    assert 'title="rests on a refuted claim"' in row[:row.index("</tr>")]


def test_summary_counts_and_coverage(page):
    assert "<b>5</b> of 7 claims decided" in page and "<b>1</b> open" in page
    assert 'id="coverage"' in page and "2.1 基本谱定理" in page
    assert '<option value="spectral">spectral</option>' in page


def test_text_from_the_registry_is_escaped(tiny_project, data):
    data["claims"][0]["statement"] = "a <script>alert(1)</script> & b"
    page = html.render(data)
    assert "<script>alert(1)</script>" not in page
    assert "a &lt;script&gt;alert(1)&lt;/script&gt; &amp; b" in page


@pytest.mark.parametrize("value, expected", [
    ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "singular values (computed for this report)"),
    ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], "shape 2 x 2 x 2"),
    ([0.1, 0.2, 0.30000000000000004], "[0.1, 0.2, 0.30000000000000004]"),
    ({"q": [1.0, 0.0]}, "<dt>q</dt>"),
    ("not a number", "<code>not a number</code>"),
    ([[0.0, 1.0], [-1.0, 0.0]], "eigenvalues (computed for this report): 0 + 1i, 0 - 1i"),
])
def test_values_are_shown_readably(value, expected):
    assert expected in html._value_html(value)


def test_the_run_record_is_shown_and_a_partial_run_said_loudly():
    from claimcheck.html import _run_record

    run = {"id": "abc", "commit": "0123456789abcdef", "dirty": True, "started": "2026-12-01T10:00:00+00:00",
           "seconds": 12.5, "profile": "ci", "python": "3.11.7", "packages": {"torch": "2.13.0"},
           "device": {"type": "cpu", "gpu": None}, "cpu": "AMD EPYC", "complete": False, "not_run": 3,
           "base": {"id": "def", "commit": "fedcba9876543210", "started": "2026-12-01T09:00:00+00:00"},
           "runs": [{"id": "def", "profile": "ci", "commit": "fedcba9876543210", "rows": 8, "seconds": 30},
                    {"id": "abc", "profile": "ci", "commit": "0123456789abcdef", "rows": 2, "seconds": 12.5}]}
    text = _run_record(run)
    assert "0123456789ab" in text and "(dirty tree)" in text and "torch 2.13.0" in text and "AMD EPYC" in text
    assert "PARTIAL" in text and "3 evidence test(s) reached by no run" in text
    assert "def (8 rows" in text and "abc (2 rows" in text  # the runs the rows come from, with their rows
    assert "PARTIAL" not in _run_record({**run, "complete": True, "mixed": False, "not_run": 0})
    mixed = _run_record({**run, "complete": True, "mixed": True, "not_run": 0})
    assert "PARTIAL" in mixed and "reached by no run" not in mixed  # nothing is missing: only the runs differ


# --- findings: how far off, by kind, and the banner of a run that did not check out ----------


@pytest.mark.parametrize("finding, expected", [
    ({"kind": "wrong-number", "claimed": 360000, "actual": 1048576, "ratio": 2.91}, "x2.9"),
    ({"kind": "wrong-number", "claimed": 16, "actual": 8, "ratio": 2}, "x0.5"),  # the direction from the numbers
    ({"kind": "wrong-number", "claimed": "n (1024 at n = 1024)", "actual": "1.03", "ratio": 994}, "x994"),
    ({"kind": "wrong-number", "claimed": 0.9, "actual": 1.0, "ratio": 1.111}, "x1.1"),
    ({"kind": "wrong-number", "claimed": 1.0, "actual": 1.04}, "x1.04"),
    ({"kind": "wrong-number", "claimed": "(n_dims, max_pos, head_dim/2)", "actual": "(max_pos, 2 n_dims)"}, "shape"),
    ({"kind": "wrong-number", "claimed": "Re(lambda) >= 0", "actual": "lambda = -0.8"}, "number"),
    ({"kind": "wrong-exponent", "claimed": -0.75, "actual": 1}, "exponent 1, not -0.75"),
    ({"kind": "wrong-exponent", "claimed": "O(n d)", "actual": "Theta(n^2 d^2 / M)"}, "exponent"),
    ({"kind": "code-does-not-run", "summary": "NDimensionalRoPE(8, 2, 16) raises NameError (pairs_per_dim)"},
     "does not run: NameError"),
    ({"kind": "code-does-not-run", "summary": "forward() stops at a placeholder and returns None"}, "returns None"),
    ({"kind": "code-does-not-run", "summary": "labelled pseudocode that calls helpers it never defines"}, "does not run"),
    ({"kind": "wrong-formula", "claimed": "A = exp(S)", "actual": "A = exp(S / sqrt(d_k))"}, "formula"),
    ({"kind": "flipped-sign", "claimed": "a - b", "actual": "b - a"}, "sign"),
    ({"kind": "reversed-direction"}, "direction"),
    ({"kind": "misattribution"}, "attribution"),
    ({"kind": "wrong-bibliographic-detail", "claimed": 2022, "actual": 2021}, "year 2021, not 2022"),
    ({"kind": "wrong-bibliographic-detail", "claimed": "ICLR 2026", "actual": "ICML 2024"}, "citation"),
    ({}, ""),  # a fails claim without a finding
])
def test_off_is_the_factor_for_numbers_and_a_word_for_the_rest(finding, expected):
    from claimcheck.findings import off

    assert off({"summary": "what is wrong", **finding}) == expected


def test_every_finding_of_the_registry_says_how_far_off_it_is():
    from claimcheck.findings import findings

    claims = [{"id": c.id, "document": c.source, "line": c.line, "verdict": c.verdict, "status": "refuted",
               "grade": c.grade, "finding": c.finding} for c in load_registry(REPO / "claims.yaml").claims]
    found = findings(claims)
    assert found and all(f["off"] for f in found), [f["id"] for f in found if not f["off"]]
    for f in found:
        if f["kind"] == "wrong-number" and f["ratio"]:
            assert re.fullmatch(r"x[0-9.]+", f["off"]), (f["id"], f["off"])


def synthetic_findings() -> list[dict]:
    from claimcheck.findings import findings

    base = {"document": "spectral", "status": "refuted", "grade": "proved"}
    rows = [("a.code", 10, "fails", {"kind": "code-does-not-run", "summary": "raises NameError: x is undefined"}),
            ("b.small", 20, "fails", {"kind": "wrong-number", "summary": "2x", "claimed": 0.5, "actual": 1, "ratio": 2}),
            ("c.big", 30, "fails", {"kind": "wrong-number", "summary": "2.9x", "claimed": 360000, "actual": 1048576,
                                    "ratio": 2.91}),
            ("d.partly-huge", 40, "partly", {"kind": "wrong-number", "summary": "off 100x", "ratio": 100}),
            ("e.formula", 50, "partly", {"kind": "wrong-formula", "summary": "a term is missing"}),
            ("f.cite", 60, "partly", {"kind": "misattribution", "summary": "another paper's result"}),
            ("g.code", 70, "partly", {"kind": "code-does-not-run", "summary": "raises TypeError on every call"})]
    return findings([{**base, "id": i, "line": line, "verdict": v, "finding": f} for i, line, v, f in rows])


def test_findings_grouped_by_kind_count_each_kind_and_name_its_worst():
    from claimcheck.findings import by_kind

    groups = by_kind(synthetic_findings())
    assert [(g["kind"], g["count"], g["fails"], g["worst"]["id"]) for g in groups] == [
        ("code-does-not-run", 2, 1, "a.code"),
        ("wrong-number", 3, 2, "c.big"),  # fails before partly, then the larger factor
        ("wrong-formula", 1, 0, "e.formula"),
        ("misattribution", 1, 0, "f.cite")]
    assert groups[1]["name"] == "wrong numbers" and groups[1]["worst"]["off"] == "x2.9"


def test_the_findings_section_shows_each_kind_with_its_worst_and_every_finding_with_how_far_off():
    section = html._findings({"findings": synthetic_findings()})
    kinds = section[section.index('class="findings kinds"'):section.index("</table>")]
    assert kinds.count("<tr class=") == 4
    row = kinds[kinds.index("<th>wrong numbers</th>"):]
    row = row[:row.index("</tr>")]
    assert ">3</a>" in row and '<td class="off">x2.9</td>' in row and 'href="#claim-c.big"' in row
    ranked = section[section.index('class="findings ranked"'):]
    assert ranked.count('<tr class="f-') == 7
    assert ('<td class="num">1</td><td class="off">does not run: NameError</td>'
            '<td class="what"><a href="#claim-a.code">') in ranked
    assert '<td class="off">x0.5</td>' not in ranked and '<td class="off">x2</td>' in ranked


def test_a_run_with_error_or_mismatch_claims_opens_with_a_red_banner_linking_them(data):
    assert 'id="alarm"' not in html.render(data)
    by_id = {c["id"]: c for c in data["claims"]}
    by_id["flash-attention.exact"]["status"] = "error"
    by_id["softmax.row-stochastic"]["status"] = "mismatch"
    by_id["complexity.quadratic-time"]["status"] = "error"
    page = html.render(data)
    banner = page[page.index('<div class="banner alarm" id="alarm"'):]
    banner = banner[:banner.index("</div>")]
    assert page.index('id="alarm"') < page.index("<header>")
    assert "3 claim(s) did not check out" in banner
    assert 'data-filter="status" data-value="error">2 error</a>' in banner
    assert 'data-value="mismatch">1 mismatch</a>' in banner
    for cid in ("flash-attention.exact", "softmax.row-stochastic", "complexity.quadratic-time"):
        assert f'<a href="#claim-{cid}">' in banner


def test_a_few_error_ratios_are_read_off_the_figures_table_and_not_plotted():
    from claimcheck.plots import MIN_RATIO_VALUES, figure_plots

    few = [{"name": f"error_ratio[backend=tiled,dtype=float32,mask=none,{part}]", "value": 0.5}
           for part in ("out", "dq", "dk", "dv")]
    many = [{"name": "error_ratio[backend=tiled,dtype=float32,mask=none,out]", "value": [0.5] * MIN_RATIO_VALUES}]
    assert figure_plots(few, "few") == []
    assert [p.title.startswith("error ratios") for p in figure_plots(many, "many")] == [True]
