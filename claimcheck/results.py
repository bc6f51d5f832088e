"""The per-claim results file (``results/claims-results.json``): read it, validate it, never lose it.

The file is written by the pytest plugin, atomically (:func:`claimcheck.status.atomic_write`), and read
by the plugin (a partial run merges into it) and by the CLI (``claims report --from-results``, ``list``,
``show``, ``findings``). Reading validates it against ``$defs/results_file`` of
``claimcheck/report.schema.json``: a row with an unknown status or without an id is an error that names
the row, never a row silently rendered or dropped.

A file that exists but cannot be used (not JSON, not a results object, rows that do not validate) is
:class:`UnreadableResults`. The plugin never overwrites such a file: :func:`set_aside` renames it to
``claims-results.unreadable-<UTC time>.json`` beside itself, and the run says so.
"""
from __future__ import annotations

import datetime as dt
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


class UnreadableResults(Exception):
    """A results file that exists but cannot be used; ``problems`` name the rows at fault."""

    def __init__(self, path: Path, problems: list[str]):
        self.path, self.problems = path, problems
        shown = problems[:10] + ([f"... and {len(problems) - 10} more"] if len(problems) > 10 else [])
        super().__init__(f"{path}: " + "; ".join(shown))


_JSON_TYPES = {"string": str, "array": list, "object": dict, "null": type(None), "boolean": bool,
               "integer": int, "number": (int, float)}


@lru_cache(maxsize=1)
def _defs() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]


def _resolved(rule: dict) -> dict:
    while "$ref" in rule:
        rule = _defs()[rule["$ref"].rsplit("/", 1)[-1]]
    return rule


def _type_ok(value: Any, names: str | list[str]) -> bool:
    kinds = tuple(_JSON_TYPES[n] for n in ([names] if isinstance(names, str) else names))
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def _check(value: Any, rule: dict, label: str) -> list[str]:
    """The flat subset of JSON Schema the results defs use (type, enum, minLength, required, properties,
    items), in plain Python: jsonschema takes ~0.5 s on a full results file, this a few milliseconds.
    tests/test_results_file.py checks that both agree."""
    rule = _resolved(rule)
    if "type" in rule and not _type_ok(value, rule["type"]):
        return [f"{label}: {json.dumps(value)[:60]} is not of type {rule['type']}"]
    if "enum" in rule and value not in rule["enum"]:
        return [f"{label}: {json.dumps(value)[:60]} is not one of {rule['enum']}"]
    if isinstance(value, str) and len(value) < rule.get("minLength", 0):
        return [f"{label}: {value!r} is too short"]
    found = []
    if isinstance(value, dict):
        found += [f"{label}: '{k}' is a required property" for k in rule.get("required", ()) if k not in value]
        for key, sub in rule.get("properties", {}).items():
            if key in value:
                found += _check(value[key], sub, f"{label}.{key}" if label != "file" else key)
    if isinstance(value, list) and "items" in rule:
        for i, item in enumerate(value):
            found += _check(item, rule["items"], f"{label}[{i}]" + _row_name(item))
    return found


def _row_name(row: Any) -> str:
    for key in ("id", "nodeid"):
        if isinstance(row, dict) and isinstance(row.get(key), str) and row[key]:
            return f" ({key} {row[key]})"
    return ""


def problems(data: Any) -> list[str]:
    """What is wrong with a parsed results file, each naming the row (``claims[3] (id softmax.x).status: ...``)."""
    return _check(data, {"$ref": "#/$defs/results_file"}, "file")


def read(path: Path) -> dict | None:
    """The results in ``path``, validated; None when there is no file. Raises :class:`UnreadableResults`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableResults(path, [f"cannot read it: {exc}"]) from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UnreadableResults(path, [f"not JSON: {exc}"]) from exc
    found = problems(data)
    if found:
        raise UnreadableResults(path, found)
    return data


def set_aside(path: Path, now: dt.datetime | None = None) -> Path:
    """Rename an unusable results file to ``<stem>.unreadable-<UTC time>.json`` beside it; the new path."""
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.stem}.unreadable-{stamp}{path.suffix}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}.unreadable-{stamp}-{n}{path.suffix}")
    path.rename(target)
    return target
