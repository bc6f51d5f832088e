"""Load ``claims.yaml`` into frozen :class:`Claim` records, remembering where each came from.

Structural validation (fields, types, allowed values, conditional requirements) is a JSON
Schema (``registry.schema.json``); every error is reported with the file, the line and the
claim id. Cross-references (sources, quotes, evidence, ``uses``) are checked by
:mod:`claimcheck.check`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA = json.loads((Path(__file__).with_name("registry.schema.json")).read_text(encoding="utf-8"))
VERDICTS = ("holds", "fails", "partly", "unverifiable", "open")
DECIDED = ("holds", "fails", "partly")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the registry or its evidence, located for a person to fix."""

    file: str
    line: int | None
    claim: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.claim or '-'}: {self.message}"


class RegistryError(Exception):
    """The registry cannot be loaded at all (invalid YAML, wrong top-level shape)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class Snippet:
    start: int
    end: int
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    line: int
    quote: str
    statement: str
    topic: str
    kind: str
    verdict: str
    reason: str | None = None
    correction: str | None = None
    evidence: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    same_as: str | None = None
    contradicts: tuple[str, ...] = ()
    snippet: Snippet | None = None
    notes: str | None = None
    # where the entry sits in the registry file: the entry's line and each field's line
    at: int = 0
    field_lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def line_of(self, name: str) -> int:
        return self.field_lines.get(name, self.at)


@dataclass(frozen=True)
class Registry:
    path: Path
    claims: tuple[Claim, ...]

    @cached_property
    def by_id(self) -> dict[str, Claim]:
        return {c.id: c for c in self.claims}

    def get(self, cid: str) -> Claim | None:
        return self.by_id.get(cid)


def parse_registry(path: Path) -> tuple[list[Claim], list[Problem], set[str]]:
    """Parse and schema-check the file.

    Returns the well-formed claims, the problems, and the ids of malformed entries (so that other
    checks do not report references to them as unknown)."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError([Problem(name, None, None, f"cannot read the registry: {exc}")]) from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise RegistryError([Problem(name, line, None, f"invalid YAML: {exc.problem or exc}")]) from exc
    if root is None:
        return [], [], set()
    if not isinstance(root, yaml.SequenceNode):
        raise RegistryError([Problem(name, root.start_mark.line + 1, None,
                                     "the registry must be a YAML list of claim mappings")])
    claims: list[Claim] = []
    problems: list[Problem] = []
    malformed: set[str] = set()  # ids of entries rejected above: still known, for cross-references
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for node in root.value:
        at = node.start_mark.line + 1
        if not isinstance(node, yaml.MappingNode):
            problems.append(Problem(name, at, None, "each entry must be a mapping of fields"))
            continue
        field_lines: dict[str, int] = {}
        cid = None
        for key, value in node.value:
            if key.value in field_lines:
                problems.append(Problem(name, key.start_mark.line + 1, None, f"field '{key.value}' given twice"))
            field_lines[key.value] = key.start_mark.line + 1
            if key.value == "id" and isinstance(value, yaml.ScalarNode):
                cid = value.value
        data = yaml.SafeLoader("").construct_object(node, deep=True)
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        for error in errors:
            if error.validator == "additionalProperties" and not error.absolute_path:
                for extra in sorted(set(data) - set(SCHEMA["properties"])):
                    problems.append(Problem(name, field_lines.get(extra, at), cid,
                                            f"unknown field '{extra}' (allowed: {', '.join(SCHEMA['properties'])})"))
                continue
            top = str(error.absolute_path[0]) if error.absolute_path else None
            problems.append(Problem(name, field_lines.get(top, at) if top else at, cid, _schema_message(error)))
        if errors:
            if isinstance(cid, str):
                malformed.add(cid)
            continue
        claims.append(_claim(data, at, field_lines))
    return claims, problems, malformed


def _schema_message(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        return f"unknown field(s): {error.message.split('(')[-1].rstrip(')')}"
    if error.validator == "required":
        missing = error.message.split(" is a required")[0]
        if "allOf" in error.absolute_schema_path:  # a field required by the verdict or the kind
            return f"missing field {missing}: required for this verdict/kind (fails and partly need a correction, " \
                   "unverifiable a reason, code-snippet a snippet range)"
        return f"missing field: {missing}"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator in ("allOf", "if", "then") or error.validator == "not":
        return error.message
    return f"{where}: {error.message}" if where else error.message


def _claim(data: dict[str, Any], at: int, field_lines: dict[str, int]) -> Claim:
    snippet = data.get("snippet")
    return Claim(
        id=data["id"],
        source=data["source"],
        line=data["line"],
        quote=data["quote"],
        statement=data["statement"].strip(),
        topic=data["topic"],
        kind=data["kind"],
        verdict=data["verdict"],
        reason=data.get("reason"),
        correction=data.get("correction"),
        evidence=tuple(data.get("evidence") or ()),
        uses=tuple(data.get("uses") or ()),
        same_as=data.get("same_as"),
        contradicts=tuple(data.get("contradicts") or ()),
        snippet=Snippet(snippet["start"], snippet["end"], tuple(snippet.get("requires") or ())) if snippet else None,
        notes=data.get("notes"),
        at=at,
        field_lines=field_lines,
    )


def load_registry(path: Path) -> Registry:
    """Load the registry, raising :class:`RegistryError` with every structural problem."""
    claims, problems, _ = parse_registry(path)
    seen: dict[str, Claim] = {}
    for claim in claims:
        if claim.id in seen:
            problems.append(Problem(str(path), claim.at, claim.id,
                                    f"duplicate id (first defined at line {seen[claim.id].at})"))
        else:
            seen[claim.id] = claim
    if problems:
        raise RegistryError(problems)
    return Registry(path, tuple(claims))
