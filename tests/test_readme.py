"""The README and the command line agree: every `claims` command the README shows runs as shown, and
every claim id it names is in the registry."""
import json
import re
import shlex
from pathlib import Path

import pytest

from claimcheck.cli import EXIT_OK, main
from claimcheck.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
# indented or fenced command lines such as "    .venv/bin/claims show ID   # comment"
_LINES = re.sub(r"\\\n\s*", " ", README).splitlines()  # join continued lines ("... \" + newline)
COMMANDS = [line.split("#")[0].strip() for line in _LINES if re.match(r"^\s+(\.venv/bin/)?claims \w", line)]
READS_RESULTS = ("report", "list", "show", "findings")  # the commands with --results
SLOW = ("report",)  # the evidence run; its --from-results form runs here
EXAMPLES = ("mypkg.",)  # a user's own kernel module, which the README uses as its example
GALLERY = ("impl.gallery:",)  # the gallery's one-line checks, at the default tier: tests/test_gallery.py runs them


def test_the_readme_shows_claims_commands():
    assert len(COMMANDS) >= 4, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_each_readme_command_runs_as_shown(command, tmp_path, capsys):
    argv = shlex.split(command)[1:]
    if any(a.startswith(EXAMPLES) for a in argv):
        pytest.skip("names the user's own module (mypkg); tests/test_kernel_cli.py runs the command on real functions")
    if any(a.startswith(GALLERY) for a in argv):
        pytest.skip("a gallery kernel at the default tier (ci): tests/test_gallery.py runs each at the smoke tier in "
                    "float32, and the top-left transformers line with its expected failure")
    if argv[0] in SLOW and "--from-results" not in argv:
        pytest.skip(f"{argv[0]} without --from-results runs the whole evidence (make report does)")
    if argv[0] in READS_RESULTS:  # the tool's tests never read the user's results/: an empty run of its own
        results = tmp_path / "claims-results.json"
        results.write_text(json.dumps({"schema": 1, "meta": None, "claims": [], "tests": []}), encoding="utf-8")
        argv += ["--results", str(results)]
    if argv[0] == "report":
        argv += ["--out", str(tmp_path / "report"), "--no-asv"]
    assert main(["--root", str(ROOT), *argv]) == EXIT_OK, capsys.readouterr().err[-2000:]


def test_every_claim_id_the_readme_names_exists():
    ids = {c.id for c in load_registry(ROOT / "claims.yaml").claims}
    topics = {i.split(".")[0] for i in ids}
    named = {m for m in re.findall(r"\b([a-z][a-z-]+\.[a-z0-9][a-z0-9.-]*[a-z0-9])\b", README)
             if m.split(".")[0] in topics and not m.endswith((".py", ".yaml", ".json", ".md", ".txt"))}
    examples = {"softmax.shift-invariance", "other.claim-id"}  # the "how to add a claim" template
    assert named - examples <= ids, sorted(named - examples - ids)
