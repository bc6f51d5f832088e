"""Run code printed in the documents, straight from ``sources/``, by line range.

The code is data under test: it is never copied into the code base. :func:`load_snippet` takes
lines ``start..end`` of a document, removes their common indentation, compiles them so that
tracebacks name the document's own line numbers, and executes them in a fresh namespace that
already holds what such snippets assume is imported::

    torch, numpy (as np and numpy), math, torch.nn as nn, torch.nn.functional as F

Snippets that use code from earlier snippets name those claims in ``snippet.requires``; they run
first, in the same namespace. The result records whether the code parsed, whether it ran, the
error (type, message, document line) and the namespace, which keeps every definition made before
an error, so that what a printed function computes can be tested even when a later line fails.
"""
from __future__ import annotations

import ast
import functools
import math
import signal
import textwrap
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from claimcheck.registry import Registry, load_registry
from claimcheck.sources import Sources, load_sources

DEFAULT_TIMEOUT_S = 30


@dataclass
class SnippetRun:
    source: str
    start: int
    end: int
    code: str
    parsed: bool = False
    ran: bool = False
    error_type: str | None = None
    error: str | None = None
    error_line: int | None = None  # line in the source document
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def defined(self) -> list[str]:
        """Names the snippet defined (functions, classes, variables), in order."""
        return [k for k in self.namespace if k not in _BASE_NAMES and not k.startswith("__")]

    def describe(self) -> str:
        where = f"{self.source}:{self.start}-{self.end}"
        if self.ran:
            return f"{where} ran; defined {', '.join(self.defined) or 'nothing'}"
        stage = "does not parse" if not self.parsed else "fails when run"
        return f"{where} {stage}: {self.error_type}: {self.error} (line {self.error_line})"


def base_namespace() -> dict[str, Any]:
    import numpy
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    return {"torch": torch, "np": numpy, "numpy": numpy, "math": math, "nn": nn, "F": F, "__name__": "snippet"}


_BASE_NAMES = frozenset(["torch", "np", "numpy", "math", "nn", "F", "__name__", "__builtins__"])


class SnippetTimeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise SnippetTimeout(f"did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def execute(run: SnippetRun, filename: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> SnippetRun:
    """Parse and execute ``run.code`` into ``run.namespace``, recording the outcome in ``run``."""
    try:
        tree = ast.parse(run.code, filename=filename)
    except SyntaxError as exc:
        run.error_type, run.error = "SyntaxError", exc.msg
        run.error_line = (exc.lineno or 1) + run.start - 1
        return run
    run.parsed = True
    ast.increment_lineno(tree, run.start - 1)  # tracebacks now count lines of the document
    try:
        with _time_limit(timeout_s):
            exec(compile(tree, filename, "exec"), run.namespace)
    except Exception as exc:  # the snippet's own failure is the data we record
        run.error_type, run.error = type(exc).__name__, str(exc)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        run.error_line = frames[-1].lineno if frames else None
        return run
    run.ran = True
    return run


def load_snippet(source: str, start: int, end: int, *, requires: tuple[SnippetRun, ...] = (),
                 bindings: dict[str, Any] | None = None, sources: Sources | None = None,
                 root: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> SnippetRun:
    """Execute lines ``start..end`` of document ``source`` after the snippets in ``requires``.

    ``requires`` are results of earlier runs; their namespaces are merged in order. ``bindings``
    supplies names the snippet uses but never defines (a test states them, e.g. to run the rest of
    a snippet past a line that fails as printed).
    """
    sources = sources or load_sources(root or project_root())
    doc = sources[source]
    code = textwrap.dedent(doc.line_range(start, end))
    namespace = base_namespace()
    for earlier in requires:
        namespace.update({k: v for k, v in earlier.namespace.items() if k not in _BASE_NAMES})
    namespace.update(bindings or {})
    run = SnippetRun(source, start, end, code, namespace=namespace)
    return execute(run, filename=f"sources/{doc.path.name}", timeout_s=timeout_s)


def run_snippet(claim_id: str, registry: Registry | None = None, root: Path | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> SnippetRun:
    """Execute the snippet of a registry claim (kind ``code-snippet``), its ``requires`` first."""
    root = root or project_root()
    cached_registry, sources = _project(root, (root / "claims.yaml").stat().st_mtime_ns)
    return _run(claim_id, registry or cached_registry, sources, timeout_s, ())


@functools.lru_cache(maxsize=4)
def _project(root: Path, registry_mtime: int) -> tuple[Registry, Sources]:
    """The registry and sources of ``root``, loaded once per version of claims.yaml."""
    return load_registry(root / "claims.yaml"), load_sources(root)


def _run(claim_id: str, registry: Registry, sources: Sources, timeout_s: float, chain: tuple[str, ...]) -> SnippetRun:
    if claim_id in chain:
        raise ValueError("snippet requires form a cycle: " + " -> ".join(chain + (claim_id,)))
    claim = registry.get(claim_id)
    if claim is None or claim.snippet is None:
        raise KeyError(f"{claim_id}: no such claim with a snippet range in {registry.path}")
    earlier = tuple(_run(r, registry, sources, timeout_s, chain + (claim_id,)) for r in claim.snippet.requires)
    return load_snippet(claim.source, claim.snippet.start, claim.snippet.end, requires=earlier,
                        sources=sources, timeout_s=timeout_s)


def project_root() -> Path:
    """The checkout this package runs from (claims.yaml beside sources/)."""
    here = Path(__file__).resolve().parent.parent
    for folder in [Path.cwd(), *Path.cwd().parents, here]:
        if (folder / "claims.yaml").exists() and (folder / "sources" / "sources.yaml").exists():
            return folder
    raise FileNotFoundError("cannot find the project root (claims.yaml beside sources/)")
