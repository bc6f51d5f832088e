"""Hypothesis profiles are chosen explicitly: CLAIMS_PROFILE, else ci under CI, else dev."""
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PROBE = ("import properties.conftest; from hypothesis import settings; s = settings(); "
         "print(settings.get_current_profile_name() if hasattr(settings, 'get_current_profile_name') "
         "else settings._current_profile, s.max_examples, s.derandomize, s.deadline)")


def _profile(env):
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env={**base, **env}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("env, expected", [
    ({}, ["dev", "100", "False", "None"]),
    ({"CI": "true"}, ["ci", "50", "True", "None"]),
    ({"CI": "true", "CLAIMS_PROFILE": "thorough"}, ["thorough", "1000", "False", "None"]),
])
def test_profile_selection(env, expected):
    assert _profile(env) == expected


def test_an_unknown_profile_is_an_error():
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "CLAIMS_PROFILE": "fast"}
    out = subprocess.run([sys.executable, "-c", "import properties.conftest"], cwd=ROOT, env=base,
                         capture_output=True, text=True)
    assert out.returncode != 0 and "expected one of ci, dev, thorough" in out.stderr
