"""Rank collapse and its gradients in deep attention-only stacks, with and without residuals (spectral.txt
line 131): the CI-scale experiment of ``experiments.rank_collapse`` and its control of the mechanism at the same
seeds and scale (the stack without residuals kept from collapsing), with its outcome predicted before it ran.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, CONTRADICTED, Decision, expect, reject_as_predicted
from experiments.rank_collapse import SCALES, CollapseGradients

CI = SCALES["ci"]


def _values(result: Decision) -> dict:
    return {"collapse_without": result.values("collapse_residual_out_no_residual"),
            "collapse_with": result.values("collapse_residual_out_residual")}


@pytest.mark.claim("spectral.rank-collapse-training-consequences")
def test_rank_collapse_weakens_query_key_gradients(decide):
    result = decide(CollapseGradients(), CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("spectral.rank-collapse-training-consequences")
@control("the stack without residuals kept from collapsing (its token deviations rescaled after each layer): the "
         "proposed cause removed, so the weakening must go", models=["spectral.rank-collapse-training-consequences"])
def test_without_residuals_but_kept_from_collapsing_the_query_key_gradients_do_not_weaken(decide):
    # predicted before it ran: with the collapse removed the weakening goes, the interval wholly below 0.5
    result = decide(CollapseGradients(collapsed="decollapsed"), CI, predicted=(CONTRADICTED,))
    reject_as_predicted(result, CONFIRMED, **_values(result))
