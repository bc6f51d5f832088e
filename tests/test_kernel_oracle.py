"""The float64 reference of the backend matrix against an oracle written elsewhere: torch's math SDPA in
float64, feature by feature.

Every verdict of ``claims kernel`` and ``properties/test_backends.py`` is an error measured against
:func:`impl.attention.attention` in float64, so a wrong reference would pass a wrong kernel that agrees
with it. Here each mask feature the matrix uses is given to torch's own math implementation of
``scaled_dot_product_attention`` in its own terms (``is_causal`` for top-left causal, torch's
``causal_lower_right`` bias for bottom-right, a boolean ``attn_mask`` where True takes part, a float
``attn_mask`` added to the scores, ``enable_gqa`` for shared key/value heads, ``scale``), on the problems
the matrix draws. The kernel features: a sliding window as a boolean and ALiBi as a float ``attn_mask``
built from numpy positions; a sink as one more key (k = 0, v = 0) whose score is the sink logit; a
softcap, which SDPA cannot express, as the formula written out in numpy.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from claimcheck import kernel
from impl.attention import ALIGNMENTS, attention
from properties.assertions import relative_error

# two float64 evaluations of one formula over at most 40 keys and 24 dims: a few hundred float64 eps
# (2.2e-16 each) at most, far below any float32 error (1.2e-7) the matrix measures against the reference
TOLERANCE = 1e-12


def _positions(n_q: int, n_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Query and key positions on the bottom-right diagonal's scale: ``(i + n_k - n_q, j)`` as (n_q, 1), (1, n_k)."""
    return np.arange(n_q)[:, None] + (n_k - n_q), np.arange(n_k)[None, :]


def _causal_keep(problem: kernel.AttentionProblem) -> np.ndarray | None:
    """The causal mask alone, from numpy positions: (n_q, n_k), True = may attend (None: no causal mask)."""
    n_q, n_k, causal = problem.q.shape[-2], problem.k.shape[-2], problem.mask.causal
    if causal is None:
        return None
    offset = n_k - n_q if causal == "bottom-right" else 0
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset


def _softcap_numpy(problem: kernel.AttentionProblem) -> torch.Tensor:
    """A softcap has no SDPA spelling: ``softmax(c tanh(q k^T s / c)) v`` written out in numpy, float64, the causal
    mask applied to the capped scores."""
    q, k, v = (t.numpy() for t in (problem.q, problem.k, problem.v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1]) if problem.scale is None else problem.scale
    c = problem.mask.softcap
    logits = c * np.tanh(np.einsum("bhid,bhjd->bhij", q, k) * scale / c)
    keep = _causal_keep(problem)
    if keep is not None:
        logits = np.where(keep, logits, -np.inf)
    if problem.mask.key_padding is not None:
        logits = np.where(problem.mask.key_padding.numpy()[:, None, None, :], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return torch.from_numpy(np.einsum("bhij,bhjd->bhid", weights / weights.sum(-1, keepdims=True), v))


def _sdpa_math(problem: kernel.AttentionProblem) -> torch.Tensor:
    q, k, v, mask = problem.q, problem.k, problem.v, problem.mask
    n_q, n_k = q.shape[-2], k.shape[-2]
    kwargs: dict = {"scale": problem.scale, "enable_gqa": problem.gqa}
    causal = _causal_keep(problem)
    hidden = None if causal is None else np.where(causal, 0.0, -np.inf)  # a float attn_mask of the causal mask
    if mask.key_padding is not None and mask.features & {"alibi", "sink", "softcap"}:  # padding with a feature:
        padded = np.where(mask.key_padding.numpy()[:, None, None, :], 0.0, -np.inf)  # (B, 1, 1, n_k), in hidden
        hidden = padded if hidden is None else hidden + padded
    if mask.softcap is not None:
        return _softcap_numpy(problem)
    if mask.window is not None:  # a boolean attn_mask, from numpy positions
        i, j = _positions(n_q, n_k)
        left, right = mask.window
        keep = np.ones((n_q, n_k), dtype=bool)
        if left is not None:
            keep &= j >= i - left
        if right is not None:
            keep &= j <= i + right
        if causal is not None:  # the causal mask with the window, both as one boolean mask
            keep &= causal
        kwargs["attn_mask"] = torch.from_numpy(keep)
    elif mask.alibi is not None:  # a float attn_mask: -slope_h |i + n_k - n_q - j|
        i, j = _positions(n_q, n_k)
        bias = -mask.alibi.numpy()[:, None, None] * np.abs(i - j)[None]
        kwargs["attn_mask"] = torch.from_numpy(bias if hidden is None else bias + hidden)
    elif mask.sink is not None:  # one more key: k = 0 and v = 0, whose score is the sink logit (a float attn_mask)
        b, h_kv = k.shape[:2]
        k = torch.cat([k, k.new_zeros(b, h_kv, 1, k.shape[-1])], dim=-2)
        v = torch.cat([v, v.new_zeros(b, h_kv, 1, v.shape[-1])], dim=-2)
        bias = torch.zeros(q.shape[1], n_q, n_k + 1, dtype=q.dtype)
        bias[..., -1] = mask.sink[:, None]
        if hidden is not None:  # the causal mask and the padding hide keys, never the sink
            bias = bias + torch.nn.functional.pad(torch.from_numpy(hidden), (0, 1))
        kwargs["attn_mask"] = bias
    elif mask.bias is not None:
        kwargs["attn_mask"] = mask.bias
    elif mask.key_padding is not None:
        keep = mask.key_padding[:, None, None, :].expand(q.shape[0], 1, n_q, n_k)
        if causal is not None:  # torch's causal biases do not combine with a tensor mask: spelled out
            keep = keep & torch.from_numpy(causal)
        kwargs["attn_mask"] = keep
    elif mask.causal == "top-left":
        kwargs["is_causal"] = True
    elif mask.causal == "bottom-right":
        kwargs["attn_mask"] = causal_lower_right(n_q, n_k)
    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)


@pytest.mark.parametrize("kind", kernel.MASK_KINDS)
@settings(max_examples=40)
@given(data=st.data())
def test_the_float64_reference_agrees_with_torchs_math_sdpa_on_every_mask_feature(kind, data):
    problem = data.draw(kernel.attention_problems(mask_kinds=(kind,), max_d=24, scales=(None, kernel.SCALE),
                                                  padded_alignments=ALIGNMENTS), label="problem")
    ours = attention(problem.q, problem.k, problem.v, problem.scale, problem.mask)
    theirs = _sdpa_math(problem)
    assert theirs.dtype == ours.dtype == torch.float64
    assert relative_error(ours, theirs) <= TOLERANCE, (str(problem.spec), relative_error(ours, theirs))


@pytest.mark.parametrize("alignment", ALIGNMENTS)
@pytest.mark.parametrize("kind", kernel.CAUSAL_JOINS)
def test_the_reference_agrees_with_torchs_math_sdpa_when_a_causal_mask_comes_with_a_feature(kind, alignment):
    problems = {p.label: p for p in kernel.fixed_problems(_causal_backend(), kind, tier="smoke")}
    problem = problems[f"{'padding' if kind == 'key-padding' else kind}+{alignment}"]
    assert problem.mask.causal == alignment
    ours = attention(problem.q, problem.k, problem.v, problem.scale, problem.mask)
    assert relative_error(ours, _sdpa_math(problem)) <= TOLERANCE, str(problem.spec)


@pytest.mark.parametrize("kind", kernel.PADDING_JOINS)
def test_the_reference_agrees_with_torchs_math_sdpa_when_key_padding_comes_with_a_feature(kind):
    problems = {p.label: p for p in kernel.fixed_problems(_causal_backend(), kind, tier="smoke")}
    problem = problems[f"{kind}+padding"]
    assert problem.mask.key_padding is not None and not problem.mask.key_padding.all()
    ours = attention(problem.q, problem.k, problem.v, problem.scale, problem.mask)
    assert relative_error(ours, _sdpa_math(problem)) <= TOLERANCE, str(problem.spec)


@pytest.mark.parametrize("label", ["gqa-4/2", "gqa-8/2", "large-logits", "negative-logits", "scale-0.3", "tiles-128", "decode",
                                   f"keys-{kernel.LONG_KEYS}", "one-key", "batch-3", "head-128",
                                   "head-256"])
@pytest.mark.parametrize("kind", kernel.MASK_KINDS)
def test_the_reference_agrees_with_torchs_math_sdpa_on_every_fixed_problem_of_the_ci_tier(kind, label):
    problems = {p.label: p for p in kernel.fixed_problems(_any_backend(), kind, tier="ci")}
    problem = problems[label]
    ours = attention(problem.q, problem.k, problem.v, problem.scale, problem.mask)
    # 1025 keys and 256 dims: still a few thousand float64 eps at most
    assert relative_error(ours, _sdpa_math(problem)) <= TOLERANCE * 10, str(problem.spec)


def _any_backend():
    return kernel.declared_backend(attention, "reference-oracle")


def _causal_backend():
    """The reference declared with every feature: its fixed problems then join each one with a causal mask."""
    from impl.backends import ALL_MASKS

    return kernel.declared_backend(attention, "reference-oracle", masks=sorted(ALL_MASKS))
