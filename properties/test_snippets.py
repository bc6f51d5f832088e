"""Does the code printed in the documents run as printed?

Every ``code-snippet`` claim names a line range of its document; the snippet harness
(:mod:`claimcheck.snippets`) executes it from ``sources/`` (after the snippets it requires) in a
namespace with torch, numpy, math, nn and F imported. What each snippet computes is decided by
the claims of its topic; whether it runs as a reader would use it (objects constructed, functions called)
is decided by ``test_snippets_called.py``.
"""
import importlib.util
import sys
import types

import pytest

from claimcheck import claim_assert, refutes
from claimcheck.snippets import run_snippet
from properties.strategies.spectral import gaussian
from properties.test_snippets_called import AS_PRINTED, edited_run, mutant


@pytest.mark.claims_from_registry(kind="code-snippet", verdict="holds")
def test_snippet_runs_as_printed(claim_id):
    run = run_snippet(claim_id)
    claim_assert(run.ran, "the printed code does not run", snippet=run.describe())


# Only the snippets whose own lines fail when executed (a statement at top level, a syntax error, a missing package);
# the other `fails` snippets define their names and fail when called, refuted in test_snippets_called.py. (A literal:
# the registry check reads this selection from the source.)
@pytest.mark.claims_from_registry(kind="code-snippet", verdict=("fails", "partly"), id=("softmax.snippet-stable-softmax",
                                  "flash-attention.snippet-flash-attn-func", "rope.snippet-rope-circuit"))
@refutes(reason="the document's own code, executed as printed: its first error is the counterexample")
def test_snippet_fails_as_printed(claim_id):
    run = run_snippet(claim_id)
    claim_assert(run.ran, "the printed code does not run as printed", snippet=run.describe(),
                 error=f"{run.error_type}: {run.error}", line=run.error_line)


FLASH_ATTN_CALL = "flash-attention.snippet-flash-attn-func"


@pytest.mark.claim("flash-attention.snippet-flash-attn-func")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "causal=True", "causal=is_causal", "the call reads one more name the fragment never defines",
    models=FLASH_ATTN_CALL)])
def test_flash_attn_fragment_lacks_only_the_package_and_the_readers_q_k_v(mutation, monkeypatch):
    edits = [mutation] if mutation else []
    installed = importlib.util.find_spec("flash_attn") is not None
    as_printed = edited_run(FLASH_ATTN_CALL, edits)  # with this machine's flash_attn, or without it
    calls = []
    package = types.ModuleType("flash_attn")  # stands in for the package: records the call it receives
    package.flash_attn_func = lambda *args, **kwargs: calls.append((args, kwargs)) or "output of flash_attn_func"
    monkeypatch.setitem(sys.modules, "flash_attn", package)
    without_qkv = edited_run(FLASH_ATTN_CALL, edits)
    q, k, v = (gaussian((2, 6, 4, 8), seed) for seed in (33, 34, 35))  # (batch, seq_len, num_heads, head_dim), line 318
    given_qkv = edited_run(FLASH_ATTN_CALL, edits, Q=q, K=k, V=v)
    first = ("NameError", 319) if installed else ("ModuleNotFoundError", 316)
    claim_assert((as_printed.error_type, as_printed.error_line) == first and (
        without_qkv.error_type, without_qkv.error_line) == ("NameError", 319) and "'Q'" in (without_qkv.error or ""),
                 "as printed the fragment does not fail at the import (flash_attn absent) or at Q (flash_attn present)",
                 installed=installed, as_printed=as_printed.describe(), with_the_package=without_qkv.describe())
    claim_assert(given_qkv.ran and len(calls) == 1 and all(a is b for a, b in zip(calls[0][0], (q, k, v)))
                 and len(calls[0][0]) == 3 and calls[0][1] == {"causal": True}
                 and given_qkv.namespace.get("output") == "output of flash_attn_func",
                 "with the package and Q, K, V the fragment does not run as the one call "
                 "output = flash_attn_func(Q, K, V, causal=True)", run=given_qkv.describe(), calls=len(calls))
