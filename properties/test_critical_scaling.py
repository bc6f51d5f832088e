"""Length-dependent attention scaling: which direction flattens attention, and the printed code.

foundations.txt lines 654-753 (Critical Attention Scaling chapter) divide the logits by
sqrt(f(T)) with f increasing; spectral.txt lines 142-152, 339-364 and linear-algebra.txt line 173
multiply them by a growing factor. Entropy facts used throughout:

* ``d/d beta H(softmax(beta z)) = -beta Var_p(z) <= 0``: larger logits make softmax SHARPER;
* with fixed-scale logits, more keys make rows flatter (H / ln n -> 1, max weight -> 0): that is the
  collapse to uniform attention; a multiplier growing like sqrt(2 ln n) (the random-energy-model
  critical point for Gaussian logits) keeps the largest weight roughly constant.

Sweeps are seeded (``impl.critical_scaling.sweep``), n = 16 ... 1024, 4 matrices per n, d_k = 16.
"""
import functools
import math

import pytest
import sympy as sp
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record, refutes
from impl.critical_scaling import (document_divisor, document_loglog_divisor, loglog_fit, polylog_multiplier,
                                   rem_critical_multiplier, row_entropy, scaled_softmax_entropy_derivative, sweep)
from impl.softmax import stable_softmax
from properties.strategies.spectral import gaussian, printed_code, real_matrices, vectors, seeds
from properties.test_snippets_called import AS_PRINTED, mutant, mutant_code

NS = [16, 64, 256, 1024]
D_K = 16

SCHEDULES = {  # name -> logit multiplier beta(n)
    "standard (f = 1)": lambda n: 1.0,
    "document f = 1 + (ln T)^1.5, logits / sqrt(f)": lambda n: document_divisor(n) ** -0.5,
    "document f = 1 + ln ln T, logits / sqrt(f)": lambda n: document_loglog_divisor(n) ** -0.5,
    "over-scaling f = T, logits / sqrt(f)": lambda n: n**-0.5,
    "multiplier (ln n)^1.7": lambda n: polylog_multiplier(n, 1.7),
    "multiplier sqrt(2 ln n)": lambda n: rem_critical_multiplier(n),
    "constant multiplier c = 2": lambda n: 2.0,
}


PINNED = {  # schedule -> (n, its multiplier there by hand): where the logarithms are integers
    "document f = 1 + (ln T)^1.5, logits / sqrt(f)": (math.exp(4), 1 / 3),  # f = 1 + 4^1.5 = 9
    "document f = 1 + ln ln T, logits / sqrt(f)": (math.exp(math.e**2), 3**-0.5),  # f = 1 + ln ln e^(e^2) = 3
    "multiplier (ln n)^1.7": (math.exp(2), 2**1.7),
    "multiplier sqrt(2 ln n)": (math.exp(8), 4.0),
}


@functools.lru_cache(maxsize=None)
def _sweep(name: str) -> dict[str, torch.Tensor]:
    if name in PINNED:  # a sweep of a wrong formula would judge another schedule: its value is a premise
        n, by_hand = PINNED[name]
        # exp then log round-trips within 2 ulps; a log or power, a sum, a power: 8 ulps of the result
        premise(abs(SCHEDULES[name](n) - by_hand) <= 8 * 2.0**-52 * by_hand, "the schedule's formula has the wrong "
                "value", schedule=name, n=n, got=SCHEDULES[name](n), by_hand=by_hand)
    return sweep(NS, D_K, SCHEDULES[name], samples=4, seed=17, spectral=False)


def _statistics(sw: dict[str, torch.Tensor]) -> dict:
    """Mean entropy and max weight per n of a sweep, and the fit max weight ~ n^e."""
    return {"n": sw["n"][:, 0], "entropy": sw["normalized_entropy"].mean(dim=1), "max_weight": sw["max_weight"].mean(dim=1),
            "fit": loglog_fit(sw["n"].flatten(), sw["max_weight"].flatten())}


def _measure(name: str) -> dict:
    """Record the entropy and max-weight series of a schedule and fit the max weight ~ n^e."""
    m = _statistics(_sweep(name))
    record(f"series[normalized entropy H/ln n vs n, {name}]", {"n": NS, "y": m["entropy"].tolist()})
    record(f"series[max attention weight vs n, {name}]", {"n": NS, "y": m["max_weight"].tolist()})
    record(f"fit[max attention weight vs n, {name}]", m["fit"].as_figure())
    return m


def _wrong_schedule(name: str, why: str, models: str | None = None):
    """A ``measure`` parameter: the negative control that runs a sweep test on schedule ``name`` instead. A small
    sweep (n = 16, 64, 256, 2 matrices each; the full one costs seconds) and unrecorded: it only has to be rejected."""
    return pytest.param(lambda: _statistics(sweep(NS[:3], D_K, SCHEDULES[name], samples=2, seed=17, spectral=False)),
                        id=name, marks=control(f"the schedule {name!r} instead: {why}", models=models))


@pytest.mark.claim("spectral.fix-attention-scaling-c-n", "long-context.qk-scale-grows-softmax-uniform",
                   "spectral.temperature-controls-spectral-amplification")
@pytest.mark.parametrize("derivative", [pytest.param(scaled_softmax_entropy_derivative, id="minus-beta-var"), pytest.param(
    lambda z, beta: -scaled_softmax_entropy_derivative(z, beta), id="plus-beta-var", marks=control(
        "the other sign, dH/dbeta = +beta Var_p(z): larger logits would flatten softmax",
        models="long-context.qk-scale-grows-softmax-uniform"))])
@given(z=real_matrices(1, 6, 10.0), beta=st.floats(0.0, 5.0))
def test_entropy_of_softmax_decreases_as_logits_grow(derivative, z, beta):
    b = torch.tensor(beta, dtype=torch.float64, requires_grad=True)
    h = row_entropy(stable_softmax(b * z)).sum()
    (grad,) = torch.autograd.grad(h, b)
    formula = derivative(z, beta).sum()
    # autograd sums -(log p + 1) dp/dbeta = -(log p + 1) p (z - E z): n terms of size p |z - E z| (|log p| + 1) per row
    # (up to 10 * 100), whose constant part cancels, a few roundings each; the formula centres z on a mean that is
    # off by delta <= n eps |z|, so beta Var is off by beta (2 delta sum p |z - E z| + delta^2) per row
    n = z.shape[-1]
    p = stable_softmax(beta * z)
    centred = (z - (p * z).sum(-1, keepdim=True)).abs()
    safe = torch.where(p > 0, p, torch.ones_like(p))
    terms = (p * centred * (torch.log(safe).abs() + 1)).sum().item()
    delta = n * 2.0**-52 * z.abs().max().item()
    formula_err = beta * (2 * delta * (p * centred).sum().item() + z.shape[0] * delta**2) + n * 2.0**-52 * abs(formula.item())
    claim_assert(abs(grad.item() - formula.item()) <= 4 * n * 2.0**-52 * terms + formula_err,
                 "dH/dbeta != -beta Var_p(z)", z=z, beta=beta, autograd=grad, formula=formula)
    # -beta sum p (z - mean)^2 is a sum of nonpositive terms: <= 0 exactly
    claim_assert(formula.item() <= 0, "entropy increases with the logit scale", z=z, beta=beta, derivative=formula)


@pytest.mark.claim("long-context.qk-scale-grows-softmax-uniform")
@refutes()
@given(z=vectors(2, 6, 10.0))
def test_larger_softmax_inputs_make_softmax_more_uniform(z):
    h1, h2 = row_entropy(stable_softmax(z)).item(), row_entropy(stable_softmax(2 * z)).item()
    claim_assert(h2 >= h1 - 1e-12, "doubling the logits lowered the entropy: larger inputs make softmax sharper, "
                 "not uniform", z=z, entropy=h1, entropy_doubled=h2)


@pytest.mark.claim("long-context.qk-scale-grows-softmax-uniform", "spectral.long-context-needs-score-scaling",
                   "spectral.rank-collapse-long-context-near-uniform", "long-context.critical-scaling-o1-saturation")
@pytest.mark.parametrize("measure", [pytest.param(lambda: _measure("standard (f = 1)"), id="standard"), _wrong_schedule(
    "multiplier sqrt(2 ln n)", "logits multiplied by the critical sqrt(2 ln n), which keeps the top weight constant"),
    _wrong_schedule("multiplier (ln n)^1.7", "rows that saturate towards one-hot as n grows, as the claim has f = 1 do",
                    models="long-context.critical-scaling-o1-saturation")])
def test_unscaled_attention_flattens_as_the_context_grows(measure):
    m = measure()
    # the logits' scale does not grow with n: q.k/sqrt(d_k) has variance 1 whatever n is
    logits = gaussian((4096, D_K), 1) @ gaussian((D_K,), 2) / math.sqrt(D_K)
    record("std of q.k/sqrt(d_k) over 4096 keys", logits.std().item())
    # "flattens" read as the top weight decaying at least like n^-0.3 (the fit's 95% upper bound), entropy rising
    claim_assert(m["fit"].ci95[1] < -0.3 and bool((m["entropy"][1:] > m["entropy"][:-1]).all()),
                 "standard attention rows do not flatten as n grows", max_weight_exponent=m["fit"].exponent,
                 entropy=m["entropy"])


@pytest.mark.parametrize("schedule", [
    pytest.param("document f = 1 + (ln T)^1.5, logits / sqrt(f)", marks=pytest.mark.claim(
        "long-context.critical-attention-formula-sqrt-dk-ft", "long-context.critical-scaling-f-polylog-1.5",
        "long-context.critical-scaling-polylog-cancels-t", "long-context.critical-scaling-theorem-polylog")),
    pytest.param("document f = 1 + ln ln T, logits / sqrt(f)", marks=pytest.mark.claim(
        "long-context.critical-scaling-f-loglog", "long-context.critical-scaling-theorem-polylog")),
    pytest.param("standard (f = 1)", marks=pytest.mark.claim("long-context.critical-scaling-theorem-polylog")),
])
@refutes(reason="seeded sweep n = 16..1024, d_k = 16, 4 matrices per n; 'does not collapse to uniform' read as: "
                "the largest attention weight does not decay like a power of n (fitted exponent above -0.2)")
def test_document_critical_scaling_keeps_attention_from_collapsing(schedule):
    m = _measure(schedule)
    claim_assert(m["fit"].ci95[0] > -0.2, "attention still collapses towards uniform: the largest weight decays like "
                 "a power of n", schedule=schedule, max_weight_exponent=m["fit"].exponent, ci95=m["fit"].ci95,
                 normalized_entropy=m["entropy"])


@pytest.mark.claim("long-context.critical-attention-formula-sqrt-dk-ft", "long-context.critical-scaling-f-polylog-1.5",
                   "long-context.critical-scaling-f-loglog", "long-context.critical-scaling-polylog-cancels-t",
                   "long-context.critical-scaling-theorem-polylog", "spectral.fix-attention-scaling-c-n",
                   "spectral.long-context-needs-score-scaling", "long-context.critical-scaling-exists")
@pytest.mark.parametrize("critical_schedule", [
    pytest.param("multiplier sqrt(2 ln n)", id="sqrt-2-ln-n"),
    pytest.param("document f = 1 + (ln T)^1.5, logits / sqrt(f)", id="document-polylog", marks=control(
        "the document's critical scaling, logits / sqrt(1 + (ln T)^1.5), as the schedule that holds the top weight",
        models=["long-context.critical-attention-formula-sqrt-dk-ft", "long-context.critical-scaling-f-polylog-1.5",
                "long-context.critical-scaling-polylog-cancels-t"])),
    pytest.param("document f = 1 + ln ln T, logits / sqrt(f)", id="document-loglog", marks=control(
        "the document's f = 1 + ln ln T, logits / sqrt(f), as the schedule that holds the top weight",
        models="long-context.critical-scaling-f-loglog")),
    pytest.param("standard (f = 1)", id="f=1", marks=control(
        "f = 1, which f = O(polylog T) admits, as the schedule that holds the top weight",
        models="long-context.critical-scaling-theorem-polylog")),
    pytest.param("constant multiplier c = 2", id="constant-c-2", marks=control(
        "line 146's bounded c(n) > 1, the constant c = 2, in place of the growing sqrt(2 ln n): the check that the top "
        "weight stops decaying must reject it", models=["spectral.fix-attention-scaling-c-n"])),
])
def test_a_growing_logit_multiplier_keeps_attention_from_flattening(critical_schedule):
    standard, divided = _measure("standard (f = 1)"), _measure("document f = 1 + (ln T)^1.5, logits / sqrt(f)")
    strong = _measure("multiplier (ln n)^1.7")
    critical = (_measure(critical_schedule) if critical_schedule == "multiplier sqrt(2 ln n)"
                else _statistics(_sweep(critical_schedule)))  # a control's sweep is not recorded
    # dividing by the document's growing f makes every row flatter than standard attention at every n
    claim_assert(bool((divided["entropy"] > standard["entropy"]).all()), "the document's division does not flatten "
                 "attention more than standard scaling", divided=divided["entropy"], standard=standard["entropy"])
    # multiplying by sqrt(2 ln n) keeps the top weight roughly constant (|slope| < 0.15, vs -0.6 without)
    claim_assert(abs(critical["fit"].exponent) < 0.15 and critical["fit"].exponent > standard["fit"].ci95[1] + 0.3,
                 "the growing multiplier does not stop the decay of the top weight",
                 critical_exponent=critical["fit"].exponent, standard_exponent=standard["fit"].exponent)
    # neither phase at any n: the top weight and H / ln n both stay inside [0.2, 0.8], away from the uniform and the
    # one-hot ends (top weight 1/n and 1, H / ln n 1 and 0)
    inside = lambda t: bool(((t >= 0.2) & (t <= 0.8)).all())
    claim_assert(inside(critical["max_weight"]) and inside(critical["entropy"]), "sqrt(2 ln n) scaling reaches the "
                 "uniform or the one-hot end", max_weight=critical["max_weight"], normalized_entropy=critical["entropy"])
    # (ln n)^1.7 overshoots: the top weight tends to 1 and the entropy to 0
    claim_assert(bool((strong["max_weight"][1:] > strong["max_weight"][:-1]).all()) and strong["entropy"][-1] < 0.1,
                 "(ln n)^1.7 does not over-concentrate attention", max_weight=strong["max_weight"])


@pytest.mark.claim("long-context.critical-scaling-ot-uniform")
@pytest.mark.parametrize("measure", [pytest.param(lambda: _measure("over-scaling f = T, logits / sqrt(f)"), id="f=T"),
                                     _wrong_schedule("standard (f = 1)", "f(T) = 1, no division by the length")])
def test_over_scaling_by_t_makes_attention_uniform(measure):
    m = measure()
    uniformity = (m["max_weight"] * m["n"]).tolist()
    record("n * max weight (1 = uniform)", uniformity)
    # "uniform" read as H / ln n > 0.999 and a top weight within 20% of 1/n at n = 1024
    claim_assert(m["entropy"][-1] > 0.999 and uniformity[-1] < 1.2, "f(T) = T does not make attention uniform",
                 normalized_entropy=m["entropy"], n_times_max_weight=uniformity)


@pytest.mark.claim("long-context.critical-scaling-o1-saturation")
@refutes(reason="n = 8 tokens with logits 20 I (each token attends to itself): the smallest clear saturated "
                "case; saturation alone is shown not to collapse the rank")
def test_saturated_softmax_causes_rank_collapse():
    a = stable_softmax(20.0 * torch.eye(8, dtype=torch.float64))
    s = torch.linalg.svdvals(a)
    stable = ((s**2).sum() / s[0] ** 2).item()
    # "collapsed" read as stable rank below 2 (of 8); saturated attention keeps it at 8
    claim_assert(stable < 2, "saturated (one-hot) attention is full rank, not collapsed", stable_rank=stable,
                 max_weight=a.max().item(), singular_values=s)


_TAU_DIVIDES = "the temperature as a divisor, logits / tau, where the scaling remedy multiplies them by tau"


@pytest.mark.claim("spectral.fix-temperature-tau-n-equivalent-to-scaling", "long-context.la-chen-tau-n-scaled-attention-formula")
@pytest.mark.parametrize("power", [pytest.param(1, id="times-tau"), pytest.param(-1, id="over-tau", marks=control(_TAU_DIVIDES))])
def test_temperature_and_scaling_remedies_are_the_same_formula(power):
    q, k, d, tau = sp.symbols("q k d tau", positive=True)
    claim_assert(sp.simplify(q * k / sp.sqrt(d) * tau**power - q * k * tau / sp.sqrt(d)) == 0, "the two logit formulas differ")


@pytest.mark.claim("spectral.fix-temperature-tau-n-equivalent-to-scaling", "long-context.la-chen-tau-n-scaled-attention-formula")
@pytest.mark.parametrize("power", [pytest.param(1, id="times-tau"), pytest.param(-1, id="over-tau", marks=control(_TAU_DIVIDES))])
@given(seed=seeds(), n=st.integers(2, 12), tau=st.floats(0.1, 10.0))
def test_scaling_logits_by_c_equals_temperature_tau_numerically(power, seed, n, tau):
    q, k = gaussian((n, 4), seed), gaussian((n, 4), seed + 1)
    remedy1 = stable_softmax(q @ k.T / 2.0 * tau**power)
    remedy2 = stable_softmax(q @ k.T * tau / 2.0)
    # the two float64 products differ only by the rounding order of two multiplications: logits eps |s| apart, which
    # moves softmax weights by <= 2 eps |s|max; each softmax's own rounding is (n + 2) u
    s_max = (q @ k.T * tau / 2.0).abs().max().item()
    claim_assert((remedy1 - remedy2).abs().max() <= (2 * s_max + n + 2) * 2.0**-52, "the remedies differ", seed=seed,
                 tau=tau)


# --- the printed code: foundations.txt 716-740 and spectral.txt 357-364 ---------------------------------


def _critical_module(c: float = 1.0, power: float = 1.5, mutation: tuple[str, str] | None = None):
    claim = "long-context.snippet-critical-attention-scaling"
    cls = (mutant_code(claim, *mutation) if mutation else printed_code(claim)).namespace["CriticalAttentionScaling"]
    return cls(D_K, c=c, polylog_power=power)


@pytest.mark.claim("long-context.critical-scaling-code-docstring-matches-formula",
                   "long-context.critical-scaling-identity-at-train-length")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant("(math.log(seq_len) **", "(math.log2(seq_len) **",
                                                            "log base 2 taken for the natural log"),
    mutant("return 1.0 + self.c * (math.log(seq_len) ** self.polylog_power)",
           "return (1.0 + self.c * (math.log(seq_len) ** self.polylog_power)) / (1.0 + self.c * (math.log(4096) ** "
           "self.polylog_power))", "f normalised to f(4096) = 1, as a model left unchanged at 4K needs",
           models="long-context.critical-scaling-identity-at-train-length")])
@given(t=st.integers(1, 10**6))
def test_scale_factor_is_one_plus_ln_t_to_the_1_5(mutation, t):
    module = _critical_module(mutation=mutation)
    got, exact = module.scale_factor(t), document_divisor(t)
    # the same float64 expression 1 + c (ln T)^1.5: at most the roundings of log, pow and the sum apart
    claim_assert(abs(got - exact) <= 4 * 2.0**-52 * exact and module.c == 1.0 and module.polylog_power == 1.5,
                 "scale_factor is not 1 + (ln T)^1.5", t=t, got=got)


@pytest.mark.claim("long-context.critical-scaling-code-t-is-query-length")
@pytest.mark.parametrize("length", [pytest.param(lambda n_q, n_k: n_q, id="query-count"), pytest.param(
    lambda n_q, n_k: n_k, id="context-length", marks=control(
        "T = the context length k.shape[-2], as the claim takes q.shape[-2] to be",
        models="long-context.critical-scaling-code-t-is-query-length"))])
@given(seed=seeds(), n_q=st.integers(1, 8), n_k=st.integers(1, 8))
def test_critical_scaling_code_divides_by_sqrt_dk_f_of_the_query_count(length, seed, n_q, n_k):
    q, k, v = gaussian((n_q, D_K), seed), gaussian((n_k, D_K), seed + 1), gaussian((n_k, 3), seed + 2)
    got = _critical_module().forward(q, k, v)
    t = length(n_q, n_k)
    expected = stable_softmax(q @ k.T / math.sqrt(D_K * document_divisor(t))) @ v
    # the same logits up to a few roundings (3 u |s|), moving the weights' total by <= 2 * 3 u |s|max; torch.softmax vs
    # the stable form and the n_k-term products: (n_k + 2) u; all times |v|max
    s_max = (q @ k.T / math.sqrt(D_K * document_divisor(t))).abs().max().item()
    tol = (3 * s_max + n_k + 2) * 2.0**-52 * v.abs().max().item()
    claim_assert((got - expected).abs().max() <= tol, "the module does not compute softmax(QK^T/sqrt(d_k f(T_q)))V",
                 seed=seed, n_q=n_q, n_k=n_k)


@pytest.mark.claim("long-context.critical-scaling-code-t-is-query-length")
@refutes(reason="one query against 4096 keys (KV-cached decoding at Llama-2's training length): the smallest case "
                "where the number of queries differs from the context length")
def test_critical_scaling_code_scales_by_the_context_length():
    q, k, v = gaussian((1, D_K), 1), gaussian((4096, D_K), 2), gaussian((4096, 2), 3)
    got = _critical_module().forward(q, k, v)
    by_context = stable_softmax(q @ k.T / math.sqrt(D_K * document_divisor(4096))) @ v
    # equal outputs would agree to ~1e-15 (as in the property above); 1e-9 is generous
    record("max |difference| / 1e-9", (got - by_context).abs().max().item() / 1e-9)
    claim_assert((got - by_context).abs().max() <= 1e-9, "the code uses T = q.shape[-2] = 1 (f(1) = 1: no length "
                 "scaling) instead of the context length 4096", f_used=document_divisor(1), f_context=document_divisor(4096))


@pytest.mark.claim("long-context.critical-scaling-identity-at-train-length")
@refutes(reason="8 random queries against 4096 keys (T = 4K, the training length of the table's first row): the "
                "formula's effect at T_train does not depend on the model")
def test_critical_scaling_leaves_attention_unchanged_at_the_training_length():
    q, k = gaussian((8, D_K), 4), gaussian((4096, D_K), 5)
    standard = stable_softmax(q @ k.T / math.sqrt(D_K))
    critical = stable_softmax(q @ k.T / math.sqrt(D_K * document_divisor(4096)))
    tv = 0.5 * (standard - critical).abs().sum(dim=-1).max().item()
    # "unchanged" read as total variation <= 1e-3 per row; f(4096) = 25 moves rows by 0.43
    claim_assert(tv <= 1e-3, "at T = 4096 the printed f(T) = 24.99 changes every attention row", f_4096=document_divisor(4096),
                 max_total_variation=tv)


def _length_aware(mutation: tuple[str, str] | None = None):
    claim = "spectral.snippet-length-aware-attention"
    return (mutant_code(claim, *mutation) if mutation else printed_code(claim)).namespace["length_aware_attention"]


@pytest.mark.claim("spectral.snippet-length-aware-matches-formula", "spectral.snippet-length-aware-n-is-query-length")
@pytest.mark.parametrize("mutation, length", [
    pytest.param(None, lambda n_q, n_k: n_q, id="printed"),
    pytest.param(("/ (Q.shape[-1] ** 0.5)", "/ Q.shape[-1]"), lambda n_q, n_k: n_q, id="mutant", marks=control(
        "the printed code with '/ (Q.shape[-1] ** 0.5)' -> '/ Q.shape[-1]': the scores divided by d_k, not by "
        "sqrt(d_k)")),
    pytest.param(None, lambda n_q, n_k: n_k, id="context-length", marks=control(
        "line 359's n read as the context length K.shape[-2], the number of keys, in the formula: the check against "
        "the printed code must reject it", models=["spectral.snippet-length-aware-n-is-query-length"]))])
@example(seed=0, n_q=1, n_k=8, alpha=1.5)  # one query (KV-cached decoding) against 8 keys
@given(seed=seeds(), n_q=st.integers(1, 8), n_k=st.integers(1, 8), alpha=st.floats(0.5, 2.5))
def test_length_aware_attention_multiplies_logits_by_ln_n_to_the_alpha(mutation, length, seed, n_q, n_k, alpha):
    q, k, v = gaussian((n_q, 4), seed), gaussian((n_k, 4), seed + 1), gaussian((n_k, 2), seed + 2)
    got = _length_aware(mutation)(q, k, v, base_scale=1.0, poly_alpha=alpha)
    expected = stable_softmax(q @ k.T / 2.0 * polylog_multiplier(length(n_q, n_k), alpha)) @ v
    # the snippet computes log(n) in float32 via torch.log(torch.tensor(n)): relative error delta, (ln n)^alpha's
    # alpha delta, so logits alpha delta |s| apart (plus a few float64 roundings), moving the weights' total by twice
    # that; the n_k-term products add (n_k + 2) u; all times |v|max
    delta = abs(torch.log(torch.tensor(n_q)).item() - math.log(n_q)) / math.log(n_q) if n_q > 1 else 0.0
    s_max = (q @ k.T / 2.0 * polylog_multiplier(n_q, alpha)).abs().max().item()
    tol = (2 * (alpha * delta + 2 * 2.0**-52) * s_max + (n_k + 2) * 2.0**-52) * v.abs().max().item()
    claim_assert((got - expected).abs().max() <= tol, "length_aware_attention differs from the formula",
                 seed=seed, n_q=n_q, n_k=n_k, alpha=alpha)


@pytest.mark.claim("spectral.snippet-length-aware-n-is-query-length")
@refutes(reason="one query against 64 keys (KV-cached decoding): the smallest case where the query count "
                "differs from the context length")
def test_length_aware_attention_uses_the_context_length():
    q, k = gaussian((1, 4), 6), gaussian((64, 4), 7)
    v = torch.eye(64, dtype=torch.float64)  # the output row is the attention row itself
    weights = _length_aware()(q, k, v)
    # uniform means 1/64 up to rounding (~1e-18); a deviation beyond 1e-6 would be real attention
    claim_assert((weights - 1 / 64).abs().max() > 1e-6, "with one query n = 1, ln 1 = 0 and every score is 0: the "
                 "attention over the 64 keys is exactly uniform", max_weight=weights.max(), min_weight=weights.min())


@pytest.mark.claim("spectral.snippet-length-aware-scaling-gt-one")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant("poly_alpha=1.7", "poly_alpha=1.5",
                                                            "the default exponent of ln n 1.5, not 1.7")])
@given(n=st.integers(3, 2048))
def test_length_aware_factor_exceeds_one(mutation, n):
    # read the factor off the printed code in the long-context regime the document states (n >= 3 tokens): with
    # d = 1, q_0 = k_0 = 1 and every other q, k = 0, row 0 of the attention is softmax(factor, 0, ..., 0), and
    # V = (e_1, e_2, 0, ...) returns its first two weights, so factor = ln(row_0 / row_1)
    q = torch.zeros(n, 1, dtype=torch.float64)
    q[0, 0] = 1.0
    v = torch.zeros(n, 2, dtype=torch.float64)
    v[0, 0] = v[1, 1] = 1.0
    row = _length_aware(mutation)(q, q.clone(), v)[0]
    factor = math.log(row[0] / row[1])
    # (ln 3)^1.7 = 1.17 at the smallest n; the code takes ln n of a float32 tensor (relative error <= 2^-24, times
    # 1.7 in the power), the softmax and the log of a ratio add a few float64 roundings: 1e-6 relative is generous
    claim_assert(factor > 1 and abs(factor - polylog_multiplier(n, 1.7)) <= 1e-6 * factor,
                 "(ln n)^1.7 read from the printed code is not a factor above 1", n=n, factor=factor,
                 formula=polylog_multiplier(n, 1.7))


@pytest.mark.claim("spectral.snippet-length-aware-scaling-gt-one")
@pytest.mark.parametrize("log", [pytest.param(math.log, id="ln"), pytest.param(math.log10, id="log10", marks=control(
    "the common log for ln: (log10 n)^1.7 < 1 below n = 10"))])
@given(n=st.integers(3, 10**6))
def test_length_aware_factor_exceeds_one_from_three_tokens(log, n):
    factor = polylog_multiplier(n, 1.7) if log is math.log else log(n) ** 1.7
    claim_assert(factor > 1, "(ln n)^1.7 <= 1 for n >= 3", n=n, factor=factor)


@pytest.mark.claim("spectral.fix-attention-scaling-c-n")
@refutes(reason="seeded sweep n = 16..1024, d_k = 16, 4 matrices per n, with the constant factor c(n) = 2 > 1; "
                "'counteracts rank collapse' read as: the largest attention weight no longer decays like a power of "
                "n (fitted exponent above -0.2), as with the growing sqrt(2 ln n)")
def test_any_factor_above_one_keeps_attention_from_flattening():
    constant, standard = _measure("constant multiplier c = 2"), _measure("standard (f = 1)")
    record("normalized entropy at n = 16 and 1024, c = 2", [constant["entropy"][0].item(), constant["entropy"][-1].item()])
    claim_assert(constant["fit"].ci95[0] > -0.2, "with c(n) = 2 > 1 the rows still flatten as n grows: the top weight "
                 "decays like a power of n, only more slowly than with c = 1", c2_exponent=constant["fit"].exponent,
                 c2_ci95=constant["fit"].ci95, c1_exponent=standard["fit"].exponent,
                 normalized_entropy=constant["entropy"])


# --- the critical multiplier gamma sqrt(2 ln n): a value and a law -----------------------------------------------

@pytest.mark.claim("long-context.critical-scaling-exists")
@pytest.mark.parametrize("n,gamma,expected", [(1, 1.0, 0.0), (math.exp(2), 1.0, 2.0), (math.exp(8), 1.0, 4.0),
                                              (math.exp(8), 0.5, 2.0), (math.exp(50), 1.0, 10.0)])
def test_rem_critical_multiplier_takes_its_hand_computed_values(n, gamma, expected):
    """sqrt(2 ln e^k) = sqrt(2k): 2, 4 and 10 at k = 2, 8, 50 (0 for one key); gamma scales it."""
    got = rem_critical_multiplier(n, gamma)
    # exp then log round-trips within 2 ulps of k; a product, a sqrt, a product: 4 ulps of the result
    claim_assert(abs(got - expected) <= 4 * 2.0**-52 * max(expected, 1.0), "gamma sqrt(2 ln n) has the wrong value",
                 n=n, gamma=gamma, got=got, expected=expected)


@pytest.mark.claim("long-context.critical-scaling-exists")
@pytest.mark.parametrize("rem_critical_multiplier", [pytest.param(rem_critical_multiplier, id="sqrt-2-ln-n"), pytest.param(
    lambda n, gamma=1.0: gamma * math.sqrt(math.log(n)), id="sqrt-ln-n", marks=control(
        "sqrt(ln n): the factor 2 of sqrt(2 ln n) dropped"))])
@given(n=st.integers(2, 10**6), k=st.integers(1, 4))
def test_rem_critical_multiplier_is_where_the_annealed_row_entropy_reaches_zero(rem_critical_multiplier, n, k):
    """Derrida's REM: the annealed entropy ln n - beta^2 / 2 of softmax(beta z), z ~ N(0, I_n), vanishes exactly at
    beta = sqrt(2 ln n); so beta(n^k) = sqrt(k) beta(n)."""
    beta = rem_critical_multiplier(n)
    # beta^2 / 2 rounds a log, a product, a sqrt and a square: 8 ulps of ln n
    claim_assert(abs(math.log(n) - beta**2 / 2) <= 8 * 2.0**-52 * math.log(n), "ln n - beta^2 / 2 != 0 at the "
                 "critical multiplier", n=n, beta=beta)
    claim_assert(abs(rem_critical_multiplier(n**k) - math.sqrt(k) * beta) <= 16 * 2.0**-52 * math.sqrt(k) * beta,
                 "beta(n^k) != sqrt(k) beta(n)", n=n, k=k)
