"""The mutant set of ``tools/mutants.py`` stays applicable: every snippet it edits is still in ``impl/``.

The mutants themselves run with ``make mutants`` (about a minute each), not here.
"""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("tools_mutants", ROOT / "tools" / "mutants.py")
mutants = sys.modules["tools_mutants"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(mutants)
ALL = mutants.MUTANTS + [e.mutant for e in mutants.EQUIVALENT]


@pytest.mark.parametrize("mutant", ALL, ids=[m.name for m in ALL])
def test_every_mutant_edits_one_snippet_that_is_still_in_the_source(mutant, tmp_path):
    (tmp_path / mutant.file).parent.mkdir(parents=True)
    original = (ROOT / mutant.file).read_text(encoding="utf-8")
    (tmp_path / mutant.file).write_text(original, encoding="utf-8")
    mutants.apply(mutant, tmp_path)
    mutated = (tmp_path / mutant.file).read_text(encoding="utf-8")
    assert mutated != original and mutant.old != mutant.new
    compile(mutated, mutant.file, "exec")  # a mutant is a program, not a syntax error


def test_mutant_names_are_unique_and_equivalents_say_why():
    assert len({m.name for m in ALL}) == len(ALL)
    assert all(len(e.reason) > 20 for e in mutants.EQUIVALENT)


def test_a_snippet_that_moved_is_reported_stale_not_survived(tmp_path):
    m = mutants.Mutant("gone", "impl/x.py", "no such code", "other code", "a moved snippet")
    (tmp_path / "impl").mkdir()
    (tmp_path / "impl" / "x.py").write_text("pass\n")
    with pytest.raises(LookupError, match="occurs 0 times"):
        mutants.apply(m, tmp_path)


def test_a_repeated_snippet_is_edited_at_the_named_occurrence_only(tmp_path):
    (tmp_path / "impl").mkdir()
    (tmp_path / "impl" / "x.py").write_text("a = 1\nb = 1\na = 1\n")
    mutants.apply(mutants.Mutant("second", "impl/x.py", "a = 1", "a = 2", "the second one", nth=2), tmp_path)
    assert (tmp_path / "impl" / "x.py").read_text() == "a = 1\nb = 1\na = 2\n"
    (tmp_path / "impl" / "x.py").write_text("a = 1\na = 1\n")
    with pytest.raises(LookupError, match="expected once"):
        mutants.apply(mutants.Mutant("ambiguous", "impl/x.py", "a = 1", "a = 3", "two of them"), tmp_path)
