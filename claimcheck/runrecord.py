"""What an evidence run was, and how a partial run joins the results of a full one.

The run record travels in the results' ``meta``: commit (and whether the tree was dirty), Python
and package versions, Hypothesis profile and seed, device and processor, start time, duration and
which evidence was selected. A run that did not reach every claim's evidence (one test file, a
``-k`` expression) never replaces a complete run: its outcomes are merged claim by claim into the
previous results (every claim judged again on the union of the outcomes), each row keeping the run
it came from, and the merged file says ``partial``
until the merged runs together reach every piece of evidence (the property suite, then the
experiments, for instance).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import subprocess
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "triton", "hypothesis", "numpy", "pytest")


def read_json(path: Path) -> dict | None:
    """A JSON object from a file, or None if the file is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether tracked files differ from it (None, None outside git)."""
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return commit, (bool(status) if status is not None else None)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _device() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"type": "cpu", "gpu": None}
    if torch.cuda.is_available():
        return {"type": "cuda", "gpu": torch.cuda.get_device_name(0)}
    return {"type": "cpu", "gpu": None}


def run_record(root: Path, started: float, seconds: float, profile: str | None, seed: Any, workers: int,
               selection: list[str], git: tuple[str | None, bool | None] | None = None) -> dict[str, Any]:
    """The record of one evidence run (the results' ``meta``); ``git``: the :func:`git_state` the run
    started from (a commit made while it runs does not change which run it is)."""
    commit, dirty = git or git_state(root)
    return {
        "id": hashlib.sha1(f"{started}-{commit}".encode()).hexdigest()[:12],
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 2),
        "profile": profile,
        "seed": seed,
        "workers": workers,
        "commit": commit,
        "dirty": dirty,
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "platform": f"{platform.system()} {platform.release()}",
        "cpu": _processor(),
        "device": _device(),
        "selection": selection,
        "argv": sys.argv[1:],
    }


def merge_partial(previous: dict | None, tests: list[dict], meta: dict, ran: set[str], claim_ids: list[str],
                  collected: set[str] | None = None) -> tuple[list[dict], dict, dict[str, str | None]]:
    """The tests and meta of a partial run joined to the previous results, and the run each claim's
    row comes from.

    ``ran``: the claim ids whose evidence ran now; their rows are this run's, every other claim keeps
    the run of its previous row. The tests that did not run now keep their earlier outcomes (the caller
    judges every claim again on the union). Without previous results the partial run stands alone.
    ``collected``: every node id this run collected from the files it collected whole (no ``-k``,
    ``-m`` or node ids); an earlier test of such a file that is no longer among them no longer exists
    (a renamed test, a new parametrization) and is dropped, not kept as if it still stood."""
    meta = {**meta, "complete": False}
    if not previous or not previous.get("claims"):
        runs = {cid: meta["id"] for cid in claim_ids}
        meta["runs"] = run_summaries([_summary(meta)], runs)
        return tests, meta, runs
    base = previous.get("meta") or {}
    old = {r["id"]: r.get("run", base.get("id")) for r in previous["claims"]}
    runs = {cid: meta["id"] if cid in ran or cid not in old else old[cid] for cid in claim_ids}
    now = {t["nodeid"] for t in tests}
    whole = {n.split("::", 1)[0] for n in collected or ()}
    kept = [t for t in previous.get("tests", []) if t["nodeid"] not in now
            and not (t["nodeid"].split("::", 1)[0] in whole and t["nodeid"] not in collected)]
    meta["merged_into"] = base.get("id")
    meta["base"] = {k: base.get(k) for k in ("id", "started", "commit", "profile")}
    earlier = {r.get("id"): r for r in base.get("runs") or [_summary(base)]}
    earlier[meta["id"]] = _summary(meta)  # a checkpoint of this run, written earlier, is this run
    meta["runs"] = run_summaries(list(earlier.values()), runs)
    # rows from another commit, another profile or a dirty tree are not one run's results
    meta["mixed"] = len({(r.get("commit"), r.get("profile"), r.get("dirty")) for r in meta["runs"]}) > 1
    return sorted(tests + kept, key=lambda t: t["nodeid"]), meta, runs


def run_summaries(candidates: list[dict], runs: dict[str, str | None]) -> list[dict]:
    """The runs that contribute rows, in order, each with ``rows``: how many claims' rows it gives."""
    rows = Counter(runs.values())
    return [{**_summary(r), "rows": rows[r.get("id")]} for r in candidates if rows.get(r.get("id"))]


def _summary(meta: dict) -> dict:
    return {k: meta.get(k) for k in ("id", "started", "commit", "dirty", "profile", "seconds", "interrupted")}


def partial_note(meta: dict) -> str:
    """The one sentence that says a results file is PARTIAL (empty when it is not): the same facts the page's
    banner states: evidence reached by no run, the runs its rows come from, mixed commits or profiles."""
    runs = meta.get("runs") or []
    if meta.get("complete") is not False and not meta.get("mixed") and not meta.get("interrupted"):
        return ""
    parts = []
    if meta.get("interrupted"):
        parts.append("the latest run was interrupted")
    if meta.get("complete") is False:
        parts.append(f"{meta.get('not_run')} evidence test(s) reached by no run")
    if meta.get("mixed"):
        parts.append("rows from different commits, profiles or trees")
    if len(runs) > 1:
        parts.append("rows from runs " + ", ".join(f"{r.get('id')} ({r.get('rows')} row{'' if r.get('rows') == 1 else 's'}, profile {r.get('profile')}, "
                                                  f"commit {(r.get('commit') or '?')[:8]})" for r in runs))
    elif meta.get("complete") is False and (meta.get("base") or {}).get("id"):
        parts.append(f"claims it did not reach keep the rows of run {meta['base']['id']}")
    elif meta.get("complete") is False:
        parts.append("no earlier results to keep: claims it did not reach are untested")
    return "PARTIAL: " + "; ".join(parts)


def headline(meta: dict | None) -> str:
    """What the results are composed of, in one sentence: each run that gives rows (id, profile, rows,
    seconds, interrupted or not) and the time in all."""
    if not meta:
        return "No evidence results were available: decided claims show as untested"
    runs = meta.get("runs") or [{**_summary(meta), "rows": None}]

    def one(r: dict) -> str:
        rows = f", {r['rows']} rows" if r.get("rows") is not None else ""
        stopped = ", interrupted" if r.get("interrupted") else ""
        return f"run {r.get('id')} (profile {r.get('profile')}{rows}, {r.get('seconds')} s{stopped})"

    if len(runs) == 1:
        return f"Evidence from one {one(runs[0])}"
    total = round(sum(r.get("seconds") or 0 for r in runs), 1)
    return f"Evidence composed of {len(runs)} runs, {total} s in all: " + ", ".join(one(r) for r in runs)
