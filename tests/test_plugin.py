"""The pytest plugin: per-claim statuses, correct and identical with and without pytest-xdist."""
import json
import textwrap

import pytest

REGISTRY = """
- {id: t.holds, source: foundations, line: 85, quote: 'max (x)', statement: a property that holds here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_claims.py::test_holds, properties/test_claims.py::test_holds_too]}
- {id: t.refuted, source: foundations, line: 85, quote: 'max (x)', statement: every integer is below 100 here., topic: softmax, kind: inequality, verdict: fails, correction: not every integer is below 100., evidence: [properties/test_claims.py::test_search_refutes, properties/test_claims.py::test_correction]}
- {id: t.constructed, source: foundations, line: 85, quote: 'max (x)', statement: two plus two is five here., topic: softmax, kind: count, verdict: fails, correction: two plus two is four., evidence: [properties/test_claims.py::test_constructed_refutation]}
- {id: t.mismatch, source: foundations, line: 85, quote: 'max (x)', statement: recorded holds but false here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_claims.py::test_property_fails]}
- {id: t.no-counterexample, source: foundations, line: 85, quote: 'max (x)', statement: recorded fails but true here., topic: softmax, kind: identity, verdict: fails, correction: it is true., evidence: [properties/test_claims.py::test_refutation_finds_nothing]}
- {id: t.crash, source: foundations, line: 85, quote: 'max (x)', statement: evidence that crashes here., topic: softmax, kind: identity, verdict: fails, correction: unknown here., evidence: [properties/test_claims.py::test_refutation_crashes]}
- {id: t.skipped, source: foundations, line: 85, quote: 'max (x)', statement: evidence that is skipped here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_claims.py::test_skipped]}
- {id: t.untested, source: foundations, line: 85, quote: 'max (x)', statement: evidence that was deselected here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_other.py::test_not_run]}
- {id: t.open, source: foundations, line: 85, quote: 'max (x)', statement: not decided yet here., topic: softmax, kind: identity, verdict: open}
- {id: t.repeat, source: foundations, line: 85, quote: 'max (x)', statement: the first claim again elsewhere., topic: softmax, kind: identity, verdict: holds, same_as: t.holds}
- {id: t.unverifiable, source: foundations, line: 85, quote: 'max (x)', statement: needs a pretrained model here., topic: softmax, kind: citation, verdict: unverifiable, reason: needs weights that are not available offline.}
"""

TESTS = """
import pytest
from hypothesis import given, settings, strategies as st
from claimcheck import claim_assert, record, refutes

@pytest.mark.claim("t.holds")
@given(st.integers())
def test_holds(x):
    record("square", x * x)
    claim_assert(x * x >= 0, "squares are non-negative", x=x)

@pytest.mark.claim("t.holds")
def test_holds_too():
    assert True

@pytest.mark.claim("t.refuted")
@refutes()
@given(st.integers())
def test_search_refutes(x):
    claim_assert(x < 100, "an integer is not below 100", x=x)

@pytest.mark.claim("t.refuted")
def test_correction():
    claim_assert(not all(x < 100 for x in range(101)), "the correction fails")

@pytest.mark.claim("t.constructed")
@refutes(reason="the smallest operands of the statement itself")
def test_constructed_refutation():
    claim_assert(2 + 2 == 5, "two plus two is not five", left=2, right=2, total=4)

@pytest.mark.claim("t.mismatch")
@given(st.integers(0, 10))
def test_property_fails(x):
    claim_assert(x < 5, "x is not below 5", x=x)

@pytest.mark.claim("t.no-counterexample")
@refutes()
@given(st.integers(0, 10))
def test_refutation_finds_nothing(x):
    claim_assert(x >= 0, "negative", x=x)

@pytest.mark.claim("t.crash")
@refutes()
@given(st.integers())
def test_refutation_crashes(x):
    raise TypeError("the evidence itself is broken")

@pytest.mark.claim("t.skipped")
def test_skipped():
    pytest.skip("needs CUDA")
"""

CONFTEST = """
from hypothesis import settings
settings.register_profile("t", derandomize=True, deadline=None, database=None, max_examples=30)
settings.load_profile("t")
"""


@pytest.fixture
def mini(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent(REGISTRY))
    pytester.mkpydir("properties")
    (pytester.path / "properties" / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (pytester.path / "properties" / "test_claims.py").write_text(textwrap.dedent(TESTS))
    (pytester.path / "properties" / "test_other.py").write_text(
        'import pytest\n\n@pytest.mark.claim("t.untested")\ndef test_not_run():\n    pass\n')
    return pytester


def _run(pytester, *args):
    result = pytester.runpytest_subprocess("properties/test_claims.py", "-p", "no:cacheprovider", *args)
    data = json.loads((pytester.path / "results" / "claims-results.json").read_text())
    return result, data


def _statuses(data):
    return {row["id"]: row["status"] for row in data["claims"]}


def test_statuses_of_every_kind_of_outcome(mini):
    result, data = _run(mini, "-n", "0")
    assert _statuses(data) == {
        "t.holds": "verified",
        "t.refuted": "refuted",
        "t.constructed": "refuted",
        "t.mismatch": "mismatch",
        "t.no-counterexample": "mismatch",
        "t.crash": "error",
        "t.skipped": "skipped",
        "t.untested": "untested",
        "t.open": "open",
        "t.unverifiable": "unverifiable",
        "t.repeat": "verified",
    }
    assert result.ret == 1  # mismatches and errors fail the run
    result.stdout.fnmatch_lines(["*claims: 2 verified, 2 refuted, 1 unverifiable, 1 open, 2 mismatch, 1 error, "
                                 "1 skipped, 1 untested*"])


def test_counterexamples_and_figures_are_recorded(mini):
    _, data = _run(mini, "-n", "0")
    rows = {row["id"]: row for row in data["claims"]}
    searched = rows["t.refuted"]["counterexample"]
    assert searched["how"] == "shrunk by Hypothesis" and searched["values"] == {"x": 100}
    assert "x=100" in searched["hypothesis"]
    built = rows["t.constructed"]["counterexample"]
    assert built["how"] == "constructed" and built["values"] == {"left": 2, "right": 2, "total": 4}
    assert built["reason"] == "the smallest operands of the statement itself"
    assert rows["t.repeat"]["detail"].startswith("same as t.holds: ")
    assert "skipped" in rows["t.skipped"]["status"] and rows["t.skipped"]["detail"] == "needs CUDA"
    assert "crashed" in rows["t.crash"]["detail"] and "TypeError" in rows["t.crash"]["detail"]
    tests = {t["nodeid"]: t for t in data["tests"]}
    holds = tests["properties/test_claims.py::test_holds"]
    assert holds["examples"] >= 30 and holds["figures"] and holds["figures"][0]["name"] == "square"


def _comparable(data):
    """Per-claim rows and per-test outcomes, without timings and raw traceback text (whose framing
    differs when a report crosses from an xdist worker)."""
    tests = [{k: v for k, v in t.items() if k not in ("seconds", "message")} for t in data["tests"]]
    claims = [{**{k: v for k, v in row.items() if k != "run"},  # each run has its own id
               "counterexample": {k: v for k, v in (row["counterexample"] or {}).items() if k != "detail"}}
              for row in data["claims"]]
    return claims, tests


def test_xdist_gives_the_same_per_claim_results_as_a_single_process(mini):
    _, serial = _run(mini, "-n", "0")
    _, parallel = _run(mini, "-n", "2")
    assert parallel["meta"]["workers"] == 2
    assert _comparable(serial) == _comparable(parallel)
    # every test outcome arrives exactly once
    nodeids = [t["nodeid"] for t in parallel["tests"]]
    assert len(nodeids) == len(set(nodeids)) == 9


def test_a_run_without_claim_evidence_leaves_results_alone(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    assert not (pytester.path / "results").exists()
    assert "claims:" not in result.stdout.str()


def test_a_passing_refutation_of_a_holds_claim_is_a_mismatch(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent("""
        - {id: t.h, source: foundations, line: 85, quote: 'max', statement: recorded as holding here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_h.py::test_h]}
    """))
    pytester.mkpydir("properties")
    (pytester.path / "properties" / "test_h.py").write_text(
        "import pytest\nfrom claimcheck import claim_assert, refutes\n\n"
        '@pytest.mark.claim("t.h")\n@refutes(reason="constructed")\ndef test_h():\n    claim_assert(False, "violated")\n')
    result = pytester.runpytest_subprocess("properties/", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["MISMATCH t.h: recorded holds, but *found a counterexample*"])


def test_a_refutation_whose_premise_is_broken_ends_as_error_not_refuted(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent("""
        - {id: t.p, source: foundations, line: 85, quote: 'max', statement: a claim refuted by a construction here., topic: softmax, kind: identity, verdict: fails, correction: it is false., evidence: [properties/test_p.py::test_p]}
    """))
    pytester.mkpydir("properties")
    (pytester.path / "properties" / "test_p.py").write_text(
        "import pytest\nfrom claimcheck import claim_assert, premise, refutes\n\n"
        '@pytest.mark.claim("t.p")\n@refutes(reason="constructed")\ndef test_p():\n'
        '    w = 0.01  # meant to localise the attention, but too small to\n'
        '    premise(w > 1, "the constructed attention is not localised", w=w)\n'
        '    claim_assert(False, "the claim fails on the construction")\n')
    result = pytester.runpytest_subprocess("properties/", "-p", "no:cacheprovider")
    rows = {r["id"]: r for r in json.loads((pytester.path / "results" / "claims-results.json").read_text())["claims"]}
    assert rows["t.p"]["status"] == "error" and "PremiseFailed" in rows["t.p"]["detail"]
    assert result.ret == 1


def test_a_partial_run_is_merged_into_the_full_one_never_replacing_it(mini):
    mini.runpytest_subprocess("properties/", "-p", "no:cacheprovider", "-n", "0")  # every piece of evidence
    full = json.loads((mini.path / "results" / "claims-results.json").read_text())
    assert full["meta"]["complete"] is True and "commit" in full["meta"] and "dirty" in full["meta"]
    assert {"python", "packages", "cpu", "device", "profile", "started", "seconds"} <= set(full["meta"])
    _, part = _run(mini, "-n", "0", "-k", "test_holds")
    rows = {r["id"]: r for r in part["claims"]}
    assert part["meta"]["merged_into"] == full["meta"]["id"] and len(part["meta"]["runs"]) == 2
    assert rows["t.holds"]["run"] == part["meta"]["id"]  # what ran now comes from this run
    assert rows["t.refuted"]["status"] == "refuted" and rows["t.refuted"]["run"] == full["meta"]["id"]
    assert len(part["tests"]) == len(full["tests"])  # the tests that did not run keep their outcomes


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_partial_run_drops_earlier_cases_its_whole_files_no_longer_have(mini, workers):
    """A re-parametrized test (a case renamed or removed) leaves no stale outcome behind; a ``-k`` run,
    which sees part of a file, keeps the cases it did not select."""
    other = mini.path / "properties" / "test_other.py"

    def cases(*ids):
        other.write_text('import pytest\n\n@pytest.mark.claim("t.untested")\n'
                         f'@pytest.mark.parametrize("x", {list(ids)!r})\ndef test_not_run(x):\n    pass\n')

    def nodes(*args):
        mini.runpytest_subprocess("properties/test_other.py", "-p", "no:cacheprovider", "-n", workers, *args)
        data = json.loads((mini.path / "results" / "claims-results.json").read_text())
        return {t["nodeid"].split("[")[-1].rstrip("]") for t in data["tests"] if "test_other" in t["nodeid"]}

    mini.runpytest_subprocess("properties/", "-p", "no:cacheprovider", "-n", "0")
    cases("a", "b")
    assert nodes() == {"a", "b"}
    cases("a", "c")
    assert nodes("-k", "c") == {"a", "b", "c"}  # part of the file: b is not known to be gone
    assert nodes() == {"a", "c"}  # the whole file: b is gone


def test_runs_that_together_reach_all_evidence_make_a_complete_result(mini):
    mini.runpytest_subprocess("properties/test_claims.py", "-p", "no:cacheprovider", "-n", "0")
    first = json.loads((mini.path / "results" / "claims-results.json").read_text())
    assert first["meta"]["complete"] is False  # test_other.py did not run
    mini.runpytest_subprocess("properties/test_other.py", "-p", "no:cacheprovider", "-n", "0")
    both = json.loads((mini.path / "results" / "claims-results.json").read_text())
    assert both["meta"]["complete"] is True and both["meta"]["merged_into"] == first["meta"]["id"]
    assert {r["id"]: r["status"] for r in both["claims"]}["t.untested"] == "verified"


CONTROLLED = """
import pytest
from hypothesis import given, strategies as st
from claimcheck import claim_assert, control

def square(x):
    return x * x

@pytest.mark.claim("t.c")
@pytest.mark.parametrize("f", [square, pytest.param(lambda x: -x * x - 1, marks=control("a negated square"))])
@given(st.integers())
def test_squares_are_nonnegative(f, x):
    claim_assert(f(x) >= 0, "a square is negative", x=x)

@pytest.mark.claim("t.weak")
@pytest.mark.parametrize("f", [square, pytest.param(lambda x: x * x + 1, marks=control("a shifted square"))])
@given(st.integers())
def test_a_check_too_weak_to_fail(f, x):
    claim_assert(f(x) >= 0, "a square is negative", x=x)
"""


def test_negative_controls_are_recorded_and_one_that_passes_fails_the_run(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent("""
        - {id: t.c, source: foundations, line: 85, quote: 'max', statement: squares are non-negative here., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_c.py::test_squares_are_nonnegative]}
        - {id: t.weak, source: foundations, line: 85, quote: 'max', statement: squares are non-negative there., topic: softmax, kind: identity, verdict: holds, evidence: [properties/test_c.py::test_a_check_too_weak_to_fail]}
    """))
    pytester.mkpydir("properties")
    (pytester.path / "properties" / "test_c.py").write_text(textwrap.dedent(CONTROLLED))
    result = pytester.runpytest_subprocess("properties/", "-p", "no:cacheprovider")
    rows = {r["id"]: r for r in json.loads((pytester.path / "results" / "claims-results.json").read_text())["claims"]}
    assert rows["t.c"]["status"] == "verified" and rows["t.c"]["controls"] == {"ran": 1, "rejected": 1, "models": 1}
    assert rows["t.weak"]["status"] == "mismatch" and "negative control was accepted" in rows["t.weak"]["detail"]
    assert result.ret == 1


def test_a_claim_whose_evidence_is_split_over_two_runs_is_judged_on_both(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent("""
        - {id: t.split, source: foundations, line: 85, quote: 'max', statement: refuted in one file and corrected in another., topic: softmax, kind: identity, verdict: partly, correction: the corrected form holds., evidence: [properties/test_a.py::test_refutes, properties/test_b.py::test_correction]}
    """))
    pytester.mkpydir("properties")
    (pytester.path / "properties" / "test_a.py").write_text(
        "import pytest\nfrom claimcheck import claim_assert, refutes\n\n"
        '@pytest.mark.claim("t.split")\n@refutes(reason="constructed")\ndef test_refutes():\n'
        '    claim_assert(False, "the claim as written fails")\n')
    (pytester.path / "properties" / "test_b.py").write_text(
        'import pytest\n\n@pytest.mark.claim("t.split")\ndef test_correction():\n    assert True\n')
    for part in ("properties/test_a.py", "properties/test_b.py"):
        out = pytester.runpytest_subprocess(part, "-p", "no:cacheprovider")
        assert (pytester.path / "results" / "claims-results.json").exists(), out.stdout.str()[-3000:]
    rows = {r["id"]: r for r in json.loads((pytester.path / "results" / "claims-results.json").read_text())["claims"]}
    assert rows["t.split"]["status"] == "refuted", rows["t.split"]


def test_failures_hypothesis_formats_inside_a_refutation_or_control_get_pythons_traceback_text():
    """Hypothesis formats each failure it reports with the item's repr_failure; inside a refutation or a
    control the plugin hands it Python's traceback text (pytest's re-parses every source file, ~70 ms)."""
    from claimcheck import plugin

    try:
        raise ValueError("the message")
    except ValueError:
        info = pytest.ExceptionInfo.from_current()
    text = plugin._plain_traceback(info)
    assert text.startswith("Traceback (most recent call last)") and text.rstrip().endswith("ValueError: the message")
