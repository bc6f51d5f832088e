"""Find evidence without importing it: property tests, their claim tags, and asv benchmarks.

Reading the files' syntax trees keeps ``claims check`` fast (no torch import) and lets it
report problems with the test file and line.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TestFunction:
    nodeid: str  # properties/test_x.py::test_name or ::TestClass::test_name
    file: str
    line: int
    claims: tuple[str, ...]
    refutation: bool
    # parametrized from the registry (``@pytest.mark.claims_from_registry``): one case per claim,
    # named in evidence as ``nodeid[<claim id>]``; ``selects`` holds the marker's field filters
    per_claim: bool = False
    selects: tuple[tuple[str, object], ...] = ()
    # draws generated examples (``@given``), as opposed to exact or hand-built checks
    generated: bool = False
    # a negative control as a whole (``@control(...)``), or a test with control parameters
    control: bool = False
    has_controls: bool = False
    # a check of a comparator (``@comparator_check(...)``): machinery, not evidence about the claim
    comparator: bool = False
    # the claims whose falsity its controls model (``control(..., models=...)``; a control that names none models
    # the test's claim when it has one): what ``claims check`` asks of a correction's evidence
    control_models: tuple[str, ...] = ()


def _call_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr if not isinstance(node.value, ast.Attribute) else f"{node.value.attr}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _claim_args(node: ast.expr) -> list[str] | None:
    """The ids of a ``pytest.mark.claim("a", "b")`` expression, or None if it is not one."""
    if isinstance(node, ast.Call) and _call_name(node) in ("mark.claim", "claim"):
        return [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return None


def _literal_models(node: ast.expr | None, names: dict[str, ast.expr] | None = None) -> list[str] | None:
    """A literal ``models`` value (or a module constant holding one) as a list of ids (None for ``None`` or no
    value; [] when it is not literal)."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and names and node.id in names:
        node = names[node.id]
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return []
    if value is None:
        return None
    return [value] if isinstance(value, str) else [m for m in value if isinstance(m, str)]


def _control_models(node: ast.Call, factories: dict[str, ast.FunctionDef],
                    names: dict[str, ast.expr] | None = None) -> list[str] | None:
    """The ``models`` of a ``control(reason, models=...)`` call, or of a call to a module function that makes one
    (``mutant(old, new, why, models=...)``, its ``models`` passed through): None when it names none."""
    models = next((k.value for k in node.keywords if k.arg == "models"), None)
    factory = factories.get(_call_name(node))
    if factory is None:
        return _literal_models(models, names)
    inner = next(s for s in ast.walk(factory) if isinstance(s, ast.Call) and _call_name(s) in CONTROL_CALLS)
    passed = next((k.value for k in inner.keywords if k.arg == "models"), None)
    if not isinstance(passed, ast.Name):
        return _literal_models(passed, names)
    params = [a.arg for a in factory.args.args]
    if passed.id not in params:
        return []
    at = params.index(passed.id)
    defaults = dict(zip(params[len(params) - len(factory.args.defaults):], factory.args.defaults))
    given = models if models is not None else node.args[at] if at < len(node.args) else defaults.get(passed.id)
    return _literal_models(given, names)


CONTROL_CALLS = ("control", "mark.control")


def _control_factories(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Module functions that return a control mark or parameter (their body calls ``control``)."""
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)
            and any(isinstance(s, ast.Call) and _call_name(s) in CONTROL_CALLS for s in ast.walk(f))}


def _module_claims(tree: ast.Module) -> list[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            marks = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            return [cid for m in marks for cid in (_claim_args(m) or [])]
    return []


def _function(node: ast.FunctionDef, nodeid: str, file: str, inherited: list[str],
              names: dict[str, ast.expr], factories: dict[str, ast.FunctionDef] | None = None) -> TestFunction:
    claims = list(inherited)
    refutation = per_claim = generated = control = has_controls = comparator = False
    selects: tuple[tuple[str, object], ...] = ()
    modelled: list[str | None] = []  # a control's models, None for one that names none
    for deco in node.decorator_list:
        parts = [deco] + [names[n.id] for n in ast.walk(deco) if isinstance(n, ast.Name) and n.id in names]
        for sub in (s for p in parts for s in ast.walk(p)):
            if isinstance(sub, ast.Call) and (_call_name(sub) in CONTROL_CALLS or _call_name(sub) in (factories or {})):
                has_controls = has_controls or _call_name(sub) not in CONTROL_CALLS
                models = _control_models(sub, factories or {}, names)
                modelled.extend([None] if models is None else models)
        if _call_name(deco) in ("control", "mark.control"):
            control = True
        elif _call_name(deco) in ("comparator_check", "mark.comparator"):
            comparator = True
        elif any(isinstance(s, ast.Call) and _call_name(s) in ("control", "mark.control") for s in ast.walk(deco)):
            has_controls = True
        # claim marks on the test itself, or on its parameters (pytest.param(..., marks=mark.claim(id))),
        # also when the parameters are a module-level list named in the decorator
        parts = [deco] + [names[n.id] for n in ast.walk(deco) if isinstance(n, ast.Name) and n.id in names]
        for sub in (s for p in parts for s in ast.walk(p)):
            ids = _claim_args(sub)
            if ids is not None:
                claims.extend(i for i in ids if i not in claims)
        if _call_name(deco) == "refutes":
            refutation = True
        if _call_name(deco) in ("mark.claims_from_registry", "claims_from_registry"):
            per_claim = True
            selects = tuple((k.arg, ast.literal_eval(k.value)) for k in deco.keywords)
        if _call_name(deco) == "given":
            generated = True
    # a control that names no claim is credited, case by case, to the one claim its test case is evidence for: the
    # test's own when it has one, else each claim a parameter tags its case with (one claim a case)
    direct = list(inherited) + [i for d in node.decorator_list for i in (_claim_args(d) or []) if i not in inherited]
    unnamed = (direct if len(direct) == 1 else [i for i in claims if i not in direct] if not direct else [])
    own = [m for m in modelled if m is not None] + (unnamed if None in modelled else [])
    return TestFunction(nodeid, file, node.lineno, tuple(claims), refutation, per_claim, selects, generated, control,
                        has_controls, comparator, tuple(dict.fromkeys(own)))


def property_tests(root: Path, folder: str = "properties") -> list[TestFunction]:
    """Every test function under ``root/folder`` (files ``test_*.py``), with its claim tags."""
    found: list[TestFunction] = []
    paths = sorted((root / folder).rglob("test_*.py"))
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), filename=p.relative_to(root).as_posix()) for p in paths}
    # a control factory of one test file (``mutant`` of test_snippets_called.py) is imported by others
    factories = {n: f for tree in trees.values() for n, f in _control_factories(tree).items()}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        tree = trees[path]
        module = _module_claims(tree)
        names = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                 for t in stmt.targets if isinstance(t, ast.Name)}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
                found.append(_function(stmt, f"{rel}::{stmt.name}", rel, module, names, factories))
            elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
                inherited = module + [i for d in stmt.decorator_list for i in (_claim_args(d) or [])]
                for sub in stmt.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                        found.append(_function(sub, f"{rel}::{stmt.name}::{sub.name}", rel, inherited, names,
                                               factories))
    return found


EVIDENCE_FOLDERS = ("properties", "experiments")  # the property suite, then the seeded experiments


def evidence_tests(root: Path) -> list[TestFunction]:
    """The test functions of every evidence folder that exists (``properties/``, ``experiments/``)."""
    return [t for folder in EVIDENCE_FOLDERS if (root / folder).is_dir() for t in property_tests(root, folder)]


BENCH_PREFIXES = ("time_", "timeraw_", "mem_", "peakmem_", "track_")


def benchmarks(root: Path, folder: str = "benchmarks") -> set[str]:
    """Every asv benchmark under ``root/folder`` as ``benchmarks/bench_x.py::Class.method``."""
    names: set[str] = set()
    base = root / folder
    if not base.is_dir():
        return names
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith(BENCH_PREFIXES):
                names.add(f"{rel}::{stmt.name}")
            elif isinstance(stmt, ast.ClassDef):
                for sub in stmt.body:
                    if isinstance(sub, ast.FunctionDef) and sub.name.startswith(BENCH_PREFIXES):
                        names.add(f"{rel}::{stmt.name}.{sub.name}")
    return names
