"""The ``claims`` command line at a terminal: the queries answer without torch."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
QUERIES = [["list"], ["list", "--verdict", "fails"], ["show", "spectral.eigenvalues-positive"], ["findings"], ["check"]]


@pytest.mark.parametrize("argv", QUERIES, ids=" ".join)
def test_the_queries_and_check_do_not_import_torch(tiny_project, argv):
    script = ("import sys\nfrom claimcheck.cli import main\nmain(sys.argv[1:])\n"
              "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", script, "--root", str(tiny_project.root), *argv],
                          capture_output=True, text=True, cwd=tiny_project.root, timeout=120)
    assert proc.stderr.splitlines()[-1] == "no torch", proc.stderr[-2000:]
