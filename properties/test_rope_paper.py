"""Chapter 9 of foundations.txt (lines 387-500): the "Theorem 3.1" frequency schedule attributed to
Liu & Zhou (2025), theta_i = 2*pi / T_max^(2i/d_k) * lambda_i (line 453), read on its own terms.

These are consistency checks of the formula as the document prints it; what the paper's theorem
says is recorded as unverifiable (its body could not be read), see claims.yaml.
"""
from __future__ import annotations

import pytest
import sympy as sp

from claimcheck import claim_assert

i, d, T = sp.symbols("i d_k T_max", positive=True)


def _schedule(lam):
    """theta_i = 2*pi / T_max^(2i/d_k) * lambda_i (foundations:453)."""
    return 2 * sp.pi / T ** (2 * i / d) * lam


@pytest.mark.claim("long-context.rope-base-10000-not-optimal", "rope.ndim-theorem-3-1-optimal-frequency")
def test_a_free_lambda_per_dimension_reproduces_the_base_10000_schedule():
    """With lambda_i free per dimension (line 455) the schedule contains RoPE's b = 10000 (line 425): the
    formula alone cannot single out another base."""
    lam = (T / 10000) ** (2 * i / d) / (2 * sp.pi)
    diff = sp.simplify(sp.powsimp(sp.expand_power_base(_schedule(lam) - 10000 ** (-2 * i / d), force=True), force=True))
    claim_assert(diff == 0, "lambda_i = (T_max/10000)^(2i/d_k) / (2 pi) does not give theta_i = 10000^(-2i/d_k)",
                 difference=str(diff))
    claim_assert(bool(sp.simplify(lam.subs({T: 4096, d: 64, i: 3})) > 0), "that lambda_i is not a positive scale")


@pytest.mark.claim("long-context.rope-base-10000-not-optimal")
def test_one_constant_lambda_gives_base_10000_only_when_t_max_is_10000():
    """With one constant factor (line 465, "常数因子") theta_i = c * 2 pi * T_max^(-2i/d_k) equals
    10000^(-2i/d_k) at i = 0 and i = 1 only for c = 1/(2 pi) and T_max = 10000."""
    c = sp.symbols("c", positive=True)
    c0 = sp.solve(sp.Eq(_schedule(c).subs(i, 0), 1), c)  # i = 0: 2 pi c = 10000^0
    claim_assert(c0 == [1 / (2 * sp.pi)], "i = 0 does not fix c = 1/(2 pi)", solutions=str(c0))
    for d_k in (2, 8, 64, 128):  # i = 1: T_max^(-2/d_k) = 10000^(-2/d_k), real positive roots only
        eq = sp.Eq(_schedule(c0[0]).subs({i: 1, d: d_k}), sp.Integer(10000) ** sp.Rational(-2, d_k))
        roots = [r for r in sp.solve(eq, T) if r.is_real and r.is_positive]
        claim_assert(roots == [10000], "the constant-lambda schedule meets base 10000 at another T_max",
                     d_k=d_k, roots=str(roots))


@pytest.mark.claim("rope.ndim-theorem-3-1-optimal-frequency")
def test_with_unit_lambda_the_first_plane_turns_a_full_circle_per_token():
    """lambda_0 = 1 gives theta_0 = 2 pi: at every integer position m the rotation of plane 0 is the
    identity, so that plane carries no position."""
    theta0 = _schedule(1).subs(i, 0)
    k = sp.symbols("k", integer=True)
    rot = sp.Matrix([[sp.cos(k * theta0), -sp.sin(k * theta0)], [sp.sin(k * theta0), sp.cos(k * theta0)]])
    claim_assert(theta0 == 2 * sp.pi, "theta_0 is not 2 pi", theta0=str(theta0))
    claim_assert(sp.simplify(rot - sp.eye(2)) == sp.zeros(2, 2), "R(k theta_0) is not the identity for integer k",
                 rotation=str(rot))
