"""The snippet harness runs document code by line range and reports errors at document lines."""
import pytest

from claimcheck.snippets import load_snippet, run_snippet
from claimcheck.sources import load_sources
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def sources():
    return load_sources(ROOT)


def test_a_printed_function_is_defined_and_usable(sources):
    # foundations.txt 94-99: the stable_softmax function, without the usage line that follows it
    run = load_snippet("foundations", 94, 99, sources=sources)
    assert run.parsed and run.ran and run.defined == ["stable_softmax"]
    import torch

    out = run.namespace["stable_softmax"](torch.tensor([1000.0, 0.0]))
    assert torch.isfinite(out).all()


def test_an_error_is_reported_at_the_document_line_and_earlier_definitions_survive(sources):
    run = load_snippet("foundations", 91, 102, sources=sources)
    assert run.parsed and not run.ran
    assert (run.error_type, run.error_line) == ("NameError", 102)
    assert "logits" in run.error and "stable_softmax" in run.namespace


def test_text_that_is_not_python_does_not_parse(sources):
    run = load_snippet("foundations", 1, 3, sources=sources)
    assert not run.parsed and run.error_type == "SyntaxError" and 1 <= run.error_line <= 3


def test_a_range_outside_the_document_is_rejected(sources):
    with pytest.raises(ValueError, match="outside"):
        load_snippet("foundations", 2000, 2001, sources=sources)


def test_required_snippets_run_first_in_the_same_namespace():
    run = run_snippet("architecture.snippet-encoder-layer")
    assert run.ran and {"MultiHeadAttention", "EncoderLayer"} <= set(run.defined)


def test_a_claim_without_a_snippet_is_refused():
    with pytest.raises(KeyError, match="no such claim with a snippet"):
        run_snippet("softmax.shift-invariance")
