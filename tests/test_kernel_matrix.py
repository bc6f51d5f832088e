"""The backend matrix cannot miss: what every case of every backend is guaranteed to see
(:mod:`claimcheck.kernel`, shared by ``claims kernel`` and ``properties/test_backends.py``)."""
import math

import pytest
import torch

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
    s = scores(big.q, big.k, None, big.mask)
    assert FLOAT32_EXP_OVERFLOW < s[torch.isfinite(s)].max().item() <= kernel.LARGE_LOGIT + 1e-9
    lo, hi = backend.head_dims
    assert all(lo <= p.q.shape[-1] <= hi for p in problems.values())
    assert not any(torch.isnan(attention(p.q, p.k, p.v, mask=p.mask)).any() for p in problems.values())


def _recording_kernel(seen: list):
    def fn(q, k, v, scale=None, mask=None):
        seen.append((tuple(q.shape), tuple(k.shape), round(q.double().sum().item(), 6)))
        return attention(q, k, v, scale, mask)
    return fn


def _drawn(case: kernel.Case, base_seed) -> list:
    seen: list = []
    backend = kernel.declared_backend(_recording_kernel(seen), "recorder")
    kernel.run_case(backend, case, examples=3, base_seed=base_seed)
    return seen[len(kernel.fixed_problems(backend, case.mask)):]


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
