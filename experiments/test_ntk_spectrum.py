"""The NTK's dominant eigenvalues and the task (spectral.txt lines 258-260): the CI-scale experiment of
``experiments.ntk_spectrum``, registered before its code, and its control of the mechanism at the same seeds and
scale (labels unrelated to the inputs, a placebo of the same size), predicted not confirmed. The decision is inconclusive at this
scale (the t interval straddles 0); the spectrum's shape is recorded beside it.
"""
import pytest

from experiments.analysis import INCONCLUSIVE, NOT_CONFIRMED, expect, expect_as_predicted
from experiments.ntk_spectrum import SCALES, TaskAlignedTop

CI = SCALES["ci"]


def _values(result):
    return {"label_share": result.values("top5_label_share"), "permuted_share": result.values("top5_permuted_share"),
            "below_1pct": result.values("eigenvalues_below_1pct_of_max"), "top5_trace": result.values("trace_share_top5")}


@pytest.mark.claim("spectral.ntk-eigenvalue-distribution")
def test_the_labels_share_in_the_top_ntk_eigenvectors_over_shuffled_labels_is_inconclusive(decide):
    result = decide(TaskAlignedTop(), CI)
    expect(result, INCONCLUSIVE, **_values(result))


@pytest.mark.claim("spectral.ntk-eigenvalue-distribution")
def test_labels_unrelated_to_the_inputs_are_not_aligned_with_the_top_ntk_eigenvectors(decide):
    # predicted when the control was written: the design must not confirm an alignment with unrelated labels
    result = decide(TaskAlignedTop(unrelated_labels=True), CI, predicted=NOT_CONFIRMED)
    expect_as_predicted(result, **_values(result))
