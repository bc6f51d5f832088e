"""Rank collapse and its gradients in deep attention-only stacks, with and without residuals (spectral.txt
line 131): the CI-scale experiment of ``experiments.rank_collapse`` and its negative control (``@control``:
the same assertion on a broken variant, which it must reject).
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, Decision, expect
from experiments.rank_collapse import SCALES, CollapseGradients


def assert_confirmed(result: Decision) -> None:
    expect(result, CONFIRMED, collapse_without=result.values("collapse_residual_out_no_residual"),
           collapse_with=result.values("collapse_residual_out_residual"))


@pytest.mark.claim("spectral.rank-collapse-training-consequences")
def test_rank_collapse_weakens_query_key_gradients(decide):
    assert_confirmed(decide(CollapseGradients(), SCALES["ci"]))


@pytest.mark.claim("spectral.rank-collapse-training-consequences")
@control("the stack without residual connections secretly has them")
def test_stack_with_secret_residuals_shows_no_gradient_weakening(decide):
    assert_confirmed(decide(CollapseGradients(collapsed="residual"), SCALES["control"], registered=False))
