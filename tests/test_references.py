"""References of record: `claims check` rejects bad records and bad citations with file:line:key,
the comparison rule gives the verdicts it documents, and the generic evidence applies it."""
import json
import shutil
import textwrap

import pytest

from claimcheck.records import CannotCompare, compare, verdict_of, witness_verdict
from claimcheck.references import Reference, arxiv_month
from tests.conftest import GOOD_CLAIM, GOOD_TEST, ROOT
from tests.test_registry_check import _one, _problems

RECORD = """
- key: su2021roformer
  kind: arxiv
  title: "RoFormer: Enhanced Transformer with Rotary Position Embedding"
  authors: [Jianlin Su, Yu Lu, Shengfeng Pan]
  year: 2021
  published_year: 2024
  venue: Neurocomputing
  ids: {arxiv: 2104.09864v5}
  read:
    - url: https://arxiv.org/abs/2104.09864v5
      date: 2026-12-01
      fields: [title, authors, year, ids.arxiv]
    - url: https://example.org/journal
      date: 2026-12-01
      fields: [published_year, venue]
  facts:
    - key: relative-logit
      value: true
      text: The rotated query-key product depends on the positions only through their difference.
      url: https://arxiv.org/abs/2104.09864v5
      date: 2026-12-01
"""

CITATION = """
- id: rope.cite
  source: foundations
  line: 230
  quote: RoPE (Su et al., 2022)
  statement: RoPE is due to Su et al. (2022).
  topic: rope
  kind: citation
  verdict: unverifiable
  reason: stands for any citation claim in these tests.
  cites: [su2021roformer]
"""




def _setup(project, records=RECORD, claims=CITATION):
    project.registry(GOOD_CLAIM + claims)
    project.test_file("test_a.py", GOOD_TEST)
    (project.root / "references.yaml").write_text(textwrap.dedent(records).lstrip(), encoding="utf-8")


def test_a_sound_record_and_citation_have_no_problems(project):
    _setup(project)
    assert _problems(project) == []


def test_a_read_page_without_url_is_rejected(project):
    _setup(project, RECORD.replace("    - url: https://example.org/journal\n", "    - secondary: true\n"))
    assert _one(project, "references.yaml:13:", "su2021roformer", "missing field: 'url'")


def test_a_fact_without_url_is_rejected(project):
    _setup(project, RECORD.replace("      url: https://arxiv.org/abs/2104.09864v5\n      date", "      date"))
    assert _one(project, "references.yaml:17:", "su2021roformer", "missing field: 'url'")


def test_a_field_no_page_backs_is_rejected(project):
    _setup(project, RECORD.replace("fields: [published_year, venue]", "fields: [published_year]"))
    assert _one(project, "references.yaml:7:", "su2021roformer", "venue is not backed by any page")


def test_an_unknown_cites_key_is_rejected(project):
    _setup(project, claims=CITATION.replace("cites: [su2021roformer]", "cites: [su2022roformer]"))
    assert _one(project, "claims.yaml:22:", "rope.cite", "cites unknown reference 'su2022roformer'")


def test_a_citation_claim_must_cite_a_record(project):
    decided = CITATION.replace("verdict: unverifiable", "verdict: holds\n  grade: internal\n  witness: [{source: "
                               "foundations, line: 230, quote: 'Su et al.', role: supports}]\n  evidence: ['properties/"
                               "test_records.py::test_document_supports_the_claim[rope.cite]']")
    _setup(project, claims=decided.replace("  cites: [su2021roformer]\n", ""))
    assert _one(project, "rope.cite", "a citation claim must cite a record")


@pytest.mark.parametrize("bad, message", [
    ("2104.9864v5", "malformed arXiv id"),
    ("2113.09864v1", "malformed arXiv id"),  # month 13
    ("2104.09864", "has no version"),
])
def test_a_malformed_arxiv_id_is_rejected(project, bad, message):
    _setup(project, RECORD.replace("arxiv: 2104.09864v5}", f"arxiv: {bad}}}"))
    assert _one(project, "references.yaml:8:", "su2021roformer", message)


def test_a_year_later_than_the_arxiv_id_is_rejected(project):
    _setup(project, RECORD.replace("  year: 2021\n", "  year: 2022\n"))
    assert _one(project, "references.yaml:5:", "su2021roformer", "later than the arXiv id's 2021-04")


def test_a_duplicate_key_is_rejected(project):
    _setup(project, RECORD + RECORD)
    assert _one(project, "references.yaml:", "su2021roformer", "duplicate key (first defined at line 1)")


def test_invalid_yaml_in_the_references_names_line_and_column(project):
    _setup(project, RECORD + "- key: [unclosed\n")
    assert _one(project, "references.yaml:22:", "invalid YAML", "flow sequence at line 22, column 8")


def test_unreadable_input_exits_2_and_problems_exit_1(project, capsys):
    from claimcheck.cli import main

    _setup(project, RECORD + "- key: [unclosed\n")
    assert main(["--root", str(project.root), "check"]) == 2
    _setup(project, RECORD.replace("arxiv: 2104.09864v5}", "arxiv: 2104.9864v5}"))
    assert main(["--root", str(project.root), "check"]) == 1
    (project.root / "claims.yaml").write_text("- id: x\n  quote: 'open\n", encoding="utf-8")
    assert main(["--root", str(project.root), "check"]) == 2
    assert "claims.yaml:2: -: invalid YAML" in capsys.readouterr().err


def test_an_attribution_the_record_cannot_answer_is_rejected(project):
    claims = CITATION + "  attribution: {ref: su2021roformer, doi: 10.1/x}\n"
    _setup(project, claims=claims)
    assert _one(project, "rope.cite", "states ids.doi, but record 'su2021roformer' has none")


def test_a_witness_quote_must_be_found_at_its_line(project):
    claims = CITATION + "  witness: [{source: foundations, line: 40, quote: 'no such words', role: supports}]\n"
    _setup(project, claims=claims)
    assert _one(project, "rope.cite", "witness quote 'no such words' not found within 3 lines of foundations:40")


def test_a_decided_claim_needs_a_grade_that_matches_its_evidence(project):
    _setup(project, claims="")
    project.registry(GOOD_CLAIM.replace("  grade: proved\n", ""))
    assert _one(project, "softmax.shift", "needs a grade")
    project.registry(GOOD_CLAIM.replace("grade: proved", "grade: tested"))
    assert _one(project, "softmax.shift", "grade 'tested' needs a property over generated examples")


def test_two_claims_that_disagree_on_a_work_must_be_linked(project):
    first = CITATION + "  attribution: {ref: su2021roformer, authors: [Su], et_al: true, year: 2022}\n"
    second = first.replace("id: rope.cite", "id: rope.cite-again").replace("year: 2022", "year: 2021")
    _setup(project, claims=first + second)
    assert _one(project, "rope.cite-again", "year of 'su2021roformer' is 2021 here but 2022 in rope.cite")
    _setup(project, claims=first + second.replace("  cites:", "  contradicts: [rope.cite]\n  cites:"))
    assert not [p for p in _problems(project) if "link the two" in p]


def test_two_years_the_record_bears_out_need_no_link(project):
    first = CITATION + "  attribution: {ref: su2021roformer, year: 2021}\n"  # the arXiv year
    second = first.replace("id: rope.cite", "id: rope.cite-again").replace("year: 2021", "year: 2024")  # journal
    _setup(project, claims=first + second)
    assert not [p for p in _problems(project) if "link the two" in p]


# --- the comparison rule ------------------------------------------------------------------------

REF = Reference(key="w", kind="arxiv", title="A Study of Things", read=({"url": "https://x.org", "date": "2026-12-01",
                "fields": ["title"]},), authors=("Ada Lovelace", "Thiziri Nait Saada", "Alan Turing"), year=2021,
                published_year=2024, venue="ICLR 2024", ids={"arxiv": "2104.00001v2"})


@pytest.mark.parametrize("attribution, verdict", [
    ({"authors": ["Lovelace"], "et_al": True, "year": 2021}, "holds"),
    ({"authors": ["Lovelace"], "et_al": True, "year": 2024}, "holds"),  # the venue version's year
    ({"authors": ["Lovelace", "Nait Saada", "Turing"], "title": "a study of THINGS"}, "holds"),
    ({"authors": ["Lovelace"], "et_al": True, "year": 2022}, "partly"),  # right work, wrong year
    ({"authors": ["Turing"], "et_al": True, "year": 2021}, "fails"),  # wrong first author
    ({"authors": ["Lovelace", "Nait Saada"]}, "fails"),  # an incomplete list without "et al."
    ({"authors": ["Turing", "Lovelace", "Nait Saada"]}, "partly"),  # the right people in another order
    ({"authors": ["Turing", "Lovelace", "Lovelace"]}, "fails"),  # a permutation must use each author once
    ({"year": 2023}, "fails"),  # only a year is asserted, and it is wrong
    ({"arxiv": "2104.00001", "venue": "NeurIPS 2024"}, "partly"),
    ({"arxiv": "2104.00002"}, "fails"),
])
def test_the_rule_gives_the_documented_verdict(attribution, verdict):
    assert verdict_of(compare({"ref": "w", **attribution}, REF)) == verdict


def test_the_rule_cannot_compare_what_the_record_lacks():
    with pytest.raises(CannotCompare):
        compare({"ref": "w", "facts": {"main-result": "x"}}, REF)
    with pytest.raises(CannotCompare):
        verdict_of([])


def test_witness_roles_decide_like_fields():
    assert witness_verdict(["supports"]) == "holds"
    assert witness_verdict(["contradicts"]) == "fails"
    assert witness_verdict(["supports", "contradicts"]) == "partly"


def test_arxiv_ids_encode_their_month():
    assert arxiv_month("2104.09864v5") == (2021, 4)
    assert arxiv_month("hep-th/9901001v1") == (1999, 1)
    assert arxiv_month("2113.00001v1") is None
    assert arxiv_month("2104.9864v1") is None  # five digits after the dot since 2015
    assert arxiv_month("1412.6980v9") == (2014, 12)


# --- the generic evidence, run as pytest runs it ----------------------------------------------

MINI_REGISTRY = """
- {id: c.holds, source: foundations, line: 230, quote: 'RoPE (Su et al., 2022)', statement: RoPE is due to Su et al., topic: rope, kind: citation, verdict: holds, grade: recorded, cites: [su2021roformer], attribution: {ref: su2021roformer, authors: [Su], et_al: true}, evidence: ['properties/test_records.py::test_record_confirms_the_attribution[c.holds]']}
- {id: c.partly, source: foundations, line: 230, quote: 'RoPE (Su et al., 2022)', statement: RoPE is due to Su et al. 2022, topic: rope, kind: citation, verdict: partly, grade: recorded, correction: Su et al. 2021., cites: [su2021roformer], attribution: {ref: su2021roformer, authors: [Su], et_al: true, year: 2022}, evidence: ['properties/test_records.py::test_record_confirms_the_attribution[c.partly]', 'properties/test_records.py::test_record_contradicts_the_attribution[c.partly]']}
- {id: c.wrong-verdict, source: foundations, line: 230, quote: 'RoPE (Su et al., 2022)', statement: recorded holds though the year is off, topic: rope, kind: citation, verdict: holds, grade: recorded, cites: [su2021roformer], attribution: {ref: su2021roformer, authors: [Su], et_al: true, year: 2022}, evidence: ['properties/test_records.py::test_record_confirms_the_attribution[c.wrong-verdict]']}
- {id: c.internal, source: foundations, line: 230, quote: 'RoPE (Su et al., 2022)', statement: the document dates RoPE to 2022, topic: rope, kind: citation, verdict: holds, grade: internal, cites: [su2021roformer], witness: [{source: foundations, line: 230, quote: 'Su et al., 2022', role: supports}], evidence: ['properties/test_records.py::test_document_supports_the_claim[c.internal]']}
"""


def test_the_generic_evidence_confirms_refutes_and_catches_a_wrong_verdict(pytester):
    pytester.makefile(".yaml", claims=textwrap.dedent(MINI_REGISTRY), references=textwrap.dedent(RECORD))
    shutil.copytree(ROOT / "sources", pytester.path / "sources")
    pytester.mkpydir("properties")
    shutil.copy(ROOT / "properties" / "test_records.py", pytester.path / "properties" / "test_records.py")
    pytester.runpytest_subprocess("properties/", "-p", "no:cacheprovider", "-n", "0")
    rows = {r["id"]: r for r in json.loads((pytester.path / "results" / "claims-results.json").read_text())["claims"]}
    assert rows["c.holds"]["status"] == "verified"
    assert rows["c.partly"]["status"] == "refuted"
    assert "year" in json.dumps(rows["c.partly"]["counterexample"])
    assert rows["c.wrong-verdict"]["status"] == "error"  # the rule gives partly: the registry is wrong
    assert rows["c.internal"]["status"] == "verified"


def test_an_attribution_states_only_what_the_documents_section_says(project):
    # line 230 reads "RoPE (Su et al., 2022)": a surname or a year that its section never names is not the document's
    claims = CITATION + "  attribution: {ref: su2021roformer, authors: [Turing], et_al: true, year: 2023}\n"
    _setup(project, claims=claims)
    assert _one(project, "rope.cite", "attribution author 'Turing' does not occur in foundations:")
    assert _one(project, "rope.cite", "attribution year 2023 does not occur in foundations:")
    _setup(project, claims=CITATION + "  attribution: {ref: su2021roformer, authors: [Su], et_al: true, year: 2022}\n")
    assert not [p for p in _problems(project) if "does not occur" in p]
