"""``claims check``: everything that can be wrong with the registry, its sources and its evidence.

Each problem names the file, the line and the claim id. Checks:

* the registry parses and every entry matches the schema (fields, values, conditional fields);
* ids are unique; ``uses``/``same_as``/``contradicts``/snippet ``requires`` name known ids and
  ``uses`` has no cycle;
* each source is known and unchanged (sha256), each quote is found within a few lines of its line,
  each snippet range lies inside its document;
* evidence names tests and benchmarks that exist, and each named test is tagged with the claim;
  each tagged test is named in its claim's evidence; no test is tagged with an unknown id or
  with no claim at all;
* a decided verdict has evidence of the right kind: ``holds`` a property and no refutation,
  ``fails`` a refutation and evidence that proves its correction (a property, a cited record or a witness of
  the documents), ``partly`` a refutation and a property for its correction;
* a correction proved by a property has a control of its own: a negative control that models the claim's own
  falsity (``control(..., models=...)``, found in the syntax tree like the tags), so that the test proving the
  correction is shown to reject the claim as stated; the corrections still owed one are listed, one id a line,
  in ``docs/corrections-without-control.txt``, a list that may only shrink (an id there that has its control
  now, or is not a correction proved by a property, is a problem too);
* a test parametrized from the registry runs exactly for the claims that name it;
* a decided verdict has an evidence grade, and the grade matches the evidence (``tested`` needs a
  test that draws examples, ``recorded`` an attribution checked against a record, ``internal`` a
  witness of the documents);
* the references of record (``references.yaml``, :mod:`claimcheck.references`) are well formed;
  every ``cites`` key resolves, every citation claim cites a record, every attribution can be
  compared with its record, every witness quote is found at its line, and two claims that say
  different things of the same work are linked by ``contradicts``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from claimcheck.collect import TestFunction, benchmarks, evidence_tests
from claimcheck.records import GENERIC_RECORD_TESTS, CannotCompare, compare, fold, name_tokens
from claimcheck.references import default_path, parse_references
from claimcheck.registry import DECIDED, Claim, Problem, RegistryError, parse_registry, selected
from claimcheck.sources import load_sources


def _parse(root: Path, path: Path, parse) -> tuple[str, list | None, list[Problem], set[str]]:
    """``(name, entries, problems, malformed ids)`` of one YAML file read by ``parse`` (the registry's or
    the references' parser), its problems named by the file's path from ``root``; entries None when the
    file cannot be read at all (then the problems say why)."""
    name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    try:
        entries, problems, malformed = parse(path)
    except RegistryError as exc:
        return name, None, [Problem(name, p.line, p.claim, p.message) for p in exc.problems], set()
    return name, entries, [Problem(name, p.line, p.claim, p.message) for p in problems], malformed


@dataclass(frozen=True)
class Audit:
    """What ``claims check`` found: the problems, whether an input could not be read or parsed at all
    (the registry or the references: then the problems say why), and how many claims are well formed."""

    problems: list[Problem]
    unreadable: bool
    claims: int


def check(root: Path, registry_path: Path | None = None, references_path: Path | None = None) -> list[Problem]:
    """All problems found in the project at ``root``; an empty list means the registry is sound."""
    return audit(root, registry_path, references_path).problems


def audit(root: Path, registry_path: Path | None = None, references_path: Path | None = None) -> Audit:
    """Every check of the project at ``root``, each file read and parsed once."""
    registry_path = registry_path or root / "claims.yaml"
    reg, claims, problems, malformed = _parse(root, registry_path, parse_registry)
    if claims is None:
        return Audit(problems, unreadable=True, claims=0)

    ids: dict[str, Claim] = {}
    for c in claims:
        if c.id in ids:
            problems.append(Problem(reg, c.at, c.id, f"duplicate id (first defined at line {ids[c.id].at})"))
        else:
            ids[c.id] = c

    problems += _check_sources(root, reg, claims)
    known = set(ids) | malformed
    problems += _check_links(reg, claims, ids, known)
    tests = {t.nodeid: t for t in evidence_tests(root)}
    problems += _check_evidence(root, reg, claims, ids, known, tests)
    references = _parse(root, references_path or default_path(root), parse_references)
    problems += _check_records(root, reg, claims, tests, references)
    problems += _check_experiments(reg, claims)
    return Audit(problems, unreadable=references[1] is None, claims=len(claims))


def _check_experiments(reg: str, claims: list[Claim]) -> list[Problem]:
    """A claim decided by an experiment names a test under ``experiments/``, and only such a claim does."""
    problems: list[Problem] = []
    for c in claims:
        runs = [ev for ev in c.evidence if ev.startswith("experiments/")]
        if c.experiment is not None and not runs and not (c.verdict in ("open", "unverifiable")
                                                         and c.experiment.registered == "before-result"):
            # registered and not yet run: an undecided claim may carry its prediction before any code runs it
            problems.append(Problem(reg, c.line_of("experiment"), c.id,
                                    "has an experiment but its evidence names no test under experiments/ (only an "
                                    "open or unverifiable claim may carry a prediction registered before its run)"))
        if runs and c.experiment is None:
            problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                    f"evidence names {runs[0]} but the claim has no 'experiment' (its prediction)"))
    return problems


def _check_sources(root: Path, reg: str, claims: list[Claim]) -> list[Problem]:
    problems: list[Problem] = []
    sources = load_sources(root)
    for doc in sources.documents.values():
        if not doc.path.exists():
            problems.append(Problem(str(doc.path.relative_to(root)), None, None, "source document is missing"))
        elif doc.actual_sha256() != doc.sha256:
            problems.append(Problem(str(doc.path.relative_to(root)), None, None,
                                    "source document differs from the copy received (sha256 mismatch)"))
    for c in claims:
        if c.source not in sources:
            problems.append(Problem(reg, c.line_of("source"), c.id,
                                    f"unknown source '{c.source}' (known: {', '.join(sources.documents)})"))
            continue
        doc = sources[c.source]
        if c.line > len(doc.lines):
            problems.append(Problem(reg, c.line_of("line"), c.id, f"line {c.line} is past the end of {doc.path.name} "
                                    f"({len(doc.lines)} lines)"))
        elif doc.find_quote(c.quote, c.line) is None:
            near = doc.lines[c.line - 1].strip()[:60]
            problems.append(Problem(reg, c.line_of("quote"), c.id,
                                    f"quote {c.quote!r} not found within 3 lines of {c.source}:{c.line} "
                                    f"(that line reads {near!r})"))
        if c.snippet and not 1 <= c.snippet.start <= c.snippet.end <= len(doc.lines):
            problems.append(Problem(reg, c.line_of("snippet"), c.id,
                                    f"snippet range {c.snippet.start}-{c.snippet.end} is outside {doc.path.name}"))
    return problems


def _check_links(reg: str, claims: list[Claim], ids: dict[str, Claim], known: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    for c in claims:
        links = [("uses", u) for u in c.uses] + [("contradicts", x) for x in c.contradicts]
        links += [("same_as", c.same_as)] if c.same_as else []
        links += [("snippet", r) for r in (c.snippet.requires if c.snippet else ())]
        for name, target in links:
            if target not in known:
                problems.append(Problem(reg, c.line_of(name), c.id, f"{name} names unknown claim id '{target}'"))
            elif target == c.id:
                problems.append(Problem(reg, c.line_of(name), c.id, f"{name} names the claim itself"))
    # cycles in `uses`: depth-first search with colours
    state: dict[str, int] = {}
    reported: set[frozenset] = set()

    def visit(cid: str, path: list[str]) -> None:
        state[cid] = 1
        for nxt in ids[cid].uses:
            if nxt not in ids:
                continue
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    problems.append(Problem(reg, ids[cid].line_of("uses"), cid,
                                            "uses forms a cycle: " + " -> ".join(cycle)))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[cid] = 2

    for cid in ids:
        if cid not in state:
            visit(cid, [cid])
    return problems


OWED_CONTROLS = "docs/corrections-without-control.txt"


def owed_controls(root: Path) -> dict[str, int]:
    """The corrections still owed a control of their own (``OWED_CONTROLS``): id -> line; none when absent."""
    path = root / OWED_CONTROLS
    if not path.exists():
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    return {line.strip(): i for i, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")}


def _check_evidence(root: Path, reg: str, claims: list[Claim], ids: dict[str, Claim], known: set[str],
                    tests: dict[str, TestFunction]) -> list[Problem]:
    problems: list[Problem] = []
    owed, owed_control = owed_controls(root), set()
    benches = benchmarks(root)
    for t in tests.values():
        if not t.claims and not t.per_claim:
            problems.append(Problem(t.file, t.line, None,
                                    f"{t.nodeid} is tagged with no claim (add @pytest.mark.claim(...))"))
        for cid in t.claims:
            if cid not in known:
                problems.append(Problem(t.file, t.line, cid, f"{t.nodeid} is tagged with unknown claim id '{cid}'"))
            elif cid in ids and t.nodeid not in ids[cid].evidence:
                problems.append(Problem(t.file, t.line, cid,
                                        f"{t.nodeid} is tagged with '{cid}' but that claim's evidence does not name it"))
    for c in claims:
        named_tests = []
        for ev in c.evidence:
            if ev.startswith("benchmarks/"):
                if ev not in benches:
                    problems.append(Problem(reg, c.line_of("evidence"), c.id, f"evidence names unknown benchmark '{ev}'"))
                continue
            test = tests.get(ev.split("[")[0])
            if test is None:
                problems.append(Problem(reg, c.line_of("evidence"), c.id, f"evidence names unknown test '{ev}'"))
            elif test.per_claim:
                if ev != f"{test.nodeid}[{c.id}]":
                    problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                            f"'{test.nodeid}' runs one case per claim: name it as '{test.nodeid}[{c.id}]'"))
                else:
                    named_tests.append(test)
            elif c.id not in test.claims:
                problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                        f"evidence names '{ev}', which is not tagged with this claim"))
            else:
                named_tests.append(test)
        if c.same_as and c.same_as in ids and not c.evidence:
            # a repeat is decided by the claim it repeats, not tested twice
            target = ids[c.same_as]
            if c.verdict not in ("open", target.verdict):
                problems.append(Problem(reg, c.line_of("verdict"), c.id,
                                        f"verdict '{c.verdict}' differs from '{target.verdict}' of the claim it "
                                        f"repeats ({c.same_as}); give it its own evidence or align the verdicts"))
            continue
        if c.verdict in DECIDED and not c.evidence:
            problems.append(Problem(reg, c.line_of("verdict"), c.id, f"verdict '{c.verdict}' has no evidence"))
            continue
        refs = [t for t in named_tests if t.refutation]
        props = [t for t in named_tests if not t.refutation and not t.control and not t.comparator]
        if c.verdict == "holds" and refs:
            problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                    f"verdict 'holds' but {refs[0].nodeid} is a refutation"))
        if c.verdict == "holds" and named_tests and not props:
            problems.append(Problem(reg, c.line_of("evidence"), c.id, "verdict 'holds' needs a property test"))
        if c.verdict in ("fails", "partly") and named_tests and not refs:
            problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                    f"verdict '{c.verdict}' needs a refutation (@refutes) among its evidence"))
        if c.verdict == "partly" and named_tests and not props:
            problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                    "verdict 'partly' needs a property test of its correction"))
        # a correction read from a record (the generic record check) is proved by the record it cites, compared
        # field by field: a comparator, whose own checks reject wrong fields, not a property owing a control
        computed = [t for t in props if not t.nodeid.startswith(GENERIC_RECORD_TESTS)]
        if c.verdict in ("fails", "partly") and computed and not any(c.id in t.control_models for t in named_tests):
            owed_control.add(c.id)
            if c.id not in owed:
                problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                        f"the correction of this '{c.verdict}' claim is proved by {computed[0].nodeid} "
                                        "with no control of its own: add a negative control that models the claim's "
                                        "own falsity (control(..., models=...)) to the test that proves the correction"))
        if c.verdict == "fails" and named_tests and not props and not c.cites and not c.witness:
            # a refutation shows the claim false; what the correction says instead needs proving too
            problems.append(Problem(reg, c.line_of("correction"), c.id,
                                    "verdict 'fails' needs evidence that proves its correction: a property test (not a "
                                    "refutation or a control), a record it cites, or a witness of the documents"))
    for cid, line in owed.items():
        if cid not in owed_control:
            why = ("is not a claim of the registry" if cid not in ids else "has a control of its own now, or is not a "
                   "correction proved by a property")
            problems.append(Problem(OWED_CONTROLS, line, cid, f"listed as owed a control, but {why}: remove the line"))
    return problems




def _check_records(root: Path, reg: str, claims: list[Claim], tests: dict[str, TestFunction],
                   references: tuple[str, list | None, list[Problem], set[str]]) -> list[Problem]:
    """The references' own problems and the claims' citations, attributions, witnesses and grades;
    ``references`` is what :func:`_parse` read of the references file."""
    name, refs_list, problems, malformed = references
    problems = list(problems)
    if refs_list is None:
        return problems
    refs = {r.key: r for r in refs_list}
    sources = load_sources(root)
    for t in tests.values():  # a registry-parametrized test runs exactly for the claims that name it
        if not t.per_claim:
            continue
        for c in claims:
            runs, named = selected(c, dict(t.selects)), f"{t.nodeid}[{c.id}]" in c.evidence
            if runs and not named:
                problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                        f"{t.nodeid} runs for this claim ({', '.join(f'{k}={v!r}' for k, v in t.selects)}) "
                                        f"but its evidence does not name {t.nodeid}[{c.id}]"))
            elif named and not runs:
                problems.append(Problem(reg, c.line_of("evidence"), c.id,
                                        f"evidence names {t.nodeid}[{c.id}], which does not run for this claim "
                                        f"(it selects {', '.join(f'{k}={v!r}' for k, v in t.selects)})"))
    for c in claims:
        for key in c.cites:
            if key not in refs and key not in malformed:
                problems.append(Problem(reg, c.line_of("cites"), c.id, f"cites unknown reference '{key}' (not in {name})"))
        # a citation claim cites its record; only one left unverifiable because no record of the
        # work could be found may cite none (its reason says what was searched)
        if c.kind == "citation" and not c.cites and not c.same_as and c.verdict != "unverifiable":
            problems.append(Problem(reg, c.line_of("kind"), c.id,
                                    f"a citation claim must cite a record of the work (cites: [key] of {name})"))
        if c.attribution:
            ref = c.attribution["ref"]
            if ref not in c.cites:
                problems.append(Problem(reg, c.line_of("attribution"), c.id, f"attribution ref '{ref}' is not in cites"))
            elif ref in refs:
                try:
                    compare(c.attribution, refs[ref])
                except CannotCompare as exc:
                    problems.append(Problem(reg, c.line_of("attribution"), c.id, str(exc)))
            if c.source in sources:
                problems += [Problem(reg, c.line_of("attribution"), c.id, p)
                             for p in _unanchored(c.attribution, sources[c.source], c.line)]
        for w in c.witness:
            if w.source not in sources:
                problems.append(Problem(reg, c.line_of("witness"), c.id, f"witness names unknown source '{w.source}'"))
            elif sources[w.source].find_quote(w.quote, w.line) is None:
                problems.append(Problem(reg, c.line_of("witness"), c.id,
                                        f"witness quote {w.quote!r} not found within 3 lines of {w.source}:{w.line}"))
        problems += _check_grade(reg, c, tests)
        if c.verdict in ("fails", "partly") and not c.finding:
            problems.append(Problem(reg, c.line_of("verdict"), c.id,
                                    f"verdict '{c.verdict}' needs a finding (kind and summary: how wrong the claim is)"))
    problems += _check_citation_conflicts(reg, claims, refs)
    return problems


def _unanchored(attribution: dict, document, line: int) -> list[str]:
    """What an attribution states that the document does not: each stated surname (whole words), the year, the
    venue and the title must occur in the claim's section, from its heading down to two lines past the claim's
    line (where the sentence that names the work often sits a few lines above the claim, as in "Theorem 7.1
    (Chen et al. 2025)"). The comparison with the record is only as good as this reading of the document."""
    start = max([h.line for h in document.headings if h.line <= line] or [1])
    text = "\n".join(document.lines[start - 1:line + 2])
    words, folded = set(name_tokens(text)), fold(text)
    where = f"{document.key}:{start}-{min(line + 2, len(document.lines))}"
    out = [f"attribution author {name!r} does not occur in {where} (the claim's section)"
           for name in attribution.get("authors") or [] if not set(name_tokens(name)) <= words]
    if "year" in attribution and not re.search(rf"(?<!\d){attribution['year']}(?!\d)", text):
        out.append(f"attribution year {attribution['year']} does not occur in {where}")
    for field in ("venue", "title"):
        if field in attribution and fold(str(attribution[field])) not in folded:
            out.append(f"attribution {field} {attribution[field]!r} does not occur in {where}")
    return out


def _check_grade(reg: str, c: Claim, tests: dict[str, TestFunction]) -> list[Problem]:
    if c.verdict not in DECIDED or (c.same_as and not c.evidence):
        return []
    if c.grade is None:
        return [Problem(reg, c.line_of("verdict"), c.id,
                        "a decided verdict needs a grade (proved, tested, measured, recorded or internal)")]
    named = [tests.get(ev.split("[")[0]) for ev in c.evidence]
    if c.grade == "tested" and not any(t is not None and t.generated for t in named):
        return [Problem(reg, c.line_of("grade"), c.id,
                        "grade 'tested' needs a property over generated examples (@given) among the evidence")]
    if c.grade == "recorded" and not (c.attribution or any(ev.startswith(GENERIC_RECORD_TESTS) for ev in c.evidence)):
        return [Problem(reg, c.line_of("grade"), c.id, "grade 'recorded' needs an attribution checked against its record")]
    if c.grade == "internal" and not c.witness:
        return [Problem(reg, c.line_of("grade"), c.id, "grade 'internal' needs a witness (lines of the documents)")]
    return []


def _check_citation_conflicts(reg: str, claims: list[Claim], refs: dict) -> list[Problem]:
    """Two claims that say different things of the same work, not both borne out by its record (a
    work's arXiv year and its venue year are both right), must be linked (``contradicts``)."""
    problems: list[Problem] = []
    by_ref: dict[str, list[Claim]] = {}
    for c in claims:
        if c.attribution:
            by_ref.setdefault(c.attribution["ref"], []).append(c)
    for ref, cs in by_ref.items():
        for i, a in enumerate(cs):
            for b in cs[i + 1:]:
                for f in ("authors", "year", "venue", "title"):
                    if f in a.attribution and f in b.attribution and \
                            _said(a.attribution, f) != _said(b.attribution, f) and \
                            not (_right(a, f, refs.get(ref)) and _right(b, f, refs.get(ref))) and \
                            b.id not in a.contradicts and a.id not in b.contradicts:
                        problems.append(Problem(reg, b.line_of("attribution"), b.id,
                                                f"{f} of '{ref}' is {b.attribution[f]!r} here but {a.attribution[f]!r} in "
                                                f"{a.id}: link the two with contradicts"))
    return problems


def _right(c: Claim, name: str, record) -> bool:
    """Whether the record bears out what the claim's attribution says of one field."""
    if record is None:
        return False
    try:
        return all(k.match for k in compare({"ref": record.key, name: c.attribution[name],
                                              **({"et_al": True} if name == "authors" else {})}, record))
    except CannotCompare:
        return False


def _said(attribution: dict, name: str) -> str:
    """What an attribution says of a field, folded; of the authors, the first one (lists differ in length)."""
    value = attribution[name]
    return fold(value[0] if name == "authors" else str(value))
