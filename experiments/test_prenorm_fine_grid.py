"""Pre-LN's learning-rate tolerance on a 1/16-decade grid (linear-algebra.txt line 378): the CI-scale experiment of
``experiments.prenorm_fine_grid``, registered before its code and decided at the grid's resolution
(interval-censored), and its control of the mechanism at the same scale and seeds (pre-LN without the identity
residual path, against the same post-LN scan), which must not show what the decision shows. At the CI scale the
decision is confirmed; the control rejects, but because the arm without its identity path does not train at the
anchor rate already (its cell is [0, 10^-2.5) in every seed), not because its tolerance alone was removed.
"""
import pytest

from claimcheck import control
from experiments.analysis import CONFIRMED, expect, expect_side
from experiments.prenorm_fine_grid import SCALES, TOLERANCE, FineGridTolerance

CI = SCALES["ci"]


def _values(result):
    return {m: result.values(m) for m in ("lr_pre_low", "lr_post_low", "log10_ratio_low", "log10_ratio_high")}


@pytest.mark.claim("architecture.la-prenorm-more-stable-larger-lr")
def test_pre_ln_largest_stable_learning_rate_exceeds_post_ln_on_a_sixteenth_decade_grid(decide):
    result = decide(TOLERANCE, CI)
    expect(result, CONFIRMED, **_values(result))


@pytest.mark.claim("architecture.la-prenorm-more-stable-larger-lr")
@control("pre-LN blocks secretly without their identity residual path (x -> F(Norm(x))), same seeds, scale and "
         "post-LN scan: without the proposed cause the advantage must not show",
         models=["architecture.la-prenorm-more-stable-larger-lr"])
def test_pre_ln_without_the_identity_path_has_no_learning_rate_advantage(decide):
    result = decide(FineGridTolerance(arm="pre-no-identity"), CI, registered=False)
    expect_side(result, CONFIRMED, **_values(result))
