"""Does the code printed in the documents run as printed?

Every ``code-snippet`` claim names a line range of its document; the snippet harness
(:mod:`claimcheck.snippets`) executes it from ``sources/`` (after the snippets it requires) in a
namespace with torch, numpy, math, nn and F imported. What each snippet computes is decided by
the claims of its topic; whether it runs as a reader would use it (objects constructed, functions called)
is decided by ``test_snippets_called.py``.
"""
import pytest

from claimcheck import claim_assert, refutes
from claimcheck.snippets import run_snippet


@pytest.mark.claims_from_registry(kind="code-snippet", verdict="holds")
def test_snippet_runs_as_printed(claim_id):
    run = run_snippet(claim_id)
    claim_assert(run.ran, "the printed code does not run", snippet=run.describe())


# Only the snippets whose own lines fail when executed (a statement at top level, a syntax error, a missing package);
# the other `fails` snippets define their names and fail when called, refuted in test_snippets_called.py. (A literal:
# the registry check reads this selection from the source.)
@pytest.mark.claims_from_registry(kind="code-snippet", verdict="fails", id=("softmax.snippet-stable-softmax",
                                  "flash-attention.snippet-flash-attn-func", "rope.snippet-rope-circuit"))
@refutes(reason="the document's own code, executed as printed: its first error is the counterexample")
def test_snippet_fails_as_printed(claim_id):
    run = run_snippet(claim_id)
    claim_assert(run.ran, "the printed code does not run as printed", snippet=run.describe(),
                 error=f"{run.error_type}: {run.error}", line=run.error_line)
