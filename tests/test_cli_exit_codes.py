"""One exit-code rule for every subcommand of ``claims``: 0 success (a query answered, whatever the
claims' status); 1 the claims or the kernel failed (a mismatch or an error in the evidence, problems
``claims check`` found, a kernel case that failed); 2 a usage or input error (bad arguments, a file
that cannot be read or parsed at all, an unknown claim id or document, a function that cannot be
imported)."""
from __future__ import annotations

import json

import pytest

from claimcheck import cli
from claimcheck.cli import EXIT_CLAIMS_FAILED, EXIT_OK, EXIT_USAGE
from tests.conftest import GOOD_CLAIM, GOOD_TEST

NARROW = ["--dtype", "float32", "--mask", "none", "--examples", "1"]  # one case of the backend matrix


def _id(value) -> str | None:
    """A case's name in the test id: an arrangement's function name, or the arguments as typed."""
    return getattr(value, "__name__", None) or (" ".join(value) if isinstance(value, list) else None)


def _code(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


# claims check, on a miniature project: each case writes its files and returns the arguments


def _sound(project) -> list[str]:
    project.registry(GOOD_CLAIM)
    project.test_file("test_a.py", GOOD_TEST)
    return ["check"]


def _a_quote_off_its_line(project) -> list[str]:
    argv = _sound(project)
    project.registry(GOOD_CLAIM.replace("line: 85", "line: 60"))
    return argv


def _unparsable_registry(project) -> list[str]:
    _sound(project)
    project.registry("- id: [unclosed\n")
    return ["check"]


def _unparsable_references(project) -> list[str]:
    (project.root / "references.yaml").write_text("- key: [unclosed\n", encoding="utf-8")
    return _sound(project)


def _missing_registry_file(project) -> list[str]:
    return [*_sound(project), "--registry", str(project.root / "nowhere.yaml")]


def _bad_check_option(project) -> list[str]:
    return [*_sound(project), "--regsitry", "x"]


@pytest.mark.parametrize("arrange,code", [
    (_sound, EXIT_OK), (_a_quote_off_its_line, EXIT_CLAIMS_FAILED), (_unparsable_registry, EXIT_USAGE),
    (_unparsable_references, EXIT_USAGE), (_missing_registry_file, EXIT_USAGE), (_bad_check_option, EXIT_USAGE),
], ids=_id)
def test_claims_check_exit_code(project, arrange, code, capsys):
    argv = arrange(project)
    assert _code(["--root", str(project.root), *argv]) == code, capsys.readouterr().err


# claims report and the queries, on the sample project and its saved results


def _mismatch(tiny_project) -> None:
    results = json.loads(tiny_project.results_path.read_text())
    results["claims"][0].update(status="mismatch", detail="recorded holds, but a property failed")
    tiny_project.write_results(results)


def _no_results(tiny_project) -> None:
    tiny_project.results_path.unlink()


def _unparsable_results(tiny_project) -> None:
    tiny_project.results_path.write_text("{ not json", encoding="utf-8")


def _as_saved(tiny_project) -> None:
    pass


REPORT = ["report", "--from-results", "--no-asv"]
SHOW = ["show", "spectral.eigenvalues-positive"]


@pytest.mark.parametrize("argv,arrange,code", [
    (REPORT, _as_saved, EXIT_OK),
    (REPORT, _mismatch, EXIT_CLAIMS_FAILED),
    (REPORT, _no_results, EXIT_USAGE),
    (REPORT, _unparsable_results, EXIT_USAGE),
    (["report", "--profile", "fast"], _as_saved, EXIT_USAGE),
    (["list"], _as_saved, EXIT_OK),
    (["list"], _mismatch, EXIT_OK),  # a query answers whatever the claims' status
    (["list", "--document", "nowhere"], _as_saved, EXIT_USAGE),
    (["list"], _unparsable_results, EXIT_USAGE),
    (["list", "--verdik", "fails"], _as_saved, EXIT_USAGE),
    (SHOW, _as_saved, EXIT_OK),
    (SHOW, _mismatch, EXIT_OK),
    (["show", "spectral.no-such-claim"], _as_saved, EXIT_USAGE),
    (SHOW, _unparsable_results, EXIT_USAGE),
    (["findings"], _as_saved, EXIT_OK),
    (["findings"], _mismatch, EXIT_OK),
    (["findings", "--top", "many"], _as_saved, EXIT_USAGE),
    (["findings"], _unparsable_results, EXIT_USAGE),
    (["frobnicate"], _as_saved, EXIT_USAGE),
], ids=_id)
def test_report_and_query_exit_codes(tiny_project, argv, arrange, code, capsys):
    arrange(tiny_project)
    assert _code(["--root", str(tiny_project.root), *argv]) == code, capsys.readouterr().err


def test_an_unparsable_registry_is_an_input_error_for_every_command(tiny_project, capsys):
    (tiny_project.root / "claims.yaml").write_text("- id: [unclosed\n", encoding="utf-8")
    for argv in (REPORT, ["list"], SHOW, ["findings"], ["check"]):
        assert _code(["--root", str(tiny_project.root), *argv]) == EXIT_USAGE, argv
    assert "invalid YAML" in capsys.readouterr().err


# claims kernel: a function needs no project


@pytest.mark.parametrize("argv,code", [
    (["impl.attention:attention", *NARROW], EXIT_OK),
    (["tests.kernel_zoo:gqa_modulo", *NARROW], EXIT_CLAIMS_FAILED),
    (["nosuchmodule:fn"], EXIT_USAGE),
    (["impl.attention:attention", "--head-dims", "8"], EXIT_USAGE),
    (["impl.attention:attention", "--dtpye", "float32"], EXIT_USAGE),
], ids=_id)
def test_claims_kernel_exit_code(argv, code, capsys):
    assert _code(["kernel", *argv]) == code, capsys.readouterr().out[-2000:]
