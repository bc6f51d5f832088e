"""The references of record: ``references.yaml``, one record per cited work or external fact.

A record carries the bibliographic fields of a work (title, full author list, year of the first
public version, venue, identifiers) and the facts of its content that claims rest on, each with
the URL where it was read and the date. Nothing is fetched at test or report time: the records
are the offline copy of the public record that citation claims are checked against
(:mod:`claimcheck.records`).

Structural validation is a JSON Schema (``references.schema.json``); :func:`validate` adds what a
schema cannot say: unique keys, every bibliographic field backed by a page that was read, arXiv
ids with a version whose YYMM is a real month and not later than the recorded year allows.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.registry import Entry, Problem, RegistryError, parse_entries

SCHEMA = json.loads((Path(__file__).with_name("references.schema.json")).read_text(encoding="utf-8"))
# new-style arXiv ids (YYMM.NNNN from 2007, YYMM.NNNNN from 2015) and old-style archive/YYMMNNN, with version
ARXIV_ID = re.compile(r"^(?:(?P<yy>\d{2})(?P<mm>\d{2})\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/(?P<oyy>\d{2})(?P<omm>\d{2})\d{3})"
                      r"(?P<version>v[1-9]\d*)?$")
BIB_FIELDS = ("title", "authors", "year", "published_year", "venue")


@dataclass(frozen=True)
class Fact:
    key: str
    text: str
    url: str
    date: str
    value: Any = None
    secondary: bool = False


@dataclass(frozen=True)
class Reference:
    key: str
    kind: str
    title: str
    read: tuple[dict[str, Any], ...]
    authors: tuple[str, ...] = ()
    year: int | None = None
    published_year: int | None = None
    venue: str | None = None
    ids: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    facts: tuple[Fact, ...] = ()
    notes: str | None = None
    at: int = 0

    def fact(self, key: str) -> Fact | None:
        return next((f for f in self.facts if f.key == key), None)

    @property
    def url(self) -> str:
        """The page the record was first read from (its primary link)."""
        return self.read[0]["url"]


def arxiv_month(arxiv_id: str) -> tuple[int, int] | None:
    """(year, month) encoded in an arXiv id, or None if it is not well formed."""
    m = ARXIV_ID.match(arxiv_id)
    if not m:
        return None
    yy, mm = (m["yy"], m["mm"]) if m["yy"] else (m["oyy"], m["omm"])
    if m["yy"] and len(arxiv_id.split(".")[1].split("v")[0]) != (5 if int(yy) >= 15 else 4):
        return None  # four digits after the dot until 2014, five from 2015
    year = int(yy) + (1900 if int(yy) >= 91 else 2000)
    return (year, int(mm)) if 1 <= int(mm) <= 12 else None


def default_path(root: Path) -> Path:
    return root / "references.yaml"


def parse_references(path: Path) -> tuple[list[Reference], list[Problem], set[str]]:
    """Parse, schema-check and validate the file; problems name the file, the line and the key.

    Also returns the keys of malformed records (known, so that citing them is not a second error)."""
    if not path.exists():
        return [], [], set()
    entries, problems, malformed = parse_entries(path, SCHEMA, "key", "the references", "record")
    refs: list[Reference] = []
    seen: dict[str, int] = {}
    for e in entries:
        problems += _validate(str(path), e)
        key = e.data["key"]
        if key in seen:
            problems.append(Problem(str(path), e.at, key, f"duplicate key (first defined at line {seen[key]})"))
            continue
        seen[key] = e.at
        refs.append(_reference(e))
    return refs, problems, malformed


def load_references(path: Path) -> dict[str, Reference]:
    refs, problems, _ = parse_references(path)
    if problems:
        raise RegistryError(problems)
    return {r.key: r for r in refs}


def _validate(name: str, e: Entry) -> list[Problem]:
    d, key = e.data, e.data["key"]
    problems: list[Problem] = []
    covered = {f for page in d["read"] for f in page["fields"]}
    present = [f for f in BIB_FIELDS if f in d] + [f"ids.{i}" for i in d.get("ids", {})]
    for f in present:
        if f not in covered:
            path = tuple(f.split("."))
            problems.append(Problem(name, e.line_at(path), key,
                                    f"{f} is not backed by any page in `read` (list it in a read entry's fields, "
                                    "or leave the field out)"))
    for i, page in enumerate(d["read"]):
        for f in page["fields"]:
            if f not in present:
                problems.append(Problem(name, e.line_at(("read", i, "fields")), key,
                                        f"read entry names field {f}, which the record does not have"))
    dates = [("read", i, page["date"]) for i, page in enumerate(d["read"])]
    dates += [("facts", i, fact["date"]) for i, fact in enumerate(d.get("facts", []))]
    for where, i, value in dates:
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            problems.append(Problem(name, e.line_at((where, i, "date")), key, f"{value!r} is not a calendar date"))
    arxiv = d.get("ids", {}).get("arxiv")
    if arxiv is not None:
        month = arxiv_month(arxiv)
        if month is None:
            problems.append(Problem(name, e.line_at(("ids", "arxiv")), key,
                                    f"malformed arXiv id {arxiv!r} (expected YYMM.NNNNN with a version, e.g. "
                                    "2104.09864v5)"))
        elif not ARXIV_ID.match(arxiv)["version"]:
            problems.append(Problem(name, e.line_at(("ids", "arxiv")), key,
                                    f"arXiv id {arxiv!r} has no version: record the version that was read (e.g. "
                                    f"{arxiv}v1)"))
        elif d.get("year") and d["year"] > month[0]:
            problems.append(Problem(name, e.line_at(("year",)), key,
                                    f"year {d['year']} is later than the arXiv id's {month[0]}-{month[1]:02d}: the "
                                    "year is that of the first public version"))
    fact_keys: set[str] = set()
    for i, fact in enumerate(d.get("facts", [])):
        if fact["key"] in fact_keys:
            problems.append(Problem(name, e.line_at(("facts", i, "key")), key, f"fact {fact['key']!r} given twice"))
        fact_keys.add(fact["key"])
    return problems


def _reference(e: Entry) -> Reference:
    d = e.data
    return Reference(
        key=d["key"], kind=d["kind"], title=d["title"], read=tuple(d["read"]),
        authors=tuple(d.get("authors") or ()), year=d.get("year"), published_year=d.get("published_year"),
        venue=d.get("venue"), ids=dict(d.get("ids") or {}),
        facts=tuple(Fact(f["key"], f["text"], f["url"], f["date"], f.get("value"), bool(f.get("secondary")))
                    for f in d.get("facts") or ()),
        notes=d.get("notes"), at=e.at,
    )
