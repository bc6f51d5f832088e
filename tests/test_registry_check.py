"""`claims check` rejects every malformed registry with the file, the line and the claim id."""
import subprocess
import sys

import pytest

from claimcheck.check import check
from tests.conftest import GOOD_CLAIM, GOOD_TEST


def _problems(project):
    return [str(p) for p in check(project.root)]


def _one(project, *fragments):
    """Exactly the problems that contain every fragment: at least one, and print all on failure."""
    found = _problems(project)
    hits = [p for p in found if all(f in p for f in fragments)]
    assert hits, f"no problem with {fragments} among:\n" + "\n".join(found)
    return hits[0]


def test_a_sound_registry_has_no_problems(project):
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST)
    assert _problems(project) == []


def test_a_registry_validated_before_is_validated_again_once_it_changes(project):
    """The schema check is skipped only for the very text (and schema) that passed it before."""
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST)
    assert _problems(project) == [] and list((project.root / "results" / ".cache").glob("valid-claims.yaml-*"))
    project.registry(GOOD_CLAIM.replace("verdict: holds", "verdict: maybe"))
    assert _one(project, "claims.yaml:8:", "softmax.shift", "'maybe' is not one of")


def test_invalid_yaml_names_the_file_and_line(project):
    project.registry(GOOD_CLAIM + "- id: broken\n  quote: 'unterminated\n  line: [1\n")
    project.test_file("test_a.py", GOOD_TEST)
    problem = _one(project, "claims.yaml:", "invalid YAML")
    assert problem.split(":")[1].isdigit()


def test_unknown_field(project):
    project.registry(GOOD_CLAIM + "  colour: blue\n")
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:12:", "softmax.shift", "unknown field", "colour")


def test_missing_field(project):
    project.registry(GOOD_CLAIM.replace("  topic: softmax\n", ""))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:1:", "softmax.shift", "missing field", "topic")


def test_value_outside_its_vocabulary(project):
    project.registry(GOOD_CLAIM.replace("verdict: holds", "verdict: maybe"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:8:", "softmax.shift", "'maybe' is not one of")


def test_duplicate_ids(project):
    project.registry(GOOD_CLAIM + GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:13:", "softmax.shift", "duplicate id", "line 1")


def test_unknown_source(project):
    project.registry(GOOD_CLAIM.replace("source: foundations", "source: appendix"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:2:", "softmax.shift", "unknown source 'appendix'")


def test_quote_not_found_near_its_line(project):
    project.registry(GOOD_CLAIM.replace("line: 85", "line: 60"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:4:", "softmax.shift", "not found within 3 lines of foundations:60")


def test_quote_found_within_the_window_is_accepted(project):
    project.registry(GOOD_CLAIM.replace("line: 85", "line: 87"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _problems(project) == []


def test_edited_source_is_caught(project):
    doc = project.root / "sources" / "index.txt"
    doc.write_bytes(doc.read_bytes() + b"\n")
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "sources/index.txt", "sha256 mismatch")


@pytest.mark.parametrize("verdict, needed", [("fails", "correction"), ("partly", "correction"),
                                             ("unverifiable", "reason")])
def test_verdict_without_its_required_field(project, verdict, needed):
    project.registry(GOOD_CLAIM.replace("verdict: holds", f"verdict: {verdict}"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "softmax.shift", needed)


def test_evidence_naming_a_missing_test(project):
    project.registry(GOOD_CLAIM.replace("test_a.py::test_shift", "test_a.py::test_gone"))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:10:", "softmax.shift", "unknown test 'properties/test_a.py::test_gone'")


def test_evidence_naming_a_missing_benchmark(project):
    project.registry(GOOD_CLAIM + "    - benchmarks/bench_x.py::Attention.time_forward\n")
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "softmax.shift", "unknown benchmark 'benchmarks/bench_x.py::Attention.time_forward'")


def test_evidence_naming_an_existing_benchmark_is_accepted(project):
    (project.root / "benchmarks").mkdir()
    (project.root / "benchmarks" / "bench_x.py").write_text("class Attention:\n    def time_forward(self):\n        pass\n")
    project.registry(GOOD_CLAIM + "    - benchmarks/bench_x.py::Attention.time_forward\n")
    project.test_file("test_a.py", GOOD_TEST)
    assert _problems(project) == []


def test_test_tagged_with_an_unknown_claim(project):
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST + '\n@pytest.mark.claim("no.such-claim")\ndef test_other():\n    pass\n')
    assert _one(project, "properties/test_a.py:8:", "no.such-claim", "tagged with unknown claim id")


def test_test_tagged_with_no_claim(project):
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST + "\ndef test_untagged():\n    pass\n")
    assert _one(project, "properties/test_a.py:7:", "test_untagged is tagged with no claim")


def test_tagged_test_missing_from_the_claims_evidence(project):
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST + '\n@pytest.mark.claim("softmax.shift")\ndef test_more():\n    pass\n')
    assert _one(project, "softmax.shift", "test_more is tagged with 'softmax.shift' but that claim's evidence")


def test_uses_naming_an_unknown_claim(project):
    project.registry(GOOD_CLAIM + "  uses: [softmax.ghost]\n")
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "claims.yaml:12:", "softmax.shift", "uses names unknown claim id 'softmax.ghost'")


def test_uses_forming_a_cycle(project):
    second = GOOD_CLAIM.replace("id: softmax.shift", "id: softmax.other") + "  uses: [softmax.shift]\n"
    project.registry(GOOD_CLAIM + "  uses: [softmax.other]\n" + second)
    project.test_file("test_a.py", GOOD_TEST.replace('claim("softmax.shift")', 'claim("softmax.shift", "softmax.other")'))
    assert _one(project, "uses forms a cycle", "softmax.shift -> softmax.other -> softmax.shift")


def test_decided_verdict_without_evidence(project):
    project.registry(GOOD_CLAIM.split("  evidence:")[0])
    project.test_file("test_a.py", GOOD_TEST.replace('@pytest.mark.claim("softmax.shift")\n', ""))
    assert _one(project, "claims.yaml:8:", "softmax.shift", "verdict 'holds' has no evidence")


def test_open_and_unverifiable_need_no_evidence(project):
    claim = GOOD_CLAIM.split("  evidence:")[0]
    project.registry(claim.replace("verdict: holds", "verdict: open")
                     + claim.replace("softmax.shift", "softmax.b").replace("verdict: holds",
                                                                         "verdict: unverifiable\n  reason: needs the paper's private data"))
    assert _problems(project) == []


def test_refuted_verdict_needs_a_refutation(project):
    project.registry(GOOD_CLAIM.replace("verdict: holds", "verdict: fails\n  correction: softmax is shift-invariant always."))
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "softmax.shift", "verdict 'fails' needs a refutation")


def test_a_refuted_claims_correction_needs_evidence_of_its_own(project):
    fails = GOOD_CLAIM.replace("verdict: holds", "verdict: fails\n  correction: softmax is shift-invariant always.")
    refutation = ('@pytest.mark.claim("softmax.shift")\n@refutes(reason="constructed")\ndef test_shift():\n    pass\n')
    header = "import pytest\nfrom claimcheck import refutes\n\n"
    project.registry(fails)
    project.test_file("test_a.py", header + refutation)
    assert _one(project, "claims.yaml:", "softmax.shift", "verdict 'fails' needs evidence that proves its correction")
    # a property of the correction beside the refutation satisfies it
    project.registry(fails.replace("    - properties/test_a.py::test_shift\n",
                                   "    - properties/test_a.py::test_shift\n    - properties/test_a.py::test_correction\n"))
    project.test_file("test_a.py", header + refutation + '\n@pytest.mark.claim("softmax.shift")\ndef test_correction():\n    pass\n')
    assert not [p for p in _problems(project) if "proves its correction" in p]


def test_a_correction_proved_by_a_property_needs_a_control_that_models_the_claims_own_falsity(project):
    partly = GOOD_CLAIM.replace("verdict: holds", "verdict: partly\n  correction: softmax is shift-invariant always.").replace(
        "    - properties/test_a.py::test_shift\n",
        "    - properties/test_a.py::test_shift\n    - properties/test_a.py::test_correction\n")
    header = "import pytest\nfrom claimcheck import control, refutes\n\n"
    refutation = '@pytest.mark.claim("softmax.shift")\n@refutes(reason="constructed")\ndef test_shift():\n    pass\n\n'
    correction = ('@pytest.mark.claim("softmax.shift")\n@pytest.mark.parametrize("c", [0, pytest.param(1, marks=control('
                  '"the claim as stated"{models}))])\ndef test_correction(c):\n    pass\n')
    project.registry(partly)
    project.test_file("test_a.py", header + refutation + correction.replace('marks=control("the claim as stated"{models})',
                                                                           "marks=[]"))
    assert _one(project, "claims.yaml:", "softmax.shift", "proved by properties/test_a.py::test_correction with no "
                "control of its own")
    # a control crediting another claim is not the claim's own
    project.test_file("test_a.py", header + refutation + correction.replace("{models}", ', models="softmax.other"'))
    assert _one(project, "softmax.shift", "no control of its own")
    # one that names it, or names none in a test of this claim alone, is
    for models in (', models="softmax.shift"', ""):
        project.test_file("test_a.py", header + refutation + correction.replace("{models}", models))
        assert not [p for p in _problems(project) if "control of its own" in p]
    # the list of corrections still owed a control excuses a listed claim, and may only shrink
    project.test_file("test_a.py", header + refutation + correction.replace('marks=control("the claim as stated"{models})',
                                                                           "marks=[]"))
    owed = project.root / "docs" / "corrections-without-control.txt"
    owed.parent.mkdir(exist_ok=True)
    owed.write_text("# owed\nsoftmax.shift\n")
    assert not [p for p in _problems(project) if "control" in p]
    project.test_file("test_a.py", header + refutation + correction.replace("{models}", ""))
    assert _one(project, "docs/corrections-without-control.txt:2", "softmax.shift", "has a control of its own now")
    owed.write_text("softmax.gone\n")
    assert _one(project, "docs/corrections-without-control.txt:1", "softmax.gone", "is not a claim of the registry")


def test_holds_verdict_must_not_rest_on_a_refutation(project):
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", "import pytest\nfrom claimcheck import refutes\n\n"
                      '@pytest.mark.claim("softmax.shift")\n@refutes(reason="constructed")\ndef test_shift():\n    pass\n')
    assert _one(project, "softmax.shift", "verdict 'holds' but properties/test_a.py::test_shift is a refutation")


def test_the_command_exits_1_with_the_problems_and_0_when_sound(project):
    project.registry(GOOD_CLAIM.replace("line: 85", "line: 60"))
    project.test_file("test_a.py", GOOD_TEST)
    bad = subprocess.run([sys.executable, "-m", "claimcheck.cli", "--root", str(project.root), "check"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "claims.yaml:4: softmax.shift: quote" in bad.stderr
    project.registry(GOOD_CLAIM)
    good = subprocess.run([sys.executable, "-m", "claimcheck.cli", "--root", str(project.root), "check"],
                          capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert "1 claims, no problems" in good.stdout


def test_the_command_exits_2_outside_a_project(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "claimcheck.cli", "check"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "no claims.yaml" in proc.stderr


def test_the_real_registry_is_sound():
    from tests.conftest import ROOT

    problems = check(ROOT)
    assert not problems, "\n".join(map(str, problems))


def test_a_repeat_takes_its_verdict_from_the_claim_it_repeats(project):
    repeat = (GOOD_CLAIM.split("  evidence:")[0].replace("id: softmax.shift", "id: softmax.shift-again")
              + "  same_as: softmax.shift\n")
    project.registry(GOOD_CLAIM + repeat)
    project.test_file("test_a.py", GOOD_TEST)
    assert _problems(project) == []
    project.registry(GOOD_CLAIM + repeat.replace("verdict: holds", "verdict: fails\n  correction: it is false after all."))
    assert _one(project, "softmax.shift-again", "differs from 'holds' of the claim it repeats (softmax.shift)")


def test_a_refuted_verdict_needs_a_finding(project):
    fails = GOOD_CLAIM.replace("verdict: holds", "verdict: fails\n  correction: softmax is shift-invariant always.")
    project.registry(fails)
    project.test_file("test_a.py", GOOD_TEST)
    assert _one(project, "softmax.shift", "needs a finding")
    project.registry(fails.replace("  grade: proved\n", "  grade: proved\n  finding: {kind: wording, summary: a loose "
                                   "word for an exact statement}\n"))
    assert not [p for p in _problems(project) if "finding" in p]


@pytest.mark.parametrize("registry", [
    GOOD_CLAIM + "  colour: blue\n",  # a schema problem, on the field's line
    GOOD_CLAIM.replace("verdict: holds", "verdict: maybe"),  # a bad value, on its line
    GOOD_CLAIM + "- id: broken\n  quote: 'unterminated\n  line: [1\n",  # invalid YAML: where it was left open
], ids=["unknown-field", "bad-value", "invalid-yaml"])
def test_libyaml_and_the_python_parser_name_the_same_lines(project, registry, monkeypatch):
    import yaml

    from claimcheck import registry as registry_mod

    project.registry(registry)
    project.test_file("test_a.py", GOOD_TEST)
    lines = {}
    for loader in ("SafeLoader", "CSafeLoader"):
        if not hasattr(yaml, loader):
            pytest.skip("PyYAML without libyaml")
        monkeypatch.setattr(registry_mod, "_COMPOSER", getattr(yaml, loader))
        lines[loader] = [(p.file, p.line, p.claim) for p in check(project.root)]
    assert lines["SafeLoader"] == lines["CSafeLoader"] and lines["SafeLoader"]
