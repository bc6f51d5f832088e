"""The features of fused kernels that change the call (:mod:`claimcheck.kernel_features`): the log-sum-exp
and its gradient, packed variable-length batches, a KV cache. Each reference agrees with an oracle written
apart from it, each case's problems have the property that makes its bug show, a correct kernel passes,
and a kernel that gets the feature wrong fails the check aimed at it (the zoo, ``tests/kernel_zoo.py``)."""
import math

import pytest
import torch
import torch.nn.functional as F

from claimcheck import kernel
from claimcheck import kernel_features as kf
from impl.attention import Mask, attention
from impl.backends import BACKENDS

F32 = torch.float32


def _run(fn, mask: str, dtype=F32, examples: int = 1, **declared) -> kernel.CaseResult:
    backend = kernel.declared_backend(fn, getattr(fn, "__name__", "fn"), **declared)
    return kernel.run_case(backend, kernel.Case(dtype, mask), examples=examples, shrink=False)


# ---- lse ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reference", "tiled"])
def test_a_registry_backend_declaring_lse_passes_its_value_and_gradient_checks(name):
    result = kernel.run_case(BACKENDS[name], kernel.Case(F32, "lse"), examples=1)
    assert result.ok, result.message
    parts = {c.part for _, c in result.checks}
    assert {"out", "lse", "dq", "dk", "dv"} <= parts
    assert {p.label for p, _ in result.checks} >= {"lse-gqa-4/2", "lse-large-logits", "lse-fully-masked"}


def test_the_lse_problems_reach_past_exp_overflow_and_hide_whole_rows():
    problems = {p.label: p for p in kf.lse_problems(BACKENDS["reference"])}
    big = problems["lse-large-logits"]
    lse = attention(big.q, big.k, big.v, mask=big.mask, return_lse=True)[1]
    assert lse.max().item() > math.log(torch.finfo(F32).max)  # L past 88.7: exp(L) is inf in float32
    masked = problems["lse-fully-masked"]
    lse = attention(masked.q, masked.k, masked.v, mask=masked.mask, return_lse=True)[1]
    assert torch.isinf(lse).any() and torch.isfinite(lse).any()


def _lse_inf_on_empty_rows(q, k, v, scale=None, mask=None, return_lse=False):
    """Right, with flash-attn's convention: a row with no allowed key gives lse = +inf."""
    out, lse = attention(q, k, v, scale, mask, return_lse=True)
    return (out, torch.where(torch.isinf(lse), math.inf, lse)) if return_lse else out


def test_fully_masked_rows_give_minus_inf_unless_the_kernel_declares_its_own_value():
    declared = dict(features=["lse"], backward=False, fully_masked="nan")
    result = _run(_lse_inf_on_empty_rows, "lse", examples=0, **declared)
    assert not result.ok and result.failed_checks == ["lse-fully-masked:lse-fully-masked",
                                                      "lse-fully-masked-causal:lse-fully-masked"], result.failed_checks
    assert "give inf, declared -inf" in result.message
    _lse_inf_on_empty_rows.claims_capabilities = {"lse_fully_masked": "inf"}
    try:
        assert _run(_lse_inf_on_empty_rows, "lse", examples=0, **declared).ok
    finally:
        del _lse_inf_on_empty_rows.claims_capabilities


def _output_only(q, k, v, scale=None, mask=None, return_lse=False):
    return attention(q, k, v, scale, mask)  # return_lse ignored


def test_a_kernel_declaring_lse_that_returns_the_output_alone_is_an_error_saying_so():
    result = _run(_output_only, "lse", features=["lse"], backward=False)
    assert result.status == "error" and "returns (out, lse)" in result.message


# ---- varlen ---------------------------------------------------------------------------------------------


def _padded_oracle(problem: kf.PackedProblem) -> torch.Tensor:
    """Packed attention computed the other way: sequences padded to one length, SDPA's math kernel in
    float64 with key padding (and the causal mask built per sequence), the padded rows dropped."""
    rows = []
    for i, (n_q, n_k) in enumerate(problem.lengths):
        a, c = sum(n for n, _ in problem.lengths[:i]), sum(n for _, n in problem.lengths[:i])
        if n_q == 0:
            continue
        q = problem.q[a:a + n_q].transpose(0, 1)[None]
        k, v = (t[c:c + n_k].transpose(0, 1)[None] for t in (problem.k, problem.v))
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        pad = 5  # keys past the sequence, hidden by the mask
        k, v = (torch.cat([t, torch.randn(t.shape[:2] + (pad, t.shape[-1]), dtype=t.dtype)], 2) for t in (k, v))
        allowed = torch.arange(n_k + pad)[None, :] < n_k
        if problem.causal:
            offset = n_k - n_q if problem.causal == "bottom-right" else 0
            allowed = allowed & (torch.arange(n_k + pad)[None, :] <= torch.arange(n_q)[:, None] + offset)
        rows.append(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=problem.scale)[0].transpose(0, 1))
    return torch.cat(rows, 0)


@pytest.mark.parametrize("label", ["varlen-4/2", "varlen-cross", "varlen+top-left", "varlen+bottom-right"])
def test_the_varlen_reference_agrees_with_padded_attention_and_every_fixed_problem_has_an_empty_sequence(label):
    problem = {p.label: p for p in kf.packed_problems(BACKENDS["reference"])}[label]
    assert (0, 0) in problem.lengths
    cu_q, cu_k = problem.cu_seqlens("cpu")
    assert cu_q.dtype == torch.int32 and cu_q[0] == 0 and cu_q[-1] == problem.q.shape[0] == sum(cu_q.diff().tolist())
    got = kf.varlen_attention(problem.q, problem.k, problem.v, problem.scale,
                              Mask(causal=problem.causal) if problem.causal else None, cu_q, cu_k)
    assert torch.allclose(got, _padded_oracle(problem), atol=1e-12, rtol=0)  # float64, two orders of summation


def test_packed_sequences_attended_as_one_differ_from_the_reference_on_every_fixed_problem():
    from tests.kernel_zoo import varlen_across_boundaries

    for p in kf.packed_problems(BACKENDS["reference"]):
        cu_q, cu_k = p.cu_seqlens("cpu")
        mask = Mask(causal=p.causal) if p.causal else None
        wrong = varlen_across_boundaries(p.q, p.k, p.v, None, mask, cu_q, cu_k)
        assert (wrong - kf.varlen_attention(p.q, p.k, p.v, None, mask, cu_q, cu_k)).abs().max() > 0.1, p.label


def test_the_gallerys_packed_sdpa_passes_the_varlen_and_kvcache_cases_in_every_dtype():
    from impl.gallery import sdpa_packed

    for feature in ("varlen", "kvcache"):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            result = _run(sdpa_packed, feature, dtype)
            assert result.ok, (feature, dtype, result.message)
            assert any(c.part == "dq" for _, c in result.checks) == (feature == "varlen")  # the cache: forward only


# ---- kvcache --------------------------------------------------------------------------------------------


def _loop_oracle(p: kf.CacheProblem) -> torch.Tensor:
    """Each output entry from its definition: a softmax over the allowed cache positions, one query at a time."""
    b_, h_q, n_q, _ = p.q.shape
    group = h_q // p.k_cache.shape[1]
    s = p.scale if p.scale is not None else p.q.shape[-1] ** -0.5
    out = torch.empty(b_, h_q, n_q, p.v_cache.shape[-1], dtype=torch.float64)
    for b in range(b_):
        n = p.seqlens[b]
        for h in range(h_q):
            for i in range(n_q):
                last = n - 1 if p.causal is None else i + n - n_q  # bottom-right: the diagonal meets the prefix's end
                keys = p.k_cache[b, h // group, : last + 1]
                w = torch.softmax(keys @ p.q[b, h, i] * s, 0)
                out[b, h, i] = w @ p.v_cache[b, h // group, : last + 1]
    return out


def test_the_kvcache_reference_agrees_with_a_softmax_over_the_allowed_positions_and_the_caches_hold_stale_entries():
    for p in kf.cache_problems(BACKENDS["reference"]):
        got = kf.kvcache_attention(p.q, p.k_cache, p.v_cache, p.scale, Mask(causal=p.causal) if p.causal else None,
                                   torch.tensor(p.seqlens, dtype=torch.int32))
        assert torch.allclose(got, _loop_oracle(p), atol=1e-12, rtol=0), p.label
        assert any(n < p.k_cache.shape[2] for n in p.seqlens), p.label  # a stale tail a kernel must not read
    assert {p.label for p in kf.cache_problems(BACKENDS["reference"])} == {"kvcache-decode", "kvcache-prefill",
                                                                           "kvcache-causal"}


def test_feature_cases_run_only_when_declared_and_are_counted_before_the_run():
    backend = kernel.declared_backend(attention, "attention", features=["lse"], backward=False)
    cases, skipped = kernel.matrix(backend, "cpu", [F32])
    assert "float32-lse" in {c.name for c in cases}
    assert {"float32-varlen", "float32-kvcache"} <= {c.name for c, _ in skipped}
    counts = kernel.tier_counts(backend, "cpu", [F32], ["lse"], examples=3)
    result = kernel.run_case(backend, kernel.Case(F32, "lse"), examples=3)
    assert result.ok and result.problems == counts["fixed"] + counts["drawn"] == len(kf.lse_problems(backend)) + 1
