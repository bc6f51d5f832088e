"""The ``claims`` command line: help, exit codes, list, show and report."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from claimcheck import cli

REPO = Path(__file__).resolve().parents[1]


def run(project, *args, capsys):
    code = cli.main(["--root", str(project.root), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["check", "--help"], ["list", "--help"],
                                  ["show", "--help"]])
def test_help_exits_zero_and_describes_the_command(args, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 0
    assert "usage: claims" in capsys.readouterr().out


def test_help_lists_the_subcommands_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # as read, whatever the terminal's width
    for word in ("check", "report", "list", "show", "Exit codes", "2 usage or input error"):
        assert word in out


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["list", "--verdict", "maybe"], ["report", "--profile", "x"],
                                  ["show"]])
def test_usage_errors_exit_two(args, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 2


def test_list_filters_by_verdict_status_document_topic_and_kind(tiny_project, capsys):
    code, out, _ = run(tiny_project, "list", "--format", "ids", capsys=capsys)
    assert code == 0 and len(out.split()) == 7
    _, out, _ = run(tiny_project, "list", "--verdict", "fails", "--format", "ids", capsys=capsys)
    assert out.split() == ["spectral.eigenvalues-positive"]
    _, out, _ = run(tiny_project, "list", "--status", "untested", "--status", "open", "--format", "ids", capsys=capsys)
    assert out.split() == ["spectral.trace-is-n", "spectral.gap-bound"]
    _, out, _ = run(tiny_project, "list", "-d", "spectral", "-k", "inequality", "--format", "ids", capsys=capsys)
    assert out.split() == ["spectral.eigenvalues-positive", "spectral.gap-bound"]
    _, out, _ = run(tiny_project, "list", "--topic", "complexity", capsys=capsys)
    header, row = out.splitlines()  # the statement is shown where the terminal leaves room for it
    assert header.split()[:5] == ["claim", "where", "verdict", "grade", "status"]
    assert row.startswith("complexity.quadratic-time  foundations:67") and "verified" in row


def test_list_as_json(tiny_project, capsys):
    code, out, _ = run(tiny_project, "list", "--verdict", "unverifiable", "--format", "json", capsys=capsys)
    (claim,) = json.loads(out)
    assert code == 0 and claim["id"] == "long-context.ppl-8k" and claim["reason"]


def test_list_unknown_document_exits_two(tiny_project, capsys):
    code, _, err = run(tiny_project, "list", "--document", "nowhere", capsys=capsys)
    assert code == 2 and "unknown document 'nowhere'" in err


def test_show_prints_everything_about_a_claim(tiny_project, capsys):
    code, out, _ = run(tiny_project, "show", "spectral.eigenvalues-positive", capsys=capsys)
    assert code == 0
    for text in ("「正实部」", "verdict:   fails (recorded)    status: refuted (observed)", "counterexample found",
                 "an eigenvalue has a negative real part", "A = [[0.0, 1.0], [1.0, 0.0]]", "correction:",
                 "refutation properties/test_spectral.py::test_eigenvalues_have_nonnegative_real_part, 12 examples",
                 "uses: softmax.row-stochastic [verified]", "used by: spectral.trace-is-n [open]"):
        assert text in out, text


def test_show_gives_figures_benchmarks_and_what_did_not_run(tiny_project, capsys):
    _, out, _ = run(tiny_project, "show", "flash-attention.exact", capsys=capsys)
    assert "figure error_ratio[backend=tiled,dtype=float32,mask=none,out] = [0.5, 0.8, 1.1, 0.9, 0.7, 0.6, 1.0, 0.95, 0.85, 0.75]" in out
    assert "benchmark benchmarks/bench_attention.py::Attention.time_forward on cpu-box" in out
    assert "n=128, backend='tiled': 90 µs" in out
    _, out, _ = run(tiny_project, "show", "spectral.gap-bound", capsys=capsys)
    assert "not run" in out and "test_gap_in_range" in out and "rests on refuted: spectral.eigenvalues-positive" in out


def test_show_as_json_follows_the_report_schema(tiny_project, capsys):
    import jsonschema

    from claimcheck.report import load_schema

    _, out, _ = run(tiny_project, "show", "spectral.eigenvalues-positive", "--json", capsys=capsys)
    schema = load_schema()
    jsonschema.Draft202012Validator({**schema["$defs"]["claim"], "$defs": schema["$defs"]}).validate(json.loads(out))


def test_show_unknown_id_exits_two_with_suggestions(tiny_project, capsys):
    code, _, err = run(tiny_project, "show", "spectral.eigenvalue-positive", capsys=capsys)
    assert code == 2 and "no claim with id" in err and "spectral.eigenvalues-positive" in err


def test_unreadable_registry_exits_two(tiny_project, capsys):
    (tiny_project.root / "claims.yaml").write_text("- id: [unclosed\n")
    code, _, err = run(tiny_project, "list", capsys=capsys)
    assert code == 2 and "invalid YAML" in err


def test_unreadable_results_exit_two(tiny_project, capsys):
    tiny_project.results_path.write_text("{ not json")
    code, _, err = run(tiny_project, "show", "softmax.row-stochastic", capsys=capsys)
    assert code == 2 and "cannot use the results file" in err and "not JSON" in err


def test_report_from_saved_results_writes_the_folder(tiny_project, capsys):
    code, out, err = run(tiny_project, "report", "--from-results", capsys=capsys)
    assert code == 0, err
    folder = tiny_project.root / "report"
    assert sorted(p.name for p in folder.iterdir()) == ["claims.json", "claims.md", "index.html"]
    assert "report written to" in out and "3 verified" in out
    assert "asv results: 2 benchmark result(s) from 1 machine(s)" in err
    assert "PARTIAL: 1 evidence test(s) did not run" in err


def test_report_exits_one_when_evidence_disagrees_with_a_verdict(tiny_project, capsys):
    results = json.loads(tiny_project.results_path.read_text())
    results["claims"][0].update(status="mismatch", detail="recorded holds, but a property failed")
    tiny_project.write_results(results)
    code, _, err = run(tiny_project, "report", "--from-results", capsys=capsys)
    assert code == 1 and "MISMATCH softmax.row-stochastic" in err
    assert (tiny_project.root / "report" / "index.html").exists()


def test_report_from_missing_results_exits_two(tiny_project, capsys):
    tiny_project.results_path.unlink()
    code, _, err = run(tiny_project, "report", "--from-results", capsys=capsys)
    assert code == 2 and "no results file" in err


def test_report_runs_the_evidence_with_the_chosen_profile(tiny_project, tmp_path):
    """A real run: pytest with the plugin on a one-test property suite, then the report."""
    props = tiny_project.root / "properties"
    props.mkdir()
    (props / "test_softmax.py").write_text(textwrap.dedent('''
        import os
        import pytest
        from claimcheck import claim_assert, record

        @pytest.mark.claim("softmax.row-stochastic")
        def test_rows_sum_to_one():
            record("profile", os.environ.get("CLAIMS_PROFILE"))
            claim_assert(sum([0.25, 0.75]) == 1.0, "a row does not sum to one")
    '''))
    tiny_project.results_path.unlink()
    env_path = f"{REPO}"
    proc = subprocess.run([sys.executable, "-m", "claimcheck.cli", "--root", str(tiny_project.root), "report",
                           "--profile", "thorough", "--workers", "0", "--no-asv"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "running the evidence (profile thorough)" in proc.stderr
    assert "claims: properties 1/1" in proc.stderr, proc.stderr  # the progress line
    log = (tiny_project.root / "results" / "last-run.log").read_text()
    assert "[100%]" in log and "1 passed" in proc.stdout.splitlines()[-2]  # pytest's output, and its last line
    data = json.loads((tiny_project.root / "report" / "claims.json").read_text())
    claims = {c["id"]: c for c in data["claims"]}
    assert claims["softmax.row-stochastic"]["status"] == "verified"
    assert claims["softmax.row-stochastic"]["outcomes"][0]["figures"] == [{"name": "profile", "value": "thorough"}]
    assert data["partial"]["not_run"]  # the other claims' tests do not exist in this project


def test_check_on_this_repository_passes(capsys):
    assert cli.main(["--root", str(REPO), "check"]) == 0
