"""The ``claims`` command line at a terminal: the queries answer without torch, tables fit the terminal,
help is wrapped without breaking an example, and a misspelt option or subcommand gets a suggestion."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from claimcheck import cli
from claimcheck.cli import OFF_CUT
from claimcheck.terminal import Column, cells, fit, table, widths

REPO = Path(__file__).resolve().parents[1]
QUERIES = [["list"], ["list", "--verdict", "fails"], ["show", "spectral.eigenvalues-positive"], ["findings"], ["check"]]
SUBCOMMANDS = ["check", "report", "findings", "list", "show", "kernel"]
PROBLEM_EXAMPLE = "'B=1,H_q=4,H_kv=2,n_q=9,n_k=20,d_k=16,d_v=16,seed=1000,logit_scale=1.0'"


@pytest.mark.parametrize("argv", QUERIES, ids=" ".join)
def test_the_queries_and_check_do_not_import_torch(tiny_project, argv):
    script = ("import sys\nfrom claimcheck.cli import main\nmain(sys.argv[1:])\n"
              "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script, "--root", str(tiny_project.root), *argv],
                          capture_output=True, text=True, cwd=tiny_project.root, timeout=120)
    assert proc.stderr.splitlines()[-1] == "no torch", proc.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# tables


def test_a_table_that_fits_keeps_every_cell_whole_under_its_header():
    lines = table([Column("#", ["9", "10"], right=True), Column("claim", ["a.b", "c.long-id"]),
                   Column("text", ["short", "longer text"], cut=4)], total=80)
    assert lines == [" #  claim      text", " 9  a.b        short", "10  c.long-id  longer text"]


def test_a_narrow_table_cuts_the_rightmost_cuttable_column_first_down_to_its_minimum():
    columns = [Column("id", ["x" * 30], cut=10), Column("where", ["doc:12"]), Column("text", ["y" * 50], cut=8)]
    assert widths(columns, 60) == [30, 6, 20]  # the text alone gives way
    assert widths(columns, 40) == [22, 6, 8]  # then the id, the text at its minimum
    assert widths(columns, 10) == [10, 6, 8]  # at their minimums the row is as narrow as it gets


def test_an_optional_column_is_left_out_rather_than_cut_below_its_minimum():
    columns = [Column("id", ["x" * 30], cut=10), Column("text", ["y" * 50], cut=20, optional=True)]
    assert widths(columns, 60) == [30, 28]
    assert widths(columns, 45) == [30, None]
    assert table(columns, 45) == ["id", "x" * 30]


def test_wide_characters_take_two_columns_and_a_cut_is_marked():
    assert cells("关键论文") == 8 and fit("2026 关键论文", 10) == "2026 关..." and fit("2026 关键论文", 9) == "2026..."
    assert fit("a  b\nc", 10) == "a b c" and fit("abcdefgh", 6) == "abc..."


def _empty_results(tmp_path: Path) -> Path:
    path = tmp_path / "claims-results.json"  # never the user's results/: an empty run of the test's own
    path.write_text(json.dumps({"schema": 1, "meta": None, "claims": [], "tests": []}), encoding="utf-8")
    return path


def _query(argv, capsys) -> list[str]:
    assert cli.main(["--root", str(REPO), *argv]) == cli.EXIT_OK
    return capsys.readouterr().out.splitlines()


def test_the_top_ten_findings_fit_100_columns_with_where_and_how_far_off(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # not a terminal: 100 columns
    lines = _query(["findings", "--top", "10", "--results", str(_empty_results(tmp_path))], capsys)
    assert max(map(cells, lines)) <= 100
    assert lines[0].split() == ["#", "verdict", "where", "claim", "off"]
    rows = lines[1::2]
    assert len(rows) == 10 and all(re.search(r"\s[a-z-]+:\d+\s", row) for row in rows), rows
    (first,) = json.loads("\n".join(_query(["findings", "--top", "1", "--format", "json", "--results",
                                            str(_empty_results(tmp_path))], capsys)))
    assert first["off"] and first["off"][:OFF_CUT - 3] in rows[0]


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_claims_list_fits_the_terminal_columns(columns, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    lines = _query(["list", "--verdict", "fails", "--results", str(_empty_results(tmp_path))], capsys)
    assert max(map(cells, lines)) <= columns
    assert lines[0].split()[:5] == ["claim", "where", "verdict", "grade", "status"]
    assert ("statement" in lines[0]) == (columns >= 160)  # the statement where the terminal leaves room


# ---------------------------------------------------------------------------------------------
# help


def _help(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", [None, "250"])
@pytest.mark.parametrize("argv", [[]] + [[s] for s in SUBCOMMANDS], ids=lambda a: " ".join(a) or "claims")
def test_help_lines_fit_100_columns_on_any_terminal(argv, columns, capsys, monkeypatch):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = _help(argv, capsys)
    assert max(len(line) for line in out.splitlines()) <= 100, out


def test_help_prose_is_wrapped_to_a_narrow_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    description = _help(["kernel"], capsys).split("\n\n")[1]
    assert description.startswith("Run the backend matrix") and max(map(len, description.splitlines())) <= 60


@pytest.mark.parametrize("columns", ["60", "100"])
def test_the_kernel_help_keeps_its_examples_copyable(columns, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", columns)
    out = _help(["kernel"], capsys)
    assert PROBLEM_EXAMPLE in out  # whole, on one line
    example = out.split("example:\n", 1)[1]
    command = re.sub(r"\\\n\s*", "", example).split()  # as a shell joins the continued lines
    assert command == ["claims", "kernel", "mypkg.attn:my_attention", "--device", "cuda", "--dtype", "bfloat16",
                       "--causal", "bottom-right", "--no-key-padding", "--no-bias", "--backward", "--head-dims",
                       "64-128"]


# ---------------------------------------------------------------------------------------------
# usage errors


@pytest.mark.parametrize("argv,usage,hint", [
    (["list", "--verdik", "fails"], "usage: claims list", "did you mean --verdict?"),
    (["findings", "--tpo", "3"], "usage: claims findings", "did you mean --top?"),
    (["show", "x", "--fulll"], "usage: claims show", "did you mean --full?"),
    (["lst"], "usage: claims [", "did you mean list?"),
    (["list", "--verdict", "fail"], "usage: claims list", "did you mean fails?"),
])
def test_a_misspelt_option_or_subcommand_gets_the_usage_and_what_was_meant(argv, usage, hint, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == cli.EXIT_USAGE and usage in err and hint in err, err
