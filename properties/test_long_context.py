"""Long-context claims that cite experiments: internal consistency of the reported tables, and Corollary 1."""
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes

# foundations.txt lines 747-750: standard PPL, critical-scaling PPL and improvement %, as printed
# (the number of decimals printed tells how much each figure was rounded).
LLAMA2_ROWS = [
    pytest.param("5.47", "5.47", "0", id="4K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-4k-improvement")),
    pytest.param("9.21", "6.12", "33.5", id="8K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-8k-improvement")),
    pytest.param("25.3", "7.45", "70.6", id="16K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-16k-improvement")),
    pytest.param("89.7", "9.83", "89.0", id="32K", marks=pytest.mark.claim("long-context.llama2-7b-ppl-32k-improvement")),
]


def _half_unit(printed: str) -> float:
    """Half a unit in the last printed digit: how far the exact value may be from the printed one."""
    return 0.5 * 10.0 ** Decimal(printed).as_tuple().exponent


def _relative_reduction(s: float, c: float) -> float:
    """The improvement of critical scaling over standard scaling, in percent: 100 (s - c) / s."""
    return 100 * (s - c) / s


def _improvement_range(standard: str, critical: str, improvement=_relative_reduction) -> tuple[float, float]:
    """min and max of the improvement over s, c within rounding of their printed values."""
    s, hs = float(standard), _half_unit(standard)
    c, hc = float(critical), _half_unit(critical)
    corners = [improvement(si, ci) for si in (s - hs, s + hs) for ci in (c - hc, c + hc)]
    return min(corners), max(corners)


@pytest.mark.parametrize("improvement", [
    pytest.param(_relative_reduction, id="reduction"),
    pytest.param(lambda s, c: 100 * c / s, id="ratio", marks=control(
        "the ratio 100 c / s (what remains of the PPL) in place of the reduction 100 (s - c) / s")),
])
@pytest.mark.parametrize("standard, critical, printed", LLAMA2_ROWS)
def test_llama2_improvement_is_the_relative_ppl_reduction(standard, critical, printed, improvement):
    lo, hi = _improvement_range(standard, critical, improvement)
    record("implied improvement % (range)", [round(lo, 3), round(hi, 3)])
    # The PPLs are themselves rounded, so the improvement is only known to an interval; the printed
    # improvement, itself rounded, must lie within that interval widened by its own half unit.
    slack = _half_unit(printed)
    claim_assert(lo - slack <= float(printed) <= hi + slack,
                 "improvement is not (standard - critical) / standard for any PPLs that round to the table's",
                 implied_range=[lo, hi], printed_percent=printed)


# --- Corollary 1 of foundations.txt line 615, decided (issue 12) --------------------------------------------------
# "For T > T_train a RoPE Transformer's accuracy is at least 1 - O((T_train / T)^gamma), gamma > 0" puts no
# condition on the model, the task or training, and its right-hand side tends to 1 as T grows. A RoPE model with
# a zero read-out is a RoPE Transformer; it predicts one class, so on a task with balanced labels its accuracy is
# exactly 1/2 at every length, below 1 - C (T_train / T)^gamma once T > T_train (2 C)^(1 / gamma), for every C, gamma.

def _zero_readout_rope_accuracy(t: int, d: int = 4, batch: int = 16, seed: int = 0, theta=None) -> float:
    """Accuracy of a one-layer RoPE attention model with a zero read-out at length t; ``theta`` its frequencies
    (d/2,), the original b^(-2i/d) schedule by default."""
    import math

    import torch

    from impl.rope import rope_frequencies, rope_interleaved
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, t, d, dtype=torch.float64, generator=g)
    labels = torch.arange(batch) % 2  # balanced binary labels (e.g. the sign of the first token), half of each
    w = [torch.randn(d, d, dtype=torch.float64, generator=g) for _ in range(3)]
    pos = torch.arange(t, dtype=torch.float64)
    theta = rope_frequencies(d) if theta is None else theta
    q, k = rope_interleaved(x @ w[0], pos, theta), rope_interleaved(x @ w[1], pos, theta)
    h = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ (x @ w[2])
    logits = h[:, -1] @ torch.zeros(d, 2, dtype=torch.float64)  # zero read-out: both classes score 0
    pred = logits.argmax(-1)  # ties go to class 0
    return float((pred == labels).double().mean())


@pytest.mark.claim("long-context.rope-extrapolation-accuracy-lower-bound", "long-context.rope-corollary-justifies-ntk-yarn",
                   "long-context.rope-extrapolation-gamma-dependence")
@refutes(reason="the least trained RoPE model there is (zero read-out) on a balanced task: accuracy exactly 1/2 at "
                "every length; for each constant pair (C, gamma) it is evaluated at the first length where the bound "
                "exceeds 3/4")
def test_a_rope_model_whose_accuracy_stays_at_one_half_breaks_the_bound():
    t_train = 8
    broken = []
    for c in (0.5, 1.0, 2.0):
        for gamma in (0.5, 1.0, 2.0):
            t = math.ceil(t_train * (4 * c) ** (1 / gamma)) + 1  # there C (T_train / T)^gamma < 1/4
            bound = 1 - c * (t_train / t) ** gamma
            acc = _zero_readout_rope_accuracy(t)
            assert acc == 0.5  # the construction itself: balanced labels, one predicted class
            if acc < bound:
                broken.append({"C": c, "gamma": gamma, "T": t, "bound": round(bound, 3), "accuracy": acc})
    record("(C, gamma, T) where accuracy < 1 - C (T_train/T)^gamma", broken)
    claim_assert(not broken, "a RoPE Transformer's accuracy stays below 1 - C (T_train/T)^gamma for every C, gamma tried",
                 counterexamples=broken)


def _frequencies(schedule: str, s: float, t_train: int, d: int = 4):
    from impl.rope import rope_frequencies
    from impl.rope_scaling import ntk_aware, yarn
    return {"original": lambda: rope_frequencies(d), "ntk-aware": lambda: ntk_aware(d, 10000.0, s),
            "yarn": lambda: yarn(d, 10000.0, s, t_train)}[schedule]()


@pytest.mark.claim("long-context.rope-corollary-justifies-ntk-yarn")
@pytest.mark.parametrize("accuracy", [pytest.param(_zero_readout_rope_accuracy, id="zero-read-out"), pytest.param(
    lambda t, theta: 1.0, id="oracle", marks=control(
        "an oracle read-out with accuracy 1 at every length, the only kind of model the bound would cover: the check "
        "must reject it", models=["long-context.rope-corollary-justifies-ntk-yarn"]))])
@given(schedule=st.sampled_from(["original", "ntk-aware", "yarn"]), s=st.sampled_from([2.0, 4.0, 8.0]),
       c=st.floats(0.05, 2.0), gamma=st.floats(0.5, 3.0))
@settings(max_examples=20)  # one forward pass of up to 16 x 513 tokens per example
def test_corollary_1_fails_with_original_ntk_aware_and_yarn_frequencies_alike(accuracy, schedule, s, c, gamma):
    t_train = 8
    # the first length past T_train where C (T_train / T)^gamma < 1/4, i.e. the bound exceeds 3/4; T <= 513 here
    t = max(t_train + 1, math.ceil(t_train * (4 * c) ** (1 / gamma)) + 1)
    bound = 1 - c * (t_train / t) ** gamma
    acc = accuracy(t, theta=_frequencies(schedule, s, t_train))
    # exact: the zero read-out predicts one class on balanced labels, accuracy 1/2; the bound is > 3/4 at this T
    claim_assert(acc < bound, "a RoPE model with these frequencies meets 1 - C (T_train / T)^gamma", schedule=schedule,
                 s=s, C=c, gamma=gamma, T=t, accuracy=acc, bound=bound)
