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


def _module_claims(tree: ast.Module) -> list[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            marks = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            return [cid for m in marks for cid in (_claim_args(m) or [])]
    return []


def _function(node: ast.FunctionDef, nodeid: str, file: str, inherited: list[str],
              names: dict[str, ast.expr]) -> TestFunction:
    claims = list(inherited)
    refutation = per_claim = generated = control = has_controls = comparator = False
    selects: tuple[tuple[str, object], ...] = ()
    for deco in node.decorator_list:
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
    return TestFunction(nodeid, file, node.lineno, tuple(claims), refutation, per_claim, selects, generated, control,
                        has_controls, comparator)


def property_tests(root: Path, folder: str = "properties") -> list[TestFunction]:
    """Every test function under ``root/folder`` (files ``test_*.py``), with its claim tags."""
    found: list[TestFunction] = []
    for path in sorted((root / folder).rglob("test_*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        module = _module_claims(tree)
        names = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                 for t in stmt.targets if isinstance(t, ast.Name)}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
                found.append(_function(stmt, f"{rel}::{stmt.name}", rel, module, names))
            elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
                inherited = module + [i for d in stmt.decorator_list for i in (_claim_args(d) or [])]
                for sub in stmt.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                        found.append(_function(sub, f"{rel}::{stmt.name}::{sub.name}", rel, inherited, names))
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
