"""Fixtures for the suite's own tests: a miniature project (sources, registry, evidence)."""
import shutil
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent


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
  evidence:
    - properties/test_a.py::test_shift
"""

GOOD_TEST = """
import pytest

@pytest.mark.claim("softmax.shift")
def test_shift():
    assert True
"""
