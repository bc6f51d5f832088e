"""pytest plugin: the ``claim`` marker and per-claim aggregation of evidence outcomes.

Registered through the ``pytest11`` entry point, so a plain ``pytest -n auto properties/`` uses it.
Each test marked ``@pytest.mark.claim("id", ...)`` is evidence for those claims. Its outcome
travels in ``report.user_properties`` (which pytest-xdist ships from workers to the controller),
so aggregation happens once, in the controller, with nothing lost or duplicated.

At the end of a session that ran claim-marked tests, the observed status of every claim in the
registry is written to ``results/claims-results.json`` (``--claims-results``) and a one-line
summary is printed. Evidence that disagrees with a recorded verdict is a *mismatch* and fails the run.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from claimcheck import evidence
from claimcheck import results as results_file
from claimcheck.progress import Progress
from claimcheck.registry import RegistryError, load_registry, selected
from claimcheck.runrecord import git_state, merge_partial, partial_note, run_record, run_summaries
from claimcheck.status import Outcome, atomic_write, build_results, evidence_index, observe_all, summary_counts

# pytest-xdist runs one worker per core, so a BLAS thread pool in each worker only oversubscribes the cores:
# numpy's OpenBLAS threads spin while they wait (two workers' rank-collapse sweeps took 14 s, not 1 s).
# Set before any worker imports numpy or torch; a value the user set wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

_PREFIX = "claimcheck."


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "claim registry evidence")
    group.addoption("--claims-registry", default=None, help="registry file (default: <rootdir>/claims.yaml)")
    group.addoption("--claims-references", default=None,
                    help="references of record (default: <rootdir>/references.yaml)")
    group.addoption(
        "--claims-results",
        default=None,
        help="where to write per-claim results (default: <rootdir>/results/claims-results.json)",
    )
    group.addoption(
        "--backend",
        default=None,
        metavar="MODULE:FUNCTION",
        help="check this attention function (or a registry backend by name) instead of the registry's backends in "
             "properties/test_backends.py; capabilities from the function's claims_capabilities attribute "
             "(see `claims kernel --help`)",
    )
    group.addoption(
        "--kernel-tier",
        default="smoke",
        choices=("smoke", "ci", "full"),
        help="the backend matrix's tier in properties/test_backends.py (default: smoke, small shapes with every "
             "feature of the contract; ci adds kernel-scale shapes and FlexAttention in every dtype, as make test's "
             "kernel part runs it; full adds the length and head-dim sweeps)",
    )
    group.addoption("--claims-progress", action="store_true", default=False,
                    help="print a progress line (phase, counts, time left) to stderr; claims report uses it")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "claim(*ids): the test is evidence for these claim ids in claims.yaml")
    config.addinivalue_line("markers", "control(reason, models=ids): a negative control: the check run against a "
                                       "deliberately wrong variant of the claims it models; it must reject it (use "
                                       "claimcheck.control)")
    config.addinivalue_line("markers", "comparator(reason): a check of a comparator, not of a claim: it must reject "
                                       "every wrong field (use claimcheck.comparator_check)")
    config.addinivalue_line(
        "markers",
        "claims_from_registry(**fields): run the test once per registry claim whose fields match "
        "(e.g. kind='code-snippet', verdict=('holds', 'partly'), has='attribution'), passing its id as the "
        "`claim_id` argument",
    )
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) aggregates
        config.pluginmanager.register(_Aggregator(config), "claimcheck-aggregator")


def _claim_ids(item: pytest.Item) -> list[str]:
    ids: list[str] = []
    for mark in item.iter_markers("claim"):
        if not mark.args or not all(isinstance(a, str) for a in mark.args):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.claim needs one or more claim ids as strings")
        ids.extend(a for a in mark.args if a not in ids)
    return ids


def _loaded(config: pytest.Config, attr: str, option: str, default: Path, load):
    """A file the run reads, loaded once per process; a malformed one stops the run with its problems."""
    cached = getattr(config, attr, None)
    if cached is None:
        try:
            cached = load(Path(config.getoption(option) or default))
        except RegistryError as exc:
            raise pytest.UsageError(str(exc)) from exc
        setattr(config, attr, cached)
    return cached


def _registry(config: pytest.Config):
    return _loaded(config, "_claimcheck_registry", "claims_registry", Path(str(config.rootpath)) / "claims.yaml",
                   load_registry)


def references(config: pytest.Config):
    """The references of record, loaded once per process (for the evidence of citation claims)."""
    from claimcheck.references import default_path, load_references

    return _loaded(config, "_claimcheck_references", "claims_references", default_path(Path(str(config.rootpath))),
                   load_references)


def registry(config: pytest.Config):
    """The claim registry of this run."""
    return _registry(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("claims_from_registry")
    if mark is None:
        return
    if "claim_id" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: claims_from_registry needs a `claim_id` argument")
    registry = _registry(metafunc.config)
    chosen = [c.id for c in registry.claims if selected(c, mark.kwargs)]
    metafunc.parametrize(
        "claim_id", [pytest.param(cid, id=cid, marks=pytest.mark.claim(cid)) for cid in chosen]
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        ids = _claim_ids(item)
        if ids:
            kind = "refutation" if getattr(getattr(item, "obj", None), "_claimcheck_refutation", False) else "property"
            if item.get_closest_marker("comparator") is not None:
                kind = "comparator"
            mark = item.get_closest_marker("control")
            if mark is not None:
                kind = "control"
                ids, models = _control_claims(item, mark, ids)
                item.user_properties.append((_PREFIX + "models", models))
            item.user_properties.append((_PREFIX + "claims", ids))
            item.user_properties.append((_PREFIX + "kind", kind))


def _control_claims(item: pytest.Item, mark: pytest.Mark, ids: list[str]) -> tuple[list[str], list[str]]:
    """The claims a control is evidence for, and those whose falsity it models (credited to them only).

    A control that names what it models (``control(reason, models=...)``) belongs to those claims alone; one
    that does not is credited to its test's claim when the test has one, and to none when it has several
    (it still runs, and one it accepts still makes each of the test's claims a mismatch)."""
    models = list(mark.kwargs.get("models") or ())
    if models:
        stray = [m for m in models if m not in ids]
        if stray:
            raise pytest.UsageError(f"{item.nodeid}: control(models=...) names {', '.join(stray)}, which the test is "
                                    f"not evidence for (its claims: {', '.join(ids)})")
        return models, models
    return ids, (list(ids) if len(ids) == 1 else [])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    evidence._current_item = item
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    counter = [0]
    original = getattr(handle, "inner_test", None)
    if original is not None:  # count the examples Hypothesis runs (shrinking included)

        @functools.wraps(original)  # Hypothesis prints the failing call under this name
        def counted(*args: Any, **kwargs: Any) -> Any:
            counter[0] += 1
            return original(*args, **kwargs)

        handle.inner_test = counted
    expected = original is not None and _fails_by_design(item)
    if expected:
        item.repr_failure = _plain_traceback  # type: ignore[method-assign]  # an instance attribute, removed below
    try:
        yield
    finally:
        evidence._current_item = None
        if expected:
            del item.repr_failure
        if original is not None:
            handle.inner_test = original
            item.user_properties.append((_PREFIX + "examples", counter[0]))


def _fails_by_design(item: pytest.Item) -> bool:
    """A refutation or a negative control: the test function is expected to raise."""
    return bool(getattr(getattr(item, "obj", None), "_claimcheck_refutation", False)
                or item.get_closest_marker("control"))


def _plain_traceback(excinfo: pytest.ExceptionInfo) -> str:
    """Python's own traceback text, for the failures Hypothesis formats inside a refutation or a control.

    Hypothesis formats every failure it reports with the test item's ``repr_failure``; pytest's version
    re-reads and parses each source file of the traceback (about 70 ms a failure, twice per refutation,
    some 20 s of a CI run), and the text is discarded: a refutation keeps the message and the falsifying
    example, a control only that the check rejected. A failure pytest itself reports (a refutation that
    found no counterexample) is formatted after the call, by pytest's own ``repr_failure`` again.
    """
    return "".join(traceback.format_exception(excinfo.type, excinfo.value, excinfo.tb))


CHECKPOINT_SECONDS = 30  # the results file is rewritten this often during a run, so a killed run leaves its rows
CONTROL_EXAMPLES = 10  # a wrong variant fails at once; a handful of examples shows it, without shrinking


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """Run a negative control: it passes when the check rejects the wrong variant (a ClaimViolation)."""
    mark = pyfuncitem.get_closest_marker("control")
    if mark is None:
        return None
    fn = pyfuncitem.obj
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    inner = getattr(fn, "hypothesis", None)
    saved = getattr(fn, "_hypothesis_internal_use_settings", None)
    if inner is not None and saved is not None:  # few examples, no shrinking: the first failure is enough
        from hypothesis import Phase, settings

        fn._hypothesis_internal_use_settings = settings(saved, max_examples=CONTROL_EXAMPLES,
                                                        phases=[Phase.explicit, Phase.generate])
    try:
        fn(**args)
    except Exception as exc:  # pytest's skip and fail outcomes are BaseExceptions: they pass through
        if not evidence.control_rejected(exc):
            raise evidence.ControlMisfired(
                f"negative control {pyfuncitem.nodeid} ({mark.args[0] if mark.args else ''}): the variant was stopped "
                f"by {_what_raised(exc)}, not rejected by the claim's own check (a ClaimViolation)") from exc
    else:
        raise evidence.ControlAccepted(f"negative control accepted ({mark.args[0] if mark.args else ''}): the "
                                       "evidence passes on a deliberately wrong variant, so it cannot fail")
    finally:
        if inner is not None and saved is not None:
            fn._hypothesis_internal_use_settings = saved
    return True


def _what_raised(exc: BaseException) -> str:
    """``Type: first line`` of an exception; a group lists the kinds of its leaves."""
    if isinstance(exc, BaseExceptionGroup):
        leaves, todo = [], [exc]
        while todo:
            e = todo.pop()
            todo.extend(e.exceptions) if isinstance(e, BaseExceptionGroup) else leaves.append(e)
        return f"{type(exc).__name__} of " + ", ".join(sorted({type(e).__name__ for e in leaves}))
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    result = yield
    report = result.get_result()
    if call.excinfo is not None and report.failed:
        exc = call.excinfo.value
        # Only a violated assertion is evidence; any other exception is a crash of the test.
        violated = isinstance(exc, AssertionError) or (
            isinstance(exc, BaseExceptionGroup)
            and exc.split(AssertionError)[1] is None
        )
        report.user_properties = list(report.user_properties) + [
            (_PREFIX + "exception", {"type": type(exc).__name__, "violated": bool(violated and call.when == "call")})
        ]


class _Aggregator:
    """Collects outcomes in the controller and writes the per-claim results."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.outcomes: dict[str, Outcome] = {}
        self.started = time.time()
        self.results: dict | None = None
        self.collected: set[str] = set()  # every node id collected (by the workers, under xdist)
        self.set_aside: tuple | None = None  # (the error, where the unusable results file was moved)
        self.progress: Progress | None = None
        self.checkpointed = time.time()
        self.git = git_state(Path(str(config.rootpath)))  # the commit this run starts from, for every write

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected.update(item.nodeid for item in session.items)
        self._start_progress()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(ids)
        self._start_progress()

    def _start_progress(self) -> None:
        if not self.config.getoption("claims_progress") or not self.collected:
            return
        if self.progress is None or self.progress.expected.keys() != self.collected:
            self.progress = Progress(set(self.collected), _previous_seconds(self._results_path()), _progress_stream())

    def _whole_files_collected(self) -> set[str] | None:
        """The collected node ids when whole files were collected (no -k, -m, --deselect or node ids), else None."""
        opt = self.config.option
        if getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or getattr(opt, "deselect", None) \
                or any("::" in str(a) for a in self.config.args):
            return None
        return self.collected or None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = {k[len(_PREFIX):]: v for k, v in report.user_properties if isinstance(k, str) and k.startswith(_PREFIX)}
        if "claims" not in props:
            return
        outcome = self.outcomes.get(report.nodeid)
        if outcome is None:
            outcome = self.outcomes[report.nodeid] = Outcome(
                nodeid=report.nodeid, claims=list(props["claims"]), kind=props.get("kind", "property"),
                models=list(props["models"]) if "models" in props else None,
            )
        outcome.update(report, props)
        if time.time() - self.checkpointed >= CHECKPOINT_SECONDS:  # results written as they arrive
            self.checkpointed = time.time()
            self._write(interrupted=True)  # "did not finish", until the final write says otherwise

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        if self.progress is not None:
            self.progress.finished(nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.progress is not None:
            self.progress.draw(final=True)
        if not self.outcomes:
            return  # no claim evidence ran (e.g. the suite's own tests): leave results alone
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        self.results = self._write(interrupted=interrupted)
        if any(r["status"] in ("mismatch", "error") for r in self.results["claims"]) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write(self, interrupted: bool) -> dict:
        """Judge every claim on the outcomes so far and write the results file (merged into earlier results
        when this run does not reach every piece of evidence); a file that cannot be read is set aside first."""
        root = Path(str(self.config.rootpath))
        registry = _registry(self.config)
        outcomes = list(self.outcomes.values())
        observed = observe_all(registry, outcomes)
        path = self.results_path = self._results_path()
        meta = run_record(root, self.started, time.time() - self.started, _profile_name(),
                          self.config.getoption("hypothesis_seed", None),
                          getattr(self.config.option, "numprocesses", None) or 0,
                          [str(a) for a in self.config.args], self.git)
        meta["interrupted"] = interrupted
        results = build_results(registry, observed, outcomes, meta)
        missing = _evidence_not_run(registry, self.outcomes)
        if missing:  # a partial run joins the previous results claim by claim, never replaces them
            previous = self._previous(path)
            ran = {cid for o in outcomes for cid in o.claims}
            tests, meta, runs = merge_partial(previous, results["tests"], meta, ran, [c.id for c in registry.claims],
                                              self._whole_files_collected())
            # judge every claim again on the union of the outcomes: evidence split over runs (properties/, then
            # experiments/) counts together; outcomes of tests the registry no longer names are dropped
            named = {ev for c in registry.claims for ev in c.evidence}
            tests = [t for t in tests if t["nodeid"] in named or t["nodeid"].split("[", 1)[0] in named]
            union = [Outcome(**t) for t in tests]
            rows = [{**r, "run": runs[r["id"]]} for r in build_results(registry, observe_all(registry, union), union,
                                                                        meta)["claims"]]
            # runs that together reach every piece of evidence (properties/, then experiments/) make a whole
            still = _evidence_not_run(registry, (t["nodeid"] for t in tests))
            meta["not_run"] = len(still)
            meta["complete"] = not still
            results = {**results, "claims": rows, "tests": tests, "meta": meta}
        else:
            rows = [{**r, "run": meta["id"]} for r in results["claims"]]
            meta = {**meta, "complete": True, "not_run": 0, "runs": run_summaries([meta], {r["id"]: meta["id"] for r in rows})}
            results = {**results, "meta": meta, "claims": rows}
        atomic_write(path, json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        return results

    def _results_path(self) -> Path:
        root = Path(str(self.config.rootpath))
        return Path(self.config.getoption("claims_results") or root / "results" / "claims-results.json")

    def _previous(self, path: Path) -> dict | None:
        """The results a partial run merges into; an unusable file is renamed aside (kept), never overwritten."""
        try:
            return results_file.read(path)
        except results_file.UnreadableResults as exc:
            kept = results_file.set_aside(path)
            self.set_aside = (exc, kept)
            return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.results is None:
            return
        tr = terminalreporter
        tr.section("claims")
        if self.set_aside is not None:
            exc, kept = self.set_aside
            tr.write_line(f"RESULTS FILE SET ASIDE: {exc.path} could not be used ({exc.problems[0]}); kept as {kept}. "
                          "This run's rows stand alone.", red=True, bold=True)
        for row in self.results["claims"]:
            if row["status"] in ("mismatch", "error"):
                tr.write_line(f"{row['status'].upper()} {row['id']}: {row['detail']}", red=True)
        counts = summary_counts(self.results)
        tr.write_line("claims: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
                      + f"  ({self.results_path})")
        note = partial_note(self.results["meta"])
        if note:
            tr.write_line(note, yellow=True, bold=True)


def _progress_stream():
    """Where the progress line goes: the descriptor ``claims report`` passes (``CLAIMS_PROGRESS_FD``, its own
    stderr, while pytest's output goes to the log), else this process's stderr."""
    fd = os.environ.get("CLAIMS_PROGRESS_FD")
    if fd and fd.isdigit():
        try:
            return os.fdopen(int(fd), "w", closefd=False)
        except OSError:
            pass
    return sys.stderr


def _previous_seconds(path: Path) -> dict[str, float]:
    """How long each test took in the saved results (for the progress line's time left; empty if none)."""
    try:
        saved = results_file.read(path)
    except results_file.UnreadableResults:
        return {}  # set aside by the first write; the time left is then estimated from this run alone
    return {t["nodeid"]: float(t.get("seconds") or 0) for t in (saved or {}).get("tests", [])}


def _evidence_not_run(registry, nodeids) -> list[str]:
    """Evidence tests named in the registry that no node among ``nodeids`` reaches (benchmarks aside), each
    once (several claims may name one test): the count the page and ``claims report`` give too."""
    reached = evidence_index(nodeids)
    return sorted({ev for c in registry.claims for ev in c.evidence if not ev.startswith("benchmarks/")
                   and ev not in reached})


def _profile_name() -> str | None:
    from hypothesis import settings

    getter = getattr(settings, "get_current_profile_name", None)
    return getter() if getter else getattr(settings, "_current_profile", None)
