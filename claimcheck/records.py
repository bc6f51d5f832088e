"""Decide citation and document-internal claims: compare what a document says with the record.

A claim's ``attribution`` lists what the document asserts of a cited work (authors, year, title,
venue, identifiers, facts of its content). :func:`compare` checks each asserted field against the
work's record (:mod:`claimcheck.references`) and :func:`verdict_of` turns the checks into the
verdict the evidence supports:

* core fields — authors, title, identifiers, facts — say *which* work and *what* it shows;
  peripheral fields — year, venue, the order of the right authors, facts marked ``role: condition``
  or ``role: detail`` — say when, where, how it is cited, under what, by which variant of the idea;
* any core field wrong: ``fails`` (misattributed); only peripheral fields wrong while a core field
  is right: ``partly``; a claim that asserts only peripheral fields and gets one wrong: ``fails``;
  nothing wrong: ``holds``.

A claim's ``witness`` lists lines of the documents that support or contradict it; each quote must
be found at its line, and the roles decide the same way (contradicted only: ``fails``; both:
``partly``; supported only: ``holds``).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from claimcheck.references import Reference

# the generic record check of the property suite: a correction it proves is proved by the cited record, compared
# field by field (a comparator, whose own checks reject wrong fields), not by a property that owes a control
GENERIC_RECORD_TESTS = "properties/test_records.py::"

CORE = ("authors", "title", "arxiv", "acl", "openreview", "doi")
PERIPHERAL = ("year", "venue")
IDS = ("arxiv", "acl", "openreview", "doi")


class CannotCompare(Exception):
    """The claim asserts something its record does not hold: an error of the evidence, not a verdict."""


@dataclass(frozen=True)
class FieldCheck:
    field: str
    stated: Any
    recorded: Any
    match: bool
    core: bool

    def describe(self) -> str:
        sign = "==" if self.match else "!="
        return f"{self.field}: document {self.stated!r} {sign} record {self.recorded!r}"


def fold(text: str) -> str:
    """Lower case, accents removed, every run of non-alphanumerics one space."""
    text = unicodedata.normalize("NFKD", str(text))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return " ".join(re.split(r"[^0-9a-z\u4e00-\u9fff]+", text)).strip()


def name_tokens(name: str) -> list[str]:
    """The words of a person's name, lower case, accents removed, split at spaces, commas and initials' dots;
    a hyphen or apostrophe stays inside its word (``Ran-Milo`` and ``O'Brien`` are one word each)."""
    text = unicodedata.normalize("NFKD", str(name)).replace("\u2019", "'").replace("\u2010", "-")
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    words = (w.strip("-'") for w in re.split(r"[^\w'-]+", text))
    return [w for w in words if w]


def _surname_matches(full_name: str, surname: str) -> bool:
    """Whether ``surname`` is the surname of ``full_name``: its words are the last words of the name, whole
    (``Saada`` is not the surname of Tam Nait-Saada, nor ``Milo`` of Yuval Ran-Milo, nor ``Li`` of Ali)."""
    full, last = name_tokens(full_name), name_tokens(surname)
    return bool(last) and full[-len(last):] == last


def _authors(stated: list[str], et_al: bool, recorded: tuple[str, ...]) -> bool:
    if not et_al and len(stated) != len(recorded):
        return False
    return len(stated) <= len(recorded) and all(_surname_matches(r, s) for s, r in zip(stated, recorded))


def _same_people(stated: list[str], et_al: bool, recorded: tuple[str, ...]) -> bool:
    """Whether the stated surnames name exactly the recorded authors, in some order (no "et al.")."""
    if et_al or len(stated) != len(recorded):
        return False
    unused = list(recorded)
    for surname in stated:
        match = next((r for r in unused if _surname_matches(r, surname)), None)
        if match is None:
            return False
        unused.remove(match)
    return True


def _value(v: Any) -> Any:
    return fold(v) if isinstance(v, str) else v


def _strip_version(arxiv_id: str) -> str:
    return re.sub(r"v\d+$", "", arxiv_id.strip())


def compare(attribution: dict[str, Any], record: Reference) -> list[FieldCheck]:
    """Every field the document asserts, checked against the record; raises CannotCompare if the record lacks one."""
    checks: list[FieldCheck] = []

    def need(name: str, value: Any) -> Any:
        if value in (None, (), ""):
            raise CannotCompare(f"the claim states {name}, but record {record.key!r} has none")
        return value

    if "authors" in attribution:
        recorded = need("authors", record.authors)
        et_al = bool(attribution.get("et_al"))
        stated = attribution["authors"] + (["et al."] if et_al else [])
        in_order = _authors(attribution["authors"], et_al, recorded)
        if not in_order and _same_people(attribution["authors"], et_al, recorded):
            # the right people in another order: the work is identified, its citation is off (bibliographic)
            checks.append(FieldCheck("authors", stated, list(recorded), True, True))
            checks.append(FieldCheck("author order", stated, list(recorded), False, False))
        else:
            checks.append(FieldCheck("authors", stated, list(recorded), in_order, True))
    if "title" in attribution:
        recorded = need("title", record.title)
        checks.append(FieldCheck("title", attribution["title"], recorded, fold(attribution["title"]) == fold(recorded),
                                 True))
    for name in IDS:
        if name in attribution:
            recorded = need(f"ids.{name}", record.ids.get(name))
            stated = attribution[name]
            same = (_strip_version(stated) == _strip_version(recorded)) if name == "arxiv" else fold(stated) == fold(recorded)
            checks.append(FieldCheck(name, stated, recorded, same, True))
    if "year" in attribution:
        years = [y for y in (record.year, record.published_year) if y]
        need("year", years)
        checks.append(FieldCheck("year", attribution["year"], years if len(years) > 1 else years[0],
                                 attribution["year"] in years, False))
    if "venue" in attribution:
        recorded = need("venue", record.venue)
        checks.append(FieldCheck("venue", attribution["venue"], recorded, fold(attribution["venue"]) == fold(recorded),
                                 False))
    for key, stated in (attribution.get("facts") or {}).items():
        role = "core"
        if isinstance(stated, dict):
            role, stated = stated.get("role", "core"), stated["value"]
        fact = record.fact(key)
        if fact is None or fact.value is None:
            raise CannotCompare(f"the claim states fact {key!r}, but record {record.key!r} has no value for it")
        checks.append(FieldCheck(f"facts.{key}", stated, fact.value, _value(stated) == _value(fact.value),
                                 role == "core"))
    return checks


def verdict_of(checks: list[FieldCheck]) -> str:
    """The verdict that a list of field checks supports (rule in the module docstring)."""
    if not checks:
        raise CannotCompare("the attribution asserts no field to compare")
    core_wrong = any(c.core and not c.match for c in checks)
    core_right = any(c.core and c.match for c in checks)
    peripheral_wrong = any(not c.core and not c.match for c in checks)
    if core_wrong:
        return "fails"
    if peripheral_wrong:
        return "partly" if core_right else "fails"
    return "holds"


def witness_verdict(roles: list[str]) -> str:
    if not roles:
        raise CannotCompare("the witness lists no line")
    if "contradicts" in roles:
        return "partly" if "supports" in roles else "fails"
    return "holds"
