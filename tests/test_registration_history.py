"""Registration that history proves: every experiment's prediction is committed before its result.

For each ``experiment`` of ``claims.yaml`` (and each earlier one a claim keeps as ``superseded``), the git
history gives the commit that first registered it (the first commit of ``claims.yaml`` adding
``name: <experiment>``) and the commit where its result first
landed: the first stored artefact ``experiments/artefacts/<name>-<key>.json`` (an uncommitted one counts as
a result landing now), or the first commit of ``claims.yaml`` writing its outcome (``Experiment <name>``,
or ``<metric> = <number>``), whichever is earlier. The history shows the registration first only when its
commit is a strict ancestor of the result's. The registry's ``registered`` must say what the history shows:
``before-result`` only when it shows it (or when there is no result yet), ``after-result`` otherwise; and an experiment registered before its
result carries, in its registration commit, the prediction and any ``uninformative`` reason it has now.

Without the history (a shallow clone, no git) the test fails and says so: it never skips.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from claimcheck.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
ARTEFACTS = "experiments/artefacts"
REGISTRY = "claims.yaml"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")
    return done.stdout


def history_problem(repo: Path) -> str | None:
    """Why the history cannot prove an order of commits (None: it can)."""
    try:
        if git(repo, "rev-parse", "--is-shallow-repository").strip() == "true":
            return (f"{repo} is a shallow clone: registration order cannot be proved from a truncated history; "
                    "fetch the full history (git fetch --unshallow)")
    except (RuntimeError, OSError) as exc:
        return f"no git history at {repo}: {exc}"
    return None


@dataclass(frozen=True)
class Reading:
    """What the history shows of one experiment: its registration commit, its first result (commit, or
    ``"worktree"`` for an artefact not yet committed, or None) and the reading ``before-result`` /
    ``after-result``."""

    registration: str | None
    result: str | None
    how: str
    order: str


def _first(repo: Path, *args: str) -> str | None:
    lines = git(repo, "log", "--reverse", "--format=%H", *args).split()
    return lines[0] if lines else None


def _ancestor(repo: Path, older: str, newer: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=repo).returncode == 0


def _earliest(repo: Path, commits: list[str]) -> str | None:
    """The commit of ``commits`` that is an ancestor of all the others (the first in history)."""
    commits = [c for c in commits if c]
    for c in commits:
        if all(c == other or _ancestor(repo, c, other) for other in commits):
            return c
    return commits[0] if commits else None


def first_artefact(repo: Path, name: str) -> str | None:
    """The first commit adding an artefact of experiment ``name`` itself (not of its controls)."""
    own = re.compile(rf"(^|/){re.escape(name)}-[0-9a-f]{{16}}\.json$")
    commit = None
    for line in git(repo, "log", "--reverse", "--diff-filter=A", "--format=C %H", "--name-only", "--",
                    ARTEFACTS).splitlines():
        if line.startswith("C "):
            commit = line[2:]
        elif own.search(line.strip()):
            return commit
    return None


def read_history(repo: Path, name: str, metric: str) -> Reading:
    """The history's reading of experiment ``name`` (whose metric is ``metric``)."""
    registration = _first(repo, "-S", f"name: {name}", "--", REGISTRY)
    artefact = first_artefact(repo, name)
    outcome = _first(repo, "-E", "-G", rf"[Ee]xperiment {re.escape(name)}([^a-z0-9-]|$)|"
                                        rf"(^|[^a-z0-9_]){re.escape(metric)} = -?[0-9]", "--", REGISTRY)
    result, how = _earliest(repo, [artefact, outcome]), "artefact or outcome text"
    if result is None and any((repo / ARTEFACTS).glob(f"{name}-*.json")):
        result, how = "worktree", "an artefact not yet committed"
    if result is None:  # no result yet: nothing predates the registration
        first = True
    elif registration is None:
        first = False
    else:  # a result not yet committed follows any committed registration
        first = result == "worktree" or (registration != result and _ancestor(repo, registration, result))
    return Reading(registration, result, how, "before-result" if first else "after-result")


def registered_text_at(repo: Path, commit: str, text: str) -> bool:
    """Whether ``text`` (whitespace-normalised) is in ``claims.yaml`` as of ``commit``."""
    at = " ".join(git(repo, "show", f"{commit}:{REGISTRY}").split())
    return " ".join(text.split()) in at


@dataclass(frozen=True)
class Registered:
    """One registered experiment of a claim: its ``experiment`` or one it ``superseded``."""

    id: str
    experiment: object


def _experiments():
    return [Registered(c.id, e) for c in load_registry(ROOT / REGISTRY).claims
            for e in (c.experiment, *c.superseded) if e is not None]


@pytest.fixture(scope="module")
def history():
    problem = history_problem(ROOT)
    if problem:
        pytest.fail(problem)
    return ROOT


@pytest.mark.parametrize("claim", _experiments(), ids=lambda c: c.experiment.name)
def test_the_registration_label_says_what_the_history_shows(history, claim):
    e = claim.experiment
    reading = read_history(history, e.name, e.metric)
    assert e.registered == reading.order, (
        f"{claim.id}: experiment {e.name} is labelled registered {e.registered}, but the history shows "
        f"{reading.order}: registration {reading.registration or 'not committed'}, first result "
        f"{reading.result or 'none'} ({reading.how})")
    if e.registered == "before-result":
        assert reading.registration is not None, \
            f"{e.name}: labelled before-result, but its registration is not committed yet: commit it on its own first"
        assert registered_text_at(history, reading.registration, e.prediction), \
            f"{e.name}: the prediction was changed after its registration commit {reading.registration}"
        assert e.uninformative is None or registered_text_at(history, reading.registration, e.uninformative), \
            f"{e.name}: 'uninformative' was not set at registration ({reading.registration})"


def test_the_fourteen_experiments_of_the_first_pass_are_labelled_registered_after_the_result():
    after = sorted(c.experiment.name for c in _experiments() if c.experiment.registered == "after-result")
    assert len(after) >= 14, after


# --- the reading itself, on a history made for it ----------------------------------------------------------

def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    _commit(tmp_path, {REGISTRY: "- id: a\n"}, "start")
    return tmp_path


ARTEFACT = f"{ARTEFACTS}/toy-0123456789abcdef.json"
REGISTERED = "- id: a\n  experiment:\n    name: toy\n    metric: gain\n"


def test_a_registration_committed_before_its_artefact_reads_before_result(repo):
    registration = _commit(repo, {REGISTRY: REGISTERED}, "register")
    result = _commit(repo, {ARTEFACT: "{}"}, "result")
    assert read_history(repo, "toy", "gain") == Reading(registration, result, "artefact or outcome text",
                                                        "before-result")


def test_a_registration_in_the_commit_of_its_outcome_reads_after_result(repo):
    _commit(repo, {REGISTRY: REGISTERED + "  notes: measured gain = 0.3\n"}, "register and result")
    assert read_history(repo, "toy", "gain").order == "after-result"


def test_an_outcome_written_before_the_registration_reads_after_result(repo):
    _commit(repo, {REGISTRY: "- id: a\n  notes: Experiment toy gave gain = 0.3\n"}, "result")
    _commit(repo, {REGISTRY: REGISTERED + "  notes: Experiment toy gave gain = 0.3\n"}, "register")
    assert read_history(repo, "toy", "gain").order == "after-result"


def test_an_artefact_of_a_control_is_not_the_experiment_result(repo):
    _commit(repo, {f"{ARTEFACTS}/toy-broken-0123456789abcdef.json": "{}"}, "a control's result")
    _commit(repo, {REGISTRY: REGISTERED}, "register")
    assert read_history(repo, "toy", "gain").order == "before-result"


def test_an_uncommitted_artefact_of_an_uncommitted_registration_reads_after_result(repo):
    (repo / ARTEFACTS).mkdir(parents=True)
    (repo / ARTEFACT).write_text("{}")
    assert read_history(repo, "toy", "gain") == Reading(None, "worktree", "an artefact not yet committed",
                                                        "after-result")


def test_a_shallow_clone_is_reported_not_skipped(repo, tmp_path_factory):
    _commit(repo, {REGISTRY: REGISTERED}, "register")
    shallow = tmp_path_factory.mktemp("shallow") / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    assert "shallow clone" in history_problem(shallow)
    assert "no git history" in history_problem(tmp_path_factory.mktemp("bare"))
