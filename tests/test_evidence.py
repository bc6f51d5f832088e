"""The evidence helpers: refutations pass only on a genuine counterexample."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck import ClaimViolation, NoCounterexample, claim_assert, refutes


def test_claim_assert_carries_the_values():
    with pytest.raises(ClaimViolation) as info:
        claim_assert(1 > 2, "one is not above two", one=1, two=2)
    assert info.value.example == {"one": 1, "two": 2} and "one = 1" in str(info.value)


def test_a_refutation_passes_when_the_search_finds_a_violation():
    @refutes()
    @settings(derandomize=True, database=None)
    @given(st.integers())
    def claim_all_small(x):
        claim_assert(x < 10, "big", x=x)

    claim_all_small()  # does not raise


def test_a_refutation_fails_when_no_violation_exists():
    @refutes()
    @settings(derandomize=True, database=None, max_examples=20)
    @given(st.integers(0, 5))
    def claim_all_small(x):
        claim_assert(x < 10, "big", x=x)

    with pytest.raises(NoCounterexample):
        claim_all_small()


def test_a_crash_is_never_taken_for_a_counterexample():
    @refutes(reason="constructed")
    def broken():
        raise ZeroDivisionError("bug in the evidence")

    with pytest.raises(ZeroDivisionError):
        broken()


def test_a_plain_assertion_is_not_a_counterexample_either():
    @refutes(reason="constructed")
    def sloppy():
        assert False, "plain assert"

    with pytest.raises(AssertionError, match="plain assert"):
        sloppy()


def test_a_constructed_counterexample_must_give_its_reason():
    with pytest.raises(TypeError, match="needs refutes\\(reason=...\\)"):
        @refutes()
        def bare():
            claim_assert(False, "x")


def test_values_become_plain_json():
    import json

    import numpy as np
    import torch

    from claimcheck.evidence import _plain

    values = {"t": torch.tensor([[1.0, float("inf")]]), "z": torch.tensor([1 + 2j]), "a": np.array([3, 4]),
              "c": complex(0, -1), "n": float("nan")}
    plain = _plain(values)
    assert plain == {"t": [[1.0, "inf"]], "z": {"re": 1.0, "im": 2.0}, "a": [3, 4], "c": {"re": 0.0, "im": -1.0},
                     "n": "nan"}
    json.dumps(plain, allow_nan=False)
