"""The scaling factor 1/sqrt(d_k): the variance argument of foundations.txt lines 36-44.

Statistical claims are tested on a fixed seed with a stated sample size and a 6-sigma bound: the
test is deterministic, and a true claim would fail for a random seed with probability < 1e-8.
"""
import functools
import math

import pytest
import sympy as sp
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, record, refutes
from claimcheck.snippets import run_snippet
from impl.attention import attention

N = 20_000  # samples of q . k per case
DIMS = (1, 16, 64, 256)
SIGMAS = 6.0
EPS64 = 2.0**-52


def _components(kind: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Zero-mean, unit-variance components of the named distribution (float64); (E x^4)."""
    if kind == "gaussian":
        return torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "rademacher":
        return torch.randint(0, 2, shape, generator=gen).double() * 2 - 1
    if kind == "uniform":  # U(-sqrt 3, sqrt 3) has variance 1
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * math.sqrt(3)
    raise ValueError(kind)


FOURTH_MOMENT = {"gaussian": 3.0, "rademacher": 1.0, "uniform": 9.0 / 5.0}


def _dot_products(kind: str, d: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    q, k = _components(kind, (N, d), gen), _components(kind, (N, d), gen)
    return (q * k).sum(-1)


def _variance_bound(kind: str, d: int, scale2: float = 1.0) -> float:
    """6 standard deviations of the estimator mean(S^2) of Var S, S = q . k (times scale^2).

    With X = q_i k_i (E X^2 = 1, E X^4 = m4^2) the fourth moment of S is d m4^2 + 3 d (d - 1), so
    Var(S^2) = d m4^2 + 3d(d - 1) - d^2 and the sample variance has std sqrt(Var(S^2) / N).
    """
    m4 = FOURTH_MOMENT[kind] ** 2
    var_s2 = d * m4 + 3 * d * (d - 1) - d * d
    return SIGMAS * math.sqrt(var_s2 / N) * scale2


@pytest.mark.claim("attention.dot-product-variance", "attention.dot-product-variance-proportional-dk",
                   "attention.la-scaling-iid-entries-assumption", "attention.la-scaling-var-qk-equals-dk",
                   "attention.la-scaling-std-qk-sqrt-dk", "softmax.la-unscaled-input-variance-grows-with-dk")
@pytest.mark.parametrize("kind", sorted(FOURTH_MOMENT))
def test_dot_product_of_unit_variance_components_has_variance_d_k(kind):
    """Var = d_k for every d_k, so proportional to d_k; Std = sqrt(Var) = sqrt(d_k) (linear-algebra.txt
    lines 159-164 assume i.i.d. N(0, 1) entries: the gaussian case; the others show the argument needs
    only zero mean, unit variance and independence)."""
    for d in DIMS:
        s = _dot_products(kind, d, seed=1000 + d)
        var = (s**2).mean().item()  # E[q.k] = 0 under the claim's assumptions, so Var = E[(q.k)^2]
        record(f"var(q.k)/d_k [{kind}, d_k={d}]", var / d)
        record(f"std(q.k)/sqrt(d_k) [{kind}, d_k={d}]", math.sqrt(var / d))
        claim_assert(abs(var - d) <= _variance_bound(kind, d), "sample Var[q.k] is not d_k within 6 sigma",
                     distribution=kind, d_k=d, sample_variance=var, n=N)


@pytest.mark.claim("attention.scaled-logit-unit-variance", "attention.la-scaled-std-equals-one")
@pytest.mark.parametrize("kind", sorted(FOURTH_MOMENT))
def test_scaling_by_sqrt_d_k_gives_unit_variance_logits(kind):
    for d in DIMS:
        s = _dot_products(kind, d, seed=2000 + d) / math.sqrt(d)
        var = (s**2).mean().item()
        record(f"var(q.k/sqrt d_k) [{kind}, d_k={d}]", var)
        claim_assert(abs(var - 1) <= _variance_bound(kind, d, scale2=1 / d), "scaled logits do not have unit variance",
                     distribution=kind, d_k=d, sample_variance=var, n=N)


@pytest.mark.claim("attention.la-scaling-dot-product-sum-of-dk-terms")
@pytest.mark.parametrize("d_k", [1, 3, 8])
def test_score_entry_is_a_sum_of_d_k_products_of_disjoint_independent_entries(d_k):
    """(Q K^T)_ij = sum_k Q_ik K_jk: d_k terms, each a function of its own pair of entries, so the
    terms are independent when the entries are (also for i = j: Q and K are different matrices)."""
    n = 2
    q = sp.Matrix(n, d_k, lambda i, k: sp.Symbol(f"Q_{i}{k}"))
    k_ = sp.Matrix(n, d_k, lambda j, k: sp.Symbol(f"K_{j}{k}"))
    s = q * k_.T
    for i in range(n):
        for j in range(n):
            terms = sp.Add.make_args(sp.expand(s[i, j]))
            variables = [t.free_symbols for t in terms]
            disjoint = all(a.isdisjoint(b) for x, a in enumerate(variables) for b in variables[x + 1:])
            claim_assert(len(terms) == d_k and disjoint and all(v == {q[i, m], k_[j, m]} for m, v in enumerate(
                sorted(variables, key=lambda v: sorted(map(str, v))))),
                "(Q K^T)_ij is not a sum of d_k products Q_ik K_jk of disjoint entries", i=i, j=j, entry=str(s[i, j]))


# ---- saturation without scaling (foundations.txt line 42; linear-algebra.txt lines 164-167) -------------

KEYS = 32  # keys per query
SAMPLES = 4000  # queries per d_k


def _softmax_statistics(d: int, scaled: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample: max probability and Frobenius norm of the softmax Jacobian diag(p) - p p^T.

    Gaussian q, k in R^d: given q, the logits q . k_j are independent N(0, |q|^2) over the keys, with
    |q|^2 ~ chi^2_d; sampling |q| and the standard normals is exact and costs no d-sized vectors.
    """
    gen = torch.Generator().manual_seed(seed)
    norm_q = torch.distributions.Chi2(torch.tensor(float(d), dtype=torch.float64)).sample((SAMPLES, 1)).sqrt()
    z = torch.randn((SAMPLES, KEYS), generator=gen, dtype=torch.float64)
    logits = norm_q * z / (math.sqrt(d) if scaled else 1.0)  # (SAMPLES, KEYS), std sqrt(d) unscaled
    p = torch.softmax(logits, dim=-1)
    jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    return p.max(-1).values, torch.linalg.matrix_norm(jac)


@pytest.mark.claim("attention.large-logits-saturate-softmax-vanishing-gradient", "softmax.la-unscaled-softmax-tends-one-hot",
                   "softmax.la-unscaled-gradient-vanishing-saturation")
def test_unscaled_logits_saturate_softmax_as_d_k_grows_while_scaled_ones_do_not():
    """Fixed seeds, 4000 queries of 32 keys per d_k; differences compared with 6 standard errors."""
    torch.manual_seed(7000)  # Chi2.sample draws from the global generator
    dims = (1, 16, 256, 4096, 65536)
    stats = {(d, scaled): _softmax_statistics(d, scaled, seed=7000 + d) for d in dims for scaled in (False, True)}
    mean = {key: (m.mean().item(), j.mean().item()) for key, (m, j) in stats.items()}
    se = {key: (m.std().item() / math.sqrt(SAMPLES), j.std().item() / math.sqrt(SAMPLES)) for key, (m, j) in stats.items()}
    for d in dims:
        record(f"unscaled: mean max probability, mean ||J||_F [d_k={d}]", mean[(d, False)])
        record(f"scaled: mean max probability, mean ||J||_F [d_k={d}]", mean[(d, True)])
    # from d_k = 16 on (logit std 4 over 32 keys) saturation sets in; below, spreading logits first
    # concentrate p on a few keys, which raises ||J|| (it peaks at two keys of probability 1/2)
    for a, b in zip(dims[1:], dims[2:]):
        (pa, ja), (pb, jb) = mean[(a, False)], mean[(b, False)]
        margin_p = SIGMAS * math.hypot(se[(a, False)][0], se[(b, False)][0])
        margin_j = SIGMAS * math.hypot(se[(a, False)][1], se[(b, False)][1])
        claim_assert(pb > pa + margin_p and jb < ja - margin_j, "unscaled softmax does not saturate further as d_k grows",
                     d_k=(a, b), max_probability=(pa, pb), jacobian_norm=(ja, jb))
    top_p, top_j = mean[(dims[-1], False)]
    claim_assert(top_p > 0.99 and top_j < 0.01, "at d_k = 65536 unscaled softmax is not near one-hot with a vanishing "
                 "Jacobian", max_probability=top_p, jacobian_norm=top_j)
    # with 1/sqrt(d_k) the logits are ~N(0, 1) for every d_k (exactly so only as d_k grows: at d_k = 1
    # |q|^2 ~ chi^2_1 spreads them): the Jacobian norm stays within 15% while the unscaled one falls 20-fold
    scaled_j = [mean[(d, True)][1] for d in dims]
    claim_assert(max(scaled_j) <= 1.15 * min(scaled_j) and max(scaled_j) > 20 * top_j,
                 "scaled logits' Jacobian norm changes with d_k", jacobian_norms=scaled_j, unscaled_at_65536=top_j)


# ---- the length-dependent scalings printed in the documents ----------------------------------------------


@functools.cache
def _printed(claim_id: str, name: str):
    run = run_snippet(claim_id)
    assert name in run.namespace, run.describe()  # a crash of the evidence, not a counterexample
    return run.namespace[name]


def _qkv(n_q: int, n_k: int, d: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn((1, 2, n, d), generator=gen, dtype=torch.float64) for n in (n_q, n_k, n_k))


def _length_aware_tolerance(q, k, v, alpha: float) -> float:
    """torch.log(torch.tensor(n)) is evaluated in float32 (an integer tensor promotes to the default
    dtype), so the factor carries a relative error up to alpha 2^-24 even for float64 inputs: the
    scores move by that times |S|, the output by at most twice that times max |v| (plus float64 rounding)."""
    s = attention_scores_size(q, k) * math.log(max(q.shape[-2], 2)) ** alpha
    return 2 * alpha * 2.0**-24 * s * v.abs().max().item() + 1e-12


def attention_scores_size(q: torch.Tensor, k: torch.Tensor) -> float:
    return (q @ k.transpose(-2, -1)).abs().max().item() / math.sqrt(q.shape[-1])


@pytest.mark.claim("spectral.snippet-length-aware-matches-formula")
@given(n=st.integers(2, 64), d=st.integers(1, 16), alpha=st.floats(0.5, 2.5), seed=st.integers(0, 2**16))
def test_length_aware_attention_scales_scores_by_log_n_to_the_alpha(n, d, alpha, seed):
    q, k, v = _qkv(n, n, d, seed)
    printed = _printed("spectral.snippet-length-aware-attention", "length_aware_attention")(q, k, v, 1.0, alpha)
    expected = attention(q, k, v, scale=math.log(n) ** alpha / math.sqrt(d))
    err = (printed - expected).abs().max().item()
    claim_assert(err <= _length_aware_tolerance(q, k, v, alpha),
                 "length_aware_attention is not softmax(Q K^T / sqrt(d_k) * (log n)^alpha) V",
                 n=n, d=d, alpha=alpha, error=err)


@pytest.mark.claim("spectral.snippet-length-aware-n-is-query-length")
@given(n_q=st.integers(1, 8), n_k=st.integers(1, 40), d=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_length_aware_attention_takes_n_from_the_queries_so_one_query_attends_uniformly(n_q, n_k, d, seed):
    q, k, v = _qkv(n_q, n_k, d, seed)
    printed = _printed("spectral.snippet-length-aware-attention", "length_aware_attention")(q, k, v)
    expected = attention(q, k, v, scale=math.log(n_q) ** 1.7 / math.sqrt(d))
    err = (printed - expected).abs().max().item()
    claim_assert(err <= _length_aware_tolerance(q, k, v, 1.7), "the factor is not (log n_q)^1.7", n_q=n_q, n_k=n_k,
                 error=err)
    if n_q == 1:  # log 1 = 0: every score is 0, the output is the plain mean of the value rows
        claim_assert(torch.allclose(printed, v.mean(-2, keepdim=True), rtol=0, atol=1e-14),
                     "one query does not attend uniformly", n_k=n_k, output=printed)


def _length_aware_factor(n: int) -> float:
    """c(n) read off the printed function: one-dimensional queries q = 1/64 (n of them), keys 0 and 1,
    values 0 and 1, so every output is sigmoid(c(n) / 64) and c(n) = 64 logit(output)."""
    q = torch.full((n, 1), 1 / 64, dtype=torch.float64)
    k = v = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    out = _printed("spectral.snippet-length-aware-attention", "length_aware_attention")(q, k, v)[0, 0].item()
    return 64 * math.log(out / (1 - out))


@pytest.mark.claim("spectral.snippet-length-aware-scaling-gt-one")
@refutes()
@given(n=st.integers(1, 10**6))
def test_length_aware_factor_exceeds_one(n):
    c = _length_aware_factor(n)
    claim_assert(c > 1, "(log n)^1.7 <= 1: the factor flattens attention instead of sharpening it", n=n, factor=c)


@pytest.mark.claim("spectral.snippet-length-aware-scaling-gt-one")
@given(n=st.integers(1, 10**5))
@example(n=1)
@example(n=2)
@example(n=3)
@example(n=4096)
def test_length_aware_factor_exceeds_one_exactly_from_three_tokens(n):
    c = _length_aware_factor(n)
    if n in (1, 2, 3, 4096):
        record(f"length-aware factor c(n) [n={n}]", c)
    # ln n is taken in float32 by the printed code (relative error 2^-24, times 1.7 after the power),
    # and c is read back through a sigmoid in float64: 2^-21 relative covers both
    claim_assert((c > 1) == (n >= 3) and abs(c - math.log(n) ** 1.7) <= 2.0**-21 * max(1.0, c),
                 "c(n) = (ln n)^1.7 is not > 1 exactly for n >= 3", n=n, factor=c)


@pytest.mark.claim("long-context.critical-scaling-code-docstring-matches-formula")
@given(t=st.integers(1, 10**7), c=st.floats(0.0, 4.0), power=st.floats(0.5, 3.0))
def test_critical_scale_factor_is_one_plus_c_times_ln_t_to_the_power(t, c, power):
    module = _printed("long-context.snippet-critical-attention-scaling", "CriticalAttentionScaling")(16, c, power)
    expected = 1 + c * sp.log(t) ** sp.Float(power, 30)
    got = module.scale_factor(t)
    claim_assert(abs(got - float(expected)) <= 4 * EPS64 * float(expected), "scale_factor(T) != 1 + c (ln T)^p",
                 T=t, c=c, power=power, got=got, expected=float(expected))
    default = _printed("long-context.snippet-critical-attention-scaling", "CriticalAttentionScaling")(16)
    claim_assert((default.c, default.polylog_power) == (1.0, 1.5), "defaults are not c = 1, p = 1.5")


@pytest.mark.claim("long-context.critical-scaling-code-t-is-query-length")
@given(n_q=st.integers(1, 8), n_k=st.integers(1, 40), d=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_critical_scaling_takes_t_from_the_queries_so_one_query_gets_standard_scaling(n_q, n_k, d, seed):
    q, k, v = _qkv(n_q, n_k, d, seed)
    module = _printed("long-context.snippet-critical-attention-scaling", "CriticalAttentionScaling")(d)
    out = module(q, k, v)
    expected = attention(q, k, v, scale=1 / math.sqrt(d * (1 + math.log(n_q) ** 1.5)))
    claim_assert((out - expected).abs().max().item() <= 1e-12, "the scaling does not use T = n_q", n_q=n_q, n_k=n_k)
    if n_q == 1:  # f(1) = 1: a single (decoding) query gets plain 1/sqrt(d_k), whatever the context length
        claim_assert((out - attention(q, k, v)).abs().max().item() <= 1e-12, "one query is length-scaled", n_k=n_k)
