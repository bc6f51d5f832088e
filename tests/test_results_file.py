"""Nothing lost, one truth about what ran: an unusable results file is kept aside, bad rows are errors that
name the row, an interrupted run says so, mixed runs are named with their rows, and every surface gives one
count of the evidence no run reached."""
import json
import textwrap

import jsonschema
import pytest

from claimcheck import results as results_file
from claimcheck.cli import main
from claimcheck.runrecord import headline, partial_note

from tests.test_plugin import mini  # noqa: F401  (the small project with every kind of outcome)


def _results(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _run(pytester, *args):
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", "-n", "0")


def test_an_unreadable_results_file_is_set_aside_never_overwritten(mini):
    results = mini.path / "results" / "claims-results.json"
    results.parent.mkdir()
    results.write_text("{not json", encoding="utf-8")
    out = _run(mini, "properties/test_claims.py", "-k", "test_holds")
    kept = list(results.parent.glob("claims-results.unreadable-*.json"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == "{not json"  # kept, byte for byte
    out.stdout.fnmatch_lines(["*RESULTS FILE SET ASIDE*not JSON*stand alone*"])
    assert "keep the previous run" not in out.stdout.str() and "rows from runs" not in out.stdout.str()
    meta = _results(results)["meta"]
    assert meta["complete"] is False and len(meta["runs"]) == 1 and "base" not in meta
    assert "no earlier results to keep" in partial_note(meta)


@pytest.mark.parametrize("row, problem", [
    ({"id": "t.holds", "status": "banana"}, "claims[0] (id t.holds).status: \"banana\" is not one of"),
    ({"status": "verified"}, "claims[0]: 'id' is a required property"),
    ({"id": "", "status": "verified"}, "claims[0].id: '' is too short"),
])
def test_a_bad_row_is_an_error_that_names_it(tmp_path, row, problem):
    path = tmp_path / "claims-results.json"
    path.write_text(json.dumps({"schema": 1, "meta": None, "claims": [row], "tests": []}), encoding="utf-8")
    with pytest.raises(results_file.UnreadableResults) as caught:
        results_file.read(path)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_the_claims_commands_refuse_bad_rows_with_exit_2_naming_the_row(tmp_path, capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    path = tmp_path / "claims-results.json"
    path.write_text(json.dumps({"claims": [{"id": "softmax.shift-invariance", "status": "banana"}]}), encoding="utf-8")
    assert main(["--root", str(root), "list", "--results", str(path)]) == 2
    assert "claims[0] (id softmax.shift-invariance).status" in capsys.readouterr().err


def test_a_partial_run_into_bad_rows_sets_them_aside(mini):
    results = mini.path / "results" / "claims-results.json"
    results.parent.mkdir()
    results.write_text(json.dumps({"claims": [{"status": "verified"}]}), encoding="utf-8")
    _run(mini, "properties/test_claims.py", "-k", "test_holds")
    assert len(list(results.parent.glob("claims-results.unreadable-*.json"))) == 1
    assert all("id" in r for r in _results(results)["claims"])


def test_the_fast_row_check_agrees_with_jsonschema(tmp_path):
    """results.problems checks the schema's flat subset in plain Python; jsonschema is the reference."""
    schema = json.loads(results_file.SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/results_file"})
    good = {"schema": 1, "meta": {}, "claims": [{"id": "a", "status": "verified", "run": None, "evidence_run": []}],
            "tests": [{"nodeid": "p::t", "claims": ["a"], "kind": "property", "outcome": "passed", "seconds": 0.1}]}
    variants = [good, [], {"claims": "x"}, {**good, "claims": [{"id": 3, "status": "verified"}]},
                {**good, "tests": [{**good["tests"][0], "kind": "witness"}]},
                {**good, "tests": [{**good["tests"][0], "examples": True}]},
                {**good, "claims": [{"id": "a", "status": "refuted", "evidence_run": [1]}]}]
    for data in variants:
        assert bool(results_file.problems(data)) == (not validator.is_valid(data)), data


def test_mixed_profiles_are_named_with_their_rows_on_every_surface(mini):
    _run(mini, "properties/")  # the whole evidence, profile t
    (mini.path / "properties" / "conftest.py").write_text(textwrap.dedent("""
        from hypothesis import settings
        settings.register_profile("u", derandomize=True, deadline=None, database=None, max_examples=5)
        settings.load_profile("u")
    """))
    out = _run(mini, "properties/test_claims.py", "-k", "test_holds")
    meta = _results(mini.path / "results" / "claims-results.json")["meta"]
    assert meta["mixed"] is True and meta["complete"] is True
    assert [r["profile"] for r in meta["runs"]] == ["t", "u"] and sum(r["rows"] for r in meta["runs"]) == 11
    note = partial_note(meta)
    assert "different commits, profiles" in note and "reached by no run" not in note  # nothing is missing
    out.stdout.fnmatch_lines(["PARTIAL: *"])  # the terminal says PARTIAL whenever the page does
    assert "2 runs" in headline(meta) and "profile u" in headline(meta)


def test_one_count_of_evidence_not_run_in_pytest_and_in_the_report(mini, tmp_path):
    from claimcheck import report
    from claimcheck.registry import load_registry
    from claimcheck.sources import load_sources
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "sources", mini.path / "sources")
    _run(mini, "properties/test_claims.py", "-k", "test_holds")  # several claims name the tests that did not run
    data = _results(mini.path / "results" / "claims-results.json")
    built = report.build(load_registry(mini.path / "claims.yaml"), load_sources(mini.path), data)
    assert data["meta"]["not_run"] == len(built["partial"]["not_run"]) > 0


INTERRUPTED = """
import os, signal, time
import pytest

@pytest.mark.claim("t.untested")
def test_not_run():
    pass

def test_then_ctrl_c():
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent (an xdist worker) may have ignored SIGINT
    os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C in the middle of a run
    time.sleep(5)
"""


def test_an_interrupted_run_writes_what_it_has_marked_interrupted(mini):
    (mini.path / "properties" / "test_other.py").write_text(textwrap.dedent(INTERRUPTED))
    _run(mini, "properties/test_other.py")
    data = _results(mini.path / "results" / "claims-results.json")
    assert data["meta"]["interrupted"] is True and data["meta"]["complete"] is False
    assert {r["id"]: r["status"] for r in data["claims"]}["t.untested"] == "verified"  # what ran before is kept
    assert "interrupted" in partial_note(data["meta"]) and "interrupted" in headline(data["meta"])
