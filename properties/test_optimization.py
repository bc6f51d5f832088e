"""Jacobians, signal propagation, NTK and optimisation statements (spectral.txt 184-268, 418-449, 533-544;
linear-algebra.txt 346-370, 543-561, 592-594).

Jacobians are taken with ``torch.func.jacrev`` (``impl.jacobians``) on float64 sequences; random stacks
use N(0, 1/d) weights, seeded. Depth sweeps record ``series[...]`` of the end-to-end Jacobian norm.
"""
import ast
import contextlib
import copy
import functools
import io
import math
import re
from unittest import mock

import pytest
import sympy as sp
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record, refutes
from impl.critical_scaling import loglog_fit
from impl.jacobians import (chain, jacobian, layer_norm, layer_norm_jacobian, post_norm_block, pre_norm_block, residual,
                            rms_norm, rms_norm_jacobian, self_attention)
from impl.spectral import singular_values, spectral_norm
from properties.strategies.spectral import gaussian, printed_code, real_matrices, seeds, vectors

EPS64 = 2.0**-52


def _weights(d: int, seed: int, count: int = 4) -> list[torch.Tensor]:
    return [gaussian((d, d), seed + i) / math.sqrt(d) for i in range(count)]


def _attention_branch(w: list[torch.Tensor]):
    wq, wk, wv, wo = w
    return lambda x: self_attention(x, wq, wk, wv) @ wo


def _mlp_branch(w: list[torch.Tensor]):
    return lambda x: torch.tanh(x @ w[0]) @ w[1]


# ---- the claims' wrong variants, for the negative controls (claimcheck.control) -------------------------------


def _branch_subtracted(f):
    """``x - F(x)``: the residual block with the branch's sign flipped."""
    return lambda x: x - f(x)


def _unnormalised(x: torch.Tensor) -> torch.Tensor:
    return x


def _layer_norm_jacobian_with_s_held_fixed(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """``diag(gamma) (1/s) (I - 1 1^T/d)``: LayerNorm's Jacobian with s treated as a constant (no ``y y^T / d``)."""
    d = x.shape[0]
    s = torch.sqrt(((x - x.mean()) ** 2).mean() + eps)
    return gamma[:, None] * (torch.eye(d, dtype=x.dtype) - torch.ones(d, d, dtype=x.dtype) / d) / s


@pytest.mark.claim("spectral.residual-jacobian-identity-plus", "optimization.la-residual-jacobian-identity-plus",
                   "spectral.attention-block-jacobian-identity-plus", "spectral.layer-jacobian-definition",
                   "architecture.la-prenorm-residual-path-jacobian-exactly-identity")
@pytest.mark.parametrize("block", [
    pytest.param(residual, id="exact"),
    pytest.param(_branch_subtracted, id="branch-subtracted",
                 marks=control("x - F(x) for x + F(x): its Jacobian is I - dF/dx",
                     models=["spectral.residual-jacobian-identity-plus",
                             "optimization.la-residual-jacobian-identity-plus",
                             "spectral.attention-block-jacobian-identity-plus"])),
])
@given(seed=seeds(), n=st.integers(1, 4), d=st.integers(1, 4), attention=st.booleans())
def test_residual_block_jacobian_is_identity_plus_branch_jacobian(seed, n, d, attention, block):
    w = _weights(d, seed)
    f = _attention_branch(w) if attention else _mlp_branch(w)
    x = gaussian((n, d), seed + 9)
    eye = torch.eye(n * d, dtype=torch.float64)
    j_f = jacobian(f, x)
    # x's gradient sums the skip's I with F's input paths (q, k, v: <= 4 terms, reordered, 3 u) and the test subtracts
    # J_F and I (2 u): 2.5 eps of 1 + |J_F|; 4 eps
    claim_assert((jacobian(block(f), x) - j_f - eye).abs().max() <= 4 * EPS64 * (1 + j_f.abs().max().item()),
                 "d(x + F(x))/dx != I + dF/dx", seed=seed, attention=attention)
    # pre-norm: the skip path contributes exactly I; everything else comes through F(LN(x))
    pre = jacobian(pre_norm_block(f, layer_norm), x) - jacobian(lambda t: f(layer_norm(t)), x)
    # as above, but I joins LN's backward (g - mean g - y mean(g y)) / s, terms <= (2 + sqrt d) |J_F(LN x)| / s
    s_min = torch.sqrt(((x - x.mean(-1, keepdim=True)) ** 2).mean(-1) + 1e-5).min().item()
    scale = 1 + (2 + math.sqrt(d)) * jacobian(f, layer_norm(x)).abs().max().item() / s_min
    claim_assert((pre - eye).abs().max() <= 4 * EPS64 * scale, "the pre-norm residual path's Jacobian is not I",
                 seed=seed)


@pytest.mark.claim("spectral.prenorm-jacobian-formula", "architecture.la-prenorm-residual-path-jacobian-exactly-identity")
@pytest.mark.parametrize("branch_input", [
    pytest.param(layer_norm, id="exact"),
    pytest.param(_unnormalised, id="branch-derivative-at-x",
                 marks=control("F' evaluated at x, not at LN(x): J = I + F'(x) LN'(x)",
                               models="spectral.prenorm-jacobian-formula")),
])
@given(seed=seeds(), d=st.integers(3, 6))
def test_prenorm_jacobian_is_identity_plus_branch_at_ln_times_ln_jacobian(seed, d, branch_input):
    w = _weights(d, seed)
    f = _mlp_branch(w)
    x = gaussian((d,), seed + 9)
    j_f_at_ln = jacobian(f, branch_input(x))  # F' evaluated at LN(x), not at x
    expected = torch.eye(d, dtype=torch.float64) + j_f_at_ln @ layer_norm_jacobian(x)
    # d-term sums (mean, variance, the products) of terms <= 1 + 3 (1 + |W_1|^T |W_0|^T) / s (LN' entries <= 3 / s),
    # the centring z - mean amplifying rounding by |z| / s; twice (autograd and closed form)
    terms = (w[1].abs().T @ w[0].abs().T).sum(1).max().item()

    def tol(z):
        s = math.sqrt(((z - z.mean()) ** 2).mean().item() + 1e-5)
        return 2 * d * EPS64 * (1 + 3 * (1 + terms) / s) * (1 + z.abs().max().item() / s)

    claim_assert((jacobian(pre_norm_block(f, layer_norm), x) - expected).abs().max() <= tol(x),
                 "J != I + F'(LN x) LN'(x)", seed=seed)
    # post-norm N(x + F(x)): the skip path is multiplied by N'(x + F(x)), so it is not I
    post = jacobian(post_norm_block(f, layer_norm), x)
    expected_post = layer_norm_jacobian(x + f(x)) @ (torch.eye(d, dtype=torch.float64) + jacobian(f, x))
    claim_assert((post - expected_post).abs().max() <= tol(x + f(x)), "post-norm J != N'(x + F x)(I + F'(x))",
                 seed=seed)


@pytest.mark.claim("spectral.layernorm-jacobian-bounded")
@pytest.mark.parametrize("closed_form", [
    pytest.param(layer_norm_jacobian, id="exact"),
    pytest.param(_layer_norm_jacobian_with_s_held_fixed, id="s-held-fixed",
                 marks=control("gamma / s (I - 1 1^T / d), the Jacobian with s treated as a constant: no y y^T / d")),
])
@given(x=vectors(3, 8, 100.0), gamma=st.floats(0.1, 3.0), eps=st.sampled_from([1e-5, 1e-6, 1e-3]))
@example(x=torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64), gamma=1.0, eps=1e-5)  # y y^T / d of size 1
def test_layer_norm_jacobian_norm_is_gamma_over_sqrt_var_plus_eps(x, gamma, eps, closed_form):
    g = torch.full_like(x, gamma)
    auto = jacobian(lambda t: layer_norm(t, g, eps=eps), x)
    var = ((x - x.mean()) ** 2).mean().item()
    # entries gamma / s (I - 11^T/d - y y^T/d), terms <= 3 gamma / s, from d-term sums (mean, variance); the centring
    # x - mean amplifies rounding by |x| / s (x up to 100, s down to sqrt(eps)); twice (autograd and closed form)
    d = x.shape[0]
    tol = 2 * 3 * d * EPS64 * gamma / math.sqrt(var + eps) * (1 + x.abs().max().item() / math.sqrt(var + eps))
    claim_assert((auto - closed_form(x, g, eps)).abs().max() <= tol,
                 "autograd differs from gamma/s (I - 11^T/d - y y^T/d)", x=x)
    # eigenvalues of the projector: 0 on 1, eps/(var+eps) on y, 1 on the rest (d >= 3)
    norm, exact = spectral_norm(auto).item(), gamma / math.sqrt(var + eps)
    # the entries' error (tol, d of them per row) and the SVD's 16 d eps relative
    tol_norm = d * tol + 16 * d * EPS64 * exact
    claim_assert(abs(norm - exact) <= tol_norm and norm <= gamma / math.sqrt(eps) + tol_norm,
                 "||J_LN||_2 != gamma / sqrt(var + eps) or exceeds gamma / sqrt(eps)", x=x, norm=norm, exact=exact)


@pytest.mark.claim("spectral.layernorm-jacobian-bounded")
@given(x=vectors(2, 8, 100.0), gamma=st.floats(0.1, 3.0))
def test_rms_norm_jacobian_matches_its_closed_form(x, gamma):
    assume(float((x**2).mean()) > 1e-6)  # mean(x^2) above RMSNorm's eps = 1e-6, the regime where it normalises
    g = torch.full_like(x, gamma)
    auto = jacobian(lambda t: rms_norm(t, g), x)
    r = math.sqrt(float((x**2).mean()) + 1e-6)
    # entries gamma / r (I - x x^T / (d r^2)), terms <= 2 gamma / r, from a d-term sum of squares (no cancellation):
    # d eps relative, twice; the norm adds d entries' errors and the SVD's 16 d eps (eigenvalues 1 and eps / r^2)
    d = x.shape[0]
    tol = 2 * 2 * d * EPS64 * gamma / r
    claim_assert((auto - rms_norm_jacobian(x, g)).abs().max() <= tol and
                 spectral_norm(auto).item() <= gamma / r + d * tol + 16 * d * EPS64 * gamma / r,
                 "RMSNorm Jacobian differs from its closed form",
                 x=x)


@pytest.mark.claim("spectral.network-jacobian-product-of-layers", "optimization.la-chain-rule-product-of-jacobians",
                   "spectral.layer-jacobian-definition")
@given(seed=seeds(), depth=st.integers(1, 4), d=st.integers(1, 4))
def test_network_jacobian_is_the_product_with_later_layers_on_the_left(seed, depth, d):
    layers = [residual(_mlp_branch(_weights(d, seed + 10 * l))) for l in range(depth)]
    x = gaussian((d,), seed + 99)

    def network(t):
        for f in layers:
            t = f(t)
        return t

    _, jacs = chain(layers, x)
    descending = torch.eye(d, dtype=torch.float64)
    terms = torch.eye(d, dtype=torch.float64)
    for j, l in zip(jacs, range(depth)):
        descending = j @ descending  # J_L ... J_2 J_1
        w = _weights(d, seed + 10 * l)
        terms = (torch.eye(d, dtype=torch.float64) + w[1].abs().T @ w[0].abs().T) @ terms  # |J_l| <= I + |W_1|^T |W_0|^T
    # per layer and per side: J_l = I + W_1^T diag(tanh') W_0^T (d-term sums, the I added) and one d-term product;
    # (2 d + 1) u each, two sides: (2 d + 1) eps per layer, on terms of size |J_L| ... |J_1|
    claim_assert((jacobian(network, x) - descending).abs().max() <= depth * (2 * d + 1) * EPS64 * terms.max().item(),
                 "the network Jacobian is not J_L ... J_1", seed=seed)
    # the gradient of a scalar loss (row vector) times the same ordered product
    g = torch.func.grad(lambda t: network(t).sum())(x)
    # as above, and the d-term sum 1^T (...)
    ones = torch.ones(d, dtype=torch.float64)
    claim_assert((g - ones @ descending).abs().max() <= (depth * (2 * d + 1) + d) * EPS64 * (ones @ terms).max().item(),
                 "dL/dx_0 != dL/dx_L J_L ... J_1", seed=seed)


@pytest.mark.claim("spectral.network-jacobian-product-of-layers", "optimization.la-chain-rule-product-of-jacobians")
@pytest.mark.parametrize("product", [
    pytest.param(lambda j1, j2: j2 @ j1, id="chain-rule-order"),
    pytest.param(lambda j1, j2: j1 @ j2, id="ascending", marks=control(
        "prod_l J_l multiplied in ascending order, J_1 J_2: the reading of the product sign that would make the "
        "formulas false", models=["spectral.network-jacobian-product-of-layers",
                                  "optimization.la-chain-rule-product-of-jacobians"]))])
def test_two_non_commuting_layers_compose_in_chain_rule_order(product):
    """prod_{l=1}^{L} J_l read as the chain rule orders it, later layers on the left; two linear layers
    x -> A x, x -> B x on R^2 with A B != B A, the smallest pair on which the order shows."""
    a = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    _, (j1, j2) = chain([lambda x: a @ x, lambda x: b @ x], torch.ones(2, dtype=torch.float64))
    true = jacobian(lambda x: b @ (a @ x), torch.ones(2, dtype=torch.float64))
    # small-integer matrices: both products are exact, so equality is exact; the two orders differ by 1
    claim_assert(torch.equal(product(j1, j2), true), "the product of the layer Jacobians is not the network's "
                 "Jacobian", product=product(j1, j2), true_jacobian=true)


@pytest.mark.claim("spectral.theorem-4-1-stable-iff-layer-norm-le-1-plus-eps")
@refutes(reason="two layers J_1 = diag(2, 1/2), J_2 = diag(1/2, 2): the smallest product that is perfectly stable "
                "(J = I) with layer norms 2")
def test_stable_propagation_requires_layer_norms_at_most_one_plus_eps():
    j1 = torch.diag(torch.tensor([2.0, 0.5], dtype=torch.float64))
    j2 = torch.diag(torch.tensor([0.5, 2.0], dtype=torch.float64))
    product = j2 @ j1
    # "1 + eps" read with a generous eps = 0.5; the layer norms are exactly 2
    claim_assert(max(spectral_norm(j1), spectral_norm(j2)) <= 1.5, "J = I propagates every signal unchanged, yet "
                 "||J_l||_2 = 2 > 1 + eps", product=product, layer_norms=[spectral_norm(j1), spectral_norm(j2)])


@pytest.mark.claim("spectral.theorem-4-1-stable-iff-layer-norm-le-1-plus-eps", "spectral.residual-stable-when-jf-norm-lt-1",
                   "optimization.la-residual-guarantees-no-exponential-vanishing")
@pytest.mark.parametrize("compose,guaranteed_floor", [
    pytest.param(lambda upper, r: upper * (1 + r), lambda lower: lower, id="product"),
    pytest.param(lambda upper, r: max(upper, 1 + r), lambda lower: lower, id="largest-layer-bound", marks=control(
        "the end-to-end bound taken as the largest layer bound 1 + ||J^F|| (layers within 1 + eps, or with "
        "||J^F|| < 1, read as stable at every depth): the product-bound check must reject it",
        models=["spectral.theorem-4-1-stable-iff-layer-norm-le-1-plus-eps",
                "spectral.residual-stable-when-jf-norm-lt-1"])),
    pytest.param(lambda upper, r: upper * (1 + r), lambda lower: 1.0, id="no-vanishing", marks=control(
        "the guarantee the claim reads into I + J^F: the product's smallest singular value never below 1",
        models="optimization.la-residual-guarantees-no-exponential-vanishing")),
])
@example(mats=[torch.eye(3, dtype=torch.float64)] * 5)  # J^F = I / 2 five times: ||J|| = 1.5^5 = 7.6
@given(mats=st.lists(real_matrices(3, 3, 1.0, square=True), min_size=1, max_size=5))
def test_product_bounds_follow_from_layer_bounds(compose, guaranteed_floor, mats):
    product, upper, lower = torch.eye(3, dtype=torch.float64), 1.0, 1.0
    for jf in mats:
        jf = jf / max(1.0, 2 * spectral_norm(jf).item())  # ||J^F|| <= 1/2
        j = torch.eye(3, dtype=torch.float64) + jf
        s = singular_values(j)
        r = spectral_norm(jf).item()
        # two SVDs (of I + J^F, norm <= 1.5, and of J^F), each within 16 * 3 eps of its norm, and I + J^F's rounding
        tol = 16 * 3 * EPS64 * (1.5 + 0.5) + EPS64 * 1.5
        claim_assert(1 - r - tol <= s[-1] and s[0] <= 1 + r + tol, "singular values of I + J^F leave "
                     "[1 - ||J^F||, 1 + ||J^F||]", jf=jf)
        product, upper, lower = j @ product, compose(upper, r), lower * (1 - r)
    s = singular_values(product)
    # each factor's r is within 16 * 3 eps (relative to upper), each 3 x 3 product rounds by 3 u of |J| |P| <= 3 ||J|| ||P||
    # in norm, and the final SVD adds 16 * 3 eps: absolute errors relative to the largest value, upper
    tol = (len(mats) * (48 + 9) + 48) * EPS64 * upper
    claim_assert(s[0] <= upper + tol and s[-1] >= guaranteed_floor(lower) - tol, "the product leaves "
                 "[prod (1 - ||J^F||), prod (1 + ||J^F||)]", bounds=[lower, upper], singular_values=s)


@pytest.mark.claim("spectral.residual-stable-when-jf-norm-lt-1")
@refutes(reason="20 residual layers with J^F = 0.5 I (||J^F|| = 0.5 < 1): the simplest admissible branch")
def test_residual_layers_with_branch_norm_below_one_propagate_stably():
    j = torch.eye(2, dtype=torch.float64) * 1.5
    total = torch.linalg.matrix_power(j, 20)
    # 10 stands for any "stable" bound: 1.5^20 = 3325 exceeds it 330-fold
    claim_assert(spectral_norm(total) <= 10, "each layer has ||J_l|| = 1.5 and 20 of them amplify by 1.5^20",
                 layer_norm=1.5, end_to_end=spectral_norm(total))


@pytest.mark.claim("optimization.la-residual-guarantees-no-exponential-vanishing")
@refutes(reason="20 residual layers x + F(x) with F(x) = -0.9 x in R^2: the simplest contracting branch")
def test_residual_connections_prevent_exponentially_vanishing_gradients():
    layers = [residual(lambda x: -0.9 * x) for _ in range(20)]
    _, jacs = chain(layers, torch.ones(2, dtype=torch.float64))
    total = torch.eye(2, dtype=torch.float64)
    for j in jacs:
        total = j @ total
    # 1e-3 stands for any "not vanishing" floor: 0.1^20 = 1e-20 lies 1e17 below it
    claim_assert(spectral_norm(total) >= 1e-3, "the gradient is scaled by 0.1^20", end_to_end=spectral_norm(total))


@functools.lru_cache(maxsize=None)
def _depth_sweep(kind: str, depths: tuple[int, ...], gain: float = 1.0) -> torch.Tensor:
    """||J|| after each depth in ``depths`` for random residual attention stacks (n = 4, d = 8), each branch's output
    multiplied by ``gain``: (seeds, depths)."""
    n, d, out = 4, 8, []
    for seed in SEEDS:
        norms, total = [], torch.eye(n * d, dtype=torch.float64)
        x = gaussian((n, d), 500 + seed)
        for l in range(max(depths)):
            branch = _attention_branch(_weights(d, 1000 * seed + 10 * l))
            f = (lambda x, branch=branch: gain * branch(x)) if gain != 1.0 else branch
            block = residual(f) if kind == "none" else pre_norm_block(f, layer_norm)
            total = jacobian(block, x) @ total
            x = block(x)
            if l + 1 in depths:
                norms.append(spectral_norm(total).item())
        out.append(norms)
    return torch.tensor(out, dtype=torch.float64)


SEEDS = (0, 1, 2, 3)
DEPTHS = (2, 4, 8, 16)  # without normalisation ||J|| passes 1e3 by depth 16
PRE_DEPTHS = (2, 4, 8, 16, 32)


def _growth_per_layer(depths: tuple[int, ...], norms: torch.Tensor):
    """Least-squares slope of log ||J|| against the depth L (a rate per layer), with its 95% interval."""
    return loglog_fit(torch.tensor(depths, dtype=torch.float64).exp().repeat(len(SEEDS)), norms.flatten())


@pytest.mark.claim("spectral.residual-gives-stable-spectrum-without-layernorm", "spectral.prenorm-overall-stable")
@refutes(reason="random residual attention stacks without normalisation (n = 4 tokens, d = 8, N(0, 1/d) weights, "
                "4 seeds), depth 2..16: every layer's Jacobian is bounded, the product is not")
def test_residual_stack_without_layernorm_has_a_stable_jacobian_spectrum():
    norms = _depth_sweep("none", DEPTHS)
    rate = _growth_per_layer(DEPTHS, norms)
    record("series[||J|| vs depth, residual attention, no LayerNorm]", {"n": list(DEPTHS), "y": norms.mean(0).tolist()})
    record("fit[log ||J|| per layer, no LayerNorm]", rate.as_figure())
    # "stable": growth below 5% per layer (exp 0.05); the whole 95% interval lies above 0.34 (41% per layer)
    record("lower 95% bound of the log-growth per layer / 0.05", rate.ci95[0] / 0.05)
    claim_assert(rate.ci95[1] < 0.05, "||J|| grows exponentially with depth", growth_per_layer=math.exp(rate.exponent),
                 ci95=rate.ci95, norms=norms.mean(0))


@pytest.mark.claim("spectral.residual-gives-stable-spectrum-without-layernorm")
@pytest.mark.parametrize("gain", [pytest.param(1.0, id="n01-over-d-branches"), pytest.param(1 / 16, id="branches-over-16", marks=control(
    "every branch scaled by 1/16 (a Fixup/ReZero-like small initialisation): a residual stack whose Jacobian stays "
    "tame, which the exponential-growth check must reject",
    models=["spectral.residual-gives-stable-spectrum-without-layernorm"]))])
def test_residual_stack_without_layernorm_has_a_jacobian_growing_exponentially_with_depth(gain):
    rate = _growth_per_layer(DEPTHS, _depth_sweep("none", DEPTHS, gain))
    record("95% interval of the log-growth of ||J|| per layer", list(rate.ci95))
    # exponential growth: the whole 95% interval of the log-growth per layer (4 seeds x 4 depths) lies above 0.3, i.e.
    # at least x1.35 per layer; the interval is what bounds the seeds' spread
    claim_assert(rate.ci95[0] > 0.3, "the log of ||J|| does not grow by at least 0.3 per layer",
                 growth_per_layer=math.exp(rate.exponent), ci95=rate.ci95)


@pytest.mark.claim("spectral.prenorm-overall-stable")
@pytest.mark.parametrize("pre_ln", [pytest.param(lambda norms: norms, id="measured"), pytest.param(
    lambda norms: norms[:, :1] * (1 - 1e-3 * torch.linspace(0, 1, norms.shape[1], dtype=norms.dtype)),
    id="depth-independent", marks=control(
        "line 230's overall stability: the pre-LN norms held at their depth-2 value at every depth (a 0.1% drift keeps "
        "the fit's residuals non-zero): the check that they still grow must reject it",
        models=["spectral.prenorm-overall-stable"]))])
def test_prenorm_stack_jacobian_grows_far_slower_than_without_normalisation(pre_ln):
    pre, none = pre_ln(_depth_sweep("pre", PRE_DEPTHS)), _depth_sweep("none", DEPTHS)
    fit = loglog_fit(torch.tensor(PRE_DEPTHS, dtype=torch.float64).repeat(len(SEEDS)), pre.flatten())
    rate_pre, rate_none = _growth_per_layer(PRE_DEPTHS, pre), _growth_per_layer(DEPTHS, none)
    record("series[||J|| vs depth, pre-LN residual attention]", {"n": list(PRE_DEPTHS), "y": pre.mean(0).tolist()})
    record("fit[||J|| vs depth, pre-LN]", fit.as_figure())
    record("fit[log ||J|| per layer, pre-LN]", rate_pre.as_figure())
    # tamer: the per-layer log-growth rate of pre-LN lies wholly below that of the un-normalised stack (95% intervals),
    # the log-log slope stays below 2, and at depth 16 the geometric mean is 5x below the un-normalised one
    ratio = math.exp(none[:, -1].log().mean().item() - pre[:, PRE_DEPTHS.index(16)].log().mean().item())
    record("||J|| ratio no-LN / pre-LN at depth 16 (geometric means)", ratio)
    claim_assert(rate_pre.ci95[1] < rate_none.ci95[0] and fit.ci95[1] < 2 and ratio > 5, "pre-LN does not tame the "
                 "product", exponent=fit.exponent, ci95=fit.ci95, rate_pre=rate_pre.ci95, rate_none=rate_none.ci95,
                 ratio_at_16=ratio)
    # it still grows, so depth-independent stability is not what holds
    claim_assert(bool((pre[:, -1] > pre[:, 0]).all()), "the pre-LN Jacobian norm does not grow with depth",
                 exponent=fit.exponent)


@pytest.mark.claim("optimization.la-connection-residual-spectral-norm-constraint")
@refutes(reason="one residual block with branch F(x) = 10 W x (W seeded, ||W||_2 = 1, d = 4): nothing in x + F(x) "
                "constrains the spectral norm")
def test_residual_connection_constrains_the_spectral_norm():
    w = gaussian((4, 4), 90)
    w = w / spectral_norm(w)
    j = jacobian(residual(lambda x: 10 * w @ x), torch.ones(4, dtype=torch.float64))
    # ||I + F'|| <= 2 would be the constraint ||F'|| <= 1 implies; ||I + 10 W|| >= 9 exceeds it 4.5-fold
    record("||I + 10 W||_2 / 2", spectral_norm(j).item() / 2)
    claim_assert(spectral_norm(j) <= 2, "||I + 10 W||_2 is about 10: no spectral-norm constraint", norm=spectral_norm(j))


@pytest.mark.claim("optimization.la-connection-residual-spectral-norm-constraint")
@pytest.mark.parametrize("branch_norm", [pytest.param(10.0, id="branch-10-W"), pytest.param(
    1.0, id="constrained", marks=control(
        "the branch held to ||F'||_2 <= 1, the spectral-norm constraint the claim says a residual connection is",
        models="optimization.la-connection-residual-spectral-norm-constraint"))])
@given(seed=seeds())
@settings(max_examples=10)  # 2000 tiny steps per example
def test_residual_steps_with_step_h_are_euler_steps_of_an_ode(branch_norm, seed):
    # nothing in x + F(x) caps its Jacobian: with F(x) = 10 W x, ||W||_2 = 1, ||I + 10 W||_2 >= 10 - 1 (triangle
    # inequality), far past the 2 that ||F'|| <= 1 would allow; the SVD rounds by a few eps of 11
    u = gaussian((4, 4), seed + 2)
    block = jacobian(residual(lambda x: branch_norm * (u / spectral_norm(u)) @ x), torch.ones(4, dtype=torch.float64))
    claim_assert(spectral_norm(block).item() >= 9 - 1e-12, "the residual block's Jacobian stays near the constraint "
                 "||I + F'|| <= 2", norm=spectral_norm(block).item(), branch_norm=branch_norm)
    w = gaussian((3, 3), seed) / 3
    x0 = gaussian((3,), seed + 1)
    exact = torch.linalg.matrix_exp(w) @ x0  # dx/dt = W x, t = 1
    errors = []
    for steps in (200, 2000):
        x = x0.clone()
        for _ in range(steps):
            x = x + (1 / steps) * (w @ x)
        errors.append((x - exact).abs().max().item())
    # first order: 10x the steps divide the error by ~10 (5 leaves room for the O(h^2) term); the floor: each of the
    # 2000 steps rounds by ~u |x| (h W x is small), grown by at most e^||W|| along the way
    floor = 2000 * EPS64 * math.exp(spectral_norm(w).item()) * x0.abs().max().item()
    claim_assert(errors[1] <= errors[0] / 5 + floor, "x + h F(x) does not converge to the ODE flow like h",
                 errors=errors, seed=seed)


def _mha(x, ws, h):
    """(n, d) -> (n, d): h heads of width d/h, W^O mixing the concatenated heads."""
    wq, wk, wv, wo = ws
    d_k = x.shape[1] // h
    heads = [self_attention(x, wq[:, i * d_k:(i + 1) * d_k], wk[:, i * d_k:(i + 1) * d_k], wv[:, i * d_k:(i + 1) * d_k])
             for i in range(h)]
    return torch.cat(heads, dim=1) @ wo


@pytest.mark.claim("spectral.multihead-jacobian-block-diagonal")
@refutes(reason="n = 2 tokens, d = 4, h = 2 heads: the smallest multi-head layer")
def test_multi_head_jacobian_is_the_direct_sum_of_head_jacobians():
    n, d, h = 2, 4, 2
    ws, x = _weights(d, 91), gaussian((n, d), 92)
    per_head = [jacobian(lambda t, i=i: _mha_head(t, ws, h, i), x) for i in range(h)]
    direct_sum = torch.block_diag(*per_head)
    full = jacobian(lambda t: _mha(t, ws, h), x)
    claim_assert(direct_sum.shape == full.shape, "the direct sum has h (n d) columns: each head differentiates the "
                 "whole input, so the head Jacobians stack, they do not sit on a diagonal",
                 direct_sum=tuple(direct_sum.shape), mha_jacobian=tuple(full.shape))


def _mha_head(x, ws, h, i):
    wq, wk, wv, _ = ws
    d_k = x.shape[1] // h
    cols = slice(i * d_k, (i + 1) * d_k)
    return self_attention(x, wq[:, cols], wk[:, cols], wv[:, cols])


@pytest.mark.claim("spectral.multihead-jacobian-block-diagonal", "spectral.multihead-spectrum-union-of-heads")
@pytest.mark.parametrize("head_jacobian", [pytest.param(lambda j, i, d_k: j, id="dense"), pytest.param(
    lambda j, i, d_k: j * ((torch.arange(j.shape[1]) % (j.shape[1] // (j.shape[0] // d_k))) // d_k == i),
    id="own-block-only", marks=control(
        "line 382's block-diagonal Jacobian: head i's Jacobian kept on its own input features only (the rest zeroed): "
        "the sum check must reject it", models=["spectral.multihead-jacobian-block-diagonal"]))])
@example(seed=0, n=1, h=2)  # the smallest layer with two heads
@given(seed=seeds(), n=st.integers(1, 3), h=st.integers(1, 3))
@settings(max_examples=20)  # a few Jacobians per example
def test_multi_head_jacobian_is_the_sum_of_head_jacobians_mixed_by_w_o(head_jacobian, seed, n, h):
    d = 2 * h
    ws, x = _weights(d, seed), gaussian((n, d), seed + 7)
    wo = ws[3]
    d_k = d // h
    total = sum(torch.kron(torch.eye(n, dtype=torch.float64), wo[i * d_k:(i + 1) * d_k].T.contiguous())
                @ head_jacobian(jacobian(lambda t, i=i: _mha_head(t, ws, h, i), x), i, d_k) for i in range(h))
    full = jacobian(lambda t: _mha(t, ws, h), x)
    # a head's backward is linear in its cotangent: mixing by W_O before it (full) or after it (total) reorders
    # d-term and h-term sums of terms of size (I kron |W_O^i|^T) |J_i|
    scale = sum(torch.kron(torch.eye(n, dtype=torch.float64), wo[i * d_k:(i + 1) * d_k].T.abs().contiguous())
                @ jacobian(lambda t, i=i: _mha_head(t, ws, h, i), x).abs() for i in range(h)).max().item()
    claim_assert((full - total).abs().max() <= 2 * (d + h) * EPS64 * scale,
                 "J_MHA != sum_i (I kron W_O^i^T) J_i", seed=seed)


@pytest.mark.claim("spectral.multihead-spectrum-union-of-heads")
@refutes(reason="n = 2 tokens, d = 4, h = 2 heads: each head maps R^{n d} to R^{n d/h}")
def test_each_head_jacobian_has_eigenvalues():
    ws, x = _weights(4, 93), gaussian((2, 4), 94)
    shape = tuple(jacobian(lambda t: _mha_head(t, ws, 2, 0), x).shape)
    claim_assert(shape[0] == shape[1], "a head's Jacobian is not square, so it has no eigenvalues to pool",
                 head_jacobian_shape=shape)


def _two_layer(params: dict, x: torch.Tensor) -> torch.Tensor:
    """NTK parametrisation f(x) = a . tanh(W x / sqrt(d)) / sqrt(m) (Jacot et al. 2018)."""
    m, d = params["w"].shape
    return torch.tanh(x @ params["w"].T / math.sqrt(d)) @ params["a"] / math.sqrt(m)


def _standard_two_layer(params: dict, x: torch.Tensor) -> torch.Tensor:
    """Standard parametrisation f(x) = a . tanh(W x / sqrt(d)) with a ~ N(0, 1/m): no 1/sqrt(m) in the forward."""
    d = params["w"].shape[1]
    return torch.tanh(x @ params["w"].T / math.sqrt(d)) @ params["a"]


def _init(m: int, d: int, seed: int) -> dict:
    return {"w": gaussian((m, d), seed), "a": gaussian((m,), seed + 1)}


def _ntk(params: dict, xs: torch.Tensor, network=_two_layer) -> torch.Tensor:
    jac = torch.func.jacrev(lambda p: network(p, xs))(params)
    flat = torch.cat([jac["w"].reshape(xs.shape[0], -1), jac["a"].reshape(xs.shape[0], -1)], dim=1)
    return flat @ flat.T


@pytest.mark.claim("optimization.la-ntk-matrix-definition", "spectral.ntk-definition")
@pytest.mark.parametrize("network", [
    pytest.param(_two_layer, id="ntk-parametrisation"),
    pytest.param(_standard_two_layer, id="without-1-over-sqrt-m",
                 marks=control("the Gram matrix of the network without the 1/sqrt(m) of the NTK parametrisation: "
                               "it grows with the width (variance ~ m) instead of concentrating like 1/m",
                               models="spectral.ntk-definition")),
])
def test_empirical_ntk_is_a_psd_gram_matrix_that_concentrates_with_width(network):
    xs = gaussian((3, 4), 95)
    widths, spread = [32, 128, 512, 2048], []
    for m in widths:
        thetas = torch.stack([_ntk(_init(m, 4, 1000 * m + s), xs, network) for s in range(12)])
        theta = thetas[0]
        ev = torch.linalg.eigvalsh(theta)
        # Theta = J J^T: (i, j) and (j, i) are P-term dot products, each within P u |J_i| |J_j| <= P u max diag; Theta's
        # rounding moves eigenvalues by <= 3 P u max diag (3 x 3), eigvalsh by 16 * 3 eps ||Theta||
        p = m * 4 + m
        claim_assert((theta - theta.T).abs().max() <= p * EPS64 * theta.diagonal().max()
                     and ev.min() >= -(3 * p / 2 + 48) * EPS64 * ev.max(), "Theta is not a "
                     "symmetric PSD Gram matrix", width=m, eigenvalues=ev)
        spread.append(thetas[:, 0, 1].var().item())
    fit = loglog_fit(torch.tensor(widths), torch.tensor(spread))
    record("series[variance of Theta(x1, x2) over 12 inits vs width]", {"n": widths, "y": spread})
    record("fit[variance of Theta vs width]", fit.as_figure())
    # the kernel's fluctuation around its limit has variance O(1/m): slope -1 within its 95% interval (the interval is
    # the tolerance), and the interval excludes a rate slower than 1/sqrt(m)
    claim_assert(fit.ci95[0] <= -1 <= fit.ci95[1] and fit.ci95[1] < -0.5, "Theta does not concentrate "
                 "like 1/width", exponent=fit.exponent, ci95=fit.ci95)


def _full_ntk(jac: torch.Tensor, jac_t: torch.Tensor):
    """Theta(X, X) and Theta(X_test, X) from the parameter Jacobians (n, P), (n_test, P)."""
    return jac @ jac.T, jac_t @ jac.T


def _readout_kernel(jac: torch.Tensor, jac_t: torch.Tensor, width: int = 16):
    """The same Gram matrices over the last ``width`` parameters only (the readout a of ``_flatten(_init(16, 3))``)."""
    return _full_ntk(jac[:, -width:], jac_t[:, -width:])


def _squared_loss_gradient(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d/df of 1/2 ||f - y||^2."""
    return f - y


def _cross_entropy_gradient(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Negative control: d/df of the binary cross-entropy of logits f against targets sigmoid(y), sigmoid(f) - sigmoid(y)
    (the document's training loop uses a cross-entropy, line 551)."""
    return torch.sigmoid(f) - torch.sigmoid(y)


@pytest.mark.claim("optimization.la-ntk-kernel-regression-view", "optimization.la-summary-kernel-view-ntk",
                   "spectral.ntk-regime-kernel-regression", "optimization.la-ntk-linear-dynamics-closed-form",
                   "optimization.la-connection-ntk-training-dynamics", "spectral.ntk-top-eigenvalues-set-learning-speed")
@pytest.mark.parametrize("kernel,loss_gradient", [
    pytest.param(_full_ntk, _squared_loss_gradient, id="ntk"),
    pytest.param(_readout_kernel, _squared_loss_gradient, id="readout-kernel",
                 marks=control("the kernel of the readout weights a only (J restricted to a) for the full NTK")),
    pytest.param(_full_ntk, _cross_entropy_gradient, id="cross-entropy", marks=control(
        "training on a cross-entropy loss, whose dynamics the claim also takes to be linear with the closed form",
        models="optimization.la-ntk-linear-dynamics-closed-form")),
])
@given(seed=seeds())
@settings(max_examples=10)  # each example trains a linearised model for 200 steps
def test_linearised_network_trains_as_closed_form_kernel_regression(seed, kernel, loss_gradient):
    params0 = _init(16, 3, seed)
    xs, xt = gaussian((5, 3), seed + 2), gaussian((2, 3), seed + 3)
    ys = gaussian((5,), seed + 4)
    flat0, unflatten = _flatten(params0)

    def f(flat, x):
        return _two_layer(unflatten(flat), x)

    jac = torch.func.jacrev(f)(flat0, xs)  # (5, P)
    jac_t = torch.func.jacrev(f)(flat0, xt)
    f0, f0_t = f(flat0, xs), f(flat0, xt)
    theta, theta_t = kernel(jac, jac_t)
    eta = 0.5 / torch.linalg.eigvalsh(theta).max().item()
    flat = flat0.clone()
    for _ in range(200):  # gradient descent on 1/2 ||f_lin - y||^2 of f_lin = f0 + J (theta - theta0)
        flat = flat - eta * jac.T @ loss_gradient(f0 + jac @ (flat - flat0), ys)
    pred = f0 + jac @ (flat - flat0)
    closed = ys + torch.linalg.matrix_power(torch.eye(5, dtype=torch.float64) - eta * theta, 200) @ (f0 - ys)
    # both sides are products of 200 contractions (||I - eta Theta|| <= 1) of vectors of size |f0 - y|: each step
    # rounds P-term sums J (theta - theta0) (and the closed form's Theta = J J^T): 200 (P + 5) eps |f0 - y|
    tol = 200 * (flat0.numel() + 5) * EPS64 * (f0 - ys).abs().max().item()
    claim_assert((pred - closed).abs().max() <= tol, "training residuals differ from (I - eta Theta)^t (f0 - y)",
                 seed=seed)
    # each eigen-direction i of the residual decays exactly as (1 - eta lambda_i)^t
    lam, vecs = torch.linalg.eigh(theta)
    decay = (vecs.T @ (pred - ys)) / (vecs.T @ (f0 - ys))
    ok = (vecs.T @ (f0 - ys)).abs() > 1e-6
    # numerators err by ~30 eps |f0 - y| (measured; the bound above is the worst case, 3e-12), denominators are > 1e-6:
    # the ratios err by ~1e-8 (measured up to 5e-14); 1e-6 rests on the measured, not the worst-case, rounding
    claim_assert(not ok.any() or (decay[ok] - (1 - eta * lam[ok]) ** 200).abs().max() <= 1e-6,
                 "a mode does not decay like (1 - eta lambda_i)^t", seed=seed)
    # the test prediction follows the kernel-regression formula f0(x) + Theta(x, X) Theta^-1 (f_t(X) - f0(X))
    pred_t = f0_t + jac_t @ (flat - flat0)
    kernel = f0_t + theta_t @ torch.linalg.solve(theta, pred - f0)
    # exact in exact arithmetic (theta - theta0 = J^T c lies in the row space of J); the solve loses ~ cond(Theta) eps,
    # so 1e-6 relative admits cond(Theta) up to ~1e9
    claim_assert((pred_t - kernel).abs().max() <= 1e-6 * max(1.0, pred_t.abs().max().item()),
                 "test predictions differ from kernel regression with the NTK", seed=seed)


def _flatten(params: dict):
    shapes = {k: v.shape for k, v in params.items()}
    flat = torch.cat([v.reshape(-1) for v in params.values()])

    def unflatten(vec):
        out, i = {}, 0
        for k, s in shapes.items():
            size = int(torch.tensor(s).prod())
            out[k] = vec[i:i + size].reshape(s)
            i += size
        return out

    return flat, unflatten


@pytest.mark.claim("optimization.la-ntk-linearization-in-input")
@refutes(reason="a width-16 two-layer network at 3 inputs in R^3 (seeded): the input-gradient Gram matrix and the "
                "parameter-gradient (NTK) Gram matrix of the same network")
def test_ntk_linearisation_is_the_first_order_expansion_in_the_input():
    params, xs = _init(16, 3, 96), gaussian((3, 3), 97)
    input_grads = torch.stack([torch.func.grad(lambda x: _two_layer(params, x[None])[0])(x) for x in xs])
    input_kernel, ntk = input_grads @ input_grads.T, _ntk(params, xs)
    # equal kernels would agree to ~P eps (P-term Gram sums); 1e-6 relative is generous, the gap is O(1) relative
    record("violation margin (max |difference| / tolerance)",
           ((input_kernel - ntk).abs().max() / (1e-6 * ntk.abs().max())).item())
    claim_assert((input_kernel - ntk).abs().max() <= 1e-6 * ntk.abs().max(), "the kernel of the input linearisation "
                 "is not the NTK: the NTK linearises in the parameters", input_kernel=input_kernel, ntk=ntk)


@pytest.mark.claim("optimization.la-ntk-linearization-in-input")
@pytest.mark.parametrize("linearisation", [pytest.param("parameters", id="in-theta"), pytest.param(
    "input", id="in-x", marks=control(
        "the input expansion f(x_0) + grad_x f(x_0) (x - x_0) as the linear model: at a fixed input it has no "
        "parameter term", models="optimization.la-ntk-linearization-in-input"))])
def test_parameter_linearisation_error_is_second_order(linearisation):
    params, xs = _init(16, 3, 98), gaussian((3, 3), 99)
    flat0, unflatten = _flatten(params)
    direction = gaussian(flat0.shape, 100)
    jac = torch.func.jacrev(lambda v: _two_layer(unflatten(v), xs))(flat0)
    if linearisation == "input":  # d/dtheta of f(x_0; theta_0) + grad_x f(x_0; theta_0) (x - x_0) at x = x_0
        jac = torch.zeros_like(jac)
    errors = []
    for step in (1e-2, 5e-3):
        exact = _two_layer(unflatten(flat0 + step * direction), xs)
        errors.append((exact - _two_layer(params, xs) - jac @ (step * direction)).abs().max().item())
    # second order: halving the step divides the remainder a s^2 + b s^3 by 4 (1 + b s / 2 + ...); +-0.5 lets the cubic
    # term be 1/8 of the quadratic one at s = 1e-2
    record("remainder ratio at step 1e-2 / 5e-3", errors[0] / errors[1])
    claim_assert(3.5 <= errors[0] / errors[1] <= 4.5, "f(theta) - f(theta0) - J (theta - theta0) is not O(|dtheta|^2)",
                 errors=errors)


def _descent_step(theta: torch.Tensor, grad: torch.Tensor, eta: float) -> torch.Tensor:
    return theta - eta * grad


def _ascent_step(theta: torch.Tensor, grad: torch.Tensor, eta: float) -> torch.Tensor:
    return theta + eta * grad


def _top_eigenvalue(h: torch.Tensor) -> float:
    return torch.linalg.eigvalsh(h).max().item()


def _mean_eigenvalue(h: torch.Tensor) -> float:
    return (torch.trace(h) / h.shape[0]).item()


@pytest.mark.claim("spectral.gradient-flow-equation", "spectral.hessian-controls-dynamics")
@pytest.mark.parametrize("step,curvature", [
    pytest.param(_descent_step, _top_eigenvalue, id="exact"),
    pytest.param(_ascent_step, _top_eigenvalue, id="ascent",
                 marks=control("theta + eta grad L for theta - eta grad L: the flow's other sign",
                               models="spectral.gradient-flow-equation")),
    pytest.param(_descent_step, _mean_eigenvalue, id="mean-curvature",
                 marks=control("the mean Hessian eigenvalue tr(H) / d for lambda_max in the step-size threshold",
                               models="spectral.hessian-controls-dynamics")),
])
@given(seed=seeds(), d=st.integers(1, 4))
@settings(max_examples=20)
@example(seed=0, d=3)  # d > 1: lambda_max and the mean eigenvalue differ
def test_gradient_descent_on_a_quadratic_follows_the_flow_and_needs_eta_below_2_over_lambda_max(seed, d, step,
                                                                                             curvature):
    b = gaussian((d, d), seed)
    h = b @ b.T + 0.1 * torch.eye(d, dtype=torch.float64)  # Hessian of L = theta^T H theta / 2
    theta0 = gaussian((d,), seed + 1)
    exact = torch.linalg.matrix_exp(-h) @ theta0  # gradient flow at t = 1
    errors = []
    for steps in (100, 1000):
        theta = theta0.clone()
        for _ in range(steps):
            theta = step(theta, h @ theta, 1 / steps)  # grad L = H theta
        errors.append((theta - exact).abs().max().item())
    # first order: 10x the steps divide the error by ~10 (5 leaves room for the O(eta^2) term); the floor: each of the
    # 1000 steps rounds by ~u |theta| (eta H theta is small), and |theta| <= ||theta_0|| (H is positive definite)
    floor = 1000 * EPS64 * torch.linalg.vector_norm(theta0).item()
    claim_assert(errors[1] <= errors[0] / 5 + floor, "GD does not approach the flow as eta -> 0", errors=errors)
    lam = curvature(h)
    v = torch.linalg.eigh(h).eigenvectors[:, -1]
    ends = [torch.linalg.vector_norm(torch.linalg.matrix_power(torch.eye(d, dtype=torch.float64) - c / lam * h, 200) @ v).item()
            for c in (1.9, 2.1)]
    # on the top eigenvector |1 - c|^200: 0.9^200 = 7e-10 and 1.1^200 = 2e8, 1e6 and 2e5 from the thresholds
    claim_assert(ends[0] < 1e-3 and ends[1] > 1e3, "stability of GD is not set by eta lambda_max < 2", ends=ends)


def _sharp_flat_loss(t: torch.Tensor) -> torch.Tensor:
    """Two minima at loss 0: sharp at -1 (curvature 100), flat at +2 (curvature 1)."""
    return torch.minimum(50 * (t + 1) ** 2, 0.5 * (t - 2) ** 2)


RHO = 0.1


def _sam_objective(theta: torch.Tensor) -> torch.Tensor:
    """``max_{|e| <= rho} L(theta + e)`` (Foret et al. 2021, eq. 1), the inner max over a fine grid of e."""
    e = torch.linspace(-RHO, RHO, 201, dtype=torch.float64)
    return _sharp_flat_loss(theta[:, None] + e[None, :]).max(dim=1).values


def _min_over_the_ball(theta: torch.Tensor) -> torch.Tensor:
    """``min_{|e| <= rho} L(theta + e)``: the inner max replaced by a min, on the same grid."""
    e = torch.linspace(-RHO, RHO, 201, dtype=torch.float64)
    return _sharp_flat_loss(theta[:, None] + e[None, :]).min(dim=1).values


@pytest.mark.claim("spectral.sam-lowers-hessian-top-eigenvalue", "spectral.sam-objective")
@pytest.mark.parametrize("objective", [
    pytest.param(_sam_objective, id="exact"),
    pytest.param(_min_over_the_ball, id="min-over-the-ball",
                 marks=control("min over ||e|| <= rho for the max: min_theta min_e L(theta + e) ignores sharpness",
                               models="spectral.sam-objective")),
])
def test_sam_objective_is_minimised_at_the_flat_minimum(objective):
    # -1 + rho rounds by eps / 2, a relative eps / (2 rho) in e, doubled by the square; and a few roundings of L
    claim_assert(abs(objective(torch.tensor([-1.0])).item() - 100 * RHO**2 / 2)
                 <= 100 * RHO**2 / 2 * (EPS64 / RHO + 4 * EPS64),
                 "SAM objective at a quadratic minimum is not L + lambda rho^2 / 2")
    grid = torch.linspace(-2.0, 3.0, 50001, dtype=torch.float64)
    loss, sam = _sharp_flat_loss(grid), objective(grid)
    best = grid[sam.argmin()].item()
    hess = torch.func.grad(torch.func.grad(_sharp_flat_loss))
    curvature = {"sam minimiser": hess(torch.tensor(best, dtype=torch.float64)).item(),
                 "sharp minimum": hess(torch.tensor(-1.0, dtype=torch.float64)).item()}
    record("SAM objective at the two minima (rho = 0.1)", {"sharp (-1)": objective(torch.tensor([-1.0])).item(),
                                                           "flat (2)": objective(torch.tensor([2.0])).item()})
    # L ties the two minima at 0; the SAM objective adds lambda rho^2 / 2 near each and picks the flat one
    # the grid's middle point e_0 is 3.5e-18, not 0: it moves L by <= |L'| |e_0| <= 30 |e_0|, and the two
    # evaluations of L round by <= 2 eps L
    e0 = torch.linspace(-RHO, RHO, 201, dtype=torch.float64).abs().min().item()
    claim_assert(bool((sam >= loss - (2 * EPS64 * loss + 30 * e0)).all()), "max over the ball is below L(theta)")
    # near 2 the SAM objective is (|theta - 2| + rho)^2 / 2, minimised at 2: the grid (step 1e-4) finds it within a step
    claim_assert(abs(best - 2) <= 1e-4 * (1 + 1e-9) and curvature["sam minimiser"] == 1.0 and curvature["sharp minimum"] == 100.0,
                 "the SAM objective is not minimised at the low-curvature minimum", argmin=best, curvature=curvature)


def _relu_net(w1: float, w2: float, x: torch.Tensor) -> torch.Tensor:
    return w2 * torch.relu(w1 * x)


def _hessian_top(w1: float, w2: float, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = lambda p: ((_relu_net(p[0], p[1], x) - y) ** 2).mean() / 2
    return torch.linalg.eigvalsh(torch.func.hessian(loss)(torch.tensor([w1, w2], dtype=torch.float64))).max().item()


@pytest.mark.claim("spectral.sharp-minimum-large-eig-poor-generalization", "spectral.flat-minimum-small-eig-good-generalization")
@refutes(reason="f(x) = w2 relu(w1 x) fitted exactly (w1 = w2 = 1, data y = relu(x)), reparametrised to "
                "(alpha w1, w2 / alpha) for alpha = 10 (Dinh et al. 2017): the same function, so the same test error")
def test_sharpness_of_a_minimum_decides_its_generalisation():
    x, xt = gaussian((20,), 101), gaussian((20,), 102)
    y, yt = torch.relu(x), torch.relu(xt) + 0.1 * gaussian((20,), 103)  # noisy held-out targets
    test_err = lambda w1, w2: ((_relu_net(w1, w2, xt) - yt) ** 2).mean().item()
    flat, sharp = (1.0, 1.0), (10.0, 0.1)
    lam = {"(1, 1)": _hessian_top(*flat, x, y), "(10, 0.1)": _hessian_top(*sharp, x, y)}
    err = {"(1, 1)": test_err(*flat), "(10, 0.1)": test_err(*sharp)}
    # the same function up to rounding: w2 relu(w1 x) is relu(x) within 2 u |f|, moving (f - y)^2 by <= 4 u |f| |f - y|;
    # each side's squares and 20-term mean round by (4 + 20) u of the error; a difference beyond that would be real
    f = torch.relu(xt)
    tol = 2 * EPS64 * (f * (f - yt).abs()).mean().item() + 12 * EPS64 * max(err.values())
    record("test-error difference / tolerance", abs(err["(1, 1)"] - err["(10, 0.1)"]) / tol)
    record("top Hessian eigenvalue and test error of two parametrisations", {"lambda_max": lam, "test_error": err})
    claim_assert(abs(err["(1, 1)"] - err["(10, 0.1)"]) > tol, "two minima with lambda_max differing 100-fold "
                 "compute the same function and generalise identically", lambda_max=lam, test_error=err)


def _quadratic_minimum(lam: float, ratio: float, angle: float):
    """L(theta) = theta^T H theta / 2 with H = R diag(lam, ratio * lam) R^T (R a rotation): a minimum at 0."""
    c, s = math.cos(angle), math.sin(angle)
    rot = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    h = rot @ torch.diag(torch.tensor([lam, ratio * lam], dtype=torch.float64)) @ rot.T
    return lambda theta: ((theta @ h) * theta).sum(-1) / 2  # theta (2,) or a batch (m, 2)


def _sharpness(loss, rho: float) -> float:
    """eps-sharpness max_{|e| <= rho} L(e) - L(0) of a convex loss: its maximum lies on the circle |e| = rho (grid)."""
    t = torch.linspace(0, 2 * math.pi, 4001, dtype=torch.float64)
    circle = rho * torch.stack([t.cos(), t.sin()], dim=1)
    return loss(circle).max().item() - loss(torch.zeros(2, dtype=torch.float64)).item()


def _lambda_max(loss) -> float:
    return torch.linalg.eigvalsh(torch.func.hessian(loss)(torch.zeros(2, dtype=torch.float64))).max().item()


@pytest.mark.claim("spectral.sharp-minimum-large-eig-poor-generalization", "spectral.flat-minimum-small-eig-good-generalization",
                   "spectral.sharp-minima-small-eig-generalize-well", "spectral.flat-minima-large-eig-generalize-poorly")
@pytest.mark.parametrize("curvature_of, reparametrise", [
    pytest.param(_lambda_max, lambda a: (a, 1 / a), id="lambda-max"), pytest.param(
        lambda loss: 1 / _lambda_max(loss), lambda a: (a, 1 / a), id="sharp-means-small-eigenvalue", marks=control(
            "lines 537-538's pairing, sharpness decreasing in the Hessian eigenvalue (1 / lambda_max in its place): the "
            "check that eps-sharpness is lambda_max rho^2 / 2 must reject it",
            models=["spectral.sharp-minima-small-eig-generalize-well", "spectral.flat-minima-large-eig-generalize-poorly"])),
    pytest.param(_lambda_max, lambda a: (a, 1.0), id="sharpness-moves-the-function", marks=control(
        "lines 434-436's premise that sharpness decides generalisation, i.e. a change of lambda_max changes the function: "
        "(alpha w1, w2) in place of (alpha w1, w2 / alpha); the same-function check must reject it",
        models=["spectral.sharp-minimum-large-eig-poor-generalization",
                "spectral.flat-minimum-small-eig-good-generalization"]))])
@example(alpha=10.0, lam=100.0, ratio=0.5, angle=0.0, rho=0.1)  # the refutation's alpha = 10
@given(alpha=st.floats(0.1, 10.0), lam=st.floats(0.01, 100.0), ratio=st.floats(0.0, 1.0), angle=st.floats(0.0, 3.2),
       rho=st.floats(0.01, 1.0))
def test_sharpness_grows_with_lambda_max_and_is_not_reparametrisation_invariant(curvature_of, reparametrise, alpha, lam,
                                                                                ratio, angle, rho):
    loss = _quadratic_minimum(lam, ratio, angle)
    sharp, top = _sharpness(loss, rho), curvature_of(loss)
    # the grid misses the maximising direction by at most pi / 4000 rad: relative error <= (pi / 4000)^2 < 1e-6
    claim_assert(abs(sharp - top * rho**2 / 2) <= 1e-6 * top * rho**2, "eps-sharpness is not lambda_max rho^2 / 2",
                 lam=lam, ratio=ratio, sharpness=sharp, lambda_max=top)
    x = gaussian((8,), 104)
    same = (_relu_net(*reparametrise(alpha), x) - _relu_net(1.0, 1.0, x)).abs().max().item()
    # three roundings (1 / alpha, alpha x, the product): 1.5 eps |x|; 2 eps
    claim_assert(same <= 2 * EPS64 * x.abs().max().item(), "reparametrisation changed the function", alpha=alpha)


@pytest.mark.claim("spectral.sharp-minima-small-eig-generalize-well", "spectral.flat-minima-large-eig-generalize-poorly")
@refutes(reason="two isotropic 2-D quadratic minima with Hessian 0.1 I and 10 I and radius rho = 0.1: the smallest "
                "pair that orders sharpness")
def test_sharp_minima_have_small_hessian_eigenvalues():
    minima = {lam: _quadratic_minimum(lam, 1.0, 0.0) for lam in (0.1, 10.0)}
    sharpness = {_lambda_max(loss): _sharpness(loss, 0.1) for loss in minima.values()}
    sharper = max(sharpness, key=sharpness.get)
    claim_assert(sharper == min(sharpness), "the sharper minimum is the one with the LARGER Hessian eigenvalue "
                 "(line 434 agrees)", sharpness_by_lambda_max=sharpness)


@pytest.mark.claim("optimization.la-weight-decay-is-frobenius-penalty")
@refutes(reason="one AdamW step (lr 0.1, weight_decay 0.1) on a 2-vector with loss sum(w), vs one Adam step on "
                "sum(w) + 0.1 ||w||^2 / 2: the smallest case")
def test_adamw_weight_decay_equals_a_frobenius_penalty():
    def step(opt_cls, penalty, **kw):
        w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
        opt = opt_cls([w], lr=0.1, **kw)
        (w.sum() + penalty * (w**2).sum() / 2).backward()
        opt.step()
        return w.detach()

    decoupled, coupled = step(torch.optim.AdamW, 0.0, weight_decay=0.1), step(torch.optim.Adam, 0.1)
    # equal updates would agree to a few eps; allclose's default 1e-5 relative is generous, the steps differ by 0.01
    record("violation margin (max |difference| / allclose tolerance)",
           ((decoupled - coupled).abs() / (1e-8 + 1e-5 * coupled.abs())).max().item())
    claim_assert(torch.allclose(decoupled, coupled), "AdamW's decoupled decay is not the gradient of lambda ||W||_F^2",
                 adamw=decoupled, adam_with_penalty=coupled)


@pytest.mark.claim("optimization.la-weight-decay-is-frobenius-penalty")
@pytest.mark.parametrize("optimizer", [pytest.param(torch.optim.SGD, id="SGD"), pytest.param(
    torch.optim.AdamW, id="AdamW", marks=control("AdamW (the document's own loop, line 545), whose decay the claim "
                                                 "also takes for the penalty", models="optimization.la-weight-decay-is-frobenius-penalty"))])
@given(w=vectors(1, 6, 10.0), lam=st.floats(0.0, 1.0), lr=st.floats(1e-3, 1.0))
@example(w=torch.tensor([1.0, -2.0], dtype=torch.float64), lam=0.1, lr=0.1)
def test_sgd_weight_decay_equals_the_gradient_of_half_lambda_frobenius_squared(optimizer, w, lam, lr):
    def step(wd, penalty):
        p = torch.nn.Parameter(w.clone())
        opt = optimizer([p], lr=lr, weight_decay=wd)
        (torch.sin(p).sum() + penalty * (p**2).sum() / 2).backward()
        opt.step()
        return p.detach()

    # a few roundings (the penalty's backward 2 p lam / 2, the sum with cos p, the lr product, the subtraction) of terms
    # of size |w| and lr (1 + lam |w|): 4 eps
    scale = w.abs().max().item() + lr * (1 + lam * w.abs().max().item())
    claim_assert((step(lam, 0.0) - step(0.0, lam)).abs().max() <= 4 * EPS64 * scale,
                 "SGD weight decay differs from the L2 penalty (lambda/2)||W||^2", w=w, lam=lam)


def _batches(count: int, vocab: int = 5, n: int = 3):
    gen = torch.Generator().manual_seed(7)
    return [(torch.randint(0, vocab, (1, n), generator=gen), torch.randint(0, vocab, (1, n), generator=gen))
            for _ in range(count)]


def _printed_train_loop(edit: tuple[str, str] | None = None):
    """The printed ``train_transformer``, or (a negative control) its source with one edit, run in a copy of the
    snippet's namespace."""
    run = printed_code("architecture.snippet-la-linear-algebraic-transformer")
    if edit is None:
        return run.namespace["train_transformer"]
    node = next(n for n in ast.parse(run.code).body if isinstance(n, ast.FunctionDef) and n.name == "train_transformer")
    code, (old, new) = ast.get_source_segment(run.code, node), edit
    premise(code.count(old) == 1, "the edit of the control names one place of the printed loop", old=old)
    namespace = dict(run.namespace)
    exec(compile(code.replace(old, new), "<train_transformer, edited>", "exec"), namespace)
    return namespace["train_transformer"]


@pytest.mark.claim("optimization.la-train-adamw-lr-wd", "optimization.la-train-cross-entropy-flattened",
                   "optimization.la-train-logs-every-100-batches")
@pytest.mark.parametrize("edit", [
    pytest.param(None, id="printed"),
    pytest.param(("lr=1e-4", "lr=1e-3"), id="lr-1e-3", marks=control("the loop with lr = 1e-3 for the printed 1e-4",
                                                                     models="optimization.la-train-adamw-lr-wd")),
    pytest.param(("batch_idx % 100 == 0", "batch_idx % 10 == 0"), id="log-every-10",
                 marks=control("the loop logging every 10 batches, not every 100",
                               models="optimization.la-train-logs-every-100-batches")),
    pytest.param(("F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))",
                  "F.cross_entropy(logits[:, -1], targets[:, -1])"), id="last-token-loss",
                 marks=control("the loss of the last position only, not over the flattened (B n) tokens",
                               models="optimization.la-train-cross-entropy-flattened")),
])
def test_printed_training_loop_uses_adamw_cross_entropy_and_logs_every_100_batches(edit):
    ns = printed_code("architecture.snippet-la-linear-algebraic-transformer").namespace
    train = _printed_train_loop(edit)
    torch.manual_seed(8)
    model = ns["LinearAlgebraicTransformer"](5, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_seq_len=4, dropout=0.0)
    before = copy.deepcopy(model)
    batches = _batches(101)
    out = io.StringIO()
    with mock.patch.object(torch.optim, "AdamW", wraps=torch.optim.AdamW) as adamw, contextlib.redirect_stdout(out):
        train(model, batches, n_epochs=1)
    kwargs = adamw.call_args.kwargs
    claim_assert(kwargs == {"lr": 1e-4, "weight_decay": 0.1}, "the optimiser is not AdamW(lr=1e-4, weight_decay=0.1)",
                 kwargs=kwargs)
    import inspect
    claim_assert(inspect.signature(train).parameters["n_epochs"].default == 3, "n_epochs default != 3")
    lines = out.getvalue().strip().splitlines()
    claim_assert([int(re.search(r"Batch (\d+)", l).group(1)) for l in lines] == [0, 100], "logging is not at batches "
                 "0 and 100 of 101", lines=lines)
    ids, targets = batches[0]
    with torch.no_grad():
        logits, _ = before(ids)
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1)).item()
    printed = float(re.search(r"Loss ([0-9.]+)", lines[0]).group(1))
    # the loop prints loss:.4f, half a unit of the 4th decimal; the loss itself is the same float32 forward pass
    claim_assert(abs(printed - expected) <= 5e-5, "the first printed loss is not token-level cross-entropy over the "
                 "flattened (B n, vocab) logits", printed=printed, expected=expected)


def _deeper_sharp_loss(t: torch.Tensor) -> torch.Tensor:
    """The landscape of ``_sharp_flat_loss`` with the sharp minimum (curvature 100 at -1) made deeper by 1."""
    return torch.minimum(50 * (t + 1) ** 2 - 1.0, 0.5 * (t - 2) ** 2)


@pytest.mark.claim("spectral.sam-lowers-hessian-top-eigenvalue")
@refutes(reason="one 1-D landscape, the smallest: minima of curvature 100 (depth -1) and 1 (depth 0); the sharp one "
                "is deeper by 1, more than SAM's curvature penalty (100 - 1) rho^2 / 2 = 0.495 at rho = 0.1")
def test_sam_always_ends_at_a_lower_curvature_minimum():
    grid = torch.linspace(-2.0, 3.0, 50001, dtype=torch.float64)
    e = torch.linspace(-RHO, RHO, 201, dtype=torch.float64)
    sam = _deeper_sharp_loss(grid[:, None] + e[None, :]).max(dim=1).values
    best = grid[sam.argmin()].item()
    hess = torch.func.grad(torch.func.grad(_deeper_sharp_loss))
    curvature = hess(torch.tensor(best, dtype=torch.float64)).item()
    record("SAM objective near the two minima (rho = 0.1)", {"sharp (-1)": -1 + 100 * RHO**2 / 2, "flat (2)": RHO**2 / 2})
    # the SAM objective is -1 + 0.5 = -0.5 at the sharp minimum and 0.005 at the flat one: it is minimised within a
    # grid step (1e-4) of -1, where the Hessian is the sharp 100, the same minimum plain gradient descent finds there
    claim_assert(curvature < 100.0, "SAM's minimiser is the sharp minimum (curvature 100): a deeper sharp minimum "
                 "beats the curvature penalty lambda rho^2 / 2", argmin=best, curvature=curvature)


def _sam_minimiser_curvature(depth: float) -> float:
    """The Hessian at the SAM minimiser (rho = RHO) of min(50 (t + 1)^2 - depth, (t - 2)^2 / 2): curvature 100 or 1."""
    loss = lambda t: torch.minimum(50 * (t + 1) ** 2 - depth, 0.5 * (t - 2) ** 2)  # noqa: E731
    grid = torch.linspace(-2.0, 3.0, 501, dtype=torch.float64)  # step 1e-2: -1 and 2 are grid points
    e = torch.linspace(-RHO, RHO, 21, dtype=torch.float64)  # the ball's ends +-rho, where a basin's max lies, included
    best = grid[loss(grid[:, None] + e[None, :]).max(dim=1).values.argmin()]
    return torch.func.grad(torch.func.grad(loss))(best).item()


SAM_PENALTY_GAP = (100 - 1) * RHO**2 / 2  # the SAM objectives of the two minima differ by this minus the depth


@pytest.mark.claim("spectral.sam-lowers-hessian-top-eigenvalue")
@pytest.mark.parametrize("expected", [pytest.param(lambda depth: 100.0 if depth > SAM_PENALTY_GAP else 1.0,
                                                   id="depth-against-penalty"), pytest.param(
    lambda depth: 1.0, id="always-flatter", marks=control(
        "line 449's SAM, which always ends at the lower-curvature minimum: the check of the depth-against-penalty rule "
        "must reject it", models=["spectral.sam-lowers-hessian-top-eigenvalue"]))])
@example(depth=1.0)  # the refutation's landscape: the sharp minimum deeper by 1 > 0.495
@given(depth=st.floats(0.0, 2.0))
@settings(max_examples=20)  # one scalar decides: a few depths on each side of the gap
def test_sam_prefers_the_flat_minimum_exactly_when_the_sharp_one_is_not_deeper_than_the_penalty_gap(expected, depth):
    # SAM's objective is -depth + 100 rho^2 / 2 at the sharp minimum and rho^2 / 2 at the flat one (both grid points,
    # exact to a few eps); within 1e-6 of the tie either minimum may win
    assume(abs(depth - SAM_PENALTY_GAP) > 1e-6)
    curvature = _sam_minimiser_curvature(depth)
    claim_assert(curvature == expected(depth), "SAM's minimiser is not the one the depth-against-penalty rule picks",
                 depth=depth, penalty_gap=SAM_PENALTY_GAP, curvature=curvature, expected=expected(depth))


@pytest.mark.claim("optimization.la-ntk-linear-dynamics-closed-form")
@refutes(reason="one training point, the smallest case, with the cross-entropy (logistic) loss the document's own "
                "training loop uses (linear-algebra.txt line 551): exact symbolic second derivative of the flow")
def test_ntk_training_dynamics_are_linear_for_the_cross_entropy():
    # in the NTK view the function on the training set moves by df/dt = -eta Theta dL/df; for one point with label
    # y = +1 and the logistic loss L(f) = log(1 + e^-f) that is df/dt = eta Theta sigma(-f). Linear (affine)
    # dynamics need a right-hand side affine in f, i.e. a zero second derivative
    f, eta, theta = sp.symbols("f eta Theta", positive=True)
    rhs = -eta * theta * sp.diff(sp.log(1 + sp.exp(-f)), f)
    second = sp.simplify(sp.diff(rhs, f, 2))
    record("d^2/df^2 of the cross-entropy flow at f = 1 (eta Theta = 1)", float(second.subs({f: 1, eta: 1, theta: 1})))
    claim_assert(second == 0, "with the cross-entropy the NTK flow df/dt = eta Theta sigma(-f) is not linear in f; "
                 "the closed form f* + e^{-eta Theta t}(f_0 - f*) is the squared loss's", second_derivative=str(second))
