"""The float64 reference against oracles no one here wrote: flash-attn's ``attention_ref`` and attn-gym's mods.

``tests/test_kernel_oracle.py`` checks :func:`impl.attention.attention` against torch's math SDPA, but spells
out here what SDPA cannot express (a window, ALiBi, sinks, a softcap). This file takes those definitions from
code written and used elsewhere (``tests/third_party.py`` reads it from the wheels pinned in
``tools/oracles.txt``):

* flash-attn's ``attention_ref`` (``flash_attn/cute/testing.py`` of flash-attn-4), the reference flash-attn's
  GPU tests judge its kernels by: causal (bottom-right), ``window_size`` measured from the bottom-right
  diagonal, ``softcap``, ``learnable_sink``, ``key_padding_mask`` / ``query_padding_mask`` (packed sequences,
  each aligned to its own end), GQA by repeating key/value heads, a given dropout mask, the log-sum-exp. Its
  softmax scale is fixed at 1/sqrt(d_k): the caller's scale s is given to it as q s sqrt(d_k). Top-left causal
  is its window ``(None, n_q - n_k)`` (the bottom-right diagonal moved up by n_k - n_q).
* attn-gym's ALiBi score modification (slopes 2^(-8 h / H), bias (kv_idx - q_idx) slope: the causal form, so it
  is compared under a causal mask only) and its document mask for packed sequences, evaluated on index grids.

flash-attn's key padding means "these sequences are shorter": its causal mask is then aligned to the number of
real keys, not to n_k as in our contract (and SDPA's), so key padding is compared on its own here and the
combination is compared as packed sequences (varlen), which mean exactly that.
"""
import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck import kernel
from claimcheck.kernel import relative_error
from claimcheck.kernel_features import (cache_strategy, kvcache_attention, packed_strategy, make_packed,
                                        varlen_attention)
from impl.attention import ALIGNMENTS, Mask, attention, dropout_keep, scores
from tests import third_party

# two float64 evaluations of one formula over at most 40 keys and 24 dims: a few hundred float64 eps
# (2.2e-16 each) at most, far below any float32 error (1.2e-7) the matrix measures against the reference
TOLERANCE = 1e-12
EPS32 = 2.0**-23


def _bshd(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(1, 2)  # (B, H, n, d) <-> (B, n, H, d): flash-attn's layout


def flash_ref(q, k, v, scale=None, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """flash-attn's ``attention_ref`` in float64 (``upcast=False``) on BHSD tensors -> ``(out (B, H_q, n_q, d_v),
    lse (B, H_q, n_q))``; ``scale`` goes in through q, since its scale is fixed at 1/sqrt(d_k)."""
    ref = third_party.flash_attn_testing()
    if scale is not None:
        q = q * (scale * math.sqrt(q.shape[-1]))
    out, _, lse = ref.attention_ref(_bshd(q), _bshd(k), _bshd(v), upcast=False, return_lse=True, **options)
    return _bshd(out), lse


def alibi_bias(h_q: int, n_q: int, n_k: int) -> torch.Tensor:
    """attn-gym's ALiBi score modification on a zero score: (H_q, n_q, n_k), query i at position i + n_k - n_q
    (flash-attn's bottom-right convention for ``alibi_slopes``), in float64 (its head index is given as float64)."""
    mod = third_party.attn_gym().mods.generate_alibi_bias(h_q)
    h = torch.arange(h_q, dtype=torch.float64)[:, None, None]
    q_idx = torch.arange(n_q, dtype=torch.float64)[None, :, None] + (n_k - n_q)
    kv_idx = torch.arange(n_k, dtype=torch.float64)[None, None, :]
    return mod(torch.zeros((), dtype=torch.float64), 0, h, q_idx, kv_idx)


def flash_options(problem: kernel.AttentionProblem) -> dict:
    """Our :class:`Mask` in ``attention_ref``'s terms (ALiBi from attn-gym as its ``attn_bias``)."""
    m, n_q, n_k = problem.mask, problem.q.shape[-2], problem.k.shape[-2]
    options: dict = {}
    if m.causal == "bottom-right":
        options["causal"] = True
    elif m.causal == "top-left":
        options["window_size"] = (None, n_q - n_k)
    if m.window is not None:  # with a causal mask: its right bound is the diagonal's (0 bottom-right, n_q - n_k top-left)
        left, right = m.window
        edge = {"bottom-right": 0, "top-left": n_q - n_k, None: None}[m.causal]
        if edge is not None:
            right = edge if right is None else min(right, edge)
        options["window_size"] = (left, right)
        options.pop("causal", None)
    if m.key_padding is not None:
        assert m.causal is None, "flash-attn aligns causal to the real keys: compared as varlen instead"
        options["key_padding_mask"] = m.key_padding
    if m.bias is not None:
        options["attn_bias"] = m.bias
    if m.alibi is not None:
        assert m.causal is not None, "attn-gym's ALiBi is the causal form"
        options["attn_bias"] = alibi_bias(problem.q.shape[1], n_q, n_k)
    if m.softcap is not None:
        options["softcap"] = m.softcap
    if m.sink is not None:
        options["learnable_sink"] = m.sink
    return options


def tolerance(problem: kernel.AttentionProblem) -> float:
    """TOLERANCE, or with sinks the float32 of ``attention_ref``'s sink branch (it rounds the scores to float32
    before the softmax): each exponent errs by eps32 (|s| + |max|), a few of them in a row sum."""
    if problem.mask.sink is None:
        return TOLERANCE
    s = scores(problem.q, problem.k, problem.scale, Mask(softcap=problem.mask.softcap))
    return 16 * EPS32 * (1 + s.abs().max().item() + problem.mask.sink.abs().max().item())


def compare(problem: kernel.AttentionProblem, ours=attention) -> tuple[float, float]:
    """Relative errors of our output and log-sum-exp against flash-attn's, on the rows that have a key; rows
    with none are NaN in ours (the formula's 0/0) and must be 0 in flash-attn's (its convention)."""
    out, lse = ours(problem.q, problem.k, problem.v, problem.scale, problem.mask, return_lse=True)
    their_out, their_lse = flash_ref(problem.q, problem.k, problem.v, problem.scale, **flash_options(problem))
    empty = torch.isneginf(lse)
    assert bool(torch.isneginf(their_lse[empty]).all()), "flash-attn gives a finite lse to a row with no key"
    assert bool((their_out[empty] == 0).all()), "flash-attn's rows with no key are not 0"
    return relative_error(out[~empty], their_out[~empty]), relative_error(lse[~empty], their_lse[~empty])


def _reference_with_every_feature():
    from impl.backends import ALL_MASKS

    return kernel.declared_backend(attention, "reference-oracle", masks=sorted(ALL_MASKS))


def _problems(kind: str):
    alignments = ALIGNMENTS if kind in ("sink", "softcap", "alibi", "window") else ()
    drawn = kernel.attention_problems(mask_kinds=(kind,), max_d=24, scales=(None, kernel.SCALE),
                                      padded_alignments=alignments)
    if kind == "alibi":  # the causal form of ALiBi, on the bottom-right diagonal's side of every row, with attn-gym's
        # slopes (the matrix moves each slope off the standard ones)
        drawn = drawn.filter(lambda p: p.mask.causal is not None and p.k.shape[-2] >= p.q.shape[-2]).map(
            standard_slopes)
    return drawn


def standard_slopes(problem: kernel.AttentionProblem) -> kernel.AttentionProblem:
    """``problem`` with Press et al.'s slopes 2^(-8 h / H_q), the ones attn-gym's ALiBi computes from H_q."""
    h_q = problem.q.shape[1]
    slopes = 2.0 ** (-8.0 * torch.arange(1, h_q + 1, dtype=torch.float64) / h_q)
    return dataclasses.replace(problem, mask=dataclasses.replace(problem.mask, alibi=slopes))


KINDS = ("none", "causal-top-left", "causal-bottom-right", "key-padding", "additive", "window", "alibi",
         "softcap", "sink")


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_float64_reference_agrees_with_flash_attns_attention_ref_on_every_mask_feature(kind, data):
    problem = data.draw(_problems(kind), label="problem")
    out_error, lse_error = compare(problem)
    bound = tolerance(problem)
    assert out_error <= bound and lse_error <= bound, (str(problem.spec), out_error, lse_error, bound)


@pytest.mark.parametrize("label", ["gqa-8/2", "large-logits", "negative-logits", "scale-0.3", "tiles-128", "decode",
                                   f"keys-{kernel.LONG_KEYS}", "one-key", "head-256"])
@pytest.mark.parametrize("kind", ("none", "causal-bottom-right", "window", "softcap", "sink"))
def test_the_reference_agrees_with_attention_ref_on_the_fixed_problems_of_the_ci_tier(kind, label):
    problems = {p.label: p for p in kernel.fixed_problems(_reference_with_every_feature(), kind, tier="ci")}
    problem = problems[label]
    out_error, lse_error = compare(problem)
    bound = 10 * tolerance(problem)  # 1025 keys and 256 dims: ten times the terms of a drawn problem at most
    assert out_error <= bound and lse_error <= bound, (label, out_error, lse_error)


def test_rows_with_no_key_are_nan_in_ours_and_zero_in_flash_attns_the_two_conventions_the_contract_names():
    """Key padding hiding every key of the second sequence, and bottom-right causal with 9 queries over 5 keys."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float64) for shape in ((2, 2, 9, 8), (2, 1, 5, 8),
                                                                                       (2, 1, 5, 8)))
    padding = torch.tensor([[True, False, True, True, False], [False] * 5])
    for mask in (Mask(key_padding=padding), Mask(causal="bottom-right")):
        problem = kernel.AttentionProblem(q, k, v, "fixed", mask, 3)
        out, lse = attention(q, k, v, None, mask, return_lse=True)
        assert torch.isnan(out).any() and torch.isneginf(lse).any()
        assert compare(problem) <= (TOLERANCE, TOLERANCE)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_the_dropout_reference_is_attention_refs_with_the_same_keep_mask(data):
    """Ours draws its keep mask from the seed; flash-attn's takes one: given ours, the outputs agree."""
    problem = data.draw(_problems("none"), label="problem")
    p = data.draw(st.sampled_from((0.1, 0.25, 0.5)), label="p")
    mask = Mask(dropout=(p, 7))
    ours = attention(problem.q, problem.k, problem.v, problem.scale, mask)
    keep = dropout_keep(ours.shape[:-1] + (problem.k.shape[-2],), p, 7)
    theirs, _ = flash_ref(problem.q, problem.k, problem.v, problem.scale, dropout_p=p, dropout_mask=keep)
    assert relative_error(ours, theirs) <= TOLERANCE


def _padded(problem) -> tuple[torch.Tensor, ...]:
    """Packed (total, H, d) sequences -> padded (n_seq, H, max_n, d) q, k, v and their padding masks (True = real)."""
    lengths = problem.lengths
    width_q, width_k = (max(max(n) for n in zip(*lengths)),) * 2
    out = []
    for packed, which, width in ((problem.q, 0, width_q), (problem.k, 1, width_k), (problem.v, 1, width_k)):
        starts = [0, *torch.tensor([n[which] for n in lengths]).cumsum(0).tolist()]
        padded = packed.new_zeros((len(lengths), packed.shape[1], width, packed.shape[2]))
        for b, (a, e) in enumerate(zip(starts, starts[1:])):
            padded[b, :, : e - a] = packed[a:e].transpose(0, 1)
        out.append(padded)
    real = [torch.arange(width)[None, :] < torch.tensor([n[which] for n in lengths])[:, None]
            for which, width in ((0, width_q), (1, width_k))]
    return (*out, *real)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_packed_sequences_are_attention_refs_padded_batch_each_causal_mask_aligned_to_its_own_end(data):
    problem = data.draw(packed_strategy(_reference_with_every_feature()).filter(
        lambda p: p.causal != "top-left"), label="problem")
    cu_q, cu_k = problem.cu_seqlens("cpu")
    ours = varlen_attention(problem.q, problem.k, problem.v, problem.scale, Mask(causal=problem.causal),
                            cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    q, k, v, real_q, real_k = _padded(problem)
    theirs, _ = flash_ref(q, k, v, problem.scale, causal=problem.causal == "bottom-right",
                          query_padding_mask=real_q, key_padding_mask=real_k)
    theirs = torch.cat([theirs[b, :, :n_q].transpose(0, 1) for b, (n_q, _) in enumerate(problem.lengths)], 0)
    assert relative_error(ours, theirs) <= TOLERANCE, problem.shape


@pytest.mark.parametrize("causal", [None, "top-left"])
def test_packed_self_attention_is_attention_refs_with_attn_gyms_document_mask(causal):
    """Sequences of 7, 0, 19, 1 and 70 tokens packed into one (the document mask of attn-gym, causal or not, as
    one float bias): no token attends across a boundary."""
    gym = third_party.attn_gym()
    lengths = [(7, 7), (0, 0), (19, 19), (1, 1), (70, 70)]
    problem = make_packed(lengths, 4, 2, 16, 8, seed=5, causal=causal)
    offsets = gym.masks.document_mask.length_to_offsets([n for n, _ in lengths], "cpu")
    inner = gym.masks.causal_mask if causal else (lambda b, h, q_idx, kv_idx: q_idx >= 0)
    total = offsets[-1].item()
    keep = gym.masks.generate_doc_mask_mod(inner, offsets)(0, 0, torch.arange(total)[:, None],
                                                            torch.arange(total)[None, :])
    bias = torch.zeros(total, total, dtype=torch.float64).masked_fill(~keep, -math.inf)
    theirs, _ = flash_ref(*(t.transpose(0, 1)[None] for t in (problem.q, problem.k, problem.v)), attn_bias=bias)
    cu_q, cu_k = problem.cu_seqlens("cpu")
    ours = varlen_attention(problem.q, problem.k, problem.v, None, Mask(causal=causal), cu_seqlens_q=cu_q,
                            cu_seqlens_k=cu_k)
    assert relative_error(ours, theirs[0].transpose(0, 1)) <= TOLERANCE


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_kv_cache_is_attention_refs_key_padding_with_causal_aligned_to_the_valid_prefix(data):
    problem = data.draw(cache_strategy(_reference_with_every_feature()), label="problem")
    seqlens = torch.tensor(problem.seqlens)
    ours = kvcache_attention(problem.q, problem.k_cache, problem.v_cache, problem.scale,
                             Mask(causal=problem.causal), cache_seqlens=seqlens)
    valid = torch.arange(problem.k_cache.shape[2])[None, :] < seqlens[:, None]
    theirs, _ = flash_ref(problem.q, problem.k_cache, problem.v_cache, problem.scale,
                          causal=problem.causal == "bottom-right", key_padding_mask=valid)
    assert relative_error(ours, theirs) <= TOLERANCE, problem.shape


# ---- the comparison rejects wrong references ------------------------------------------------------------


def _wrong(change):
    def wrong_reference(q, k, v, scale, mask, return_lse=False):
        return attention(*change(q, k, v, scale, mask), return_lse=return_lse)
    return wrong_reference


def _other_alignment(q, k, v, scale, mask):
    return q, k, v, scale, Mask(causal={"top-left": "bottom-right", "bottom-right": "top-left"}[mask.causal])


def _head_modulo(q, k, v, scale, mask):  # query head h reads key/value head h % H_kv instead of h // group
    group = q.shape[1] // k.shape[1]
    order = torch.arange(q.shape[1]).reshape(k.shape[1], group).T.reshape(-1)
    return q[:, order], k, v, scale, mask


WRONG = {  # a wrong reference, and a problem where it is wrong
    "alignment swapped": (_wrong(_other_alignment), kernel.fixed_problem("causal-bottom-right", 1, n_q=9, n_k=20)),
    "sink dropped": (_wrong(lambda q, k, v, s, m: (q, k, v, s, Mask())), kernel.fixed_problem("sink", 2)),
    "softcap dropped": (_wrong(lambda q, k, v, s, m: (q, k, v, s, Mask())),
                        kernel.fixed_problem("softcap", 3, max_logit=4.0)),
    "window mirrored": (_wrong(lambda q, k, v, s, m: (q, k, v, s, Mask(window=m.window[::-1]))),
                        kernel.make_problem(kernel.ProblemSpec("window", 1, 2, 1, 9, 20, 8, 8, seed=4))),
    "ALiBi slopes reversed": (_wrong(lambda q, k, v, s, m: (q, k, v, s, Mask(causal=m.causal, alibi=m.alibi.flip(0)))),
                              standard_slopes(kernel.fixed_problem("alibi", 5, n_q=20, n_k=20, causal="bottom-right"))),
    "heads h % H_kv": (_wrong(_head_modulo), kernel.fixed_problem("none", 6)),
    "scale ignored": (_wrong(lambda q, k, v, s, m: (q, k, v, None, m)),
                      kernel.fixed_problem("none", 7, scale=kernel.SCALE)),
}


@pytest.mark.parametrize("name", WRONG)
def test_the_comparison_with_attention_ref_rejects_a_wrong_reference(name):
    wrong, problem = WRONG[name]
    assert compare(problem) <= (tolerance(problem), tolerance(problem))  # the right one passes on this problem
    out_error, _ = compare(problem, ours=wrong)
    assert out_error > 1e3 * tolerance(problem), (name, out_error)
