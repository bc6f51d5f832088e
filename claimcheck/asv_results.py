"""Read asv's saved benchmark results for the report.

asv keeps one file per (machine, commit, environment) in its standard layout::

    <results_dir>/benchmarks.json                  what each benchmark is: params, unit, type
    <results_dir>/<machine>/machine.json           the machine's description
    <results_dir>/<machine>/<commit>-<env>.json    one run: {"results": {name: [result, params, ...]}}

``results_dir`` comes from ``asv.conf.json`` (default ``.asv/results``). Every part may be
absent or unreadable: the reader then returns fewer results and says which files it skipped,
it never fails the report. Registry evidence names a benchmark as
``benchmarks/bench_x.py::Class.method``; asv names the same benchmark ``bench_x.Class.method``.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_RESULTS_DIR = ".asv/results"
DEFAULT_BENCHMARK_DIR = "benchmarks"


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark's results in one asv results file.

    ``values[i]`` is the result for the i-th combination of ``params`` (asv's order:
    ``itertools.product(*params)``); ``None`` when that combination failed, NaN when it was skipped
    (asv's own convention: a benchmark that raises NotImplementedError in setup is stored as NaN).
    """

    name: str  # asv's name, bench_x.Class.method
    machine: str
    commit: str
    env: str
    date: int | None  # milliseconds since the epoch (asv's "date": the commit date)
    unit: str | None
    kind: str | None  # time, peakmem, mem, track
    param_names: tuple[str, ...]
    params: tuple[tuple[str, ...], ...]
    values: tuple[float | None, ...]

    def rows(self) -> list[tuple[tuple[str, ...], float | None]]:
        """(parameter combination, value) pairs; one pair with no parameters when unparameterized."""
        combos = list(itertools.product(*self.params)) if self.params else [()]
        return list(zip(combos, self.values))

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine, "commit": self.commit, "env": self.env, "date": self.date,
            "unit": self.unit, "type": self.kind, "param_names": list(self.param_names),
            # JSON has no NaN: a skipped combination is null with "skipped": true
            "rows": [{"params": list(p), "value": None if v is not None and math.isnan(v) else v,
                      **({"skipped": True} if v is not None and math.isnan(v) else {})} for p, v in self.rows()],
        }


@dataclass
class AsvResults:
    results_dir: Path
    runs: list[BenchmarkRun] = field(default_factory=list)
    machines: dict[str, dict] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # files that could not be read, with why
    benchmark_dir: str = DEFAULT_BENCHMARK_DIR

    @property
    def available(self) -> bool:
        return bool(self.runs)

    def asv_name(self, evidence: str) -> str:
        """``benchmarks/sub/bench_x.py::Class.method`` -> ``sub.bench_x.Class.method``."""
        path, _, member = evidence.partition("::")
        prefix = self.benchmark_dir.rstrip("/") + "/"
        path = path[len(prefix):] if path.startswith(prefix) else path
        return path.removesuffix(".py").replace("/", ".") + "." + member

    def history(self, evidence: str) -> list[BenchmarkRun]:
        """Every run of the benchmark named by ``evidence``, oldest first."""
        name = self.asv_name(evidence)
        return sorted((r for r in self.runs if r.name == name), key=lambda r: (r.date or 0, r.commit))

    def latest(self, evidence: str) -> list[BenchmarkRun]:
        """The most recent run on each machine (and environment)."""
        newest: dict[tuple[str, str], BenchmarkRun] = {}
        for run in self.history(evidence):
            newest[(run.machine, run.env)] = run
        return list(newest.values())


def results_location(root: Path) -> tuple[Path, str]:
    """``results_dir`` and ``benchmark_dir`` from ``<root>/asv.conf.json`` (asv's defaults otherwise)."""
    conf = root / "asv.conf.json"
    results_dir, benchmark_dir = DEFAULT_RESULTS_DIR, DEFAULT_BENCHMARK_DIR
    if conf.exists():
        try:
            data = _loads_commented(conf.read_text(encoding="utf-8"))
            results_dir = data.get("results_dir", results_dir)
            benchmark_dir = data.get("benchmark_dir", benchmark_dir)
        except (OSError, ValueError, AttributeError):
            pass
    return root / results_dir, benchmark_dir


def load_asv_results(root: Path, results_dir: Path | None = None) -> AsvResults:
    """All results under the project's asv results folder; empty when there is none."""
    default_dir, benchmark_dir = results_location(root)
    folder = results_dir or default_dir
    out = AsvResults(folder, benchmark_dir=benchmark_dir)
    if not folder.is_dir():
        return out
    meta = _read(folder / "benchmarks.json", out) if (folder / "benchmarks.json").exists() else {}
    for machine_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        machine_file = machine_dir / "machine.json"
        if machine_file.exists():
            out.machines[machine_dir.name] = _read(machine_file, out) or {}
        for path in sorted(machine_dir.glob("*.json")):
            if path.name == "machine.json":
                continue
            data = _read(path, out)
            if data is not None:
                out.runs += _runs(path, machine_dir.name, data, meta or {}, out)
    return out


def _read(path: Path, out: AsvResults) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        out.skipped.append(f"{path}: {exc}")
        return None


def _runs(path: Path, machine: str, data: Any, meta: dict, out: AsvResults) -> list[BenchmarkRun]:
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        out.skipped.append(f"{path}: not an asv results file (no 'results' mapping)")
        return []
    commit = str(data.get("commit_hash") or path.stem.split("-")[0])
    env = str(data.get("env_name") or path.stem.partition("-")[2])
    columns = data.get("result_columns") or ["result", "params"]
    runs = []
    for name, entry in data["results"].items():
        try:
            result, params = _result_and_params(entry, columns)
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            out.skipped.append(f"{path}: {name}: {exc}")
            continue
        info = meta.get(name) if isinstance(meta.get(name), dict) else {}
        param_names = tuple(info.get("param_names") or (f"param{i + 1}" for i in range(len(params))))
        runs.append(BenchmarkRun(
            name=name, machine=machine, commit=commit, env=env,
            date=data.get("date") if isinstance(data.get("date"), (int, float)) else None,
            unit=info.get("unit"), kind=info.get("type") or _kind_from_name(name),
            param_names=param_names, params=tuple(tuple(str(v) for v in p) for p in params),
            values=tuple(_number(v) for v in result),
        ))
    return runs


def _result_and_params(entry: Any, columns: list[str]) -> tuple[list, list]:
    """asv's format 2 is a row per benchmark (``result_columns``); format 1 a mapping or a bare number."""
    if isinstance(entry, list):
        row = dict(zip(columns, entry))
        result, params = row.get("result"), row.get("params") or []
    elif isinstance(entry, dict):
        result, params = entry.get("result"), entry.get("params") or []
    else:
        result, params = entry, []
    if not isinstance(result, list):
        result = [result]
    expected = math.prod(len(p) for p in params) if params else 1
    if len(result) != expected:
        raise ValueError(f"{len(result)} values for {expected} parameter combinations")
    return result, params


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isinf(value):
        return float(value)  # finite, or NaN: skipped
    return None


def _kind_from_name(name: str) -> str | None:
    method = name.rsplit(".", 1)[-1]
    for kind in ("timeraw", "time", "peakmem", "mem", "track"):
        if method.startswith(kind + "_"):
            return "time" if kind == "timeraw" else kind
    return None


def _loads_commented(text: str) -> dict:
    """asv.conf.json allows ``//`` comments; drop whole-line ones before parsing."""
    return json.loads("\n".join(line for line in text.splitlines() if not re.match(r"\s*//", line)))


def format_row(row: dict, unit: str | None) -> str:
    """``format_value`` of one row of :meth:`BenchmarkRun.to_json`."""
    return "skipped" if row.get("skipped") else format_value(row["value"], unit)


def format_value(value: float | None, unit: str | None) -> str:
    """A result with a readable unit: seconds as s/ms/us/ns, bytes as B/KiB/MiB/GiB."""
    if value is None:
        return "failed"
    if math.isnan(value):
        return "skipped"
    if unit == "seconds":
        for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(value) >= scale or name == "ns":
                return f"{value / scale:.3g} {name}"
    if unit == "bytes":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")):
            if abs(value) >= scale or name == "B":
                return f"{value / scale:.3g} {name}"
    return f"{value:.4g}" + (f" {unit}" if unit and unit != "unit" else "")
