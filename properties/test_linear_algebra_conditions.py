"""Conditions that linear-algebra.txt leaves out, tested in the regime the document states.

Line 9 (the introduction) says softmax makes sigma_1 >> sigma_2 for attention matrices, with no condition at all.

Lines 123-125 explain the spectral-gap theorem (line 118: the joint limit n, d -> infinity): sigma_1 of the softmax
attention matrix is an outlier and A is approximately rank one. Both need the theorem's hypothesis, independent
random Q and K at initialisation, which the document never states: with tied projections Q = K (shared query-key
weights) in the same joint limit the diagonal logits |q_i|^2 / sqrt(d_k) ~ sqrt(d_k) dominate, A tends to the
identity, and sigma_2 / sigma_1 tends to 1 (sigma_2 / sigma_1 is also the spectral-norm error of the best rank-one
approximation, relative to ||A||_2, by Eckart-Young).
"""
import math

import pytest
import torch

from claimcheck import claim_assert, record, refutes
from impl.softmax import stable_softmax
from impl.spectral import singular_values

NS = [16, 32, 64, 128]


def _tied_ratio(n: int, gen: torch.Generator, samples: int = 2) -> float:
    """Mean sigma_2 / sigma_1 of softmax(Q Q^T / sqrt(d_k)) with d_k = n (the joint limit, tied Q = K)."""
    ratios = []
    for _ in range(samples):
        q = torch.randn(n, n, generator=gen, dtype=torch.float64)
        s = singular_values(stable_softmax(q @ q.T / math.sqrt(n)))
        ratios.append((s[1] / s[0]).item())
    return sum(ratios) / len(ratios)


@pytest.mark.claim("spectral.la-nait-saada-sigma1-outlier", "spectral.la-nait-saada-approx-rank-one",
                   "spectral.la-intro-softmax-spectral-gap-width-collapse", "spectral.la-intro-attention-rank-one-update")
@refutes(reason="tied projections Q = K with d_k = n = 16..128, 2 seeded matrices per n: the document's joint limit "
                "n, d -> infinity without the independence of Q and K that the theorem assumes and the text omits")
def test_sigma1_is_an_outlier_and_a_is_near_rank_one_in_the_joint_limit_for_tied_projections():
    gen = torch.Generator().manual_seed(21)
    ratios = [_tied_ratio(n, gen) for n in NS]
    record("series[sigma_2/sigma_1 vs n, Q = K, d_k = n]", {"n": NS, "y": ratios})
    # an outlier sigma_1 (and a near rank-one A) means sigma_2 / sigma_1 small and shrinking along the limit
    claim_assert(ratios[-1] < min(ratios[0], 0.5), "with Q = K the attention matrix tends to the identity: sigma_2 "
                 "/ sigma_1 -> 1, so sigma_1 is no outlier and the best rank-one approximation is off by ~||A||_2",
                 ratio_by_n=ratios)
