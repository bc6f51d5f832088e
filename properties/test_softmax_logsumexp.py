"""The log-sum-exp normaliser of the stable softmax (foundations.txt line 85), ``impl.softmax.logsumexp``:
``log sum_j exp(x_j) = max x + log sum_j exp(x_j - max x)``, the per-row statistic L that the tiled
algorithms keep. A value against a 50-digit oracle (mpmath, no shared code) and the laws that define it.
"""
import math

import mpmath
import pytest
import torch
from hypothesis import given

from claimcheck import claim_assert
from impl.softmax import logsumexp, stable_softmax
from properties.strategies import finite_floats, logit_vectors

EPS64 = 2.0**-52


@pytest.mark.claim("softmax.stable-softmax-matches-torch-and-no-overflow")
@given(x=logit_vectors(max_len=16, bound=1e3))
def test_logsumexp_equals_the_50_digit_log_of_the_sum_of_exponentials(x):
    with mpmath.workdps(50):
        exact = float(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(v))) for v in x.tolist())))
    got = logsumexp(x).item()
    # max + log(sum of n terms in [0, 1], one of them 1): the log errs by ~(n + 2) u absolutely (its argument is
    # >= 1, relative error (n + 1) u), the final sum rounds by u |result|: (n + 2) u + u (|max| + ln n) with n <= 16
    tol = (len(x) + 2) * EPS64 + 2 * EPS64 * (abs(exact) + math.log(len(x)) + 1)
    claim_assert(math.isfinite(got) and abs(got - exact) <= tol, "logsumexp differs from log sum exp beyond rounding",
                 x=x, got=got, exact=exact, tol=tol)


@pytest.mark.claim("softmax.stable-softmax-matches-torch-and-no-overflow")
@given(x=logit_vectors(max_len=16, bound=1e3), c=finite_floats(1e3))
def test_logsumexp_shifts_with_its_input_bounds_the_max_and_normalises_the_softmax(x, c):
    lse = logsumexp(x).item()
    m, n = x.max().item(), len(x)
    size = abs(m) + abs(c) + math.log(n) + 1  # the magnitude every result below is rounded at
    # lse(x + c) = lse(x) + c: the shift x + c rounds each entry (u |x + c|), then as above: 24 u of the size
    claim_assert(abs(logsumexp(x + c).item() - (lse + c)) <= 24 * EPS64 * size, "logsumexp(x + c) != logsumexp(x) + c",
                 x=x, c=c)
    # max x <= L <= max x + ln n, each up to the rounding of L (4 u of its size)
    claim_assert(m - 4 * EPS64 * size <= lse <= m + math.log(n) + 4 * EPS64 * size, "L is outside [max, max + ln n]",
                 x=x, lse=lse)
    # exp(x - L) is the softmax: x - L rounds by u size, the exp turns it relative; the softmax rounds ~4 u
    claim_assert(bool(((torch.exp(x - lse) - stable_softmax(x)).abs() <= 8 * EPS64 * size).all()),
                 "exp(x - logsumexp(x)) is not the softmax", x=x)
