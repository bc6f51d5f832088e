"""RoPE frequency schedules: theta_i = b^(-2i/d), the wavelengths they cover, the frequency "loss"
of foundations.txt line 463, and the variant table of lines 495-500 (NTK-aware, YaRN) against the
papers' definitions in impl/rope_scaling.py; index.txt lines 144, 241 and 259.
"""
from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes
from impl.rope import rope_frequencies, rotation_matrix
from claimcheck.plugin import references
from impl.rope_scaling import ntk_aware, ntk_aware_base, position_interpolation, wavelengths, yarn, yarn_attention_factor
from properties.strategies.positional import (even_head_dims, extension_scales, frequency_vectors, rope_bases,
                                              vectors)

EPS64 = 2.0**-52


def _rel_close(a: torch.Tensor, b: torch.Tensor, ulps: float) -> bool:
    return bool(((a - b).abs() <= ulps * EPS64 * b.abs()).all())


# --- theta_i = b^(-2i/d) (foundations:427, :496) --------------------------------------------------------------

def _printed_schedule_zero_based(base: float, d: int) -> list[float]:
    """theta_i = b^{-2i/d_k} (lines 427, 496) over the pairs (2i, 2i+1) of R_Theta (line 252): 0-based i."""
    return [base ** (-2 * i / d) for i in range(d // 2)]


def _printed_schedule_one_based(base: float, d: int) -> list[float]:
    """The same formula with the summation limits i = 1 .. d_k/2 of lines 405 and 481 taken literally."""
    return [base ** (-2 * i / d) for i in range(1, d // 2 + 1)]


@pytest.mark.claim("rope.frequency-geometric-base-10000", "rope.variant-original-frequency")
@pytest.mark.parametrize("printed", [
    pytest.param(_printed_schedule_zero_based, id="pairs-2i-2i+1"),
    pytest.param(_printed_schedule_one_based, id="i-from-1", marks=control(
        "the formula read with i = 1 .. d_k/2: every frequency multiplied by b^{-2/d_k} and theta = 1 missing, "
        "a schedule that is not RoFormer's",
        models=("rope.frequency-geometric-base-10000", "rope.variant-original-frequency"))),
])
@given(d=even_head_dims(2, 256), base=rope_bases())
def test_zero_based_b_power_minus_2i_over_d_is_the_roformer_and_llama_schedule(printed, d, base):
    doc = torch.tensor(printed(base, d), dtype=torch.float64)
    roformer = torch.tensor([base ** (-2 * (i - 1) / d) for i in range(1, d // 2 + 1)], dtype=torch.float64)
    llama = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))  # inv_freq of LLaMA/transformers
    # three float64 evaluations of b^x with |x| <= 1: a few ulps apart.
    claim_assert(_rel_close(doc, roformer, 8) and _rel_close(doc, llama, 8),
                 "the printed b^{-2i/d_k} is not RoFormer's schedule 10000^{-2(i-1)/d}, i = 1 .. d/2", d=d, base=base,
                 printed=doc, roformer=roformer)
    claim_assert(doc[0].item() == 1.0, "theta_0 is not 1 (the highest frequency, one radian per token)", d=d)
    claim_assert(_rel_close(rope_frequencies(d, base), doc, 8), "impl.rope_frequencies is not the printed schedule",
                 d=d, base=base)


@pytest.mark.claim("rope.frequency-log-uniform-spectrum")
@pytest.mark.parametrize("schedule", [
    pytest.param(lambda b, d, i: b ** (-2 * i / d), id="geometric"),
    pytest.param(lambda b, d, i: 1 - 2 * i / d, id="linear", marks=control(
        "linearly spaced frequencies theta_i = 1 - 2i/d: equal steps in theta, not in log theta")),
])
def test_consecutive_frequency_ratio_is_constant_symbolically(schedule):
    b, d, i = sp.symbols("b d i", positive=True)
    theta = schedule(b, d, i)
    claim_assert(sp.simplify(theta.subs(i, i + 1) / theta - b ** (-2 / d)) == 0, "theta_{i+1}/theta_i != b^{-2/d}")
    claim_assert(sp.simplify(sp.diff(sp.expand_log(sp.log(theta), force=True), i, 2)) == 0,
                 "log theta_i is not linear in i")


def _linear_frequencies(d: int, base: float) -> torch.Tensor:
    """theta_i = 1 - 2i/d, i = 0 .. d/2 - 1: linearly spaced from 1 down to 2/d (the base unused)."""
    return 1 - torch.arange(0, d, 2, dtype=torch.float64) / d


@pytest.mark.claim("rope.frequency-log-uniform-spectrum")
@pytest.mark.parametrize("frequencies", [
    pytest.param(rope_frequencies, id="impl"),
    pytest.param(_linear_frequencies, id="linear", marks=control(
        "linearly spaced frequencies theta_i = 1 - 2i/d: equal steps in theta, not in log theta")),
])
@given(d=even_head_dims(4, 256), base=rope_bases())
@example(d=8, base=10000.0)
def test_log_frequencies_are_equally_spaced(frequencies, d, base):
    steps = torch.diff(torch.log(frequencies(d, base)))
    expected = -2 * math.log(base) / d
    # log theta_i = -(2i/d) ln b within ~(ln b + 2) u (the exponent's rounding, pow), log adds u ln b; a difference of
    # two such and the expected's u ln b: ~(3 ln b + 4) u <= 8 eps ln b (ln b >= 4.6)
    claim_assert((steps - expected).abs().max().item() <= 16 * EPS64 * math.log(base), "log theta_i not equally spaced",
                 d=d, base=base)


@pytest.mark.claim("rope.frequency-range-o1-to-ot")
@refutes(reason="LLaMA-like head (d_k = 128, b = 10^4) at two context lengths 4096 and 10^6: the schedule is a "
                "function of b and d_k only, so one pair of lengths suffices")
def test_wavelength_range_grows_with_the_sequence_length():
    d_k, b = 128, 1e4
    longest = {}
    for t in (4096, 10**6):
        longest[t] = wavelengths(rope_frequencies(d_k, b)).max().item()  # the schedule never reads T
    record("longest period (tokens) for d=128, b=1e4 and b=5e5", [longest[4096], 2 * math.pi * 5e5 ** (126 / 128)])
    claim_assert(longest[10**6] / longest[4096] >= 10**6 / 4096 / 100,
                 "the covered range does not grow with T: the longest period is the same for every T",
                 longest_period_tokens=longest, periods_per_context={t: t / w for t, w in longest.items()})


@pytest.mark.claim("rope.frequency-range-o1-to-ot")
@pytest.mark.parametrize("longest_period", [
    pytest.param(lambda d, base, length: 2 * math.pi * base ** ((d - 2) / d), id="2pi-b^((d-2)/d)"),
    pytest.param(lambda d, base, length: float(length), id="the-sequence-length", marks=control(
        "periods reaching the sequence length T, as the claim's range O(1) to O(T) has them",
        models="rope.frequency-range-o1-to-ot"))])
@given(d=even_head_dims(4, 256), base=rope_bases(), length=st.integers(64, 2**20))
def test_wavelengths_run_from_2pi_to_2pi_b_to_the_d_minus_2_over_d(longest_period, d, base, length):
    lam = wavelengths(rope_frequencies(d, base))  # the schedule reads b and d only: no T
    longest = longest_period(d, base, length)
    # theta_0 = b^-0 = 1 exactly, and 2 pi / 1 is the test's 2 pi bit for bit
    claim_assert(lam.min().item() == 2 * math.pi, "shortest period is not 2 pi", d=d)
    # the exponents (d - 2)/d round identically on both sides: two pows (<= 2 ulp each), 2 pi times and over: ~4 eps
    claim_assert(abs(lam.max().item() - longest) <= 16 * EPS64 * longest, "longest period is not 2 pi b^{(d-2)/d}",
                 d=d, base=base)


@pytest.mark.claim("rope.index-rope-base-adapt-to-target-length")
@given(d=even_head_dims(4, 256), b1=rope_bases(), b2=rope_bases())
def test_longest_period_grows_with_the_base(d, b1, b2):
    lo, hi = sorted((b1, b2))
    w_lo, w_hi = (wavelengths(rope_frequencies(d, b)).max().item() for b in (lo, hi))
    # each longest period within ~4 eps relative (as above); equal bases give equal bits
    claim_assert(w_lo <= w_hi * (1 + 16 * EPS64), "a larger base gives a shorter longest period", d=d, b=(lo, hi))


# --- the frequency "loss" (foundations:461-465) ---------------------------------------------------------------

def _frequency_loss(q: torch.Tensor, k: torch.Tensor, theta: torch.Tensor, theta_star: torch.Tensor,
                    offsets: torch.Tensor) -> float:
    """L = mean over offsets n - m of (<q, R_Theta(n-m) k> - <q, R_Theta*(n-m) k>)^2 (line 463)."""
    diffs = [q @ (rotation_matrix(o, theta) - rotation_matrix(o, theta_star)) @ k for o in offsets]
    return torch.stack(diffs).pow(2).mean().item()


def _frequency_loss_reference_sign_flipped(q, k, theta, theta_star, offsets) -> float:
    """Line 463 with the reference logit at the other sign of the offset, <q, R_Theta*(m - n) k>."""
    diffs = [q @ (rotation_matrix(o, theta) - rotation_matrix(-o, theta_star)) @ k for o in offsets]
    return torch.stack(diffs).pow(2).mean().item()


T_MAX = 4096


def _proportional_to_t_max_power(theta_star: torch.Tensor) -> torch.Tensor:
    """Negative control: the claimed optimum c T_max^{-2i/d_k} (c = theta*_0, so that plane 0 matches)."""
    d = 2 * len(theta_star)
    return theta_star[0] * T_MAX ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)


@pytest.mark.claim("rope.frequency-loss-objective", "rope.frequency-optimum-proportional-tmax-power")
@pytest.mark.parametrize("loss,minimiser", [
    pytest.param(_frequency_loss, lambda theta_star: theta_star, id="printed"),
    pytest.param(_frequency_loss_reference_sign_flipped, lambda theta_star: theta_star, id="reference-sign",
                 marks=control("the reference logit taken at the offset's other sign, <q, R_Theta*(m - n) k>")),
    pytest.param(_frequency_loss, _proportional_to_t_max_power, id="t-max-power", marks=control(
        "the claimed minimiser c T_max^{-2i/d_k} (T_max = 4096) in place of Theta*",
        models="rope.frequency-optimum-proportional-tmax-power")),
])
@given(d=even_head_dims(2, 8), data=st.data())
def test_frequency_loss_is_nonnegative_and_zero_exactly_at_the_reference(loss, minimiser, d, data):
    q, k = data.draw(vectors(d, 2.0), label="q"), data.draw(vectors(d, 2.0), label="k")
    theta_star = data.draw(frequency_vectors(d // 2), label="theta_star")
    theta = data.draw(frequency_vectors(d // 2), label="theta")
    offsets = torch.arange(-16, 17, dtype=torch.float64)
    at_star = loss(q, k, minimiser(theta_star), theta_star, offsets)
    elsewhere = loss(q, k, theta, theta_star, offsets)
    claim_assert(at_star == 0.0, "L(Theta*) != 0", theta_star=theta_star)
    claim_assert(elsewhere >= at_star, "L(Theta) < L(Theta*): the reference is not a minimiser", theta=theta)


@pytest.mark.claim("rope.frequency-optimum-proportional-tmax-power")
@refutes(reason="two planes (d_k = 4) is the smallest head with a frequency ratio; L(c T^{-2i/d}) = 0 would need "
                "c = 1 + 2 pi j and c / 64 = 0.01 + 2 pi l (offsets are integers), i.e. 0.36 = 2 pi (64 l - j): "
                "impossible, as 0.36 is no integer multiple of 2 pi, so the tested c (the two matching ones and a log "
                "grid) stand for all")
def test_minimiser_of_the_frequency_loss_is_proportional_to_t_max_power():
    d_k, t_max = 4, T_MAX
    theta_star = rope_frequencies(d_k, 1e4)  # the reference: (1, 0.01)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(d_k, dtype=torch.float64, generator=g), torch.randn(d_k, dtype=torch.float64, generator=g)
    offsets = torch.arange(-64, 65, dtype=torch.float64)
    shape = t_max ** (-2 * torch.arange(d_k // 2, dtype=torch.float64) / d_k)  # T_max^{-2i/d_k} = (1, 1/64)
    cs = [1.0, 0.64] + torch.logspace(-2, 1, 31, dtype=torch.float64).tolist()
    losses = {c: _frequency_loss(q, k, c * shape, theta_star, offsets) for c in cs}
    best = min(losses, key=losses.get)
    record("min over c of L(c T^{-2i/d}) vs L(Theta*)", [losses[best], 0.0])
    # a matching schedule would leave rounding only, differences ~1e-13 and a loss ~1e-26; the best c leaves 0.12
    claim_assert(losses[best] <= 1e-20, "no schedule proportional to T_max^{-2i/d_k} minimises L (L(Theta*) = 0)",
                 best_c=best, loss_at_best_c=losses[best], loss_at_reference=0.0, t_max=t_max)


# --- NTK-aware (foundations:497) ------------------------------------------------------------------------------

@pytest.mark.claim("rope.variant-ntk-aware-frequency")
@refutes(reason="d_k = 4, alpha = 2: the smallest head for which d_k/(d_k - 2) is defined, and an integer scale")
def test_printed_ntk_formula_is_a_change_of_base():
    d_k, b, alpha = 4, 1e4, 2.0
    printed = [b ** (-2 * i / d_k) * alpha ** (d_k / (d_k - 2)) for i in range(d_k // 2)]  # line 497
    scaled_base = ntk_aware(d_k, b, alpha).tolist()  # (b alpha^{d/(d-2)})^{-2i/d}
    # equal tables would agree to a few ulps; 1e-12 is generous, the printed theta_0 is 4, not 1
    claim_assert(all(abs(p - s) <= 1e-12 * s for p, s in zip(printed, scaled_base)),
                 "b^{-2i/d} alpha^{d/(d-2)} is not the frequency table of any scaled base (theta_0 != 1)",
                 printed=printed, ntk_aware=scaled_base)


@pytest.mark.claim("rope.variant-ntk-aware-frequency")
def test_ntk_aware_keeps_the_highest_and_divides_the_lowest_frequency_symbolically():
    b, s, d = sp.symbols("b s d", positive=True)
    i = sp.Symbol("i", nonnegative=True)
    theta_new = (b * s ** (d / (d - 2))) ** (-2 * i / d)

    def log_equal(x, y) -> bool:  # compare positive expressions through their logarithms
        return sp.simplify(sp.expand_log(sp.log(x) - sp.log(y), force=True)) == 0

    claim_assert(log_equal(theta_new, b ** (-2 * i / d) * s ** (-2 * i / (d - 2))),
                 "(b s^{d/(d-2)})^{-2i/d} != b^{-2i/d} s^{-2i/(d-2)}")
    claim_assert(theta_new.subs(i, 0) == 1, "theta'_0 != theta_0 = 1")
    claim_assert(log_equal(theta_new.subs(i, (d - 2) / 2), b ** (-(d - 2) / d) / s),
                 "theta'_{d/2-1} != theta_{d/2-1} / s")


def _printed_ntk(d: int, base: float, s: float) -> torch.Tensor:
    """Negative control: line 497's table, theta_i = b^{-2i/d_k} alpha^{d_k/(d_k-2)} with alpha = s."""
    return rope_frequencies(d, base) * s ** (d / (d - 2))


@pytest.mark.claim("rope.variant-ntk-aware-frequency")
@pytest.mark.parametrize("scaled", [pytest.param(ntk_aware, id="impl"), pytest.param(
    _printed_ntk, id="line-497", marks=control("line 497's b^{-2i/d_k} alpha^{d_k/(d_k-2)}",
                                               models="rope.variant-ntk-aware-frequency"))])
@given(d=even_head_dims(4, 256), base=rope_bases(), s=extension_scales())
@example(d=128, base=1e4, s=4.0)
def test_ntk_aware_is_the_transformers_formula_and_interpolates_only_the_low_end(scaled, d, base, s):
    new, old = scaled(d, base, s), rope_frequencies(d, base)
    hf = 1.0 / ((base * s ** (d / (d - 2))) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    # the same base b s^{d/(d-2)} (its exponent's rounding costs u ln s d/(d-2) <= 2 u ln s), raised by two pows
    # (<= 2 ulp each) and one reciprocal, exponents <= 1: ~(8 + 2 ln s) u; 16 ulps
    claim_assert(_rel_close(new, hf, 16), "differs from base * factor**(dim/(dim-2))", d=d, s=s)
    claim_assert(new[0].item() == old[0].item() == 1.0, "the highest frequency moved", d=d, s=s)
    # theta'_last / theta_last: the base's rounding (u + 2 u ln s) to a power <= 1, two pows, the product and the
    # division: ~(8 + 2 ln s) u; twice that
    tol = (8 + 2 * math.log(s)) * EPS64
    claim_assert(abs(new[-1].item() * s / old[-1].item() - 1) <= tol,
                 "the lowest frequency is not divided by s", d=d, s=s)
    claim_assert(bool(((new <= old * (1 + tol)) & (new >= old / s * (1 - tol))).all()),
                 "some frequency is not between theta/s and theta", d=d, s=s)


@pytest.mark.claim("rope.variant-ntk-aware-frequency")
@pytest.mark.parametrize("d,s,factor", [(4, 4.0, 16.0), (6, 9.0, 27.0), (8, 8.0, 16.0), (130, 2.0**64, 2.0**65)])
def test_ntk_aware_base_is_b_times_s_to_the_d_over_d_minus_2_on_exact_cases(d, s, factor):
    """Cases where s^(d/(d-2)) is an integer: 4^2, 9^(3/2), 8^(4/3), (2^64)^(65/64); b' = 10^4 times it."""
    new = ntk_aware_base(1e4, s, d)
    # one pow with exponent d/(d-2) (rounded: ln s * u * d/(d-2) <= 46 u for s = 2^64) and one product; 64 ulps
    claim_assert(abs(new - 1e4 * factor) <= 64 * EPS64 * 1e4 * factor, "the NTK-aware base is not b s^(d/(d-2))",
                 d=d, s=s, base=new, expected=1e4 * factor)


# --- YaRN (foundations:498) -----------------------------------------------------------------------------------

@pytest.mark.claim("rope.variant-yarn-piecewise")
@refutes(reason="LLaMA-2's setting (d = 128, b = 10^4, L = 4096) with s = 2: the highest-frequency plane, which the "
                "printed table says is interpolated linearly")
def test_yarn_interpolates_high_frequencies_linearly():
    d, base, length, s = 128, 1e4, 4096, 2.0
    theta, new = rope_frequencies(d, base), yarn(d, base, s, length)
    # theta/s would be matched to a few ulps; 1e-12 is generous, YaRN's theta_0 is 1, not 0.5
    claim_assert(abs(new[0] - theta[0] / s) <= 1e-12, "the highest-frequency plane is not linearly interpolated "
                 "(theta/s): YaRN leaves it unchanged", theta_0=theta[0], yarn_theta_0=new[0], s=s,
                 rotations_in_L=length / (2 * math.pi / theta[0].item()))


def _yarn_as_printed(d: int, base: float, s: float, length: int) -> torch.Tensor:
    """Negative control: line 498's table, linear interpolation theta/s for the high-frequency planes (more than
    beta = 32 turns in L), NTK-aware frequencies for the others."""
    theta = rope_frequencies(d, base)
    high = length * theta / (2 * math.pi) > 32
    return torch.where(high, theta / s, ntk_aware(d, base, s))


@pytest.mark.claim("rope.variant-yarn-piecewise")
@pytest.mark.parametrize("scaled", [pytest.param(yarn, id="impl"), pytest.param(
    _yarn_as_printed, id="line-498", marks=control(
        "line 498's table: high frequencies linearly interpolated, low ones NTK-aware",
        models="rope.variant-yarn-piecewise"))])
@given(d=even_head_dims(4, 256), base=rope_bases(), s=extension_scales(), length=st.integers(64, 2**17))
@example(d=128, base=1e4, s=2.0, length=4096)  # LLaMA-2's setting: planes in all three bands
def test_yarn_extrapolates_high_and_interpolates_low_frequencies(scaled, d, base, s, length):
    theta, new = rope_frequencies(d, base), scaled(d, base, s, length)
    r = length * theta / (2 * math.pi)  # rotations of each plane within the original context L
    high, low, ramp = r > 32, r < 1, (r >= 1) & (r <= 32)
    claim_assert(bool((new[high] == theta[high]).all()), "a plane with more than beta = 32 turns in L was changed",
                 d=d, s=s, length=length)
    # gamma = 0 (clamped) makes (1 - 0) theta / s + 0 theta the test's theta / s bit for bit (4 ulps cover an r at the
    # edge, where the impl's r = L / (2 pi / theta) may round to a gamma of a few u)
    claim_assert(_rel_close(new[low], theta[low] / s, 4), "a plane with less than one turn in L is not theta/s",
                 d=d, s=s, length=length)
    # a convex combination (1 - gamma) theta / s + gamma theta: ~4 roundings of size theta (4 u); 4 eps
    claim_assert(bool(((new[ramp] <= theta[ramp] * (1 + 4 * EPS64)) & (new[ramp] >= theta[ramp] / s * (1 - 4 * EPS64))).all()),
                 "a ramp plane is outside [theta/s, theta]", d=d, s=s, length=length)
    # and the value inside the ramp: gamma = (r - alpha) / (beta - alpha) with alpha = 1, beta = 32. r here and in the
    # impl differ by a few ulps (L theta / 2 pi vs L / (2 pi / theta)), moving gamma by ~ 32 u / 31 and the result by
    # that times theta; with the ~6 roundings of the combination, 16 eps theta
    gamma = (r[ramp] - 1) / (32 - 1)
    expected = (1 - gamma) * theta[ramp] / s + gamma * theta[ramp]
    claim_assert(bool(((new[ramp] - expected).abs() <= 16 * EPS64 * theta[ramp]).all()), "a ramp plane is not "
                 "(1 - gamma) theta / s + gamma theta with gamma = (r - 1) / 31", d=d, s=s, length=length)


@pytest.mark.claim("long-context.yarn-purpose-long-context", "long-context.index-pi-yarn-extend-context")
@given(d=even_head_dims(4, 128), base=rope_bases(), s=extension_scales(), length=st.integers(64, 2**15))
def test_pi_and_yarn_keep_extended_positions_within_the_trained_angle_range(d, base, s, length):
    theta = rope_frequencies(d, base)
    extended = s * length  # L' = s L
    pi_max = (extended - 1) * position_interpolation(theta, s)
    # positions 0 .. sL - 1 are squeezed into [0, L): every angle stays below L theta (trained: up to (L - 1) theta);
    # (sL - 1) theta / s rounds twice (2 u), far inside the exact margin theta / s (>= 1e-7 relative); 8 eps spare
    claim_assert(bool((pi_max < length * theta * (1 + 8 * EPS64)).all()),
                 "PI sends a position < sL past the trained range [0, L)", d=d, s=s, length=length)
    new = yarn(d, base, s, length)
    low = length * theta / (2 * math.pi) < 1  # planes that do not complete a turn within L: YaRN interpolates them
    # the interpolated planes are theta / s bit for bit (see above): the same two roundings
    claim_assert(bool(((extended - 1) * new[low] < length * theta[low] * (1 + 8 * EPS64)).all()),
                 "a YaRN-interpolated plane leaves the trained angle range", d=d, s=s)


# --- YaRN's attention factor sqrt(1/t) = 0.1 ln s + 1 (section 3.4), against the record: a value and a law --------

def _yarn_record(config) -> tuple[float, float]:
    record_ = references(config)["peng2023yarn"]
    return record_.fact("attention-factor-coefficient").value, record_.fact("attention-factor-offset").value


@pytest.mark.claim("rope.variant-yarn-piecewise")
@pytest.mark.parametrize("s", [1.0, 2.0, 4.0, 16.0, 32.0, 128.0])
def test_yarn_attention_factor_is_the_published_0_1_ln_s_plus_1(pytestconfig, s):
    coefficient, offset = _yarn_record(pytestconfig)  # the authors' get_mscale (references.yaml, peng2023yarn)
    factor = yarn_attention_factor(s)
    published = coefficient * math.log(s) + offset
    record(f"yarn_attention_factor[s={s:g}]", {"sqrt(1/t)": factor, "logit multiplier 1/t": factor**2})
    # the same three float64 operations in the same order: equal to rounding (2 ulps)
    claim_assert(abs(factor - published) <= 2 * EPS64 * published, "the YaRN attention factor is not 0.1 ln s + 1",
                 s=s, factor=factor, published=published)


@pytest.mark.claim("rope.variant-yarn-piecewise")
@given(s1=extension_scales(), s2=extension_scales())
def test_yarn_attention_factor_is_one_at_s_1_and_logarithmic_in_s(s1, s2):
    """sqrt(1/t) - 1 is proportional to ln s: additive over products of scales, 1 without extension, increasing."""
    f = yarn_attention_factor
    # each factor rounds its log and two operations (~3 ulps of the factor, <= 1.5): 16 ulps of 3 is generous
    claim_assert(f(1.0) == 1.0 and abs((f(s1 * s2) - 1) - (f(s1) - 1) - (f(s2) - 1)) <= 16 * EPS64 * 3,
                 "sqrt(1/t) - 1 is not additive in the scale (not a multiple of ln s), or not 1 at s = 1",
                 s1=s1, s2=s2, f1=f(s1), f2=f(s2), f12=f(s1 * s2))
    lo, hi = sorted((s1, s2))  # non-decreasing (neighbouring floats may share a rounded log), strictly past 1 ulp of ln
    claim_assert(f(lo) <= f(hi) and (hi <= lo * (1 + 1e-12) or f(lo) < f(hi)), "the factor does not increase with s",
                 s1=s1, s2=s2)
