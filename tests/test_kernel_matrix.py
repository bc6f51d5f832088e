"""The backend matrix cannot miss: what every case of every backend is guaranteed to see
(:mod:`claimcheck.kernel`, shared by ``claims kernel`` and ``properties/test_backends.py``)."""
import math

import pytest
import torch
from hypothesis import given, settings

from claimcheck import kernel
from impl.attention import attention, scores
from impl.backends import BACKENDS

FLOAT32_EXP_OVERFLOW = math.log(torch.finfo(torch.float32).max)  # 88.72: exp of more is inf in float32 and bfloat16


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize("mask_kind", kernel.MASK_KINDS)
def test_every_case_sees_shared_heads_odd_lengths_both_length_orders_and_overflowing_scores(name, mask_kind):
    backend = BACKENDS[name]
    problems = {p.label: p for p in kernel.fixed_problems(backend, mask_kind)}
    heads = {(p.q.shape[1], p.k.shape[1]) for p in problems.values()}
    assert {(4, 2), (8, 2)} <= heads if backend.gqa else all(h == g for h, g in heads)
    lengths = [(p.q.shape[2], p.k.shape[2]) for p in problems.values()]
    assert all(n % kernel.TILE for pair in lengths for n in pair)
    assert any(a < b for a, b in lengths) and (mask_kind == "causal-bottom-right" or any(a > b for a, b in lengths))
    big = problems["large-logits"]
    s = scores(big.q, big.k, None, kernel._finite_mask(big.mask))  # q k^T s before ALiBi lowers or a softcap bends it
    assert FLOAT32_EXP_OVERFLOW < s[torch.isfinite(s)].max().item() <= kernel.LARGE_LOGIT + 1e-9
    lo, hi = backend.head_dims
    assert all(lo <= p.q.shape[-1] <= hi for p in problems.values())
    assert not any(torch.isnan(attention(p.q, p.k, p.v, p.scale, p.mask)).any() for p in problems.values())


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize("mask_kind", kernel.MASK_KINDS)
def test_every_case_sees_keys_across_a_64_wide_tile_one_query_over_many_keys_and_the_callers_scale(name, mask_kind):
    backend = BACKENDS[name]
    problems = {p.label: p for p in kernel.fixed_problems(backend, mask_kind)}
    tiles, decode = problems["tiles-128"], problems["decode"]
    n_q, n_k = tiles.q.shape[2], tiles.k.shape[2]
    # keys across two 64-wide tiles and a 128-wide one, queries across a 128-row tile, off every 16-wide tile
    assert kernel.ROW_TILE < min(n_q, n_k) < 3 * kernel.WIDE_TILE and n_k % kernel.TILE and n_q % kernel.TILE
    assert (n_q > n_k) == (mask_kind != "causal-bottom-right")  # the other order is decode's
    assert decode.q.shape[2] == 1 and decode.k.shape[2] > 2 * kernel.WIDE_TILE and decode.k.shape[2] % kernel.TILE
    scaled = [p for p in problems.values() if p.scale is not None]
    assert [p.label for p in scaled] == ["scale-0.3", "scale-0"] and scaled[0].scale != kernel.default_scale(
        scaled[0].q.shape[-1]) and scaled[1].scale == 0


@pytest.mark.parametrize("name", [b for b in BACKENDS if "key-padding" in next(iter(BACKENDS[b].devices.values())).masks])
def test_key_padding_is_also_checked_under_every_declared_causal_alignment(name):
    backend = BACKENDS[name]
    masks = next(iter(backend.devices.values())).masks
    combined = {p.mask.causal for p in kernel.fixed_problems(backend, "key-padding") if p.mask.causal}
    assert combined == {a for a in ("top-left", "bottom-right") if f"causal-{a}" in masks} != set()
    for p in kernel.fixed_problems(backend, "key-padding"):
        if p.mask.causal:
            assert p.mask.key_padding is not None and not p.mask.key_padding.all()  # some keys are padded
            allowed = torch.isfinite(scores(p.q, p.k, None, p.mask))
            visible = torch.isfinite(scores(p.q, p.k, None, kernel.Mask(causal=p.mask.causal)))
            assert allowed.any(-1).all() and (visible & ~allowed).any()  # padding hides keys the causal mask shows
    drawn = kernel.problem_strategy(backend, "key-padding")
    seen = set()

    @settings(max_examples=30, database=None, derandomize=True)
    @given(drawn)
    def collect(problem):
        seen.add(problem.mask.causal)

    collect()
    assert seen == {None} | combined  # drawn problems combine them too


def test_the_rule_bounds_the_largest_error_not_the_mean():
    """One entry of 4096 off by 1e-4: the max error breaks the rule; a mean error would hide it."""
    oracle = torch.randn(64, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    naive = oracle.float()  # one rounding per entry: error <= half an ulp
    actual = naive.clone()
    actual[3, 5] += 1e-4
    check = kernel.within_reference_error(actual, oracle, naive, kernel.C_OUT, floor_ulps=kernel.FLOOR_ULPS, scale=1.0)
    assert not check.ok and check.error >= 1e-4 - 1e-6
    mean = lambda x: (x.double() - oracle).abs().mean().item()  # noqa: E731
    assert mean(actual) <= kernel.C_OUT * mean(naive) + check.floor  # the mean rule would accept it


def test_the_rule_adds_the_floor_once_not_c_times():
    """error <= c x naive + floor: an error of c x naive + 1.5 floors fails (it is within c x (naive + floor))."""
    oracle = torch.zeros(8, dtype=torch.float64)
    naive = torch.zeros(8)
    naive[2] = 1e-6
    floor = kernel.FLOOR_ULPS * kernel.EPS[torch.float32]  # the floor for terms of size 1
    for extra, ok in ((0.5, True), (1.5, False)):
        actual = torch.zeros(8)
        actual[6] = kernel.C_OUT * naive[2].item() + extra * floor  # float32 rounds it by 6e-8 relative: << 0.5 floor
        check = kernel.within_reference_error(actual, oracle, naive, kernel.C_OUT, floor_ulps=kernel.FLOOR_ULPS,
                                              scale=1.0)
        assert check.floor == floor and check.ok is ok, (extra, check)
        assert check.error <= kernel.C_OUT * (check.naive_error + check.floor)  # c x (naive + floor) would pass both


def _recording_kernel(seen: list):
    def fn(q, k, v, scale=None, mask=None):
        seen.append((tuple(q.shape), tuple(k.shape), round(q.double().sum().item(), 6)))
        return attention(q, k, v, scale, mask)
    return fn


def _drawn(case: kernel.Case, base_seed) -> list:
    seen: list = []
    backend = kernel.declared_backend(_recording_kernel(seen), "recorder", backward=False)  # one call a problem
    kernel.run_case(backend, case, examples=3, base_seed=base_seed)
    fixed = kernel.fixed_problems(backend, case.mask)
    # each fixed problem is one call, and the reuse problem one more (the kernel called again on other inputs)
    return seen[len(fixed) + any(p.label == kernel.REUSE_PROBLEM for p in fixed):]


def test_every_case_draws_its_own_examples_the_same_in_every_run():
    a, b = kernel.Case(torch.float32, "none"), kernel.Case(torch.float16, "none")
    first = _drawn(a, 0)
    assert len(first) == 3 and first == _drawn(a, 0)  # deterministic (ci)
    assert first != _drawn(b, 0)  # but not the same problems for every case
    assert first != _drawn(a, 1)  # and --seed moves them


def test_a_kernel_that_raises_is_an_error_not_a_wrong_answer():
    def broken(q, k, v, scale=None, mask=None):
        raise RuntimeError("no kernel image for this device")

    result = kernel.run_case(kernel.declared_backend(broken, "broken"), kernel.Case(torch.float32, "none"))
    assert result.status == "error" and "no kernel image" in result.message and result.failing.label == "gqa-4/2"


def test_a_wrong_output_shape_or_dtype_fails_its_case():
    def float32_out(q, k, v, scale=None, mask=None):
        return attention(q.float(), k.float(), v.float(), scale, None if mask is None else mask)

    result = kernel.run_case(kernel.declared_backend(float32_out, "f32"), kernel.Case(torch.float16, "none"), 0)
    assert result.status == "fail" and "wrong shape or dtype" in result.message


# ---- tiers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BACKENDS))
def test_the_tiers_nest_and_the_default_checks_past_1024_keys_and_every_declared_head_dim_of_128_and_256(name):
    backend = BACKENDS[name]
    labels = {t: {p.label for p in kernel.fixed_problems(backend, "none", tier=t)} for t in kernel.TIERS}
    assert labels["smoke"] < labels["ci"] < labels["full"]
    default = kernel.fixed_problems(backend, "none", tier=kernel.DEFAULT_TIER)
    assert any(p.k.shape[2] > 1024 for p in default)
    lo, hi = backend.head_dims
    declared = {w for w in kernel.WIDE_HEADS if lo <= w <= hi and w % backend.head_dim_multiple == 0}
    assert {p.q.shape[-1] for p in default if p.q.shape[-1] >= 128} == declared
    # what the kernel cannot take is listed, not rounded down to a width it can
    assert {label for label, _ in kernel.undeclared_problems(backend)} == {f"head-{w}" for w in
                                                                           set(kernel.WIDE_HEADS) - declared}


def test_the_full_tier_sweeps_both_sides_of_the_64_and_128_wide_tiles_and_odd_head_dims():
    problems = kernel.fixed_problems(BACKENDS["reference"], "causal-bottom-right", tier="full")
    lengths = {p.k.shape[2] for p in problems}
    assert {63, 64, 65, 127, 128, 129, 1023, 1025} <= lengths
    assert {59, 111, 256} <= {p.q.shape[-1] for p in problems}
    assert all(p.q.shape[2] <= p.k.shape[2] for p in problems)  # bottom-right: no row without a key


def test_a_fixed_problem_is_the_same_tensors_in_every_tier():
    by_tier = {t: {p.label: p for p in kernel.fixed_problems(BACKENDS["reference"], "key-padding", tier=t)}
               for t in kernel.TIERS}
    for label, p in by_tier["smoke"].items():
        for tier in ("ci", "full"):
            other = by_tier[tier][label]
            assert torch.equal(p.q, other.q) and torch.equal(p.v, other.v)
            assert torch.equal(p.mask.key_padding, other.mask.key_padding)


@pytest.mark.parametrize("name", ["drops-keys-past-1024", "first-64-head-dims"])
def test_a_kernel_wrong_only_at_kernel_scale_passes_the_smoke_tier_and_fails_the_default(name):
    from tests.kernel_zoo import ZOO

    wrong = next(w for w in ZOO if w.name == name)
    backend = kernel.declared_backend(wrong.fn, wrong.name)
    case = kernel.Case(torch.float32, "none")
    assert kernel.run_case(backend, case, examples=0, tier="smoke").ok
    result = kernel.run_case(backend, case, examples=0, tier=kernel.DEFAULT_TIER)
    assert not result.ok and wrong.check in result.failed_checks, result.message


def test_a_kernel_that_writes_into_its_inputs_fails_although_its_output_is_right():
    from tests.kernel_zoo import scales_q_in_place

    result = kernel.run_case(kernel.declared_backend(scales_q_in_place, "in-place"), kernel.Case(torch.float32, "none"),
                             examples=0)
    assert not result.ok and "gqa-4/2:inputs" in result.failed_checks
    assert not any(label.endswith(":out") for label in result.failed_checks)  # the output itself was right
    assert "the kernel wrote into q" in result.message


def test_the_tier_counts_are_what_the_run_checks():
    backend = BACKENDS["reference"]
    masks = ["none", "key-padding", kernel.DROPOUT]
    counts = kernel.tier_counts(backend, "cpu", [torch.float32], masks, examples=3, tier="ci")
    results, _ = kernel.run_matrix(backend, "cpu", [torch.float32], masks, examples=3, tier="ci")
    assert counts == {"cases": 3, "fixed": sum(len(kernel.fixed_problems(backend, m, "cpu", "ci"))
                                               for m in ("none", "key-padding")), "drawn": 6, "dropout": 1,
                      "fully_masked": 0}
    assert sum(r.problems for r in results) == counts["fixed"] + counts["drawn"] + counts["dropout"]


# ---- what a failing kernel computes instead ------------------------------------------------------------


@pytest.mark.parametrize("name,diagnosis", [
    ("wrong-scale", "scale 1/d = 1/16"),
    ("causal-alignment", "top-left causal alignment (declared bottom-right)"),
    ("causal-dropped-for-one-query", "bottom-right causal alignment (declared top-left)"),
    ("gqa-modulo", "query head h reading key/value head h % H_kv (not h // group)"),
    ("scale-ignored", "the default scale 1/sqrt(d) = 0.25, not the caller's 0.3"),
    ("key-padding-ignored", "key padding ignored"),
    ("bias-before-scale", "the bias added before the scale"),
    ("softmax-over-queries", "the softmax taken over the queries"),
])
def test_a_failing_kernel_is_told_which_nearby_semantics_its_output_matches(name, diagnosis):
    from tests.kernel_zoo import ZOO

    wrong = next(w for w in ZOO if w.name == name)
    dtype, mask = wrong.case.split("-", 1)
    result = kernel.run_case(kernel.declared_backend(wrong.fn, name), kernel.Case(kernel.DTYPES[dtype], mask),
                             examples=0)
    assert not result.ok and result.diagnosis == diagnosis


@pytest.mark.parametrize("name", ["online-softmax-without-rescaling", "no-max-subtraction", "dropped-tail-block",
                                  "scales-q-in-place"])
def test_a_kernel_wrong_in_no_nearby_convention_gets_no_diagnosis(name):
    from tests.kernel_zoo import ZOO

    wrong = next(w for w in ZOO if w.name == name)
    dtype, mask = wrong.case.split("-", 1)
    result = kernel.run_case(kernel.declared_backend(wrong.fn, name), kernel.Case(kernel.DTYPES[dtype], mask),
                             examples=0)
    assert not result.ok and result.diagnosis is None


def test_a_correct_kernel_matches_none_of_the_nearby_semantics_on_any_fixed_problem():
    """Every alternative differs from the declared semantics on the problems where it is tried, so a
    diagnosis can only describe a wrong kernel."""
    for kind in kernel.MASK_KINDS:
        for p in kernel.fixed_problems(BACKENDS["reference"], kind, tier="ci"):
            assert kernel.diagnose(attention, torch.float32, p) is None, (kind, p.label)


def test_a_kernel_declared_deterministic_is_run_twice_and_one_that_is_not_bitwise_equal_fails():
    from tests.kernel_zoo import keys_in_a_new_order_each_call

    declared = kernel.declared_backend(keys_in_a_new_order_each_call, "reorders")
    case = kernel.Case(torch.float32, "none")
    result = kernel.run_case(declared, case, examples=0, tier="smoke")
    assert not result.ok and "gqa-4/2:determinism" in result.failed_checks, result.message
    assert not any(c.endswith(":out") for c in result.failed_checks)  # as accurate as the reference
    not_declared = kernel.declared_backend(keys_in_a_new_order_each_call, "reorders", deterministic=False)
    assert kernel.run_case(not_declared, case, examples=0, tier="smoke").ok


@pytest.mark.parametrize("name", ["reference", "tiled", "sdpa-math", "sdpa-flash"])
def test_the_registry_backends_declared_deterministic_are_bitwise_equal_over_repeated_calls(name):
    backend = BACKENDS[name]
    assert backend.deterministic
    result = kernel.run_case(backend, kernel.Case(torch.float32, "additive"), examples=2, base_seed=0, tier="smoke")
    assert result.ok and not any("determinism" in c for c in result.failed_checks)


def test_a_drawn_problem_prints_as_its_spec_in_hypothesis_reports_not_as_its_tensors():
    from hypothesis.vendor.pretty import pretty

    problem = kernel.make_problem(kernel.ProblemSpec("additive", 2, 4, 2, 40, 40, 16, 16, seed=1))
    text = pretty(problem)
    assert text == repr(problem) and "tensor" not in text and "seed=1" in text and len(text) < 400


# ---- dropout ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reference", "sdpa-math"])
def test_the_backends_declaring_dropout_pass_its_case_in_every_dtype(name):
    from claimcheck.kernel_dropout import summary

    backend = BACKENDS[name]
    cases, _ = kernel.matrix(backend, "cpu", masks=[kernel.DROPOUT])
    assert [c.dtype for c in cases] == [torch.float32, torch.float16, torch.bfloat16]
    for case in cases:
        result = kernel.run_case(backend, case)
        assert result.ok and result.problems == 1, result.message
        assert {c.name for c in result.dropout} == {"reproducible", "seeded", "keep-rate", "independent", "values"}
        assert "keep-rate: kept 0.7" in summary(result.dropout)


def test_a_kernel_without_dropout_lists_its_dropout_cases_as_not_declared():
    cases, skipped = kernel.matrix(BACKENDS["tiled"], "cpu", masks=[kernel.DROPOUT])
    assert not cases and len(skipped) == 3 and all("dropout" in why for _, why in skipped)


def test_seeded_sdpa_dropout_leaves_the_callers_random_state_as_it_was():
    from impl.attention import Mask

    q = k = v = torch.randn(1, 2, 8, 8)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    BACKENDS["sdpa-math"].fn(q, k, v, None, Mask(dropout=(0.5, 1)))
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("bad", [(1.0, 0), (-0.1, 0), (0.5, 1.5), (0.5,)])
def test_a_dropout_outside_its_domain_is_refused(bad):
    from impl.attention import Mask

    with pytest.raises(ValueError, match="dropout="):
        Mask(dropout=bad)


def test_a_kernel_without_dropout_refuses_a_dropout_mask_rather_than_ignoring_it():
    from impl.attention import Mask

    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(ValueError, match="has no dropout"):
        BACKENDS["tiled"].fn(q, q, q, None, Mask(dropout=(0.1, 0)))
