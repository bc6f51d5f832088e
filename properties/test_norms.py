"""LayerNorm and RMSNorm (index.txt line 96): the formulas against torch's, and their invariances."""
import functools

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control
from impl.norms import layer_norm, rms, rms_norm
from properties.strategies.architecture import assert_equal_up_to_rounding, gaussian, seeds

EPS64 = 2.0**-52
shapes = st.tuples(st.integers(1, 3), st.integers(1, 8))  # (rows, d)
scales = st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3)


def _rms_norm_eps_outside(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """``gamma * x / (sqrt(mean x^2) + eps)``: eps added outside the square root."""
    return gamma * x / (torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + eps)


@pytest.mark.claim("architecture.index-rmsnorm-definition")
@pytest.mark.parametrize("formula", [pytest.param(rms_norm, id="eps-inside"), pytest.param(
    _rms_norm_eps_outside, id="eps-outside", marks=control("eps outside the root: gamma x / (sqrt(mean x^2) + eps)"))])
@given(shape=shapes, seed=seeds(), eps=st.sampled_from([0.0, 1e-6, 1e-2]))
def test_the_printed_rmsnorm_formula_is_torch_rms_norm(formula, shape, seed, eps):
    x, gamma = gaussian(seed, *shape), gaussian(seed + 1, shape[-1])
    assert_equal_up_to_rounding(formula(x, gamma, eps), F.rms_norm(x, (shape[-1],), gamma, eps),
                                "gamma * x / sqrt(mean x^2 + eps) != torch.nn.functional.rms_norm", eps=eps)


@pytest.mark.claim("architecture.index-rmsnorm-definition")
@pytest.mark.parametrize("normalise", [pytest.param(functools.partial(rms_norm, eps=0.0), id="rms"), pytest.param(
    lambda x: x / torch.linalg.vector_norm(x, dim=-1, keepdim=True), id="l2",
    marks=control("divided by the L2 norm, the 1/d of the mean missing: RMS 1/sqrt(d), not 1"))])
@given(shape=shapes, seed=seeds(), c=scales)
def test_rmsnorm_without_eps_has_unit_rms_and_is_invariant_to_positive_rescaling(normalise, shape, seed, c):
    x = gaussian(seed, *shape)
    y = normalise(x)
    assert_equal_up_to_rounding(rms(y), torch.ones_like(rms(y)), "RMSNorm output (gamma = 1) does not have RMS 1")
    sign = 1.0 if c > 0 else -1.0
    assert_equal_up_to_rounding(normalise(c * x), sign * y, "RMSNorm(c x) != sign(c) RMSNorm(x)", c=c)


@pytest.mark.claim("architecture.index-rmsnorm-definition")
@pytest.mark.parametrize("root", [pytest.param(sp.sqrt, id="sqrt"), pytest.param(
    lambda t: t, id="no-root", marks=control("the square root missing: x / mean(x^2) scales as 1/c"))])
def test_rmsnorm_scale_invariance_symbolically(root):
    d = 3
    x = sp.symbols(f"x0:{d}", real=True)
    c = sp.Symbol("c", positive=True)
    norm = lambda v: [vi / root(sum(vj**2 for vj in v) / d) for vi in v]  # noqa: E731  eps = 0
    for lhs, rhs in zip(norm([c * xi for xi in x]), norm(list(x))):
        claim_assert(sp.simplify(lhs - rhs) == 0, "RMSNorm(c x) != RMSNorm(x) for c > 0", lhs=str(lhs))


@pytest.mark.claim("architecture.index-rmsnorm-definition")
@pytest.mark.parametrize("centre", [pytest.param(lambda x: x - x.mean(-1, keepdim=True), id="centred"), pytest.param(
    lambda x: x, id="uncentred", marks=control("RMSNorm(x) taken for LayerNorm(x): the mean subtraction dropped"))])
@given(shape=shapes, seed=seeds(), eps=st.sampled_from([0.0, 1e-5]))
def test_rmsnorm_is_layernorm_without_the_mean_subtraction(centre, shape, seed, eps):
    assume(shape[-1] > 1 or eps > 0)  # d = 1 centres x to 0: both sides are 0 / 0 without eps
    x, gamma = gaussian(seed, *shape), gaussian(seed + 1, shape[-1])
    centred = centre(x)
    assert_equal_up_to_rounding(rms_norm(centred, gamma, eps), layer_norm(x, gamma, None, eps),
                                "RMSNorm(x - mean x) != LayerNorm(x) with beta = 0")


@pytest.mark.claim("architecture.index-rmsnorm-definition")
@given(shape=st.tuples(st.integers(1, 3), st.integers(2, 8)), seed=seeds(), c=scales, b=st.floats(-1e2, 1e2))
def test_layernorm_is_invariant_to_shifts_along_ones_and_rmsnorm_is_not(shape, seed, c, b):
    x = gaussian(seed, *shape)
    sign = 1.0 if c > 0 else -1.0
    moved = layer_norm(c * x + b, eps=0.0)
    # Rounding c x + b errs by (|b| + |c| max|x|) eps per entry; normalising divides by |c| std(x).
    # That condition number times a few eps per operation (d-term sums) bounds the float64 gap.
    cond = (abs(b) + abs(c) * x.abs().max().item()) / (abs(c) * x.std(-1, unbiased=False).min().item())
    gap = (moved - sign * layer_norm(x, eps=0.0)).abs().max().item()
    claim_assert(gap <= 16 * shape[-1] * cond * EPS64, "LayerNorm(c x + b 1) != sign(c) LayerNorm(x)",
                 c=c, b=b, gap=gap, cond=cond)
    # RMSNorm keeps the mean: a shift along 1 moves it unless b = 0 (RMSNorm(x + b 1) = RMSNorm(x) forces b = 0
    # whenever x is not itself a multiple of 1, which a Gaussian x is not almost surely).
    # a shift b moves RMSNorm by ~|b| |1 - y mean(y)| / rms(x) (>= ~1e-4 for |b| > 1e-3 and Gaussian x), rounding by
    # ~d eps (|b| + |x|) / rms(x) ~ 1e-13: 1e-6 lies between them
    if abs(b) > 1e-3:
        shifted_gap = (rms_norm(x + b, eps=0.0) - rms_norm(x, eps=0.0)).abs().max().item()
        claim_assert(shifted_gap > 1e-6, "RMSNorm was invariant to a shift along 1", b=b, gap=shifted_gap)
