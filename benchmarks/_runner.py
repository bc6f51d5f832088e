"""A small in-process runner for this suite that writes asv's result layout.

asv is the way to run the suite (``asv run``; see benchmarks/README.md). This runner exists for
a short GPU lease, where asv may not be installed and the time is fixed: it runs a selection of
benchmarks in one process, cheap ones first, stops starting new ones at a deadline, and saves
after every parameter combination, so whatever ran is kept. Its files are asv's own (results
API version 2): ``<results>/<machine>/<commit>-<env>.json``, ``<results>/<machine>/machine.json``
and ``<results>/benchmarks.json``, readable by ``asv publish`` and the report, because every
benchmark class declares an explicit ``version`` (which asv then uses instead of a hash of the
source, so both writers agree).

Discovery mirrors asv's: public classes of the ``bench_*`` modules, methods named ``time_*``
(timed: median of samples) and ``track_*`` (a returned number); ``setup`` raising
``NotImplementedError`` is a skip.
"""
from __future__ import annotations

import gc
import importlib
import inspect
import itertools
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BENCH_DIR = Path(__file__).resolve().parent
PREFIXES = ("time_", "track_")
RESULT_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
                  "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


# ---- discovery ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suite:
    """A benchmark class of a ``bench_*`` module: its asv name prefix, parameter grid and methods."""

    module: str  # e.g. "bench_attention"
    cls: type
    methods: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.module}.{self.cls.__name__}"

    @property
    def params(self) -> list[list[Any]]:
        params = getattr(self.cls, "params", [])
        if params and not isinstance(params[0], (list, tuple)):  # asv's shorthand for one parameter
            return [list(params)]
        return [list(p) for p in params]

    @property
    def param_names(self) -> list[str]:
        names = list(getattr(self.cls, "param_names", []))
        return names or [f"param{i + 1}" for i in range(len(self.params))]

    def combos(self) -> list[tuple]:
        return list(itertools.product(*self.params))


def bench_modules() -> list[str]:
    """Names of the ``bench_*`` modules of this package, sorted."""
    return sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))


def discover(pattern: str = "") -> list[Suite]:
    """The benchmark classes whose asv names (``module.Class.method``) match ``pattern`` (a regex)."""
    package = BENCH_DIR.name
    suites = []
    for module_name in bench_modules():
        module = importlib.import_module(f"{package}.{module_name}")
        for cls_name, cls in vars(module).items():
            if cls_name.startswith("_") or not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            methods = tuple(m for m, _ in inspect.getmembers(cls, inspect.isfunction)
                            if m.startswith(PREFIXES) and re.search(pattern, f"{module_name}.{cls_name}.{m}"))
            if methods:
                suites.append(Suite(module_name, cls, methods))
    return suites


# ---- running -----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one benchmark method gave at one parameter combination."""

    value: float | None = None
    samples: list[float] = field(default_factory=list)
    number: int = 1
    started_at: float = 0.0
    duration: float = 0.0
    skipped: str | None = None  # the reason
    failed: str | None = None  # the error


def sample_times(fn: Callable[[], object], sample_time: float = 0.01, max_samples: int = 10,
                 budget: float = 0.2) -> tuple[list[float], int]:
    """asv-style timing: ``number`` calls per sample so a sample lasts ``sample_time``, and at
    least two samples, up to ``max_samples`` within ``budget`` seconds. Returns (seconds per call, number)."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-9)
    number = max(1, int(sample_time / once))
    samples: list[float] = []
    begun = time.perf_counter()
    while len(samples) < 2 or (len(samples) < max_samples and time.perf_counter() - begun < budget):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return samples, number


def run_combo(suite: Suite, combo: tuple) -> dict[str, Outcome]:
    """Set up ``suite`` at ``combo`` once and run each of its methods; never raises."""
    started = time.time()
    outcomes: dict[str, Outcome] = {}
    instance = suite.cls()
    try:
        if hasattr(instance, "setup"):
            instance.setup(*combo)
    except NotImplementedError as exc:
        return {m: Outcome(skipped=str(exc) or "skipped", started_at=started) for m in suite.methods}
    except Exception as exc:  # a broken benchmark is reported, and the run goes on
        error = _error_text(exc)
        return {m: Outcome(failed=error, started_at=started) for m in suite.methods}
    for method in suite.methods:
        bound = getattr(instance, method)
        t0 = time.time()
        try:
            if method.startswith("time_"):
                samples, number = sample_times(lambda: bound(*combo))
                outcomes[method] = Outcome(statistics.median(samples), samples, number, t0)
            else:
                outcomes[method] = Outcome(float(bound(*combo)), started_at=t0)
        except NotImplementedError as exc:
            outcomes[method] = Outcome(skipped=str(exc) or "skipped", started_at=t0)
        except Exception as exc:
            outcomes[method] = Outcome(failed=_error_text(exc), started_at=t0)
        outcomes[method].duration = time.time() - t0
    if hasattr(instance, "teardown"):
        instance.teardown(*combo)
    del instance
    _release_memory()
    return outcomes


def _error_text(exc: BaseException) -> str:
    tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return tail[:500]


def _release_memory() -> None:
    gc.collect()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---- asv's files -------------------------------------------------------------------------------------


def machine_info(name: str) -> dict[str, str]:
    """asv's machine.json fields for this machine."""
    cpu, ram = platform.processor() or "", ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
            ram = str(kb * 1024)
    except (OSError, StopIteration, ValueError):
        pass
    return {"arch": platform.machine(), "cpu": cpu, "machine": name, "num_cpu": str(os.cpu_count() or ""),
            "os": f"{platform.system()} {platform.release()}", "ram": ram}


def env_name() -> str:
    """The name ``asv run --python=same`` gives this interpreter's environment."""
    return "existing-py_" + re.sub(r'[<>:"/\\^|?*\x00-\x1f]', "_", os.path.abspath(sys.executable))


def benchmark_entry(suite: Suite, method: str) -> dict[str, Any]:
    """The benchmarks.json entry asv writes for ``suite.method``."""
    func = getattr(suite.cls, method)
    try:
        code = inspect.getsource(func)
    except (OSError, TypeError):
        code = ""
    entry = {
        "code": code, "name": f"{suite.name}.{method}", "param_names": suite.param_names,
        "params": [[repr(v) for v in p] for p in suite.params],
        "timeout": getattr(func, "timeout", getattr(suite.cls, "timeout", 60.0)),
        "type": "time" if method.startswith("time_") else "track",
        "unit": "seconds" if method.startswith("time_") else getattr(func, "unit", "unit"),
        "version": str(getattr(func, "version", getattr(suite.cls, "version", ""))),
    }
    if method.startswith("time_"):
        entry.update({"min_run_count": 2, "number": 0, "repeat": 0, "rounds": 1, "sample_time": 0.01,
                      "warmup_time": -1})
    return entry


class ResultsFile:
    """One asv results file (API version 2), updated benchmark by benchmark and saved atomically."""

    def __init__(self, results_dir: Path, machine: str, commit: str, commit_date_ms: int, python: str):
        self.results_dir, self.machine = results_dir, machine
        self.path = results_dir / machine / f"{commit[:8]}-{env_name()}.json"
        info = machine_info(machine)
        self.data: dict[str, Any] = {
            "commit_hash": commit, "env_name": env_name(), "date": commit_date_ms,
            "params": {**info, "python": python}, "python": python, "requirements": {}, "env_vars": {},
            "result_columns": RESULT_COLUMNS, "results": {}, "durations": {}, "version": 2,
        }
        if self.path.exists():  # a rerun on the same commit keeps what it does not redo
            old = json.loads(self.path.read_text())
            if old.get("version") == 2 and old.get("commit_hash") == commit:
                self.data["results"].update(old.get("results", {}))
        self._machine_json(info)

    def _machine_json(self, info: dict[str, str]) -> None:
        path = self.results_dir / self.machine / "machine.json"
        if not path.exists():
            _write_json(path, {**info, "version": 1})

    def record(self, suite: Suite, method: str, outcomes: dict[tuple, Outcome]) -> None:
        """Store ``suite.method``'s outcomes, one per parameter combination; as asv does, a skip
        is NaN and a failure (or a combination not run) None."""
        combos = suite.combos()
        got = [outcomes.get(c) for c in combos]
        ok = [o if o is not None and o.value is not None else None for o in got]

        def column(fn: Callable[[Outcome], Any]) -> list[Any]:
            return [fn(o) if o is not None else None for o in ok]

        timed = method.startswith("time_")
        values = [o.value if o is not None and o.value is not None else
                  math.nan if o is not None and o.skipped else None for o in got]
        row = [
            values,
            [[repr(v) for v in p] for p in suite.params],
            str(getattr(suite.cls, "version", "")),
            int(1000 * min((o.started_at for o in got if o is not None), default=time.time())),
            sum(o.duration for o in got if o is not None),
            column(lambda o: _ci(o.samples)[0] if timed else None),
            column(lambda o: _ci(o.samples)[1] if timed else None),
            column(lambda o: _quantile(o.samples, 0.25) if timed else None),
            column(lambda o: _quantile(o.samples, 0.75) if timed else None),
            column(lambda o: o.number if timed else None),
            column(lambda o: len(o.samples) if timed else None),
            column(lambda o: o.samples if timed else None),
        ]
        if not suite.params:  # an unparameterized benchmark stores scalars
            row = [row[0][0], [], *row[2:5], *[c[0] for c in row[5:]]]
        self.data["results"][f"{suite.name}.{method}"] = row

    def save(self) -> None:
        _write_json(self.path, self.data)


def update_benchmarks_json(results_dir: Path, suites: list[Suite]) -> None:
    """Add this suite's entries to ``<results>/benchmarks.json`` (entries asv wrote are kept)."""
    path = results_dir / "benchmarks.json"
    data = json.loads(path.read_text()) if path.exists() else {"version": 2}
    for suite in suites:
        for method in suite.methods:
            data.setdefault(f"{suite.name}.{method}", benchmark_entry(suite, method))
    _write_json(path, data)


def _ci(samples: list[float]) -> tuple[float, float]:
    """A distribution-free 99% interval for the median: [min, max] of >= 8 samples (P(miss) = 2^(1-n))."""
    if len(samples) < 8:
        return -math.inf, math.inf
    return min(samples), max(samples)


def _quantile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    s = sorted(samples)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False))
    tmp.replace(path)
