"""Claims decided by the record of a cited work or by the documents' own lines.

A citation claim's ``attribution`` says what the document asserts of a work (authors, year,
title, venue, identifiers, facts of its content); the work's record in ``references.yaml`` says
what the public record shows, with the page each field was read from. A claim decided by the
documents themselves lists the lines that support or contradict it as its ``witness``. The rule
that turns the comparison into a verdict is :mod:`claimcheck.records`; these tests apply it to
every such claim of the registry, and a recorded verdict that the rule does not give is an error
of the registry, never a pass.
"""
from pathlib import Path

import pytest

from claimcheck import claim_assert, comparator_check, refutes
from claimcheck.plugin import references, registry
from claimcheck.records import compare, verdict_of, witness_verdict
from claimcheck.sources import load_sources


class VerdictDisagrees(Exception):
    """The recorded verdict is not the one the comparison gives: the registry is wrong, not the claim."""


def _attribution(config, claim_id):
    claim = registry(config).get(claim_id)
    record = references(config)[claim.attribution["ref"]]
    checks = compare(claim.attribution, record)
    if verdict_of(checks) != claim.verdict:
        raise VerdictDisagrees(f"{claim_id}: the record gives {verdict_of(checks)!r}, the registry says "
                               f"{claim.verdict!r}: " + "; ".join(c.describe() for c in checks))
    return claim, record, checks


@pytest.mark.claims_from_registry(has="attribution", verdict=("holds", "partly"))
def test_record_confirms_the_attribution(claim_id, pytestconfig):
    claim, record, checks = _attribution(pytestconfig, claim_id)
    confirmed = [c for c in checks if c.core or claim.verdict == "holds"]
    claim_assert(confirmed and all(c.match for c in confirmed), "the record does not confirm the attribution",
                 checks=[c.describe() for c in confirmed], record=record.url)


@pytest.mark.claims_from_registry(has="attribution", verdict=("fails", "partly"))
@refutes(reason="the record of the cited work, field by field: each field where the document differs is exact")
def test_record_contradicts_the_attribution(claim_id, pytestconfig):
    claim, record, checks = _attribution(pytestconfig, claim_id)
    wrong = [c for c in checks if not c.match]
    claim_assert(not wrong, "the document differs from the record of the work it cites",
                 differences=[c.describe() for c in wrong], record=record.url)


def _witness(config, claim_id):
    claim = registry(config).get(claim_id)
    sources = load_sources(Path(str(config.rootpath)))
    found = []
    for w in claim.witness:
        line = sources[w.source].find_quote(w.quote, w.line)
        if line is None:  # a witness that is not there decides nothing: an error of the evidence
            raise LookupError(f"{claim_id}: witness quote {w.quote!r} not found near {w.source}:{w.line}")
        found.append((w, line))
    if witness_verdict([w.role for w in claim.witness]) != claim.verdict:
        raise VerdictDisagrees(f"{claim_id}: the witness lines give {witness_verdict([w.role for w in claim.witness])!r}, "
                               f"the registry says {claim.verdict!r}")
    return claim, found


@pytest.mark.claims_from_registry(has="witness", verdict=("holds", "partly"))
def test_document_supports_the_claim(claim_id, pytestconfig):
    claim, found = _witness(pytestconfig, claim_id)
    supports = [f"{w.source}:{line}: {w.quote}" for w, line in found if w.role == "supports"]
    claim_assert(supports, "no line of the documents supports the claim")


@pytest.mark.claims_from_registry(has="witness", verdict=("fails", "partly"))
@refutes(reason="lines of the documents themselves: each contradicting line is quoted verbatim")
def test_document_contradicts_the_claim(claim_id, pytestconfig):
    claim, found = _witness(pytestconfig, claim_id)
    against = [f"{w.source}:{line}: {w.quote}" for w, line in found if w.role == "contradicts"]
    claim_assert(not against, "the documents' own lines contradict the claim", lines=against)


# ---- checks of the comparators: the comparison must reject a wrong attribution or a wrong quote ----------
# They show that the machinery notices a wrong field; they cannot fail when the record itself is wrong, so they
# are reported as checks of the comparator, never as a negative control of the claim.


def _wrong(name, value, record):
    """A deliberately wrong value for one asserted field of an attribution."""
    if name == "authors":
        return ["Nobody"] + list(value[1:])
    if name == "year":
        return min(y for y in (record.year, record.published_year) if y) - 3
    if name == "arxiv":
        return value[:-1] + ("0" if value[-1] != "0" else "1")
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    return f"{value} (another)"


def _variants(attribution, record):
    for name, value in attribution.items():
        if name in ("ref", "et_al"):
            continue
        if name == "facts":
            for key, stated in value.items():
                inner = stated["value"] if isinstance(stated, dict) else stated
                wrong = {**stated, "value": _wrong(key, inner, record)} if isinstance(stated, dict) else _wrong(key, inner, record)
                yield f"facts.{key}", {**attribution, "facts": {**value, key: wrong}}
        else:
            yield name, {**attribution, name: _wrong(name, value, record)}


@pytest.mark.claims_from_registry(has="attribution", verdict=("holds", "partly"))
@comparator_check("each field the attribution asserts, changed to a wrong value: the comparison must reject every "
                  "variant")
def test_record_rejects_a_wrong_attribution(claim_id, pytestconfig):
    claim, record, checks = _attribution(pytestconfig, claim_id)
    right = {c.field for c in checks if c.match}
    accepted = [name for name, variant in _variants(claim.attribution, record)
                if name in right and all(c.match for c in compare(variant, record) if c.field == name)]
    claim_assert(not accepted, "the comparison accepts a wrong value of a field the record confirms",
                 accepted=accepted, record=record.url)


@pytest.mark.claims_from_registry(has="witness", verdict=("holds", "partly", "fails"))
@comparator_check("each witness quote with one character changed: the quote look-up must not find the variant")
def test_document_lines_reject_a_wrong_quote(claim_id, pytestconfig):
    claim, found = _witness(pytestconfig, claim_id)
    sources = load_sources(Path(str(pytestconfig.rootpath)))
    accepted = [w.quote for w, _ in found
                if sources[w.source].find_quote(w.quote[:-1] + ("\u2205" if w.quote[-1] != "\u2205" else "x"), w.line)]
    claim_assert(not accepted, "a witness quote is found after a one-character change", accepted=accepted)
