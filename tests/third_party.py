"""Attention references written outside this project, read from the wheels pinned in ``tools/oracles.txt``.

``make`` fetches those wheels at set-up (``pip download --no-deps --require-hashes``) into ``.venv/oracles``
(``CLAIMS_ORACLES`` names another folder). Nothing is installed: a pure-Python wheel is a zip that Python imports
from when it is on ``sys.path`` (attn-gym), and flash-attn-4's package ``__init__`` needs CUDA and the CuTe DSL,
so its one CPU file, ``flash_attn/cute/testing.py``, is executed on its own by path.

A missing wheel skips the tests that need it, with the reason and the command that fetches it; under
``CLAIMS_REQUIRE_ORACLES=1`` (CI) it fails them instead, so a broken set-up cannot pass by skipping.
"""
from __future__ import annotations

import functools
import os
import sys
import types
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tools" / "oracles.txt"
FETCH = ".venv/bin/python -m pip download --no-deps --require-hashes -r tools/oracles.txt -d .venv/oracles"


def _folder() -> Path:
    return Path(os.environ.get("CLAIMS_ORACLES", ROOT / ".venv" / "oracles"))


def pinned() -> dict[str, str]:
    """``{distribution: version}`` of ``tools/oracles.txt``."""
    out = {}
    for line in PINNED.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].split()
        if requirement:
            name, _, version = requirement[0].partition("==")
            out[name] = version
    return out


def wheel(distribution: str) -> Path:
    """The pinned wheel of ``distribution`` in the oracles folder; skip (or fail under CI) when it is missing."""
    version = pinned()[distribution]
    path = _folder() / f"{distribution.replace('-', '_')}-{version}-py3-none-any.whl"
    if not path.is_file():
        reason = f"the oracle wheel {path.name} is not in {_folder()} (fetch it: {FETCH})"
        if os.environ.get("CLAIMS_REQUIRE_ORACLES"):
            pytest.fail(f"CLAIMS_REQUIRE_ORACLES is set but {reason}")
        pytest.skip(reason)
    return path


@functools.cache
def flash_attn_testing() -> types.ModuleType:
    """flash-attn-4's ``flash_attn/cute/testing.py`` (``attention_ref`` and its mask builders), run as a module."""
    path = wheel("flash-attn-4")
    member = "flash_attn/cute/testing.py"
    module = types.ModuleType("flash_attn_cute_testing")
    module.__file__ = f"{path}/{member}"
    source = zipfile.ZipFile(path).read(member)
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - a pinned, hashed wheel's file
    return module


@functools.cache
def attn_gym() -> types.ModuleType:
    """The ``attn_gym`` package, imported from its wheel (its masks and score modifications are pure functions)."""
    path = str(wheel("attn-gym"))
    if path not in sys.path:
        sys.path.append(path)
    import attn_gym.masks
    import attn_gym.mods

    return attn_gym
