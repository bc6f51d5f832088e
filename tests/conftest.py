"""Fixtures for the suite's own tests.

* ``project``: a miniature project (sources, registry, evidence) to write registries and property
  files into;
* ``tiny_project``: a project with the real ``sources/``, a registry of a few claims covering every
  verdict, a ``uses`` chain through a refuted claim, saved results and asv results (for the
  report and the command line). Tests change any part of it through the returned ``Project``.
"""
import json
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
torch.set_num_threads(1)  # pytest-xdist runs one worker per core; more threads only oversubscribe


class MiniProject:
    """A throw-away copy of the project layout with a registry and property files of our choosing."""

    def __init__(self, root: Path):
        self.root = root
        shutil.copytree(ROOT / "sources", root / "sources")
        (root / "properties").mkdir()
        (root / "properties" / "__init__.py").write_text("")

    def registry(self, text: str) -> Path:
        path = self.root / "claims.yaml"
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    def test_file(self, name: str, text: str) -> Path:
        path = self.root / "properties" / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path


@pytest.fixture
def project(tmp_path: Path) -> MiniProject:
    return MiniProject(tmp_path)


# One claim that is sound on its own: foundations.txt line 85 reads the stable softmax formula.
GOOD_CLAIM = """
- id: softmax.shift
  source: foundations
  line: 85
  quote: 'e^{x_i-\\max (x)}'
  statement: softmax is invariant to subtracting the maximum.
  topic: softmax
  kind: identity
  verdict: holds
  grade: proved
  evidence:
    - properties/test_a.py::test_shift
"""

GOOD_TEST = """
import pytest

@pytest.mark.claim("softmax.shift")
def test_shift():
    assert True
"""


# --- the report's sample project -------------------------------------------------------------


CLAIMS = [
    {"id": "softmax.row-stochastic", "source": "foundations", "line": 50, "quote": "按行归一化",
     "statement": "Row-wise softmax gives a matrix whose entries are non-negative and whose rows sum to 1.",
     "topic": "softmax", "kind": "identity", "verdict": "holds",
     "evidence": ["properties/test_softmax.py::test_rows_sum_to_one"]},
    {"id": "spectral.eigenvalues-positive", "source": "spectral", "line": 35, "quote": "正实部",
     "statement": "Every eigenvalue of a softmax attention matrix has a non-negative real part.",
     "topic": "spectral", "kind": "inequality", "verdict": "fails",
     "correction": "Eigenvalues of a row-stochastic matrix lie in the unit disc; their real parts can be negative.",
     "uses": ["softmax.row-stochastic"],
     "evidence": ["properties/test_spectral.py::test_eigenvalues_have_nonnegative_real_part",
                  "properties/test_spectral.py::test_eigenvalues_lie_in_unit_disc"]},
    {"id": "spectral.trace-is-n", "source": "spectral", "line": 36, "quote": "和为 $n$",
     "statement": "The eigenvalues of an attention matrix sum to n.",
     "topic": "spectral", "kind": "identity", "verdict": "open", "uses": ["spectral.eigenvalues-positive"]},
    {"id": "spectral.gap-bound", "source": "spectral", "line": 52, "quote": "\\Delta (A)",
     "statement": "The spectral gap is 1 - lambda_2 and lies in [0, 2].",
     "topic": "spectral", "kind": "inequality", "verdict": "holds", "uses": ["spectral.trace-is-n"],
     "evidence": ["properties/test_spectral.py::test_gap_in_range"]},
    {"id": "flash-attention.exact", "source": "foundations", "line": 298, "quote": "FlashAttention数学等价性",
     "statement": "Tiled attention computes the same output as standard attention, up to rounding.",
     "topic": "flash-attention", "kind": "empirical", "verdict": "holds",
     "evidence": ["properties/test_flash.py::test_tiled_matches_reference",
                  "benchmarks/bench_attention.py::Attention.time_forward"]},
    {"id": "complexity.quadratic-time", "source": "foundations", "line": 67, "quote": "$O(n^2\\cdot d_k)$\t$O(n^2)$",
     "statement": "Standard attention takes O(n^2 d) time.",
     "topic": "complexity", "kind": "complexity", "verdict": "holds",
     "evidence": ["properties/test_complexity.py::test_flops_are_quadratic"]},
    {"id": "long-context.ppl-8k", "source": "foundations", "line": 748, "quote": "8K\t9.21\t6.12\t33.5%",
     "statement": "On Llama-2 7B at 8K tokens, perplexity is 9.21 with standard scaling and 6.12 with critical scaling.",
     "topic": "long-context", "kind": "citation", "verdict": "unverifiable",
     "reason": "Needs the Llama-2 7B weights and an evaluation corpus."},
]

MATRIX = [[0.0, 1.0], [1.0, 0.0]]  # a permutation matrix: row-stochastic, eigenvalues 1 and -1


def _test(nodeid, claims, kind="property", outcome="passed", **extra):
    base = {"nodeid": nodeid, "claims": claims, "kind": kind, "outcome": outcome, "message": None,
            "counterexample": None, "figures": [], "examples": None, "seconds": 0.01}
    base.update(extra)
    return base


def sample_results() -> dict:
    counterexample = {"message": "an eigenvalue has a negative real part", "values": {"A": MATRIX, "n": 2},
                      "hypothesis": "Falsifying example: test_eigenvalues_have_nonnegative_real_part(n=2)",
                      "how": "shrunk by Hypothesis", "reason": None}
    tests = [
        _test("properties/test_softmax.py::test_rows_sum_to_one", ["softmax.row-stochastic"], examples=50),
        _test("properties/test_spectral.py::test_eigenvalues_have_nonnegative_real_part",
              ["spectral.eigenvalues-positive"], kind="refutation", examples=12, counterexample=counterexample),
        _test("properties/test_spectral.py::test_eigenvalues_lie_in_unit_disc", ["spectral.eigenvalues-positive"],
              examples=50),
        _test("properties/test_flash.py::test_tiled_matches_reference[float32]", ["flash-attention.exact"], examples=50,
              figures=[{"name": "error_ratio[backend=tiled,dtype=float32,mask=none,out]", "value": [0.5, 0.8, 1.1, 0.9, 0.7, 0.6, 1.0, 0.95, 0.85, 0.75]},
                       {"name": "error_ratio[backend=sdpa-math,dtype=float32,mask=none,out]", "value": [1.0, 1.2, 0.7]},
                       {"name": "max_abs_error", "value": 3.2e-7}]),
        _test("properties/test_flash.py::test_tiled_matches_reference[float64]", ["flash-attention.exact"], examples=50),
        _test("properties/test_complexity.py::test_flops_are_quadratic", ["complexity.quadratic-time"],
              figures=[{"name": "series[flops,d=64]", "value": {"n": [128, 256, 512, 1024], "y": [2.1e6, 8.4e6, 3.4e7, 1.3e8]}},
                       {"name": "fit[flops,d=64]", "value": {"exponent": 2.0, "ci95": [1.98, 2.02]}}]),
    ]
    rows = [
        ("softmax.row-stochastic", "holds", "verified", "1 property held", None,
         ["properties/test_softmax.py::test_rows_sum_to_one"]),
        ("spectral.eigenvalues-positive", "fails", "refuted", "counterexample found; correction held (1 property)",
         counterexample, ["properties/test_spectral.py::test_eigenvalues_have_nonnegative_real_part",
                          "properties/test_spectral.py::test_eigenvalues_lie_in_unit_disc"]),
        ("spectral.trace-is-n", "open", "open", "recorded; not yet decided", None, []),
        ("spectral.gap-bound", "holds", "untested", "no evidence for this claim ran", None, []),
        ("flash-attention.exact", "holds", "verified", "2 properties held", None,
         ["properties/test_flash.py::test_tiled_matches_reference[float32]",
          "properties/test_flash.py::test_tiled_matches_reference[float64]"]),
        ("complexity.quadratic-time", "holds", "verified", "1 property held", None,
         ["properties/test_complexity.py::test_flops_are_quadratic"]),
        ("long-context.ppl-8k", "unverifiable", "unverifiable", "Needs the Llama-2 7B weights and an evaluation corpus.",
         None, []),
    ]
    return {
        "schema": 1, "meta": {"profile": "ci", "seconds": 1.5, "workers": 2},
        "claims": [{"id": i, "verdict": v, "status": s, "detail": d, "counterexample": cx, "evidence_run": ev}
                   for i, v, s, d, cx, ev in rows],
        "tests": tests,
    }


def sample_asv(folder: Path) -> None:
    """One machine, two commits of ``bench_attention.Attention.time_forward`` over (n, backend)."""
    (folder / "cpu-box").mkdir(parents=True)
    (folder / "benchmarks.json").write_text(json.dumps({
        "bench_attention.Attention.time_forward": {"name": "bench_attention.Attention.time_forward",
                                                   "param_names": ["n", "backend"],
                                                   "params": [["128", "256", "512"], ["'tiled'", "'reference'"]],
                                                   "type": "time", "unit": "seconds"},
        "version": 2}))
    (folder / "cpu-box" / "machine.json").write_text(json.dumps({"machine": "cpu-box", "cpu": "test", "version": 1}))
    columns = ["result", "params", "version", "started_at", "duration"]
    for commit, date, scale in (("aaaa1111", 1_700_000_000_000, 1.0), ("bbbb2222", 1_700_100_000_000, 0.9)):
        values = [scale * t for t in (1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3)] + [None]
        (folder / "cpu-box" / f"{commit}-virtualenv-py3.11.json").write_text(json.dumps({
            "commit_hash": commit, "env_name": "virtualenv-py3.11", "date": date, "params": {"machine": "cpu-box"},
            "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": columns,
            "results": {"bench_attention.Attention.time_forward": [values, [["128", "256", "512"], ["'tiled'", "'reference'"]],
                                                                    "v", date, 1.0]},
            "durations": {}, "version": 2}))


@dataclass
class Project:
    root: Path

    @property
    def results_path(self) -> Path:
        return self.root / "results" / "claims-results.json"

    def write_claims(self, claims: list[dict]) -> None:
        text = yaml.safe_dump(claims, allow_unicode=True, sort_keys=False)
        (self.root / "claims.yaml").write_text(text, encoding="utf-8")

    def write_results(self, results: dict) -> None:
        self.results_path.parent.mkdir(parents=True, exist_ok=True)
        self.results_path.write_text(json.dumps(results, ensure_ascii=False), encoding="utf-8")

    def write_asv(self) -> None:
        sample_asv(self.root / ".asv" / "results")


@pytest.fixture
def tiny_project(tmp_path: Path) -> Project:
    """A project with the real sources, the sample registry, its results and asv results."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "sources", root / "sources")
    project = Project(root)
    project.write_claims(CLAIMS)
    project.write_results(sample_results())
    project.write_asv()
    return project
