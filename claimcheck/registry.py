"""Load ``claims.yaml`` into frozen :class:`Claim` records, remembering where each came from.

Structural validation (fields, types, allowed values, conditional requirements) is a JSON
Schema (``registry.schema.json``); every error is reported with the file, the line and the
claim id. Cross-references (sources, quotes, evidence, ``uses``) are checked by
:mod:`claimcheck.check`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA = json.loads((Path(__file__).with_name("registry.schema.json")).read_text(encoding="utf-8"))
VERDICTS = ("holds", "fails", "partly", "unverifiable", "open")
DECIDED = ("holds", "fails", "partly")
GRADES = ("proved", "tested", "measured", "recorded", "internal")


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
class Witness:
    """A line of the documents that decides a claim: it supports or contradicts it."""

    source: str
    line: int
    quote: str
    role: str  # supports | contradicts


@dataclass(frozen=True)
class Experiment:
    """A claim decided by a seeded small-scale experiment (``experiments/``): its pre-registered prediction.

    Decided by ``experiments.analysis`` from the t interval of the effect ``metric`` over seeds: confirmed
    when it lies wholly on the ``comparison`` side of ``threshold``, contradicted when wholly on the other,
    inconclusive when it straddles, uninformative by design when ``uninformative`` gives the reason the
    design cannot show the effect; ``scale`` is the CI scale the verdict states.
    """

    name: str
    prediction: str
    metric: str
    comparison: str  # >= | <= | > | <
    threshold: float
    scale: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # before-result: the prediction was committed before any result (tests/test_registration_history.py
    # checks it in the git history); after-result: it entered the registry with or after its outcome
    registered: str = "before-result"
    uninformative: str | None = None  # why the design cannot show the effect, set at registration


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
    grade: str | None = None
    evidence: tuple[str, ...] = ()
    cites: tuple[str, ...] = ()
    # what the document says of a cited work, compared with its record (claimcheck.records)
    attribution: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    witness: tuple[Witness, ...] = ()
    uses: tuple[str, ...] = ()
    same_as: str | None = None
    contradicts: tuple[str, ...] = ()
    snippet: Snippet | None = None
    notes: str | None = None
    experiment: Experiment | None = None
    # earlier experiments whose design could not decide the claim, kept as registered (their tests still run)
    superseded: tuple[Experiment, ...] = ()
    # for fails / partly: how wrong the claim is (claimcheck.findings ranks by it)
    finding: dict[str, Any] | None = field(default=None, compare=False, hash=False)
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


def selected(claim: Claim, filters: dict[str, Any]) -> bool:
    """Whether ``claim`` matches a ``claims_from_registry`` marker's filters: ``field=value``,
    ``field=(value, ...)`` for any of several values, ``has="field"`` for a field that is set."""
    for name, want in filters.items():
        if name == "has":
            if not getattr(claim, want):
                return False
        elif isinstance(want, (tuple, list)):
            if getattr(claim, name) not in want:
                return False
        elif getattr(claim, name) != want:
            return False
    return True


def parse_registry(path: Path) -> tuple[list[Claim], list[Problem], set[str]]:
    """Parse and schema-check the file.

    Returns the well-formed claims, the problems, and the ids of malformed entries (so that other
    checks do not report references to them as unknown)."""
    entries, problems, malformed = parse_entries(path, SCHEMA, "id", "the registry", "claim")
    return [_claim(e.data, e.at, e.field_lines) for e in entries], problems, malformed


@dataclass(frozen=True)
class Entry:
    """One schema-valid mapping of a YAML list file, with the lines its fields sit on."""

    data: dict[str, Any]
    at: int
    field_lines: dict[str, int]
    node: yaml.MappingNode = field(compare=False, repr=False)

    def line_at(self, path: tuple) -> int:
        """The line of the value at ``path`` (keys and list indices) inside this entry."""
        return node_line(self.node, path) or self.at


def node_line(node: yaml.Node, path: tuple) -> int | None:
    line = node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == step]
            if not match:
                return line
            key, node = match[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def parse_entries(path: Path, schema: dict, key_field: str, what: str, noun: str
                  ) -> tuple[list[Entry], list[Problem], set[str]]:
    """Parse a YAML list of mappings and check each against ``schema``; problems carry file:line:key."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError([Problem(name, None, None, f"cannot read {what}: {exc}")]) from exc
    try:
        root = yaml.compose(text, Loader=_COMPOSER)
    except yaml.MarkedYAMLError as exc:
        raise RegistryError([Problem(name, *_yaml_error(exc))]) from exc
    if root is None:
        return [], [], set()
    if not isinstance(root, yaml.SequenceNode):
        raise RegistryError([Problem(name, root.start_mark.line + 1, None,
                                     f"{what} must be a YAML list of {noun} mappings")])
    entries: list[Entry] = []
    problems: list[Problem] = []
    malformed: set[str] = set()  # keys of entries rejected here: still known, for cross-references
    validator = jsonschema.Draft202012Validator(schema)
    memo = _validated_memo(path, text, schema)
    known_valid = memo is not None and memo.exists()  # this exact text passed this exact schema before
    constructor = _Loader("")
    for node in root.value:
        at = node.start_mark.line + 1
        if not isinstance(node, yaml.MappingNode):
            problems.append(Problem(name, at, None, "each entry must be a mapping of fields"))
            continue
        field_lines: dict[str, int] = {}
        key = None
        for k, value in node.value:
            if k.value in field_lines:
                problems.append(Problem(name, k.start_mark.line + 1, None, f"field '{k.value}' given twice"))
            field_lines[k.value] = k.start_mark.line + 1
            if k.value == key_field and isinstance(value, yaml.ScalarNode):
                key = value.value
        data = _plain_dates(constructor.construct_object(node, deep=True))
        errors = [] if known_valid else sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        for error in errors:
            if error.validator == "additionalProperties" and not error.absolute_path:
                for extra in sorted(set(data) - set(schema["properties"])):
                    problems.append(Problem(name, field_lines.get(extra, at), key,
                                            f"unknown field '{extra}' (allowed: {', '.join(schema['properties'])})"))
                continue
            problems.append(Problem(name, node_line(node, tuple(error.absolute_path)) or at, key,
                                    _schema_message(error)))
        if errors:
            if isinstance(key, str):
                malformed.add(key)
            continue
        entries.append(Entry(data, at, field_lines, node))
    if memo is not None and not problems and not known_valid:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            memo.touch()
        except OSError:
            pass  # a read-only checkout validates every time
    return entries, problems, malformed


def _validated_memo(path: Path, text: str, schema: dict) -> Path | None:
    """The marker file saying that ``text`` passed ``schema`` (JSON Schema validation of the 690 entries is
    most of what `claims list` costs): ``results/.cache/`` beside the file, named by the hash of both."""
    digest = hashlib.sha256((text + json.dumps(schema, sort_keys=True)).encode()).hexdigest()[:24]
    return path.resolve().parent / "results" / ".cache" / f"valid-{path.name}-{digest}"


# libyaml composes the 780 KB registry ~15x faster than PyYAML's Python parser; both keep every node's
# line and column, which the problems report
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_error(exc: yaml.MarkedYAMLError) -> tuple[int | None, None, str]:
    """Line, claim (none) and message of a YAML error: the line of the construct left open (an
    unterminated quote or bracket) when the parser names one, else where it stopped; both columns."""
    at = exc.context_mark or exc.problem_mark
    where = []
    if exc.problem_mark is not None:
        where.append(f"stopped at line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1}")
    if exc.context_mark is not None:
        where.append(f"{exc.context} at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}")
    return (at.line + 1 if at else None, None, f"invalid YAML: {exc.problem or exc} ({'; '.join(where)})")


class _Loader(yaml.SafeLoader):
    """Reads an unquoted arXiv id (2104.09860) as the string it is, not as a float that drops a zero."""

    def construct_yaml_float(self, node: yaml.Node) -> Any:
        if isinstance(node.value, str) and re.fullmatch(r"\d{4}\.\d{4,5}", node.value):
            return node.value
        return super().construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _plain_dates(value: Any) -> Any:
    """YAML reads an unquoted 2026-12-01 as a date; the files keep dates as ISO strings."""
    if isinstance(value, dict):
        return {k: _plain_dates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_dates(v) for v in value]
    return value.isoformat() if isinstance(value, (dt.date, dt.datetime)) else value


def _schema_message(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        return f"unknown field(s): {error.message.split('(')[-1].rstrip(')')}"
    if error.validator == "required":
        missing = error.message.split(" is a required")[0]
        if "allOf" in error.absolute_schema_path:  # a field required by the verdict or the kind
            return f"missing field {missing}: required for this verdict/kind/grade (fails and partly need a " \
                   "correction, unverifiable a reason, code-snippet a snippet range, grade recorded and an " \
                   "attribution need cites, grade internal a witness)"
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
        grade=data.get("grade"),
        evidence=tuple(data.get("evidence") or ()),
        cites=tuple(data.get("cites") or ()),
        attribution=data.get("attribution"),
        witness=tuple(Witness(**w) for w in data.get("witness") or ()),
        uses=tuple(data.get("uses") or ()),
        same_as=data.get("same_as"),
        contradicts=tuple(data.get("contradicts") or ()),
        snippet=Snippet(snippet["start"], snippet["end"], tuple(snippet.get("requires") or ())) if snippet else None,
        notes=data.get("notes"),
        experiment=Experiment(**data["experiment"]) if data.get("experiment") else None,
        superseded=tuple(Experiment(**e) for e in data.get("superseded") or ()),
        finding=data.get("finding"),
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
