"""What the spectral code printed in the documents computes, against the metrics of ``impl.spectral``.

The code runs from ``sources/`` (``properties.strategies.spectral.printed_code``). One name, several
quantities: "effective_rank" is the stable rank at spectral.txt line 79, a 99%-mass count at line 594 and
the Roy-Vetterli entropy rank at linear-algebra.txt lines 144-146; "spectral_gap" is 1 - lambda_2
(spectral.txt line 52), 1 - s_2/s_1 (line 80), s_1 - s_2 (line 598) and s_2/s_1 (linear-algebra.txt 141).
Each test checks one printed metric against the formula it actually implements, and is also run on a mutant of
the printed code (a one-line plausible bug: the other gap, an off-by-one, a transpose) as its negative control.
"""
import contextlib
import functools
import io
import math
import re
from fractions import Fraction
from types import SimpleNamespace

import matplotlib
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record, refutes
from claimcheck.snippets import project_root
from claimcheck.sources import load_sources
from impl.lowrank import truncated_svd
from impl.softmax import stable_softmax
from impl.spectral import (eigenvalue_gap, effective_rank, mass_rank, relative_singular_value_gap,
                           eigenvalues, singular_value_gap, singular_value_ratio, singular_values, stable_rank)
from properties.strategies.spectral import attention_matrices, fresh_code, gaussian, printed_code, real_matrices, seeds
from properties.test_snippets_called import (AS_PRINTED, _document_frame, _uniform_quantize, mutant, mutant_code,
                                             readers_code)

matplotlib.use("Agg")
EIG_TOL = 1e-6  # eigenvalues of non-normal matrices: O(sqrt(eps)) error near defective ones
EPS64 = 2.0**-52


def _svd_tol(a: torch.Tensor) -> float:
    """Backward-stable SVD: each singular value within 16 max(m, n) eps s_1 (as test_linear_algebra._tol)."""
    return 16 * max(a.shape[-2:]) * EPS64 * max(singular_values(a).max().item(), 1e-300)


def _code(claim_id: str, name: str, mutation: tuple[str, str] | None = None):
    return (mutant_code(claim_id, *mutation) if mutation else printed_code(claim_id)).namespace[name]


@functools.cache
def _defined_in_documents(name: str) -> tuple[str, ...]:
    """``doc:line`` of each line of the four documents that defines or imports ``name`` (``def``, ``class``, an
    assignment, an import)."""
    n = re.escape(name)
    pattern = re.compile(rf"^\s*(?:def|class)\s+{n}\b"  # a def or class statement
                         rf"|^\s*{n}\s*(?::[^=]*)?=(?!=)"  # an assignment, annotated or not
                         rf"|^\s*(?:from\s+\S+\s+)?import\s.*\b{n}\b")  # an import
    docs = load_sources(project_root()).documents
    return tuple(f"{key}:{i}" for key, doc in docs.items() for i, line in enumerate(doc.lines, 1)
                 if pattern.search(line))


def _assert_defined_nowhere(name: str, defining_function: str) -> None:
    """No line of the documents defines ``name``; the scan must find the printed ``defining_function`` itself."""
    premise(_defined_in_documents(defining_function), "the scan does not find the printed function's own def",
            function=defining_function)
    where = _defined_in_documents(name)
    claim_assert(not where, f"a line of the documents defines {name}", lines=where)


def _analyze(a: torch.Tensor, mutation: tuple[str, str] | None = None) -> dict:
    return _code("spectral.snippet-spectral-doc-analyze-attention-spectrum", "analyze_attention_spectrum", mutation)(a)


@pytest.mark.claim("spectral.snippet-analyze-normalize-max-singular-one", "spectral.snippet-analyze-effective-rank-is-stable-rank",
                   "spectral.snippet-analyze-spectral-gap-singular-ratio", "spectral.snippet-analyze-tail-ratio")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "(s ** 2).sum() / (s[0] ** 2)", "(s ** 2).sum() / s[0]", "s_1 left unsquared in the stable rank")])
@given(a=attention_matrices(2, 10))
def test_spectral_doc_analyze_attention_spectrum_computes_stable_rank_and_relative_singular_gap(mutation, a):
    out = _analyze(a, mutation)
    s = singular_values(a)
    # numpy's and torch's SVDs of the same float64 matrix agree to a few ulps of s_1
    tol = 64 * 2.0**-52 * s[0].item()
    # s_max / s_max is exactly 1 in IEEE division
    claim_assert(out["normalized"].max() == 1, "s / s.max() does not have maximum 1", a=a)
    n = a.shape[0]
    # n terms s_i^2 / s_1^2, each within 4 (2 _svd_tol) / s_1 (two SVDs; s_1 >= 1 for A 1 = 1); the range: s_1^2 is
    # one of the nonnegative summands, each <= s_1^2, so 1 <= ratio <= n up to the n-term sum's rounding
    claim_assert(abs(out["effective_rank"] - stable_rank(a).item()) <= 8 * n * _svd_tol(a) + 2 * n * EPS64 * n
                 and 1 <= out["effective_rank"] <= n * (1 + n * EPS64),
                 "'effective_rank' is not the stable rank ||A||_F^2/||A||_2^2 in [1, n]", a=a, got=out["effective_rank"])
    # s_2 / s_1 from two SVDs: 2 (2 _svd_tol) / s_1 (s_1 >= 1), and the division and subtraction
    claim_assert(abs(out["spectral_gap"] - relative_singular_value_gap(a).item()) <= 4 * _svd_tol(a) + 2 * EPS64,
                 "'spectral_gap' is not 1 - s_2/s_1", a=a, got=out["spectral_gap"])
    tail = (s[5:].sum() / s.sum()).item()
    claim_assert(abs(out["tail_ratio"] - tail) <= tol, "'tail_ratio' is not sum_{i>5} s_i / sum s_i", a=a)


@pytest.mark.claim("spectral.snippet-analyze-effective-rank-is-stable-rank", "spectral.snippet-analyzer-effective-rank-99pct-count",
                   "spectral.analyze-effective-rank-spectral-entropy", "spectral.snippet-analyzer-spectral-gap-unnormalized",
                   "spectral.spectral-gap-definition")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "(s[0] - s[1]).item()", "(1 - s[1] / s[0]).item()", "the gap normalised by s_1 (spectral.txt line 80's definition)")])
def test_the_three_effective_ranks_and_four_spectral_gaps_differ_on_one_matrix(mutation):
    a = torch.softmax(gaussian((16, 16), 40) * 2, dim=-1)
    analyzer = _analyzer_class(mutation)(None)
    ranks = {"stable rank (spectral.txt 79)": stable_rank(a).item(),
             "99% singular-value mass count (spectral.txt 594)": analyzer._effective_rank(a),
             "Roy-Vetterli entropy rank (linear-algebra.txt 146)": effective_rank(a).item()}
    gaps = {"1 - |lambda_2| (spectral.txt 52)": eigenvalue_gap(a).item(),
            "1 - s_2/s_1 (spectral.txt 80)": relative_singular_value_gap(a).item(),
            "s_1 - s_2 (spectral.txt 598)": singular_value_gap(a).item(),
            "s_2/s_1 (linear-algebra.txt 141)": singular_value_ratio(a).item()}
    record("effective_rank under each printed definition", ranks)
    record("spectral_gap under each printed definition", gaps)
    # distinct by more than 1e-3, far above their rounding (~1e-13); the closest pair differs by 0.026
    closest = min(abs(u - v) for vals in (list(ranks.values()), list(gaps.values()))
                  for i, u in enumerate(vals) for v in vals[i + 1:])
    record("closest pair of printed definitions", closest)
    claim_assert(closest > 1e-3, "the printed definitions coincide on this matrix", ranks=ranks, gaps=gaps)
    # s_1 - s_2 from two SVDs, each value within _svd_tol
    claim_assert(abs(analyzer._spectral_gap(a) - singular_value_gap(a).item()) <= 4 * _svd_tol(a) + EPS64 * 4,
                 "_spectral_gap != s_1 - s_2")


def _la_analyze(q: torch.Tensor, k: torch.Tensor, mutation: tuple[str, str] | None = None) -> dict:
    return _code("spectral.snippet-la-analyze-attention-spectrum", "analyze_attention_spectrum", mutation)(q, k)


@pytest.mark.claim("spectral.analyze-sigma1-is-largest-singular-value", "spectral.analyze-spectral-gap-is-ratio",
                   "spectral.analyze-effective-rank-spectral-entropy")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "S_norm = S / (S.sum(dim=-1, keepdim=True) + 1e-8)", "S_norm = S / (S[..., :1] + 1e-8)",
    "the spectrum normalised by s_1, not by its sum, before the entropy")])
@given(seed=seeds(), b=st.integers(1, 2), h=st.integers(1, 3), n=st.integers(2, 8), d=st.integers(1, 4))
def test_la_analyze_attention_spectrum_on_4d_inputs(mutation, seed, b, h, n, d):
    q, k = gaussian((b, h, n, d), seed), gaussian((b, h, n, d), seed + 1)
    out = _la_analyze(q, k, mutation)
    a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    s = singular_values(a)
    # the same softmax A, decomposed twice (svd, svdvals): each value within _svd_tol
    tol = 2 * _svd_tol(a)
    claim_assert((out["sigma_1"] - s[..., 0]).abs().max() <= tol and (out["sigma_2"] - s[..., 1]).abs().max() <= tol,
                 "sigma_1, sigma_2 are not the two largest singular values", seed=seed)
    # the printed s_2 / (s_1 + 1e-8) differs from s_2 / s_1 by <= 1e-8 s_2 / s_1^2 <= 1e-8 (s_1 >= 1 for A 1 = 1),
    # and the two SVDs by 2 tol / s_1
    claim_assert((out["spectral_gap"] - s[..., 1] / s[..., 0]).abs().max() <= 1e-8 + 2 * tol + 2 * EPS64,
                 "'spectral_gap' != s_2/s_1", seed=seed)
    # the printed 1e-8 guards shift p by <= 1e-8 and log p by <= 1e-8 / p: the entropy by <= n * 1e-8
    erank = effective_rank(a)
    # the range: the guards keep H within [-n 1e-8, log n + 1e-8] (sub-normalised p, log(p + 1e-8) >= log p - 1e-8 / p)
    claim_assert(((out["effective_rank"] - erank).abs() / erank).max() <= 2 * n * 1e-8
                 and bool((out["effective_rank"] >= math.exp(-n * 1e-8) * (1 - 4 * n * EPS64)).all())
                 and bool((out["effective_rank"] <= n * math.exp(1e-8) * (1 + 4 * n * EPS64)).all()),
                 "'effective_rank' is not exp(H(s / sum s)) in [1, n]", seed=seed, got=out["effective_rank"], exact=erank)


def _la_block(mutation: tuple[str, str] | None = None):
    claim = "architecture.snippet-la-linear-algebraic-transformer"
    ns = (mutant_code(claim, *mutation) if mutation else printed_code(claim)).namespace
    torch.manual_seed(0)
    return ns["LABlock"](16, 2, 32, dropout=0.0).double()


@pytest.mark.claim("spectral.lablock-svd-sigma-means", "spectral.lablock-spectral-gap-ratio",
                   "spectral.lablock-effective-rank-spectral-entropy")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "sigma_2 = S[:, :, 1].mean()", "sigma_2 = S[:, :, 1].max()", "the largest s_2 over batch and heads, not their mean")])
@given(seed=seeds())
@settings(max_examples=10)  # each example builds and runs a block; 10 seeds cover the averaging
def test_lablock_reports_batch_head_means_of_singular_value_statistics(mutation, seed):
    block = _la_block(mutation)
    x = gaussian((3, 5, 16), seed)
    _, info = block(x, return_spectral=True)
    xn = block.ln1(x)
    q = block.W_q(xn).view(3, 5, 2, 8).transpose(1, 2)  # (B, h, n, d_k)
    k = block.W_k(xn).view(3, 5, 2, 8).transpose(1, 2)
    s = singular_values(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)).detach()
    s1, s2 = s[..., 0].mean().item(), s[..., 1].mean().item()
    p = s / (s.sum(-1, keepdim=True) + 1e-8)
    erank = torch.exp(-(p * torch.log(p + 1e-8)).sum(-1)).mean().item()
    # the block's A is ours op for op; svd and svdvals of it agree within 2 _svd_tol per value (s_1 <= sqrt 5), and
    # the means of 6 such values round by 6 u
    tol = 2 * 16 * 5 * EPS64 * math.sqrt(5) + 6 * EPS64 * math.sqrt(5)
    claim_assert(abs(info["sigma_1"] - s1) <= tol and abs(info["sigma_2"] - s2) <= tol,
                 "sigma_1, sigma_2 are not batch/head means", info=info, s1=s1, s2=s2)
    # the ratio of the two means: 2 tol / s_1 (s_1 >= 1) and the division
    claim_assert(abs(info["spectral_gap"] - s2 / (s1 + 1e-8)) <= 2 * tol + EPS64, "spectral_gap is not mean s_2 / mean s_1",
                 info=info)
    # exp H moves by <= n |dH|, and dH <= sum_i (|log(p_i + 1e-8)| + 1) |dp_i| <= 19.5 * 2 n tol / S (S >= 1): n = 5
    claim_assert(abs(info["effective_rank"] - erank) <= 5 * 19.5 * 2 * 5 * tol + 16 * 5 * EPS64,
                 "effective_rank is not the mean entropy rank", info=info, erank=erank)


def _analyzer_class(mutation: tuple[str, str] | None = None):
    return _code("spectral.snippet-transformer-spectral-analyzer", "TransformerSpectralAnalyzer", mutation)


@pytest.mark.claim("spectral.snippet-analyzer-effective-rank-99pct-count", "spectral.snippet-analyzer-spectral-gap-unnormalized")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "(cumsum < threshold).sum().item() + 1", "(cumsum < threshold).sum().item()", "an off-by-one in the 99% count")])
@given(a=real_matrices(2, 10, 5.0))
def test_analyzer_effective_rank_is_the_99_percent_mass_count_and_gap_is_s1_minus_s2(mutation, a):
    analyzer = _analyzer_class(mutation)(None)
    claim_assert(analyzer._effective_rank(a) == int(mass_rank(a, 0.99)), "_effective_rank is not the least k with "
                 "99% of the singular-value mass", a=a, got=analyzer._effective_rank(a), expected=mass_rank(a, 0.99))
    # s_1 - s_2 from two SVDs, each value within _svd_tol
    claim_assert(abs(analyzer._spectral_gap(a) - singular_value_gap(a).item()) <= 4 * _svd_tol(a) + 4 * EPS64 * max(
        singular_values(a)[0].item(), 1e-300), "_spectral_gap != s_1 - s_2", a=a)


@pytest.mark.claim("spectral.snippet-analyzer-spectral-gap-unnormalized")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "if len(s) > 1 else s[0].item()", "if len(s) > 1 else 0.0", "0 for a matrix with one singular value")])
@given(row=st.lists(st.floats(-5, 5, allow_nan=False, allow_infinity=False), min_size=1, max_size=8))
@example(row=[3.0, 4.0])
def test_analyzer_spectral_gap_of_a_single_row_is_its_only_singular_value(mutation, row):
    a = torch.tensor([row], dtype=torch.float64)  # 1 x k: one singular value, the row's Euclidean norm
    norm = math.hypot(*row)  # the Euclidean norm, computed apart from the SVD (no underflow for tiny entries)
    got = _analyzer_class(mutation)(None)._spectral_gap(a)
    # the SVD of a 1 x k matrix returns its norm to a few ulps of it
    claim_assert(abs(got - norm) <= 8 * EPS64 * max(norm, 1e-300), "_spectral_gap of a one-row matrix is not its only "
                 "singular value s_1", row=row, got=got, expected=norm)


@pytest.mark.claim("spectral.snippet-analyzer-max-eigenvalue-always-one", "spectral.monitor-max-eigenvalue-warning-always-fires")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "return torch.linalg.eigvals(matrix).abs().max().item()", "return torch.linalg.eigvals(matrix).abs().mean().item()",
    "an informative per-layer statistic (the mean |eigenvalue|: 1/n for uniform, ~1 for near-identity attention), as "
    "lines 601 and 695 take max_eigenvalue to be; the always-one check must reject it",
    models=["spectral.snippet-analyzer-max-eigenvalue-always-one", "spectral.monitor-max-eigenvalue-warning-always-fires"])])
@given(a=attention_matrices(1, 10))
@example(a=stable_softmax(torch.zeros(8, 8, dtype=torch.float64).index_fill(1, torch.tensor([0]), 1.78)))
@example(a=stable_softmax(torch.zeros(4, 4, dtype=torch.float64)))  # uniform attention: mean |eigenvalue| 1/4
def test_analyzer_max_eigenvalue_of_attention_is_always_one(mutation, a):
    try:
        got = _analyzer_class(mutation)(None)._max_eigenvalue(a)
    except torch.linalg.LinAlgError as exc:
        # torch's CPU eigvals (MKL's geev) fails to converge on some rank-one attention matrices, such as the
        # sink matrix of the example; the printed statistic max |eig(A)| is then taken with numpy's geev
        record("printed _max_eigenvalue raised (torch's CPU eigvals)", str(exc).split(":")[0])
        got = eigenvalues(a).abs().max().item()
    claim_assert(abs(got - 1) <= EIG_TOL, "max |eigenvalue| of an attention matrix is not 1", a=a, got=got)


@pytest.mark.claim("spectral.snippet-analyzer-max-eigenvalue-always-one")
@refutes(reason="n = 4: uniform attention and near-identity attention softmax(20 I), the two extremes of "
                "concentration, give the same value")
def test_analyzer_max_eigenvalue_distinguishes_layers():
    m = _analyzer_class()(None)._max_eigenvalue
    uniform, sharp = torch.full((4, 4), 0.25, dtype=torch.float64), torch.softmax(20 * torch.eye(4, dtype=torch.float64), -1)
    # both are exactly 1 (row-stochastic); a difference within the eigensolver's error EIG_TOL is no information
    record("difference / EIG_TOL", abs(m(uniform) - m(sharp)) / EIG_TOL)
    claim_assert(abs(m(uniform) - m(sharp)) > EIG_TOL, "the statistic is 1 for both extremes: it carries no information",
                 uniform=m(uniform), near_identity=m(sharp))


class _Attention(torch.nn.Module):
    """One nn.MultiheadAttention layer called with need_weights=True (and per-head weights if asked)."""

    def __init__(self, per_head: bool):
        super().__init__()
        torch.manual_seed(1)
        self.mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.per_head = per_head

    def forward(self, x):
        return self.mha(x, x, x, need_weights=True, average_attn_weights=not self.per_head)[0]


def _analyze_model(model) -> tuple[dict | None, str | None]:
    try:
        return _analyzer_class()(model).analyze_all_layers(torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))), None
    except (RuntimeError, AttributeError, IndexError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


@pytest.mark.claim("spectral.snippet-analyzer-hook-captures-attention-weights")
@refutes(reason="a one-layer torch.nn.TransformerEncoderLayer (d = 8, 2 heads), the standard module that contains an "
                "nn.MultiheadAttention")
def test_analyzer_hook_captures_the_attention_matrix_of_a_standard_encoder_layer():
    torch.manual_seed(3)
    results, error = _analyze_model(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True))
    claim_assert(error is None and results, "the encoder layer calls self_attn with need_weights=False: output[1] is "
                 "None and the hook fails", error=error)


@pytest.mark.claim("spectral.snippet-analyzer-attn-00-is-matrix")
@refutes(reason="one nn.MultiheadAttention called with its defaults (need_weights=True, average_attn_weights=True)")
def test_analyzer_attn_00_is_a_matrix_with_default_weights():
    results, error = _analyze_model(_Attention(per_head=False))
    claim_assert(error is None, "head-averaged weights are [B, L, S]: attn[0, 0] is one row and svdvals fails",
                 error=error)


def _encoder_layer() -> torch.nn.Module:
    torch.manual_seed(3)
    return torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)


@pytest.mark.claim("spectral.snippet-analyzer-attn-00-is-matrix", "spectral.snippet-analyzer-hook-captures-attention-weights")
@pytest.mark.parametrize("model_of", [pytest.param(lambda: _Attention(per_head=True), id="per-head"), pytest.param(
    lambda: _Attention(per_head=False), id="head-averaged", marks=control(
        "line 583's attn[0, 0] as a matrix under nn.MultiheadAttention's default head-averaged weights: the per-head "
        "analysis check must reject the model", models=["spectral.snippet-analyzer-attn-00-is-matrix"])), pytest.param(
    _encoder_layer, id="transformer-encoder-layer", marks=control(
        "line 568's hook on every attention layer, inside torch.nn.TransformerEncoderLayer (need_weights=False): the "
        "per-head analysis check must reject the model",
        models=["spectral.snippet-analyzer-hook-captures-attention-weights"]))])
def test_analyzer_works_on_per_head_weights(model_of):
    model = model_of()
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))
    results, error = _analyze_model(model)
    claim_assert(error is None and set(results) == {"layer_0"}, "per-head weights are not analysed", error=error)
    with torch.no_grad():
        a = model.mha(x, x, x, need_weights=True, average_attn_weights=False)[1][0, 0].double()
    claim_assert(results["layer_0"]["effective_rank"] == int(mass_rank(a, 0.99)), "the analysed matrix is not head 0",
                 got=results["layer_0"])


def _model_for_monitor(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(_Attention(per_head=True), _Attention(per_head=True))


@pytest.mark.claim("spectral.monitor-max-eigenvalue-warning-always-fires")
@refutes(reason="two randomly initialised two-layer attention models, one logging step each (log_every = 1): "
                "the smallest run that reaches the warning")
def test_monitor_warning_flags_only_abnormal_layers():
    monitor = fresh_code("spectral.snippet-training-monitor", train_step=lambda model, batch: 0.0).namespace["training_monitor"]
    fired = []
    for seed in (4, 5):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            monitor(_model_for_monitor(seed), [{"input": torch.randn(1, 6, 8)}], log_every=1)
        fired.append(out.getvalue().count("主导特征值过高"))
    claim_assert(min(fired) < 2, "the 'dominant eigenvalue too high' warning fires for every layer of every model",
                 warnings_per_model=fired, layers_per_model=2)


@pytest.mark.claim("spectral.snippet-training-monitor-train-step-undefined")
@refutes(reason="one logging step of the printed training_monitor on a one-layer model; train_step is never defined "
                "in the document")
def test_training_monitor_runs_as_printed():
    monitor = _code("spectral.snippet-training-monitor", "training_monitor")
    try:
        monitor(_model_for_monitor(6), [{"input": torch.randn(1, 6, 8)}], log_every=1)
        error = None
    except NameError as exc:
        error = str(exc)
    claim_assert(error is None, "training_monitor raises NameError", error=error)


def _raised_in_document(call) -> str | None:
    """None if ``call()`` returns; else the exception and the document line it came from (an exception that never
    reached the printed code is the test's own error, re-raised)."""
    try:
        call()
    except Exception as exc:
        where = _document_frame(exc)
        if where is None:
            raise
        return f"{type(exc).__name__} at {where}"
    return None


@pytest.mark.claim("spectral.snippet-training-monitor-train-step-undefined")
# a tensor batch: x['input'] is read as five indices (torch warns of that reading before the IndexError)
@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence for multidimensional indexing")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "analyzer.analyze_all_layers(batch['input'])", "analyzer.analyze_all_layers(batch)", "each batch analysed as it "
    "is, so that a bare tensor batch would do", models="spectral.snippet-training-monitor-train-step-undefined")])
def test_training_monitor_given_a_train_step_runs_on_batches_with_an_input_key_only(mutation):
    _assert_defined_nowhere("train_step", "training_monitor")
    steps = []
    train_step = lambda model, batch: steps.append(batch) or 0.0  # noqa: E731  the reader's step; records its batch
    claim = "spectral.snippet-training-monitor"
    run = readers_code(claim, mutation, train_step=train_step)
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(7))
    batches = {"{'input': x}": {"input": x}, "x": x, "{'x': x}": {"x": x}}
    raised = {}
    for name, batch in batches.items():
        with contextlib.redirect_stdout(io.StringIO()):
            raised[name] = _raised_in_document(lambda: run.namespace["training_monitor"](
                _model_for_monitor(7), [batch], log_every=1))
    claim_assert(raised["{'input': x}"] is None and len(steps) == 3, "with a train_step the monitor does not run on "
                 "a batch {'input': x}", raised=raised, steps=len(steps))
    others = [r for name, r in raised.items() if name != "{'input': x}"]
    claim_assert(all(r is not None and r.endswith("spectral.txt:689") for r in others),
                 "a batch that is not a dict with key 'input' does not fail at line 689 (batch['input'])",
                 raised=raised)


@pytest.mark.claim("spectral.snippet-measure-rank-collapse-get-attention-undefined")
@refutes(reason="a one-layer attention model and one length n = 4; get_attention_matrix is never defined in the "
                "document")
def test_measure_rank_collapse_runs_as_printed():
    model = _Attention(per_head=True)
    model.d_model = 8
    try:
        _code("spectral.snippet-measure-rank-collapse", "measure_rank_collapse")(model, [4])
        error = None
    except NameError as exc:
        error = str(exc)
    claim_assert(error is None, "measure_rank_collapse raises NameError", error=error)


@pytest.mark.claim("spectral.snippet-measure-rank-collapse-get-attention-undefined")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "'spectral_gap': spectrum['spectral_gap']", "'spectral_gap': spectrum['tail_ratio']", "another of the six "
    "statistics reported as the gap", models="spectral.snippet-measure-rank-collapse-get-attention-undefined")])
@given(matrices=st.lists(attention_matrices(2, 8), min_size=1, max_size=3))
@settings(max_examples=25)  # each example re-executes the printed code
def test_measure_rank_collapse_given_an_attention_helper_reports_the_stable_rank_and_relative_gap_per_length(
        mutation, matrices):
    _assert_defined_nowhere("get_attention_matrix", "measure_rank_collapse")
    supplied, seen = iter(matrices), []

    def get_attention_matrix(model, x):  # the reader's helper: one attention matrix [n, n] per call
        seen.append(tuple(x.shape))
        return next(supplied)

    claim = "spectral.snippet-measure-rank-collapse"
    run = readers_code(claim, mutation, get_attention_matrix=get_attention_matrix)
    lengths = [a.shape[0] for a in matrices]
    results = run.namespace["measure_rank_collapse"](SimpleNamespace(d_model=8), lengths)
    claim_assert([r["n"] for r in results] == lengths and seen == [(1, n, 8) for n in lengths],
                 "not one record per length, each from the helper on a [1, n, d_model] input", seen=seen,
                 lengths=lengths)
    for r, a in zip(results, matrices):
        n = a.shape[0]
        # as in test_spectral_doc_analyze_attention_spectrum_computes_stable_rank_and_relative_singular_gap: numpy's
        # and torch's SVDs of one matrix, each value within _svd_tol (s_1 >= 1 for A 1 = 1)
        claim_assert(abs(r["effective_rank"] - stable_rank(a).item()) <= 8 * n * _svd_tol(a) + 2 * n * EPS64 * n
                     and abs(r["spectral_gap"] - relative_singular_value_gap(a).item()) <= 4 * _svd_tol(a) + 2 * EPS64,
                     "a record is not the stable rank and 1 - s_2/s_1 of the helper's matrix", a=a, record=r)


@pytest.mark.claim("architecture.evaluate-architecture-spectral-call")
@refutes(reason="one call with an empty config; build_transformer is never defined in the document")
def test_evaluate_architecture_spectral_runs_as_printed():
    try:
        _code("spectral.snippet-evaluate-architecture-spectral", "evaluate_architecture_spectral")({}, torch.zeros(1, 2, 8))
        error = None
    except NameError as exc:
        error = str(exc)
    claim_assert(error is None, "evaluate_architecture_spectral raises NameError", error=error)


def _commented_health_ranges() -> tuple[tuple[float, float], tuple[float, float]]:
    """The comment's two health ranges, read from the document (spectral:712-713): 有效秩 a-b and 谱间隙 c-d."""
    doc = load_sources(project_root())["spectral"]
    start = doc.find_quote("def evaluate_architecture_spectral(config, sample_data):", 702)
    text = "\n".join(doc.lines[start - 1:start + 19])
    (er,), (sg,) = re.findall(r"有效秩 ([\d.]+-[\d.]+)", text), re.findall(r"谱间隙 ([\d.]+-[\d.]+)", text)
    return tuple(map(float, er.split("-"))), tuple(map(float, sg.split("-")))


def _score_one_layer(er: float, sg: float) -> float:
    class FakeAnalyzer:  # stands in for the analyzer: the printed scoring loop is what is tested
        def __init__(self, model):
            pass

        def analyze_all_layers(self, x):
            return {"layer": {"effective_rank": er, "spectral_gap": sg}}

    fn = fresh_code("spectral.snippet-evaluate-architecture-spectral", build_transformer=lambda config: None,
                    TransformerSpectralAnalyzer=FakeAnalyzer).namespace["evaluate_architecture_spectral"]
    return fn({}, None)


@pytest.mark.claim("spectral.snippet-evaluate-thresholds-match-comment")
@pytest.mark.parametrize("er_range", [pytest.param(None, id="comment"), pytest.param((30.0, 70.0), id="30-70", marks=control(
    "the rank criterion misread as 30-70: the code's 30 < er < 100 does not implement it"))])
def test_evaluate_architecture_accepts_exactly_the_layers_inside_the_commented_ranges(er_range):
    (er_lo, er_hi), (sg_lo, sg_hi) = _commented_health_ranges()
    if er_range is not None:
        er_lo, er_hi = er_range
    # the integer ranks around both ends and the middle, the gaps around both ends: where a range's reading shows
    ers = sorted({er_lo - 1, er_lo, er_lo + 1, (er_lo + er_hi) // 2, er_hi - 1, er_hi, er_hi + 1, 99.0})
    sgs = [sg_lo - 0.01, sg_lo, (sg_lo + sg_hi) / 2, sg_hi, sg_hi + 0.01]
    # a range written a-b fixes no ends; the comment's ranges are read as open intervals, which the code's strict
    # bounds make exact (the integer ends 30 and 100 are the only values where the closed reading differs)
    wrong = [(er, sg) for er in ers for sg in sgs
             if _score_one_layer(er, sg) != float(er_lo < er < er_hi and sg_lo < sg < sg_hi)]
    claim_assert(not wrong, "the code scores a layer healthy exactly when the comment's ranges do not, or not when "
                 "they do", wrong=wrong, ranges=((er_lo, er_hi), (sg_lo, sg_hi)))


def _plot(a: torch.Tensor):
    return _code("spectral.snippet-plot-spectrum", "plot_spectrum")(a)


@pytest.mark.claim("spectral.snippet-plot-linear-scale-is-log")
@refutes(reason="one 4 x 4 uniform-logit attention matrix: the axis scale does not depend on the data")
def test_plot_first_panel_uses_a_linear_scale():
    fig = _plot(torch.softmax(gaussian((4, 4), 41), -1))
    scale = fig.axes[0].get_yscale()
    matplotlib.pyplot.close(fig)
    claim_assert(scale == "linear", "the panel titled '(Linear)' has a logarithmic y axis", yscale=scale,
                 title=fig.axes[0].get_title())


@pytest.mark.claim("spectral.snippet-plot-linear-scale-is-log", "spectral.snippet-plot-cumulative-variance-ratio-label")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "axes[0].set_yscale('log')", "axes[0].set_yscale('linear')", "the linear scale the title '(Linear)' and the comment "
    "at line 611 state: the log-axis check must reject it", models=["spectral.snippet-plot-linear-scale-is-log"]), mutant(
    "cumsum = np.cumsum(s) / np.sum(s)", "cumsum = np.cumsum(s**2) / np.sum(s**2)", "the cumulative variance ratio the "
    "label names: the singular-value-share check must reject it",
    models=["spectral.snippet-plot-cumulative-variance-ratio-label"])])
@example(a=torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3]], dtype=torch.float64))  # s = (1, 1/3): shares 3/4 vs 9/10
@given(a=attention_matrices(2, 8))
@settings(max_examples=5)  # each example draws a matplotlib figure (~0.3 s)
def test_plot_shows_log_singular_values_and_cumulative_singular_value_share(mutation, a):
    fig = _code("spectral.snippet-plot-spectrum", "plot_spectrum", mutation)(a)
    y0, y1 = fig.axes[0].lines[0].get_ydata(), torch.tensor(fig.axes[1].lines[0].get_ydata())
    scale = fig.axes[0].get_yscale()
    matplotlib.pyplot.close(fig)
    s = singular_values(a)
    n = a.shape[0]
    # two SVDs of A: each value within _svd_tol; the shares cumsum / sum move by 2 n (2 _svd_tol) / S (S >= s_1 >= 1) and
    # round by n-term sums
    claim_assert(scale == "log" and (torch.tensor(y0) - s).abs().max() <= 2 * _svd_tol(a), "panel 1 is not s on a log "
                 "axis", a=a)
    claim_assert((y1 - s.cumsum(0) / s.sum()).abs().max() <= 4 * n * _svd_tol(a) + 2 * n * EPS64,
                 "panel 2 is not cumsum(s) / sum(s)", a=a)


@pytest.mark.claim("spectral.snippet-plot-cumulative-variance-ratio-label")
@refutes(reason="A = diag(2, 1) / 3 scaled rows (singular values 2/3, 1/3): the smallest spectrum where the "
                "singular-value share (2/3) and the variance share (4/5) differ")
def test_plot_second_panel_is_the_cumulative_variance_ratio():
    a = torch.tensor([[2 / 3, 0.0], [0.0, 1 / 3]], dtype=torch.float64)
    fig = _plot(a)
    plotted = torch.tensor(fig.axes[1].lines[0].get_ydata())
    matplotlib.pyplot.close(fig)
    s = singular_values(a)
    variance = (s**2).cumsum(0) / (s**2).sum()
    # equal curves would agree to a few eps; the shares differ by 2/3 - 4/5 = 0.13
    record("violation margin (max |plotted - variance ratio| / 1e-12)", ((plotted - variance).abs().max() / 1e-12).item())
    claim_assert((plotted - variance).abs().max() <= 1e-12, "the curve labelled 'Cumulative Variance Ratio' is the "
                 "cumulative share of singular values, not of their squares", plotted=plotted, variance_ratio=variance)


def _head_diversity(stack: torch.Tensor) -> dict:
    return _code("spectral.snippet-head-spectral-diversity", "head_spectral_diversity")(stack)


@pytest.mark.claim("spectral.snippet-head-diversity-most-similar-is-self")
@refutes(reason="three random 5 x 5 attention heads: the smallest stack with a choice of other head")
def test_most_similar_heads_names_another_head():
    out = _head_diversity(torch.softmax(gaussian((3, 5, 5), 42), -1))
    idx = out["most_similar_heads"].indices
    claim_assert(bool((idx != torch.arange(3)).all()), "each head is reported as its own most similar head (distance "
                 "0 on the diagonal of cdist)", indices=idx, values=out["most_similar_heads"].values)


@pytest.mark.claim("spectral.snippet-head-diversity-most-similar-is-self")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "'most_similar_heads': pairwise_diff.min(dim=0),",
    "'most_similar_heads': pairwise_diff.fill_diagonal_(float('inf')).min(dim=0),",
    "each head's most similar OTHER head, as line 402 says it finds (the diagonal masked): the zero-diagonal check "
    "must reject it", models=["spectral.snippet-head-diversity-most-similar-is-self"])])
@given(seed=seeds(), h=st.integers(2, 5))
def test_most_similar_heads_is_the_diagonal_of_the_distance_matrix(mutation, seed, h):
    stack = torch.softmax(gaussian((h, 6, 6), seed), -1)
    out = _code("spectral.snippet-head-spectral-diversity", "head_spectral_diversity", mutation)(stack)
    claim_assert(torch.equal(out["most_similar_heads"].indices, torch.arange(h))
                 and bool((out["most_similar_heads"].values == 0).all()), "min over cdist is not the zero diagonal",
                 seed=seed, indices=out["most_similar_heads"].indices)


@pytest.mark.claim("spectral.design-d-model-divisible-by-heads")
@given(d=st.integers(1, 24), h=st.integers(1, 8))
def test_heads_need_d_model_divisible_by_num_heads(d, h):
    check = _code("spectral.snippet-spectral-design-check", "spectral_design_check")
    issues = check(SimpleNamespace(num_layers=12, d_model=d, num_heads=h))
    try:
        torch.nn.MultiheadAttention(d, h)
        builds = True
    except AssertionError:
        builds = False
    claim_assert(builds == (d % h == 0) and (("d_model 应能被 num_heads 整除" in issues) == (d % h != 0)),
                 "the divisibility check and torch's head split disagree", d=d, h=h, issues=issues)


def _prune(w: torch.Tensor, sparsity: float) -> torch.Tensor:
    return _code("spectral.snippet-spectral-pruning", "spectral_pruning")(w, sparsity)


@pytest.mark.claim("spectral.snippet-spectral-pruning-is-rank-truncation-not-sparsity")
@pytest.mark.parametrize("kept", [pytest.param(lambda r, sparsity: int(r * (1 - sparsity)), id="float-floor"),
                                  pytest.param(lambda r, sparsity: math.floor(r * (1 - Fraction(repr(sparsity)))),
                                               id="exact-target-fraction", marks=control(
    "line 310's reading, target_sparsity of the singular values discarded exactly (k = floor(r (1 - s)) in exact "
    "arithmetic on the decimal s a reader writes, 0.9 = 9/10): the best-rank-k check must reject the printed output",
    models=[
        "spectral.snippet-spectral-pruning-is-rank-truncation-not-sparsity"]))])
@example(w=gaussian((10, 10), 43), sparsity=0.9)  # int(10 * (1 - 0.9)) = 0, one below the exact 1
@given(w=real_matrices(1, 8, 5.0), sparsity=st.floats(0.0, 1.0))
def test_spectral_pruning_returns_the_best_rank_k_approximation(kept, w, sparsity):
    out = _prune(w, sparsity)
    s = singular_values(w)
    k = kept(len(s), sparsity)
    best = truncated_svd(w, k)
    tail = s[k:]
    err = torch.linalg.matrix_norm(out - w, 2).item()
    # Eckart-Young-Mirsky: the rank-k truncation errs by s_{k+1} in spectral norm
    # torch.svd is torch.linalg.svd: the same decomposition, rebuilt in two orders (k-term sums of terms <= s_1), and
    # out - w's norm from one more SVD: within 2 _svd_tol(w) (16 max(m, n) eps s_1 each)
    tol = 2 * _svd_tol(w)
    claim_assert((out - best).abs().max() <= tol and abs(err - (tail[0].item() if len(tail) else 0.0)) <= tol,
                 "the output is not the best rank-k approximation", w=w, sparsity=sparsity, k=k)


@pytest.mark.claim("spectral.snippet-spectral-pruning-is-rank-truncation-not-sparsity")
@refutes(reason="a 10 x 10 matrix with target_sparsity = 0.9: the smallest size where int(10 * (1 - 0.9)) rounds "
                "1 - 0.9 = 0.09999999999999998 down to k = 0")
def test_spectral_pruning_discards_exactly_the_target_fraction():
    w = gaussian((10, 10), 43)
    out = _prune(w, 0.9)
    # out = U diag(0) V^T is exactly 0: any threshold between 0 and s_1 counts the same
    record("largest singular value of the output", singular_values(out)[0].item())
    kept = int((singular_values(out) > 1e-12).sum())
    claim_assert(kept == 1, "target_sparsity 0.9 keeps 0 of 10 singular values (the zero matrix), not 1",
                 kept=kept, zero_entries=int((out == 0).sum()), entries=100)


def _quantize(w: torch.Tensor, recorder: list, mutation: tuple[str, str] | None = None):
    def quantize(x, bits):  # stands in for the undefined helper and records what it is given
        recorder.append(x.clone())
        return x

    claim = "spectral.snippet-spectral-preserving-quantize"
    run = readers_code(claim, mutation, quantize=quantize)
    return run.namespace["spectral_preserving_quantize"](w)


# a negative control of both quantize tests: 0.8 r rounded to nearest, not floored (int(4.8) = 4 of r = 6 becomes 5)
_ROUNDED_K = mutant("k = int(0.8 * len(s))", "k = round(0.8 * len(s))", "0.8 r rounded to the nearest integer, not floored")


@pytest.mark.claim("spectral.snippet-quantize-keeps-top-80pct", "spectral.quantize-only-important-components-comment")
@given(w=real_matrices(1, 8, 5.0))
@settings(max_examples=25)  # each example re-executes the printed code
@pytest.mark.parametrize("mutation", [AS_PRINTED, _ROUNDED_K])
def test_quantize_passes_only_the_top_floor_80_percent_singular_values(mutation, w):
    seen: list = []
    out = _quantize(w, seen, mutation)
    s = singular_values(w)
    k = int(0.8 * len(s))
    # torch.svd is torch.linalg.svd; against svdvals: each value within _svd_tol (twice); the rebuilds as in pruning
    claim_assert(len(seen) == 1 and seen[0].shape == (k,) and (k == 0 or (seen[0] - s[:k]).abs().max() <= 2 * _svd_tol(w)),
                 "quantize() does not receive exactly the top int(0.8 r) singular values", w=w, k=k)
    claim_assert((out - truncated_svd(w, k)).abs().max() <= 2 * _svd_tol(w),
                 "with an identity quantizer the output is not the rank-k truncation", w=w, k=k)


@pytest.mark.claim("spectral.snippet-quantize-keeps-top-80pct")
@given(r=st.integers(5, 96), seed=seeds())
@settings(max_examples=20)  # each example re-executes the printed code
@pytest.mark.parametrize("mutation", [AS_PRINTED, _ROUNDED_K])
def test_quantize_keeps_80_percent_of_the_singular_values(mutation, r, seed):
    # weight matrices of the sizes the document is about (rank r >= 5): int(0.8 r) is floor(4 r / 5) exactly (the
    # product 0.8 * r never rounds below an integer it should reach; checked for every r <= 2e5), so the share kept
    # is within 1 / r of 80% and exactly 80% when 5 divides r
    seen: list = []
    _quantize(gaussian((r, r), seed), seen, mutation)
    kept = len(seen[0])
    claim_assert(kept == (4 * r) // 5 and abs(kept / r - 0.8) < 1 / r,
                 "the code does not keep floor(80%) of the r singular values", kept=kept, total=r)


@pytest.mark.claim("spectral.snippet-quantize-undefined")
@refutes(reason="one 4 x 4 weight; quantize() is never defined in the document")
def test_spectral_preserving_quantize_runs_as_printed():
    try:
        _code("spectral.snippet-spectral-preserving-quantize", "spectral_preserving_quantize")(gaussian((4, 4), 45))
        error = None
    except NameError as exc:
        error = str(exc)
    claim_assert(error is None, "spectral_preserving_quantize raises NameError", error=error)


@pytest.mark.claim("spectral.snippet-quantize-undefined")
@pytest.mark.parametrize("mutation", [AS_PRINTED, mutant(
    "k = int(0.8 * len(s))", "k = len(s)", "every singular value quantised and kept: rank r, above int(0.8 r)",
    models="spectral.snippet-quantize-undefined")])
@given(m=st.integers(2, 8), n=st.integers(2, 8), seed=seeds())
@settings(max_examples=25)  # each example re-executes the printed code
def test_spectral_preserving_quantize_given_a_quantizer_keeps_the_quantised_top_int_0_8_r_singular_values(mutation,
                                                                                                          m, n, seed):
    _assert_defined_nowhere("quantize", "spectral_preserving_quantize")
    claim = "spectral.snippet-spectral-preserving-quantize"
    run = readers_code(claim, mutation, quantize=_uniform_quantize)
    w = gaussian((m, n), seed)
    out = run.namespace["spectral_preserving_quantize"](w)
    s = singular_values(w)
    k = int(0.8 * len(s))
    expected = torch.cat([_uniform_quantize(s[:k], 8), torch.zeros(len(s) - k, dtype=s.dtype)])
    got = singular_values(out)
    # two SVDs of W and the rebuild U diag V^T, each within _svd_tol; the 8-bit steps s_1 / 255 are far larger
    tol = 3 * _svd_tol(w)
    rank = int((got > tol).sum())
    claim_assert(out.shape == w.shape and out.dtype == w.dtype and (got - expected).abs().max() <= tol and rank <= k,
                 "the output is not a full-precision weight of W's shape whose singular values are the quantised top "
                 "int(0.8 r) of W's, the rest 0", shape=tuple(out.shape), dtype=str(out.dtype), rank=rank, k=k,
                 max_error=(got - expected).abs().max().item())
