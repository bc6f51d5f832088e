"""Linear attention, the implicit-attention form and the Gated DeltaNet snippet (linear-algebra.txt 220-287).

* associativity ``phi(Q) (phi(K)^T V) = (phi(Q) phi(K)^T) V`` and exact FLOP counts of both orders,
  checked against ``torch.utils.flop_counter``;
* the scalar-gated implicit form (line 242) against its recurrence, and against the delta rule, whose
  matrix-valued transitions it cannot express: in any scalar-gated form the weight of v_1 in y_3 factors
  as g(x_2, x_3) h(x_1, x_3), so on a 2 x 2 grid of choices for x_1 and x_2 the weights form a rank-one
  matrix; the delta rule gives a rank-two one;
* the printed GatedDeltaNet against Yang et al.'s recurrence and the gate-after variant it implements.
"""
import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from claimcheck import claim_assert, control, record, refutes
from impl.critical_scaling import loglog_fit
from impl.linear_attention import (elu_plus_one, gated_delta_rule, gated_delta_rule_gate_after, gated_linear_recurrence,
                                   hidden_attention_matrix, implicit_attention_matrix, linear_attention,
                                   linear_attention_flops, normalized_linear_attention, output_coefficients,
                                   positive_random_features, quadratic_attention_flops, quadratic_form_linear_attention,
                                   selective_scan, trigonometric_random_features)
from impl.lowrank import nystrom
from properties.assertions import assert_within_reference_error
from properties.strategies.spectral import gaussian, printed_code, seeds

EPS64 = 2.0**-52


# ---- the claims' wrong variants, for the negative controls (claimcheck.control) -------------------------------


def _causal_summary_linear_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``phi(q_t)^T sum_{i<=t} phi(k_i) v_i^T``: the summary accumulated causally (prefix sums), not over all keys."""
    states = torch.cumsum(phi_k[:, :, None] * v[:, None, :], dim=0)  # (n, d, d_v)
    return torch.einsum("nd,nde->ne", phi_q, states)


def _gate_products_from_i(q: torch.Tensor, k: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``(prod_{j=i}^t alpha_j) q_t^T k_i``: the implicit matrix with its gate product one term too long."""
    return implicit_attention_matrix(q, k, alpha) * alpha[None, :]


def _gate_after_delta_rule_erase_added(q, k, v, alpha, beta):
    """``S_t = alpha_t [S_{t-1} + beta_t (S_{t-1} k_t) k_t^T + beta_t v_t k_t^T]``: the erase term's sign flipped."""
    s = torch.zeros(v.shape[1], k.shape[1], dtype=v.dtype)
    out = []
    for t in range(k.shape[0]):
        s = alpha[t] * (s + beta[t] * torch.outer(s @ k[t], k[t]) + beta[t] * torch.outer(v[t], k[t]))
        out.append(s @ q[t])
    return torch.stack(out)


def _hidden_attention_decay_from_s(a_bar: torch.Tensor, b_bar: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``c_t . (prod_{k=s}^t a_k) b_s``: the hidden attention matrix with its decay product one term too long."""
    return hidden_attention_matrix(a_bar, a_bar * b_bar, c)


@st.composite
def sequences(draw, max_n: int = 8, max_d: int = 4):
    """(q, k, v) float64 with q, k (n, d), v (n, d_v), and a seed for gates."""
    n, d, d_v = draw(st.integers(1, max_n)), draw(st.integers(1, max_d)), draw(st.integers(1, max_d))
    seed = draw(seeds())
    return gaussian((n, d), seed), gaussian((n, d), seed + 1), gaussian((n, d_v), seed + 2), seed


@pytest.mark.claim("linear-attention.la-linear-attn-associativity")
@pytest.mark.parametrize("summary_first", [
    pytest.param(linear_attention, id="exact"),
    pytest.param(_causal_summary_linear_attention, id="causal-summary",
                 marks=control("the summary accumulated causally, sum_{i<=t} phi(k_i) v_i^T, for phi(K)^T V")),
])
@given(qkv=sequences(max_n=12, max_d=6))
@example(qkv=(gaussian((3, 2), 0), gaussian((3, 2), 1), gaussian((3, 2), 2), 0))  # n > 1: a later key to drop
def test_linear_attention_orders_agree_within_float32_rounding(qkv, summary_first):
    q, k, v, _ = qkv
    pq, pk = elu_plus_one(q), elu_plus_one(k)
    oracle = quadratic_form_linear_attention(pq, pk, v)
    # each order: a d-term and an n-term sum of products of phi(Q) phi(K)^T >= 0 and |V|: (n + d) u of those terms each
    scale = ((pq @ pk.T) @ v.abs()).max().item()
    claim_assert((summary_first(pq, pk, v) - oracle).abs().max() <= (q.shape[0] + q.shape[1]) * EPS64 * scale,
                 "phi(Q)(phi(K)^T V) != (phi(Q) phi(K)^T) V in float64", q=q, k=k)
    # float32: the summary-first order errs no more than 4x the naive (n x n) order, vs the float64 oracle
    f32 = [t.float() for t in (pq, pk, v)]
    assert_within_reference_error(summary_first(*f32), oracle, quadratic_form_linear_attention(*f32), c=4.0,
                                  what="phi(Q)(phi(K)^T V), float32")


@pytest.mark.claim("linear-attention.la-linear-attn-associativity")
@pytest.mark.parametrize("d,d_v", [(8, 8), (4, 12), (12, 4)])  # d != d_v both ways: the two widths cannot be swapped
def test_flops_of_the_two_orders_are_4_n_d_dv_and_2_n2_d_plus_dv(d, d_v):
    ns = [64, 128, 256, 512]
    linear, quadratic = [], []
    for n in ns:
        pq, pk, v = (torch.rand(n, d), torch.rand(n, d), torch.rand(n, d_v))
        with FlopCounterMode(display=False) as lin:
            linear_attention(pq, pk, v)
        with FlopCounterMode(display=False) as quad:
            quadratic_form_linear_attention(pq, pk, v)
        claim_assert(lin.get_total_flops() == linear_attention_flops(n, d, d_v) == 4 * n * d * d_v
                     and quad.get_total_flops() == quadratic_attention_flops(n, d, d_v) == 2 * n * n * (d + d_v),
                     "counted FLOPs differ from the formulas", n=n, d=d, d_v=d_v,
                     counted=[lin.get_total_flops(), quad.get_total_flops()])
        linear.append(linear_attention_flops(n, d, d_v))
        quadratic.append(quadratic_attention_flops(n, d, d_v))
    for name, y in (("phi(Q)(phi(K)^T V)", linear), ("(phi(Q) phi(K)^T) V", quadratic)):
        record(f"series[FLOPs vs n, {name}, d={d}, d_v={d_v}]", {"n": ns, "y": y})
        fit = loglog_fit(torch.tensor(ns), torch.tensor(y, dtype=torch.float64))
        record(f"fit[FLOPs vs n, {name}, d={d}, d_v={d_v}]", fit.as_figure())


@pytest.mark.claim("linear-attention.la-linear-attn-is-nystrom")
@refutes(reason="n = 8 queries and keys of width 4 (seeded), softmax kernel exp(Q K^T / 2): a Nystrom "
                "approximation reproduces its landmark columns exactly; elu+1 linear attention matches none")
def test_feature_map_linear_attention_is_the_nystrom_approximation():
    q, k = gaussian((8, 4), 80), gaussian((8, 4), 81)
    kernel = torch.exp(q @ k.T / 2)
    linear = elu_plus_one(q) @ elu_plus_one(k).T
    best_column = ((linear - kernel).abs().max(dim=0).values / kernel.abs().max(dim=0).values).min().item()
    # a reproduced column would match to rounding (~1e-15 relative); 1e-6 is generous, the best column is 0.79 off
    record("best relative column error / 1e-6", best_column / 1e-6)
    claim_assert(best_column <= 1e-6, "no column of phi(Q) phi(K)^T equals a column of the softmax kernel",
                 best_relative_column_error=best_column)


@pytest.mark.claim("linear-attention.la-linear-attn-is-nystrom")
@pytest.mark.parametrize("approximation", [
    pytest.param(lambda kernel, landmarks, q, k: nystrom(kernel, landmarks), id="nystrom"),
    pytest.param(lambda kernel, landmarks, q, k: elu_plus_one(q) @ elu_plus_one(k).T, id="elu-plus-one", marks=control(
        "elu+1 feature-map linear attention phi(Q) phi(K)^T as the Nystrom approximation",
        models="linear-attention.la-linear-attn-is-nystrom"))])
@given(seed=seeds(), n=st.integers(2, 8), m=st.integers(1, 4))
def test_nystrom_reproduces_its_landmark_columns(approximation, seed, n, m):
    q, k = gaussian((n, 4), seed), gaussian((n, 4), seed + 1)
    kernel = torch.exp(q @ k.T / 2)
    landmarks = list(range(min(m, n)))
    approx = approximation(kernel, landmarks, q, k)
    cond = torch.linalg.cond(kernel[landmarks][:, landmarks]).item()
    # pinv of the landmark block amplifies rounding by its condition number: pinv(W) W = I + E, |E| <= 16 m eps cond(W)
    # (SVD-based pinv), and the m-term products K[:, S] pinv(W) W, entries <= m |K|
    m = len(landmarks)
    claim_assert((approx[:, landmarks] - kernel[:, landmarks]).abs().max()
                 <= 2 * 16 * m * m * EPS64 * cond * kernel.abs().max(),
                 "Nystrom does not reproduce the landmark columns", seed=seed, condition_number=cond)


@pytest.mark.claim("linear-attention.la-qk-approx-phi-phi")
@refutes()
@given(qkv=sequences(max_n=6, max_d=4))
def test_elu_plus_one_features_approximate_q_k_transpose(qkv):
    q, k, _, _ = qkv
    logits, approx = q @ k.T, elu_plus_one(q) @ elu_plus_one(k).T
    claim_assert(bool((torch.sign(logits) == torch.sign(approx)).all()) or bool((logits >= 0).all()),
                 "phi(Q) phi(K)^T > 0 everywhere while Q K^T has negative entries", q=q, k=k, qk=logits, approx=approx)


@pytest.mark.claim("linear-attention.la-qk-approx-phi-phi", "linear-attention.la-performer-random-fourier-features")
@pytest.mark.parametrize("target_of,performer", [
    pytest.param(lambda q, k: torch.exp(q @ k.T), "positive", id="softmax-kernel"),
    pytest.param(lambda q, k: q @ k.T, "positive", id="q-k-transpose", marks=control(
        "Q K^T as what phi(Q) phi(K)^T approximates", models="linear-attention.la-qk-approx-phi-phi")),
    pytest.param(lambda q, k: torch.exp(q @ k.T), "trigonometric", id="performer-trigonometric", marks=control(
        "trigonometric random Fourier features as Performer's phi",
        models="linear-attention.la-performer-random-fourier-features")),
])
def test_random_features_estimate_the_softmax_kernel_without_bias(target_of, performer):
    q, k = gaussian((4, 4), 82) * 0.5, gaussian((4, 4), 83) * 0.5
    target = target_of(q, k)
    for name, phi in (("positive", positive_random_features), ("trigonometric", trigonometric_random_features)):
        draws = torch.stack([phi(q, omega) @ phi(k, omega).T
                             for omega in (gaussian((64, 4), 1000 + i) for i in range(200))])
        mean, sem = draws.mean(0), draws.std(0) / math.sqrt(200)
        z = ((mean - target).abs() / sem).max().item()
        record(f"max |mean - exp(q.k)| / s.e. ({name}, 200 draws of 64 features)", z)
        # unbiased: each of the 16 entries within 6 standard errors (two-sided 2e-9 per entry)
        claim_assert(z <= 6, f"{name} random features are biased for exp(q.k)", z=z)
        if name == performer:  # Performer's FAVOR+ features: every estimate positive
            claim_assert(bool((draws > 0).all()), f"{name} random features (as Performer's) gave a non-positive "
                         "estimate", share_negative=(draws <= 0).double().mean().item())
        else:
            record(f"share of negative {name} estimates", (draws < 0).double().mean().item())


@pytest.mark.claim("linear-attention.la-linear-transformer-elu-plus-one")
@given(qkv=sequences())
def test_elu_plus_one_linear_attention_gives_convex_combinations(qkv):
    q, k, v, _ = qkv
    out = normalized_linear_attention(elu_plus_one(q), elu_plus_one(k), v)
    # positive weights w_i = phi(q) . phi(k_i) (d-term), numerator and denominator n-term sums, one division:
    # (n + d + 2) u relative to the weighted |v|, <= max |v|
    tol = (q.shape[0] + q.shape[1] + 2) * EPS64 * v.abs().max().item()
    claim_assert(bool((elu_plus_one(q) > 0).all()) and bool((out <= v.max(0).values + tol).all())
                 and bool((out >= v.min(0).values - tol).all()), "an output leaves the box spanned by the values",
                 q=q, k=k)


def _one_gate_for_every_token(pq: torch.Tensor, pk: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Negative control: the implicit matrix of an update that does not see the token's gate: alpha_1 at every step."""
    return implicit_attention_matrix(pq, pk, alpha[:1].expand_as(alpha))


def _gates(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sigmoid(gaussian((n,), seed + 3)), torch.sigmoid(gaussian((n,), seed + 4))


@pytest.mark.claim("linear-attention.la-implicit-attn-scalar-gated-formula",
                   "linear-attention.la-implicit-attn-phi-psi-feature-maps-alpha-gates",
                   "linear-attention.la-implicit-attn-matrix-state-view", "linear-attention.la-intro-unified-matrix-state-recurrence")
@pytest.mark.parametrize("implicit_matrix", [
    pytest.param(implicit_attention_matrix, id="exact"),
    pytest.param(_gate_products_from_i, id="gates-from-i",
                 marks=control("prod_{j=i}^t alpha_j (an off-by-one) for prod_{j=i+1}^t alpha_j")),
    pytest.param(_one_gate_for_every_token, id="update-without-the-token-gate", marks=control(
        "S_t = f(S_{t-1}, k_t, v_t): an update that does not read the token's gate alpha_t (one gate for every step)",
        models=["linear-attention.la-implicit-attn-matrix-state-view",
                "linear-attention.la-intro-unified-matrix-state-recurrence"])),
])
@given(qkv=sequences())
def test_scalar_gated_recurrence_equals_the_implicit_attention_sum(qkv, implicit_matrix):
    q, k, v, seed = qkv
    alpha, _ = _gates(seed, k.shape[0])
    pq, pk = elu_plus_one(q), elu_plus_one(k)  # phi, psi
    rec = gated_linear_recurrence(pq, pk, v, alpha)
    m = implicit_matrix(pq, pk, alpha)  # entries >= 0
    implicit = m @ v
    # per side: products of <= n gates, d-term q.k, n-term sums over tokens: (2 n + d + 1) u of the terms M |V|
    n, d = q.shape
    claim_assert((rec - implicit).abs().max() <= (2 * n + d + 1) * EPS64 * (m @ v.abs()).max().item(),
                 "the recurrence differs from sum_i (prod alpha_j) phi(q_t)^T psi(k_i) v_i", seed=seed)


def _weight_of_v1_in_y3(layer, keys: list[torch.Tensor], q3: torch.Tensor) -> float:
    """Coefficient C_31 of v_1 in y_3 for a 3-token sequence with the given keys (beta = alpha = 1)."""
    q = torch.stack([q3, q3, q3])
    k = torch.stack(keys)
    ones = torch.ones(3, dtype=torch.float64)
    return output_coefficients(lambda v: layer(q, k, v, ones, ones), 3)[2, 0].item()


def _grid(layer) -> torch.Tensor:
    """C_31 over x_1 in {key e_1, key e_2} and x_2 in {key e_1, key e_2}; x_3 has key e_3, query e_1 + e_2."""
    e = torch.eye(3, dtype=torch.float64)
    q3 = e[0] + e[1]
    return torch.tensor([[_weight_of_v1_in_y3(layer, [k1, k2, e[2]], q3) for k2 in (e[0], e[1])] for k1 in (e[0], e[1])],
                        dtype=torch.float64)


@pytest.mark.claim("linear-attention.la-implicit-attn-covers-gated-deltanet")
@refutes(reason="three tokens (the least with a token between v_1 and y_3), unit keys e_1 / e_2 for tokens 1 and 2, "
                "key e_3 and query e_1 + e_2 for token 3, beta = alpha = 1: any scalar-gated form makes the 2 x 2 grid "
                "of weights C_31 rank one")
def test_gated_delta_rule_has_the_scalar_gated_implicit_form():
    grid = _grid(lambda q, k, v, a, b: gated_delta_rule(q, k, v, a, b))
    det = torch.linalg.det(grid).item()
    # a rank-one grid of O(1) weights would have |det| ~ 1e-15 (rounding); 1e-12 is generous, the delta rule gives 1
    record("|det| / 1e-12", abs(det) / 1e-12)
    claim_assert(abs(det) <= 1e-12, "the delta rule's weights on the grid form a rank-two matrix: no alpha, phi, psi "
                 "can write them as (prod alpha_j) phi(q_3)^T psi(k_1)", grid=grid, determinant=det)


@pytest.mark.claim("linear-attention.la-implicit-attn-covers-gated-deltanet")
@pytest.mark.parametrize("delta_rule", [pytest.param(False, id="scalar-gated"), pytest.param(
    True, id="gated-delta-rule", marks=control("Gated DeltaNet's delta rule with the same gates alpha_j, as the claim "
                                               "puts it among the scalar-gated recurrences",
                                               models="linear-attention.la-implicit-attn-covers-gated-deltanet"))])
@given(seed=seeds())
@settings(max_examples=20)  # 8 small recurrences per example
def test_scalar_gated_recurrences_give_rank_one_grids(delta_rule, seed):
    e = torch.eye(3, dtype=torch.float64)
    gates = torch.sigmoid(gaussian((4,), seed))  # alpha of x_2 in {e_1, e_2} (and of x_3)

    def gated(q, k, v, a, b):  # alpha_j depends on token j only, as in RetNet / Mamba-2
        alpha = torch.stack([gates[0], gates[0] if torch.equal(k[1], e[0]) else gates[1], gates[2]])
        if delta_rule:
            return gated_delta_rule(q, k, v, alpha, b)
        return gated_linear_recurrence(elu_plus_one(q), elu_plus_one(k), v, alpha)

    grid = _grid(gated)
    # each weight: 3 recurrence steps of a 3-term dot product of positive terms, ~8 u relative; det = ad - bc: each
    # product 17 u, the subtraction: <= 17 u (|ad| + |bc|) <= 17 eps max^2; 32 eps
    claim_assert(abs(torch.linalg.det(grid).item()) <= 32 * EPS64 * grid.abs().max().item() ** 2,
                 "a scalar-gated recurrence gave a rank-two grid", grid=grid, seed=seed)


@pytest.mark.claim("linear-attention.la-intro-unified-matrix-state-recurrence",
                   "linear-attention.la-implicit-attn-matrix-state-view")
@refutes(reason="one token with the same k_1 = e_1, v_1 = 1 and gate beta_1 = 1 but gates alpha_1 = 0.5 vs 0.9 on a "
                "nonzero state: the smallest case where f must see the gate")
def test_state_update_is_a_function_of_previous_state_key_and_value_only():
    k, v = torch.eye(2, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64)
    q = torch.ones(2, 2, dtype=torch.float64)  # q_t = e_1 + e_2 reads the whole state
    beta = torch.ones(2, dtype=torch.float64)
    y_a = gated_delta_rule(q, k, v, torch.tensor([1.0, 0.5], dtype=torch.float64), beta)
    y_b = gated_delta_rule(q, k, v, torch.tensor([1.0, 0.9], dtype=torch.float64), beta)
    # exact equality: the same arithmetic on the same S, k, v would repeat bit for bit; the outputs differ by 0.4
    record("max |y(alpha = 0.5) - y(alpha = 0.9)|", (y_a - y_b).abs().max().item())
    claim_assert(torch.equal(y_a, y_b), "same S_{t-1}, k_t, v_t but different S_t: the update also depends on the "
                 "token's gates alpha_t (and beta_t)", y_alpha_05=y_a, y_alpha_09=y_b)


def _snippet_model(d_model: int = 4, d_state: int = 3):
    cls = printed_code("linear-attention.snippet-la-gated-deltanet").namespace["GatedDeltaNet"]
    torch.manual_seed(7)
    return cls(d_model, d_state)


def _snippet_inputs(model, x: torch.Tensor):
    with torch.no_grad():
        return (model.W_q(x), model.W_k(x), model.W_v(x), torch.sigmoid(model.W_beta(x)), torch.sigmoid(model.W_alpha(x)))


@pytest.mark.claim("linear-attention.gated-deltanet-snippet-delta-rule-comment", "linear-attention.gated-deltanet-snippet-sk-shape",
                   "linear-attention.gated-deltanet-snippet-output-shape", "linear-attention.gated-deltanet-snippet-beta-alpha-shapes",
                   "linear-attention.gated-deltanet-snippet-gate-order")
@pytest.mark.parametrize("recurrence", [
    pytest.param(gated_delta_rule_gate_after, id="exact"),
    pytest.param(_gate_after_delta_rule_erase_added, id="erase-sign-flipped",
                 marks=control("S + beta (S k) k^T + beta v k^T: the delta rule with its erase term's sign flipped",
                               models="linear-attention.gated-deltanet-snippet-delta-rule-comment")),
    pytest.param(gated_delta_rule, id="gate-before-write",
                 marks=control("S_{t-1} alpha_t (I - beta_t k_t k_t^T) + beta_t v_t k_t^T: Gated DeltaNet's own order, "
                               "the gate before the write, taken for the snippet's",
                               models="linear-attention.gated-deltanet-snippet-gate-order")),
])
@given(seed=seeds(), b=st.integers(1, 2), n=st.integers(1, 6))
@settings(max_examples=20)  # each example runs the printed Python loop
@example(seed=0, b=1, n=3)  # n > 1: a state for the erase term to act on
def test_printed_gated_deltanet_is_the_gate_after_delta_recurrence(seed, b, n, recurrence):
    model = _snippet_model()
    x = gaussian((b, n, 4), seed).float()
    with torch.no_grad():
        out = model(x)
    q, k, v, beta, alpha = _snippet_inputs(model, x)
    claim_assert(out.shape == (b, n, 4) and beta.shape == alpha.shape == (b, n, 1)
                 and bool(((beta > 0) & (beta < 1) & (alpha > 0) & (alpha < 1)).all()), "shapes or gate ranges differ",
                 shape=tuple(out.shape))
    for i in range(b):
        ref = recurrence(q[i].double(), k[i].double(), v[i].double(), alpha[i, :, 0].double(),
                                          beta[i, :, 0].double())
        # the DESIGN rule: the float32 snippet errs at most 4x the float32 naive recurrence (+ 4 ulps), vs float64
        naive32 = recurrence(q[i], k[i], v[i], alpha[i, :, 0], beta[i, :, 0])
        assert_within_reference_error(out[i], ref, naive32, c=4.0, what="printed GatedDeltaNet, float32")


@pytest.mark.claim("linear-attention.gated-deltanet-snippet-gate-order")
@refutes(reason="one sequence of n = 2 tokens (the first step with a state to gate), d_model = 4, d_state = 3, "
                "seeded weights")
def test_printed_gated_deltanet_follows_yang_et_al():
    model = _snippet_model()
    x = gaussian((1, 2, 4), 84).float()
    with torch.no_grad():
        out = model(x)[0].double()
    q, k, v, beta, alpha = (t[0].double() for t in _snippet_inputs(model, x))
    paper = gated_delta_rule(q, k, v, alpha[:, 0], beta[:, 0])
    # equal recurrences would differ by float32 rounding (~1e-7 here); 1e-5 is generous, the gate order changes y by 0.025
    record("max difference / 1e-5", (out - paper).abs().max().item() / 1e-5)
    claim_assert((out - paper).abs().max() <= 1e-5, "the snippet gates after the write (alpha_t also decays "
                 "beta_t v_t k_t^T); Gated DeltaNet gates S_{t-1} before it", max_difference=(out - paper).abs().max())


@pytest.mark.claim("linear-attention.index-mamba-hidden-attention-same-family")
@pytest.mark.parametrize("hidden_matrix", [
    pytest.param(hidden_attention_matrix, id="exact"),
    pytest.param(_hidden_attention_decay_from_s, id="decay-from-s",
                 marks=control("prod_{k=s}^t a_k (an off-by-one) for prod_{k=s+1}^t a_k")),
])
@given(seed=seeds(), n=st.integers(1, 8), state=st.integers(1, 4))
def test_selective_scan_equals_its_hidden_attention_matrix(seed, n, state, hidden_matrix):
    a_bar = torch.sigmoid(gaussian((n, state), seed))  # data-dependent decay in (0, 1)
    b_bar, c, x = gaussian((n, state), seed + 1), gaussian((n, state), seed + 2), gaussian((n,), seed + 3)
    scan = selective_scan(a_bar, b_bar, c, x)
    hidden = hidden_matrix(a_bar, b_bar, c)
    # per side: products of <= n decays, state-term dot products, n-term sums over tokens: (2 n + state + 1) u of the
    # terms |c| (prod a) |b| |x|
    scale = (hidden_attention_matrix(a_bar, b_bar.abs(), c.abs()) @ x.abs()).max().item()
    claim_assert((scan - hidden @ x).abs().max() <= (2 * n + state + 1) * EPS64 * scale
                 and torch.equal(hidden, torch.tril(hidden)), "the scan is not y = alpha x with causal alpha", seed=seed)
