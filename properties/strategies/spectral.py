"""Strategies for spectral claims (attention matrices, general and structured matrices) and the
documents' printed code as test input (:func:`printed_code`)."""
from __future__ import annotations

import functools

import numpy as np
import yaml
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from claimcheck.snippets import SnippetRun, load_snippet, project_root
from impl.softmax import stable_softmax


def _floats(bound: float) -> st.SearchStrategy[float]:
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False)


def real_matrices(min_side: int = 1, max_side: int = 8, bound: float = 10.0, square: bool = False
                  ) -> st.SearchStrategy[torch.Tensor]:
    """float64 matrices (m, n) with entries in [-bound, bound] (square when asked)."""
    if square:
        shape = st.integers(min_side, max_side).map(lambda n: (n, n))
    else:
        shape = st.tuples(st.integers(min_side, max_side), st.integers(min_side, max_side))
    return hnp.arrays(np.float64, shape, elements=_floats(bound)).map(torch.from_numpy)


def attention_matrices(min_n: int = 1, max_n: int = 10, bound: float = 8.0) -> st.SearchStrategy[torch.Tensor]:
    """Softmax outputs ``softmax(S)`` of square logit matrices S (n, n): strictly positive, row-stochastic."""
    return real_matrices(min_n, max_n, bound, square=True).map(stable_softmax)


def vectors(min_len: int = 1, max_len: int = 8, bound: float = 10.0) -> st.SearchStrategy[torch.Tensor]:
    """float64 vectors with entries in [-bound, bound]."""
    return hnp.arrays(np.float64, st.integers(min_len, max_len), elements=_floats(bound)).map(torch.from_numpy)


@st.composite
def low_rank_factors(draw, max_side: int = 8, bound: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B (d, r), A (r, k)) with 1 <= r <= min(d, k)."""
    d, k = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    r = draw(st.integers(1, min(d, k)))
    b = draw(hnp.arrays(np.float64, (d, r), elements=_floats(bound)))
    a = draw(hnp.arrays(np.float64, (r, k), elements=_floats(bound)))
    return torch.from_numpy(b), torch.from_numpy(a)


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**31 - 1)


def gaussian(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """float64 N(0, 1) tensor drawn from its own seeded generator."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@functools.lru_cache(maxsize=1)
def _snippet_ranges() -> dict[str, dict]:
    """claim id -> {source, snippet} for the code-snippet claims (a fast read of claims.yaml)."""
    root = project_root()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(root / "claims.yaml", encoding="utf-8") as fh:
        entries = yaml.load(fh, Loader=loader)
    return {e["id"]: {"source": e["source"], **e["snippet"]} for e in entries if e.get("snippet")}


@functools.lru_cache(maxsize=None)
def printed_code(claim_id: str) -> SnippetRun:
    """The document's code of a code-snippet claim, executed from sources/ (its ``requires`` first).

    Same execution as ``claimcheck.snippets.run_snippet``, cached per process; tests must not mutate the
    returned namespace (call :func:`fresh_code` for a private copy).
    """
    spec = _snippet_ranges()[claim_id]
    earlier = tuple(printed_code(r) for r in spec.get("requires", ()))
    return load_snippet(spec["source"], spec["start"], spec["end"], requires=earlier)


def fresh_code(claim_id: str, **extra) -> SnippetRun:
    """Execute the snippet again in a new namespace, with ``extra`` names defined before it runs."""
    spec = _snippet_ranges()[claim_id]
    earlier = tuple(printed_code(r) for r in spec.get("requires", ()))
    if extra:
        earlier = earlier + (SnippetRun("extra", 0, 0, "", ran=True, namespace=dict(extra)),)
    return load_snippet(spec["source"], spec["start"], spec["end"], requires=earlier)
