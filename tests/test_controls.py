"""Negative controls mean what they say: a control counts only when the claim's own check rejects the variant,
only for the claims whose falsity it models; checks of a comparator are reported apart; a claim whose only
evidence is controls decides nothing. Each test kills a mutant of the mechanism (named in its docstring)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from claimcheck import html
from claimcheck.records import compare, name_tokens
from claimcheck.references import Reference

ROOT = Path(__file__).resolve().parents[1]


def _entry(cid: str, *tests: str) -> str:
    evidence = ", ".join(f"properties/test_c.py::{t}" for t in tests)
    return (f"- {{id: {cid}, source: foundations, line: 85, quote: 'max', statement: a statement of {cid}., "
            f"topic: softmax, kind: identity, verdict: holds, evidence: [{evidence}]}}\n")


HEADER = """
import pytest
from claimcheck import ClaimViolation, claim_assert, comparator_check, control

def square(x):
    return x * x

"""


def _run(root: Path, registry: str, tests: str, *args: str) -> dict:
    """Run the evidence ``tests`` (below the imports of HEADER) for ``registry`` in a fresh project under ``root``:
    the exit code, pytest's output, the claims' rows and the tests' outcomes by name."""
    (root / "properties").mkdir()
    (root / "properties" / "__init__.py").write_text("")
    (root / "claims.yaml").write_text(registry)
    (root / "properties" / "test_c.py").write_text(HEADER + textwrap.dedent(tests))
    done = subprocess.run([sys.executable, "-m", "pytest", "properties/", "-p", "no:cacheprovider", "-n", "0", *args],
                          cwd=root, capture_output=True, text=True, timeout=300)
    path = root / "results" / "claims-results.json"
    data = json.loads(path.read_text()) if path.exists() else {"claims": [], "tests": []}
    return {"ret": done.returncode, "output": done.stdout + done.stderr,
            "rows": {r["id"]: r for r in data["claims"]},
            "tests": {t["nodeid"].split("::")[-1]: t for t in data["tests"]}}


# Evidence whose controls or checks go wrong in every way the mechanism must catch (the run fails).
BAD = """
    @pytest.mark.claim("t.plain")
    @pytest.mark.parametrize("f", [square, pytest.param(lambda x: -1, id="neg", marks=control("a negative square"))])
    def test_plain(f):
        assert f(3) >= 0, "a plain assert, not the claim's own check"
        claim_assert(f(3) >= 0, "a square is negative")

    @pytest.mark.claim("t.crash")
    @pytest.mark.parametrize("f", [square, pytest.param(None, id="none", marks=control("no function at all"))])
    def test_crash(f):
        claim_assert(f(3) >= 0, "a square is negative")

    @pytest.mark.claim("t.group-value")
    @pytest.mark.parametrize("mixed", [False, pytest.param(True, id="mixed", marks=control("two failures at once"))])
    def test_group_value(mixed):
        if mixed:
            raise ExceptionGroup("two failures", [ClaimViolation("a square is negative"), ValueError("broken")])

    @pytest.mark.claim("t.group-assert")
    @pytest.mark.parametrize("mixed", [False, pytest.param(True, id="mixed", marks=control("two failures at once"))])
    def test_group_assert(mixed):
        if mixed:
            raise ExceptionGroup("two failures", [ClaimViolation("a square is negative"), AssertionError("plain")])

    @pytest.mark.claim("t.only-controls")
    @control("a negative square")
    def test_only_a_control():
        claim_assert(-1 >= 0, "a square is negative")

    @pytest.mark.claim("t.accept-sign", "t.accept-shape")
    @pytest.mark.parametrize("f", [square, pytest.param(abs, id="abs", marks=control("|x| for x^2",
                                                                                     models=["t.accept-shape"]))])
    def test_accepted(f):
        claim_assert(f(2) >= 0 and f(0) == 0, "not a square")

    @pytest.mark.claim("t.cmp-bad")
    def test_cmp_bad_property():
        claim_assert(square(3) == 9, "not a square")

    @pytest.mark.claim("t.cmp-bad")
    @comparator_check("a wrong year")
    def test_cmp_bad():
        claim_assert(not ["year"], "the comparator accepts a wrong field", accepted=["year"])

    @pytest.mark.claim("t.only-cmp")
    @comparator_check("a wrong year")
    def test_only_cmp():
        claim_assert(True, "the comparator accepts a wrong field")
"""
BAD_REGISTRY = "".join([
    _entry("t.plain", "test_plain"), _entry("t.crash", "test_crash"), _entry("t.group-value", "test_group_value"),
    _entry("t.group-assert", "test_group_assert"), _entry("t.only-controls", "test_only_a_control"),
    _entry("t.accept-sign", "test_accepted"), _entry("t.accept-shape", "test_accepted"),
    _entry("t.cmp-bad", "test_cmp_bad_property", "test_cmp_bad"), _entry("t.only-cmp", "test_only_cmp")])

# Evidence whose controls are all rejected by the claims' own checks (the run passes).
GOOD = """
    @pytest.mark.claim("t.group-violations")
    @pytest.mark.parametrize("two", [False, pytest.param(True, id="two", marks=control("two failures at once"))])
    def test_group_violations(two):
        if two:
            raise ExceptionGroup("two failures", [ClaimViolation("a square is negative"), ClaimViolation("again")])

    @pytest.mark.claim("t.sign", "t.shape")
    @pytest.mark.parametrize("f", [
        square,
        pytest.param(lambda x: -x * x - 1, id="negated", marks=control("a negated square", models="t.sign")),
        pytest.param(lambda x: x * x + 1, id="shifted", marks=control("a shifted square")),
    ])
    def test_two_claims(f):
        claim_assert(f(2) >= 0 and f(0) == 0, "not a square")

    @pytest.mark.claim("t.cmp-good")
    def test_cmp_good_property():
        claim_assert(square(3) == 9, "not a square")

    @pytest.mark.claim("t.cmp-good")
    @comparator_check("a wrong year")
    def test_cmp_good():
        claim_assert(not [], "the comparator accepts a wrong field")
"""
GOOD_REGISTRY = "".join([
    _entry("t.group-violations", "test_group_violations"), _entry("t.sign", "test_two_claims"),
    _entry("t.shape", "test_two_claims"), _entry("t.cmp-good", "test_cmp_good_property", "test_cmp_good")])


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("bad"), BAD_REGISTRY, BAD)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("good"), GOOD_REGISTRY, GOOD)


def test_controls_that_go_wrong_fail_the_run_and_good_ones_pass_it(bad, good):
    assert bad["ret"] == 1, bad["output"][-3000:]
    assert good["ret"] == 0, good["output"][-3000:]


def test_a_control_stopped_by_a_plain_assertion_is_an_error_naming_it(bad):
    """Mutant killed: any AssertionError counts as the variant's rejection."""
    row = bad["rows"]["t.plain"]
    assert row["status"] == "error" and row["controls"]["rejected"] == 0
    for named in ("test_plain[neg]", "a negative square", "AssertionError: a plain assert"):
        assert named in row["detail"]


def test_a_control_whose_variant_crashes_is_an_error_not_a_rejection(bad):
    """Mutant killed: a crash of the variant counts as its rejection."""
    row = bad["rows"]["t.crash"]
    assert row["status"] == "error" and "test_crash[none]" in row["detail"] and "TypeError" in row["detail"]


@pytest.mark.parametrize("cid, other", [("t.group-value", "ValueError"), ("t.group-assert", "AssertionError")])
def test_an_exception_group_mixing_kinds_is_no_rejection(bad, cid, other):
    """Mutant killed: a group mixing a ClaimViolation with other kinds counts as the variant's rejection."""
    row = bad["rows"][cid]
    assert row["status"] == "error" and row["controls"]["rejected"] == 0
    assert f"ExceptionGroup of {', '.join(sorted([other, 'ClaimViolation']))}" in row["detail"]


def test_an_exception_group_of_the_claims_check_alone_is_a_rejection(good):
    row = good["rows"]["t.group-violations"]
    assert row["status"] == "verified" and row["controls"] == {"ran": 1, "rejected": 1, "models": 1}


def test_a_claim_whose_only_evidence_is_controls_is_an_error(bad):
    """Mutant killed: a claim with nothing but rejected controls comes out verified (or skipped)."""
    row = bad["rows"]["t.only-controls"]
    assert row["status"] == "error" and "only negative controls" in row["detail"]
    assert row["controls"] == {"ran": 1, "rejected": 1, "models": 1}


def test_a_control_is_credited_only_to_the_claims_it_models(good):
    """Mutant killed: every control of a test is credited to each of the test's claims."""
    rows, tests = good["rows"], good["tests"]
    # the negated square models t.sign's falsity only; the shifted one names no claim of the two: credited to none
    assert rows["t.sign"]["controls"] == {"ran": 2, "rejected": 2, "models": 1}
    assert rows["t.shape"]["controls"] == {"ran": 1, "rejected": 1, "models": 0}
    assert tests["test_two_claims[negated]"]["claims"] == ["t.sign"]
    assert tests["test_two_claims[negated]"]["models"] == ["t.sign"]
    assert tests["test_two_claims[shifted]"]["models"] == []
    assert not any("negated" in n for n in rows["t.shape"]["evidence_run"])


def test_an_accepted_control_is_a_mismatch_of_the_claim_it_models_only(bad):
    """Mutant killed: crediting ignored when a control is accepted (the other claim blamed, or none)."""
    rows = bad["rows"]
    assert rows["t.accept-shape"]["status"] == "mismatch" and "accepted" in rows["t.accept-shape"]["detail"]
    assert rows["t.accept-sign"]["status"] == "verified"


def test_a_check_of_the_comparator_is_its_own_kind_and_no_control(good, bad):
    """Mutant killed: a record check reported as the claim's negative control (or its failure as a mismatch)."""
    ok, wrong = good["rows"]["t.cmp-good"], bad["rows"]["t.cmp-bad"]
    assert good["tests"]["test_cmp_good"]["kind"] == bad["tests"]["test_cmp_bad"]["kind"] == "comparator"
    assert ok["status"] == "verified" and ok["comparator"] == {"ran": 1, "passed": 1}
    assert ok["controls"] == {"ran": 0, "rejected": 0, "models": 0}
    assert wrong["status"] == "error" and wrong["comparator"] == {"ran": 1, "passed": 0}
    assert "comparator accepted a wrong field" in wrong["detail"]


def test_a_claim_whose_only_evidence_is_a_comparator_check_is_an_error(bad):
    assert bad["rows"]["t.only-cmp"]["status"] == "error"


def test_a_control_naming_a_claim_its_test_is_not_evidence_for_stops_the_run(tmp_path):
    run = _run(tmp_path, _entry("t.a", "test_check"), """
        @pytest.mark.claim("t.a")
        @pytest.mark.parametrize("f", [square, pytest.param(abs, marks=control("|x|", models="t.elsewhere"))])
        def test_check(f):
            claim_assert(f(0) == 0, "not a square")
    """)
    assert run["ret"] == pytest.ExitCode.USAGE_ERROR
    assert "names t.elsewhere, which the test is not evidence for" in run["output"]


def test_the_record_checks_of_the_suite_are_comparator_checks_not_controls():
    from claimcheck.collect import evidence_tests

    found = {t.nodeid.split("::")[-1]: t for t in evidence_tests(ROOT)
             if t.nodeid.startswith("properties/test_records.py::")}
    for name in ("test_record_rejects_a_wrong_attribution", "test_document_lines_reject_a_wrong_quote"):
        assert found[name].comparator and not found[name].control and not found[name].has_controls
    assert not any(t.control or t.has_controls for t in found.values())


# ---- the page ---------------------------------------------------------------------------------------


def _claim(models: int, rejected: int, comparator: dict | None = None) -> dict:
    return {"controls": {"ran": rejected, "rejected": rejected, "models": models}, "comparator": comparator,
            "verdict": "holds", "decided": True}


def test_the_table_marks_only_claims_with_a_control_modelling_their_own_falsity():
    assert "&#10003;" in html._control_cell(_claim(1, 1)) and 'data-v="1"' in html._control_cell(_claim(1, 1))
    assert "&#10003;" not in html._control_cell(_claim(0, 3)) and 'data-v="0"' in html._control_cell(_claim(0, 3))
    assert "&#10003;" not in html._control_cell({"controls": None})


def test_the_panel_says_apart_what_models_the_claim_what_models_others_and_what_checks_the_comparator():
    mine = html._control(_claim(1, 3))
    assert "1 negative control(s) modelling this claim's own falsity" in mine and "2 negative control(s)" in mine
    others = html._control(_claim(0, 2, {"ran": 4, "passed": 4}))
    assert "No negative control modelling this claim's own falsity" in others
    assert "Checks of the comparator (not evidence for the claim): 4 of 4" in others
    assert "shown able to fail" not in others


# ---- surnames ---------------------------------------------------------------------------------------


def _record(*authors: str) -> Reference:
    return Reference(key="x2024", kind="paper", title="A title", read=(), authors=authors, year=2024)


@pytest.mark.parametrize("stated, recorded, match", [
    ("Ran-Milo", "Yuval Ran-Milo", True),
    ("Milo", "Yuval Ran-Milo", False),       # the end of a hyphenated surname is not the surname
    ("Saada", "Tam Nait-Saada", False),
    ("Li", "Ameen Ali", False),              # a substring of the last word
    ("Ali", "Ameen Ali", True),
    ("Nait Saada", "Tam Nait Saada", True),  # a surname of two words, both whole
    ("Hu", "Edward J. Hu", True),
    ("Schonlieb", "Carola-Bibiane Schönlieb", True),  # accents folded
    ("Liu", "Shih-Yang Liu", True),
    ("Yang", "Shih-Yang Liu", False),        # part of the given name
])
def test_surnames_match_the_recorded_name_as_whole_words(stated, recorded, match):
    """Mutant killed: surnames compared as substrings (or as the tail of the name's folded text)."""
    check = compare({"ref": "x2024", "authors": [stated], "et_al": False}, _record(recorded))[0]
    assert check.match is match, check.describe()


def test_name_words_keep_hyphens_and_apostrophes_inside_a_word():
    assert name_tokens("Yuval Ran-Milo") == ["yuval", "ran-milo"]
    assert name_tokens("Conan O\u2019Brien") == ["conan", "o'brien"]
    assert name_tokens("Edward J. Hu") == ["edward", "j", "hu"]
