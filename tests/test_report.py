"""The report's data (claims.json), its schema, the Markdown, atomic writing and asv results."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml
import pytest

from claimcheck import html, report
from claimcheck.asv_results import format_value, load_asv_results
from claimcheck.registry import load_registry
from claimcheck.sources import load_sources

REPO = Path(__file__).resolve().parents[1]


def build(project, results=True, asv=True):
    results_data = json.loads(project.results_path.read_text()) if results else None
    return report.build(load_registry(project.root / "claims.yaml"), load_sources(project.root), results_data,
                        load_asv_results(project.root) if asv else None)


def by_id(data):
    return {c["id"]: c for c in data["claims"]}


def validate(data):
    jsonschema.Draft202012Validator(report.load_schema()).validate(data)


def test_report_json_matches_its_schema(tiny_project):
    data = build(tiny_project)
    validate(data)
    validate(json.loads(json.dumps(data)))  # and after a round trip through the file format


def test_report_without_results_or_asv_matches_its_schema(tiny_project):
    validate(build(tiny_project, results=False, asv=False))


def test_report_of_this_repository_matches_its_schema():
    results_path = REPO / "results" / "claims-results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else None
    data = report.build(load_registry(REPO / "claims.yaml"), load_sources(REPO), results, load_asv_results(REPO))
    validate(data)
    assert len(data["claims"]) == len(load_registry(REPO / "claims.yaml").claims)
    for c in data["claims"]:
        if c["snippet"]:  # the printed code travels with the claim, for the reader
            assert c["snippet"]["text"].count("\n") == c["snippet"]["end"] - c["snippet"]["start"] + 1


def test_schema_rejects_an_unknown_status(tiny_project):
    data = build(tiny_project)
    data["claims"][0]["status"] = "probably"
    with pytest.raises(jsonschema.ValidationError):
        validate(data)


def test_counts_and_decided_versus_open(tiny_project):
    data = build(tiny_project)
    counts = data["counts"]
    assert counts["status"]["verified"] == 3 and counts["status"]["refuted"] == 1
    assert counts["verdict"]["holds"] == 4 and counts["verdict"]["open"] == 1
    assert counts["decided"] == {"decided": 5, "unverifiable": 1, "open": 1}
    assert counts["document"]["spectral"] == 3 and counts["document"]["linear-algebra"] == 0
    assert sum(counts["topic"].values()) == len(data["claims"])


def test_a_claim_resting_on_a_refuted_claim_is_marked_transitively(tiny_project):
    claims = by_id(build(tiny_project))
    assert claims["spectral.trace-is-n"]["rests_on_refuted"] == ["spectral.eigenvalues-positive"]
    assert claims["spectral.gap-bound"]["rests_on_refuted"] == ["spectral.eigenvalues-positive"]
    assert claims["spectral.eigenvalues-positive"]["rests_on_refuted"] == []  # it uses a verified claim
    assert claims["softmax.row-stochastic"]["used_by"] == ["spectral.eigenvalues-positive"]


def test_partial_results_name_the_evidence_that_did_not_run(tiny_project):
    data = build(tiny_project)
    assert data["partial"]["not_run"] == ["properties/test_spectral.py::test_gap_in_range"]
    assert data["partial"]["claims_affected"] == ["spectral.gap-bound"]
    assert data["partial"]["complete"] is False
    assert by_id(data)["spectral.gap-bound"]["not_run"] == ["properties/test_spectral.py::test_gap_in_range"]
    md = report.render_markdown(data)
    assert "Partial results" in md and "test_gap_in_range`: did not run" in md


def test_without_results_every_named_test_did_not_run_and_decided_claims_are_untested(tiny_project):
    data = build(tiny_project, results=False)
    claims = by_id(data)
    assert data["partial"]["results"] is False and data["run"] is None
    assert claims["softmax.row-stochastic"]["status"] == "untested"
    assert claims["spectral.trace-is-n"]["status"] == "open"
    assert claims["long-context.ppl-8k"]["status"] == "unverifiable"
    assert len(data["partial"]["not_run"]) == 6


def test_parametrized_nodes_count_as_their_evidence_name(tiny_project):
    claim = by_id(build(tiny_project))["flash-attention.exact"]
    assert claim["not_run"] == []
    assert [o["nodeid"].split("::")[1] for o in claim["outcomes"]] == [
        "test_tiled_matches_reference[float32]", "test_tiled_matches_reference[float64]"]
    assert claim["outcomes"][0]["examples"] == 50


def test_results_naming_unknown_claims_are_reported(tiny_project):
    results = json.loads(tiny_project.results_path.read_text())
    results["claims"].append({"id": "ghost.claim", "verdict": None, "status": "error",
                              "detail": "evidence names a claim id that is not in the registry",
                              "counterexample": None, "evidence_run": []})
    tiny_project.write_results(results)
    data = build(tiny_project)
    assert data["partial"]["unknown_claims"] == ["ghost.claim"]
    validate(data)


def test_coverage_counts_claims_per_section_and_keeps_empty_sections(tiny_project):
    data = build(tiny_project)
    spectral = next(d for d in data["coverage"] if d["document"] == "spectral")
    sections = {s["title"]: s for s in spectral["sections"]}
    assert sections["2.1 基本谱定理"]["claims"] == 2
    assert sections["2.3 谱间隙（Spectral Gap）"]["claims"] == 1
    assert sections["3. Rank Collapse 现象"]["claims"] == 0  # empty sections stay: they show gaps
    assert spectral["claims"] == 3 and spectral["sections_with_claims"] == 2
    assert by_id(data)["spectral.trace-is-n"]["section"] == "2.1 基本谱定理"


def test_asv_results_appear_under_the_claims_that_name_the_benchmark(tiny_project):
    claim = by_id(build(tiny_project))["flash-attention.exact"]
    (bench,) = claim["benchmarks"]
    assert bench["asv_name"] == "bench_attention.Attention.time_forward"
    assert bench["history"] == 2 and bench["commits"] == ["aaaa1111", "bbbb2222"]
    (run,) = bench["runs"]  # the latest commit on the one machine
    assert run["commit"] == "bbbb2222" and run["param_names"] == ["n", "backend"]
    assert run["rows"][0] == {"params": ["128", "'tiled'"], "value": pytest.approx(0.9e-4)}
    assert run["rows"][-1]["value"] is None  # a failed combination stays visible


def test_asv_results_absent_or_unreadable_are_tolerated(tiny_project, tmp_path):
    empty = load_asv_results(tmp_path)
    assert not empty.available and empty.runs == []
    bad = tiny_project.root / ".asv" / "results" / "cpu-box" / "cccc3333-broken.json"
    bad.write_text("{ not json")
    asv = load_asv_results(tiny_project.root)
    assert len(asv.runs) == 2 and any("cccc3333-broken.json" in s for s in asv.skipped)
    data = build(tiny_project)
    assert data["asv"]["skipped_files"] and data["asv"]["machines"] == ["cpu-box"]


def test_asv_results_folder_comes_from_asv_conf(tiny_project):
    (tiny_project.root / ".asv").rename(tiny_project.root / "elsewhere")
    (tiny_project.root / "asv.conf.json").write_text(
        '{\n  // asv allows comments\n  "version": 1,\n  "results_dir": "elsewhere/results"\n}\n')
    assert len(load_asv_results(tiny_project.root).runs) == 2


@pytest.mark.parametrize("value, unit, text", [
    (2.5e-4, "seconds", "250 µs"), (1.5, "seconds", "1.5 s"), (3 * 2**20, "bytes", "3 MiB"),
    (None, "seconds", "failed"), (2.01, "exponent", "2.01 exponent"),
])
def test_benchmark_values_are_formatted_with_readable_units(value, unit, text):
    assert format_value(value, unit) == text


def test_markdown_has_summary_coverage_and_details(tiny_project):
    md = report.render_markdown(build(tiny_project))
    assert "**Decided:** 5 of 7 claims" in md
    assert "## Coverage by section" in md and "2.1 基本谱定理" in md
    assert "rests on refuted claim(s): `spectral.eigenvalues-positive`" in md
    assert "A = [[0.0, 1.0], [1.0, 0.0]]" in md
    assert "benchmark `benchmarks/bench_attention.py::Attention.time_forward` on cpu-box at bbbb2222" in md


def test_write_produces_the_three_files(tiny_project, tmp_path):
    out = tmp_path / "report"
    data = build(tiny_project)
    report.write(data, out, html=html.render)
    assert sorted(p.name for p in out.iterdir()) == ["claims.json", "claims.md", "index.html"]
    assert json.loads((out / "claims.json").read_text())["claims"] == json.loads(json.dumps(data["claims"]))


def test_a_crash_while_writing_leaves_the_previous_report_intact(tiny_project, tmp_path):
    out = tmp_path / "report"
    report.write(build(tiny_project), out, html=html.render)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def crash(_report):
        raise RuntimeError("renderer crashed mid-way")

    with pytest.raises(RuntimeError):
        report.write(build(tiny_project, results=False), out, html=crash)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project", "report"]  # no temporary folder left


def test_a_new_report_replaces_the_old_one_whole(tiny_project, tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "stale.txt").write_text("from an older report")
    report.write(build(tiny_project), out, html=html.render)
    assert sorted(p.name for p in out.iterdir()) == ["claims.json", "claims.md", "index.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project", "report"]


def test_grades_and_references_reach_every_surface(tiny_project):
    from claimcheck.cli import render_claim_text
    from claimcheck.references import load_references
    from tests.test_references import RECORD

    (tiny_project.root / "references.yaml").write_text(RECORD.lstrip(), encoding="utf-8")
    claims = yaml.safe_load((tiny_project.root / "claims.yaml").read_text())
    claims.append({"id": "rope.cite", "source": "foundations", "line": 230, "quote": "RoPE (Su et al., 2022)",
                   "statement": "RoPE is due to Su et al. (2022).", "topic": "rope", "kind": "citation",
                   "verdict": "partly", "grade": "recorded", "correction": "Su et al., first posted in 2021.",
                   "cites": ["su2021roformer"],
                   "attribution": {"ref": "su2021roformer", "authors": ["Su"], "et_al": True, "year": 2022}})
    tiny_project.write_claims(claims)
    data = report.build(load_registry(tiny_project.root / "claims.yaml"), load_sources(tiny_project.root), None,
                        None, references=load_references(tiny_project.root / "references.yaml"))
    validate(data)
    c = by_id(data)["rope.cite"]
    assert c["grade"] == "recorded" and data["counts"]["grade"]["recorded"] == 1
    assert {k["field"]: k["match"] for k in c["record_checks"]} == {"authors": True, "year": False}
    assert data["references"][0]["cited_by"] == ["rope.cite"]
    md = report.render_markdown(data)
    assert "**partly** (recorded)" in md and "https://arxiv.org/abs/2104.09864v5" in md and "**differs**" in md
    page = html.render(data)
    page = html.unpack(page, page)  # the references of record travel packed until their panel opens
    assert 'class="grade g-recorded"' in page and 'href="https://arxiv.org/abs/2104.09864v5"' in page
    text = render_claim_text(c, by_id(data), {r["key"]: r for r in data["references"]})
    assert "grade: recorded" in text and "DIFF year" in text


def test_findings_are_ranked_by_the_documented_rule(tiny_project):
    from claimcheck.findings import findings

    base = {"document": "foundations", "line": 10, "status": "refuted", "grade": "proved", "correction": "x"}
    claims = [
        {**base, "id": "a.wording", "verdict": "fails", "finding": {"kind": "wording", "summary": "loose word"}},
        {**base, "id": "b.small-number", "verdict": "fails", "finding": {"kind": "wrong-number", "summary": "off 2x",
                                                                          "ratio": 2.0}},
        {**base, "id": "c.big-number", "verdict": "fails", "finding": {"kind": "wrong-number", "summary": "off 8x",
                                                                        "ratio": 8.0}},
        {**base, "id": "d.code", "verdict": "fails", "finding": {"kind": "code-does-not-run", "summary": "NameError"}},
        {**base, "id": "e.partly-number", "verdict": "partly", "finding": {"kind": "wrong-number", "summary": "x",
                                                                            "ratio": 100.0}},
        {**base, "id": "f.holds", "verdict": "holds", "finding": None},
    ]
    assert [f["id"] for f in findings(claims)] == ["d.code", "c.big-number", "b.small-number", "e.partly-number",
                                                    "a.wording"]


def test_findings_lead_the_page_and_the_markdown(tiny_project):
    data = build(tiny_project)
    validate(data)
    assert [f["id"] for f in data["findings"]] == ["spectral.eigenvalues-positive"]
    page = html.render(data)
    assert page.index('id="findings"') < page.index('id="summary"')
    md = report.render_markdown(data)
    assert md.index("## Findings") < md.index("**Decided:**")


def test_the_markdown_findings_lead_with_each_kind_and_its_worst_and_say_how_far_off():
    from tests.test_html import synthetic_findings

    md = "\n".join(report._markdown_findings({"findings": synthetic_findings()}))
    by_kind = md[md.index("### By kind"):md.index("### Every finding")]
    assert by_kind.count("\n| ") == 1 + 1 + 4  # the head, its rule, one row per kind
    assert "| wrong numbers | 3 | 2 | x2.9 | [`c.big`](#cbig): 2.9x |" in by_kind
    every = md[md.index("### Every finding"):]
    assert "| # | claim | verdict | kind | off | what is wrong |" in every
    assert "| 1 | [`a.code`](#acode) | **FAILS** | code-does-not-run | does not run: NameError |" in every


def test_a_control_of_the_mechanism_shows_its_prediction_and_whether_it_held():
    from claimcheck.html import _predicted
    from claimcheck.report import control_prediction

    hit, miss = {"predicted_text": "not confirmed", "as_predicted": True}, {"predicted_text": "contradicted",
                                                                          "as_predicted": False}
    assert control_prediction(hit) == "; predicted not confirmed, as predicted"
    assert _predicted(miss) == "contradicted (NOT as predicted)"
    assert control_prediction({"outcome": "confirmed"}) == _predicted({"predicted_text": None}) == ""


def test_runs_of_a_superseded_experiment_are_marked_so_not_shown_as_controls():
    from claimcheck.registry import Claim, Experiment

    def exp(name):
        return Experiment(name, "a prediction", "m", ">", 0.0, scale={"layers": 1}, registered="after-result")

    claim = Claim("t.c", "s", 1, "q", "a statement", "topic", "empirical", "holds",
                  experiment=exp("lr-tolerance-fine"), superseded=(exp("lr-tolerance"),))

    def run(name, scale):
        return {"nodeid": f"experiments/test_x.py::test_{name}", "outcome": "passed",
                "figures": [{"name": report.EXPERIMENT_FIGURE, "value": {"name": name, "scale": scale}}]}

    summary = report.experiment_summary(claim, [run("lr-tolerance-fine", {"layers": 1}),
                                                run("lr-tolerance-fine-no-identity", {"layers": 1}),
                                                run("lr-tolerance", {"layers": 6}),
                                                run("lr-tolerance-tied", {"layers": 6})])
    assert summary["measured"]["name"] == "lr-tolerance-fine"
    assert {r["name"]: r["superseded"] for r in summary["controls"]} == {
        "lr-tolerance-fine-no-identity": False, "lr-tolerance": True, "lr-tolerance-tied": True}
