"""Mutation testing of ``impl/``: is the property suite strong enough to notice a one-token bug?

Each mutant is one source edit of one file of ``impl/`` (an exact, unique snippet replaced by
another), applied to a temporary copy of the project; the copy's property suite runs in the CI
profile (``CI=true pytest -x properties/``) with the copy first on ``PYTHONPATH``. The mutant is
*killed* when the suite fails, *survived* when it passes. A mutant of code that ``properties/`` does not
exercise on its own (the checking machinery in ``claimcheck/``, formulas pinned by hand-computed values, the
reference's features that only an oracle written apart from it can judge) names the tests of ``tests/`` that
must kill it, and runs against those. Mutants that cannot change any result
are listed in ``EQUIVALENT`` with the reason, and not run. A snippet no longer found in the
source (the code moved on) makes the mutant *stale*: fix its anchor, it is not counted.

    .venv/bin/python tools/mutants.py                  # every mutant against properties/ (slow: ~1 min each)
    .venv/bin/python tools/mutants.py --only triton-forward-gqa-modulo --tests properties/test_backends.py
    .venv/bin/python tools/mutants.py --targeted       # each against the property files importing its module
    .venv/bin/python tools/mutants.py --list

Prints one line per mutant and the score, and writes ``results/mutants.json`` (the report shows it).
Exit status: 0 when every mutant is killed (or equivalent), 1 when one survived, 2 on a stale anchor.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("impl", "properties", "claimcheck", "experiments", "tests", "sources", "claims.yaml", "references.yaml",
          "pyproject.toml")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the project root
    old: str  # must occur exactly once in the file
    new: str
    description: str
    nth: int = 0  # 0: ``old`` must occur once; k: it occurs several times and the k-th (1-based) is edited
    tests: tuple[str, ...] = ()  # the tests that must kill it when not properties/ (the checks that pin its code)


@dataclass(frozen=True)
class Equivalent:
    mutant: Mutant
    reason: str


# FlexAttention's cells run at the ci tier only (the smoke tier leaves its CPU compiles out): in float32
FLEX_TESTS = ("properties/test_backends.py", "--kernel-tier=ci", "-k", "flex and float32")


def _m(name, file, old, new, description, nth=0, tests=()):
    return Mutant(name, f"impl/{file}", old, new, description, nth, tuple(tests))


def _c(name, file, old, new, description, tests):
    """A mutant of the checking machinery itself (``claimcheck/``), killed by the suite's own tests of it."""
    return Mutant(name, f"claimcheck/{file}", old, new, description, 0, tuple(tests))


THIRD_PARTY = "tests/test_kernel_oracle_third_party.py"
MUTANTS = [
    # our Triton kernel (impl/triton_attention.py): the two survivors of issue 13 first
    _m("triton-forward-gqa-modulo", "triton_attention.py",
       "    off_hkv = off_h // GROUP  # grouped-query attention",
       "    off_hkv = off_h % (H_Q // GROUP)  # grouped-query attention",
       "forward reads key/value head h % H_kv instead of h // group"),
    _m("triton-backward-dk-wrong-group", "triton_attention.py",
       "dk = dk.view(b, h_kv, group, n_k, d).sum(2)", "dk = dk.view(b, group, h_kv, n_k, d).sum(1)",
       "dK of a shared head summed over the wrong query heads"),
    _m("triton-backward-dv-wrong-group", "triton_attention.py",
       "dv = dv.view(b, h_kv, group, n_k, d).sum(2)", "dv = dv.view(b, group, h_kv, n_k, d).sum(1)",
       "dV of a shared head summed over the wrong query heads"),
    _m("triton-dkdv-kernel-gqa-modulo", "triton_attention.py", "    off_hkv = off_h // GROUP\n",
       "    off_hkv = off_h % (H_Q // GROUP)\n", "the dK/dV kernel reads key/value head h % H_kv", nth=1),
    _m("triton-dq-kernel-gqa-modulo", "triton_attention.py", "    off_hkv = off_h // GROUP\n",
       "    off_hkv = off_h % (H_Q // GROUP)\n", "the dQ kernel reads key/value head h % H_kv", nth=2),
    _m("triton-no-rescale", "triton_attention.py", "        acc = acc * alpha[:, None]\n", "        acc = acc\n",
       "online softmax forgets to rescale the accumulator"),
    _m("triton-l-not-rescaled", "triton_attention.py", "l_i = l_i * alpha + tl.sum(p, 1)", "l_i = l_i + tl.sum(p, 1)",
       "online softmax forgets to rescale the row sum"),
    _m("triton-causal-offset-sign", "triton_attention.py", "return n_k - n_q if causal == \"bottom-right\" else 0",
       "return n_q - n_k if causal == \"bottom-right\" else 0", "bottom-right causal offset with the wrong sign"),
    _m("triton-delta-mean", "triton_attention.py", "delta = (d_out.float() * out.float()).sum(-1)  # D_i",
       "delta = (d_out.float() * out.float()).mean(-1)  # D_i", "D_i = rowsum(dO * O) taken as a mean"),
    # the log-sum-exp our kernels return (claims kernel's lse case; properties/test_triton_attention.py)
    _m("triton-lse-in-log2", "triton_attention.py", "return (out, lse2 * LN2) if return_lse else out",
       "return (out, lse2) if return_lse else out", "the returned log-sum-exp left in base 2 (L / ln 2)",
       tests=("properties/test_triton_attention.py",)),
    _m("triton-lse-gradient-dropped", "triton_attention.py", "delta = delta - d_lse2.float() * RCP_LN2",
       "delta = delta", "a loss of the returned log-sum-exp reaches no input (dS misses P dL)",
       tests=("properties/test_triton_attention.py",)),
    _m("tiled-lse-gradient-dropped", "tiled_attention.py", "delta = delta - d_lse.to(acc_t)", "delta = delta",
       "the tiled backward drops the log-sum-exp's gradient", tests=("properties/test_triton_attention.py",)),
    # the tiled algorithm in plain torch (impl/tiled_attention.py)
    _m("tiled-no-rescale", "tiled_attention.py", "alpha = torch.exp(m_i - shift)  # rescales",
       "alpha = torch.ones_like(m_i)  # rescales", "online softmax without rescaling"),
    _m("tiled-lse-without-max", "tiled_attention.py", "lse[..., rows.start:rows.stop] = m_i + torch.log(l_i)",
       "lse[..., rows.start:rows.stop] = torch.log(l_i)", "log-sum-exp missing the row max (breaks the backward)"),
    _m("tiled-dk-unscaled", "tiled_attention.py", "dk_j += scale * (ds.transpose(-2, -1) @ q_i)",
       "dk_j += ds.transpose(-2, -1) @ q_i", "dK missing the softmax scale"),
    _m("tiled-delta-mean", "tiled_attention.py", "delta = (d_out.to(acc_t) * out.to(acc_t)).sum(dim=-1)",
       "delta = (d_out.to(acc_t) * out.to(acc_t)).mean(dim=-1)", "D_i taken as a mean"),
    _m("tiled-fully-masked-nan", "tiled_attention.py", "empty = l_i == 0  # fully masked rows",
       "empty = l_i < 0  # fully masked rows", "fully masked rows divide 0 by 0 (NaN, declared 0)"),
    # the reference itself (impl/attention.py): caught only by oracles that do not share its code
    _m("reference-gqa-modulo", "attention.py", "return x if group == 1 else x.repeat_interleave(group, dim=-3)",
       "return x if group == 1 else torch.cat([x] * group, dim=-3)", "repeat_kv maps head h to h % H_kv"),
    _m("reference-scale-1-over-d", "attention.py", "return 1.0 / math.sqrt(d_k)", "return 1.0 / d_k",
       "default scale 1/d instead of 1/sqrt(d)"),
    _m("reference-alignment-sign", "attention.py", 'offset = 0 if alignment == "top-left" else n_k - n_q',
       'offset = 0 if alignment == "top-left" else n_q - n_k', "bottom-right alignment with the wrong sign"),
    _m("reference-causal-strict", "attention.py", "return cols[None, :] <= rows[:, None] + offset",
       "return cols[None, :] < rows[:, None] + offset", "causal mask hides the diagonal"),
    _m("reference-padding-ignored", "attention.py", "bias = bias.masked_fill(~keep[..., None, None, :], -math.inf)",
       "bias = bias.masked_fill(keep[..., None, None, :] & False, -math.inf)", "key padding ignored"),
    # softmax (impl/softmax.py)
    _m("softmax-no-max", "softmax.py", "return torch.exp(x - x.amax(dim=dim, keepdim=True))", "return torch.exp(x)",
       "the stable softmax without subtracting the max"),
    _m("softmax-wrong-axis", "softmax.py", "    e = shifted_exponents(x, dim)\n    return e / e.sum(dim=dim, keepdim=True)",
       "    e = shifted_exponents(x, dim)\n    return e / e.sum(dim=0, keepdim=True)", "the stable softmax normalised over axis 0"),
    # the adapters (impl/backends.py)
    _m("sdpa-causal-dropped", "backends.py", '    if features == {"causal-top-left"}:\n        return None, True',
       '    if features == {"causal-top-left"}:\n        return None, False', "SDPA's top-left causal mask dropped"),
    _m("sdpa-padding-dropped-under-causal", "backends.py", '    if features == {"causal-top-left"}:\n        return None, True',
       '    if "causal-top-left" in features:\n        return None, True', "SDPA's top-left causal mask drops the key padding"),
    _m("flex-padding-dropped-under-causal", "backends.py", "allowed = (keep[bi, ki] & (~causal | (ki <= qi + offset))",
       "allowed = (torch.where(causal, ki <= qi + offset, keep[bi, ki])", "FlexAttention's causal mask drops the key padding",
       tests=FLEX_TESTS),
    _m("flex-sink-dropped-under-causal", "backends.py", "return allowed | (ki == sink_key) if sinks else allowed",
       "return allowed", "FlexAttention's causal mask hides the sink key", tests=FLEX_TESTS),
    _m("flex-window-left-bound-dropped", "backends.py", "& (ki >= centre - left_t)", "",
       "FlexAttention's sliding window without its left bound", tests=FLEX_TESTS),
    _m("tiled-softcap-without-its-derivative", "tiled_attention.py", "ds = ds * (1 - capped * capped)", "ds = ds",
       "the tiled backward leaves out the softcap's 1 - tanh^2"),
    _m("tiled-sink-ignored", "tiled_attention.py", "l_i = alpha * l_i + torch.exp(sink - m_new)", "l_i = alpha * l_i",
       "the tiled forward leaves the sink out of the row sum"),
    _m("flex-offset-sign", "backends.py", 'offset = torch.tensor(n_k - n_q if mask.causal == "bottom-right" else 0',
       'offset = torch.tensor(n_q - n_k if mask.causal == "bottom-right" else 0', "FlexAttention's bottom-right offset sign",
       tests=FLEX_TESTS),
    _m("softmax-logsumexp-unshifted", "softmax.py",
       "return (m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))).squeeze(dim)",
       "return torch.log(torch.exp(x).sum(dim=dim, keepdim=True)).squeeze(dim)", "logsumexp without the max shift"),
    # formulas pinned by hand-computed values (tests/test_pinned_formulas.py) and by the sweeps they are premises of
    _m("yarn-ramp-beta-16", "rope_scaling.py", "alpha: float = 1.0,\n         beta: float = 32.0)",
       "alpha: float = 1.0,\n         beta: float = 16.0)", "YaRN's ramp ends at r = 16 instead of 32"),
    _m("loglog-divisor-power", "critical_scaling.py", "return 1.0 + c * math.log(math.log(n))",
       "return 1.0 + c * math.log(math.log(n)) ** 1.1", "the document's divisor 1 + c (ln ln T)^1.1"),
    _m("kappa-lambda1-by-modulus", "spectral.py", "ev.gather(-1, ev.real.argmax(dim=-1, keepdim=True))",
       "ev.gather(-1, ev.abs().argmax(dim=-1, keepdim=True))", "kappa's lambda_1 taken by modulus, not real part",
       tests=("tests/test_pinned_formulas.py",)),
    _m("loglog-fit-n-minus-1-dof", "critical_scaling.py", "stats.t.ppf(0.975, lx.numel() - 2)",
       "stats.t.ppf(0.975, lx.numel() - 1)", "the log-log fit's t interval with n - 1 degrees of freedom",
       tests=("tests/test_pinned_formulas.py",)),
    # the reference's own kernel features, caught by the oracle written apart from it (tests/test_kernel_oracle.py)
    _m("reference-alibi-sign", "attention.py", "bias = bias - mask.alibi.to(device, dtype)[:, None, None] * distance",
       "bias = bias + mask.alibi.to(device, dtype)[:, None, None] * distance", "the reference's ALiBi bias rewards distance",
       tests=("tests/test_kernel_oracle.py",)),
    _m("reference-softcap-unscaled", "attention.py", "s = mask.softcap * torch.tanh(s / mask.softcap)",
       "s = mask.softcap * torch.tanh(s)", "the reference's softcap without 1/c inside tanh",
       tests=("tests/test_kernel_oracle.py",)),
    # ... and by code written and used elsewhere: flash-attn's attention_ref and attn-gym's mods
    # (tests/test_kernel_oracle_third_party.py)
    _m("reference-window-right-strict", "attention.py", "allowed &= cols[None, :] <= centre + right",
       "allowed &= cols[None, :] < centre + right", "the reference's window excludes its right edge",
       tests=(THIRD_PARTY,)),
    _m("reference-sink-negated", "attention.py", "sink = mask.sink.to(s.device, s.dtype)",
       "sink = -mask.sink.to(s.device, s.dtype)", "the reference's sink logit with the wrong sign", tests=(THIRD_PARTY,)),
    _m("reference-dropout-unscaled", "attention.py", "weights * dropout_keep(weights.shape, p, seed, weights.device) / (1 - p)",
       "weights * dropout_keep(weights.shape, p, seed, weights.device)", "the reference's dropout without 1/(1 - p)",
       tests=(THIRD_PARTY,)),
    _c("varlen-reference-unaligned", "kernel_features.py", "outs = [attention(q[a:b].transpose(0, 1), k[c:d].transpose(0, 1)",
       "outs = [attention(q[a:b].transpose(0, 1), k[a:a + d - c].transpose(0, 1)",
       "the packed reference reads each sequence's keys from the queries' offsets", (THIRD_PARTY,)),
    # the checking machinery: the error-ratio rule (tests/test_kernel_matrix.py) and the control mechanism
    _c("rule-mean-error", "kernel.py", "return (x.double() - reference.double()).abs().max().item() if x.numel() else 0.0",
       "return (x.double() - reference.double()).abs().mean().item() if x.numel() else 0.0",
       "the error-ratio rule on the mean error, not the largest", ("tests/test_kernel_matrix.py",)),
    _c("rule-floor-inside-c", "kernel.py", "ok = err <= c * ref_err + floor  # False for NaN",
       "ok = err <= c * (ref_err + floor)  # False for NaN", "the rule as c x (naive + floor), not c x naive + floor",
       ("tests/test_kernel_matrix.py",)),
    _c("lse-fully-masked-unjudged", "kernel_features.py", 'if hidden.any() and declared != "any":',
       "if False:", "the lse case never judges the log-sum-exp of a row with no allowed key",
       ("tests/test_kernel_features.py",)),
    _c("lse-gradient-unchecked", "kernel_features.py", "backward = backward and not hidden.any()  # log 0 has no gradient",
       "backward = False  # log 0 has no gradient", "the lse case checks the forward only (no gradient through lse)",
       ("tests/test_kernel_features.py",)),
    # the checks the fresh batches of wrong kernels asked for, each killed by the zoo kernel aimed at it
    _c("determinism-forward-only", "kernel.py", "again = _outputs(fn, q, k, v, mask, d_out, backward, s)",
       "again = _outputs(fn, q, k, v, mask, d_out, False, s)", "determinism compares the forward only",
       ("tests/test_kernel_zoo.py",)),
    _c("reuse-unchecked", "kernel.py", "if not changed and problem.label == REUSE_PROBLEM",
       "if False and problem.label == REUSE_PROBLEM", "no second call: an output a later call overwrites passes",
       ("tests/test_kernel_zoo.py",)),
    _c("dropout-neighbouring-slices-only", "kernel_dropout.py", "for i in range(len(slices)) for j in range(i + 1, len(slices))]",
       "for i in range(len(slices)) for j in range(i + 1, min(i + 2, len(slices)))]",
       "dropout independence tested on neighbouring slices only", ("tests/test_kernel_zoo.py",)),
    _c("control-any-assertion", "evidence.py", "    return isinstance(exc, ClaimViolation)\n",
       "    return isinstance(exc, (ClaimViolation, AssertionError))\n",
       "any AssertionError counts as the claim's check rejecting a control", ("tests/test_controls.py",)),
    _c("control-mixed-group", "evidence.py", "return violations is not None and others is None",
       "return violations is not None", "an exception group mixing a violation with a crash counts as a rejection",
       ("tests/test_controls.py",)),
    _c("controls-alone-decide", "status.py", 'if all(o.kind in ("control", "comparator") for o in outcomes):',
       'if not outcomes:', "a claim whose only evidence is controls is decided by them", ("tests/test_controls.py",)),
    _c("surname-substring", "records.py", "return bool(last) and full[-len(last):] == last",
       'return bool(last) and " ".join(last) in " ".join(full)', "a surname matches as a substring of the name",
       ("tests/test_controls.py",)),
    # formulas
    _m("block-size-one-too-many", "io_model.py", "        b += 1\n    return b\n", "        b += 1\n    return b + 1\n",
       "the tile size one row past what fits on chip"),
    _m("working-set-no-score-tile", "io_model.py", "block_n * d_v + block_m * block_n + block_m * d_v",
       "block_n * d_v + block_m * d_v", "the on-chip working set without the score tile S_ij"),
    _m("linear-attention-flops-d-for-dv", "linear_attention.py",
       "return matmul_flops(d, n, d_v) + matmul_flops(n, d, d_v)", "return matmul_flops(d, n, d) + matmul_flops(n, d, d_v)",
       "linear attention's first product counted with d for d_v"),
    _m("yarn-factor-log2", "rope_scaling.py", "return 0.1 * math.log(scale) + 1.0", "return 0.1 * math.log2(scale) + 1.0",
       "YaRN's attention factor with log2 for ln"),
    _m("rope-frequency-exponent", "rope.py", "(base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))",
       "(base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / (head_dim - 2)))", "theta_i = base^(-2i/(d-2))"),
    _m("rope-rotation-sign", "rope.py", "out[..., 0::2] = even * cos - odd * sin", "out[..., 0::2] = even * cos + odd * sin",
       "rotation by the wrong sign in the interleaved layout"),
    _m("kv-cache-factor", "param_counts.py", "return 2 * n_layers * n_kv_heads * d_head * seq_len * batch",
       "return n_layers * n_kv_heads * d_head * seq_len * batch", "the KV cache forgets V"),
    _m("layer-norm-params", "param_counts.py", "    return 2 * d_model\n", "    return d_model\n",
       "LayerNorm counted without its bias"),
    _m("working-set-lse", "io_model.py", "block_n * d_v + block_m * block_n + block_m * d_v + 2 * block_m",
       "block_n * d_v + block_m * block_n + block_m * d_v + block_m", "the on-chip working set forgets l or m"),
]

EQUIVALENT = [
    Equivalent(_m("sdpa-enable-gqa-always", "backends.py", "scale=scale, enable_gqa=group > 1)",
                  "scale=scale, enable_gqa=group > 0)",
                  "SDPA told GQA also when H_kv = H_q"),
               "with H_kv = H_q, enable_gqa=True repeats each key/value head once: the same computation"),
    Equivalent(_m("tiled-block-7", "backends.py", "return flash_attention(q, k, v, scale, mask, block_m=16, block_n=16,",
                  "return flash_attention(q, k, v, scale, mask, block_m=16, block_n=7,", "the tiled backend's key tile 7"),
               "the tiled algorithm is exact for every block size (properties/test_flash_attention.py draws them): "
               "only rounding changes"),
]


_IMPORT = re.compile(r"^\s*(?:from\s+impl\.(\w+)\s+import|import\s+impl\.(\w+)|from\s+impl\s+import\s+([\w, ]+))"
                     r"|importorskip\(\s*[\"']impl\.(\w+)", re.M)


def _imports(path: Path) -> set[str]:
    """The ``impl`` modules a file imports (``from impl.x import``, ``import impl.x``, ``from impl import x``,
    ``pytest.importorskip("impl.x")``)."""
    found = set()
    for a, b, names, skip in _IMPORT.findall(path.read_text(encoding="utf-8")):
        found |= {a or b or skip} if (a or b or skip) else {n.split(" as ")[0].strip() for n in names.split(",") if n.strip()}
    return found


def targeted_tests(mutant: Mutant, root: Path = ROOT) -> list[str]:
    """The property files that import the mutated module, directly or through other ``impl`` modules."""
    users = {Path(mutant.file).stem}
    modules = {p.stem: _imports(p) for p in (root / "impl").glob("*.py")}
    while True:
        more = {m for m, deps in modules.items() if deps & users} - users
        if not more:
            break
        users |= more
    files = sorted(p for p in (root / "properties").glob("test_*.py") if _imports(p) & users)
    return [str(p.relative_to(root)) for p in files] or ["properties/"]


def apply(mutant: Mutant, root: Path) -> None:
    path = root / mutant.file
    text = path.read_text(encoding="utf-8")
    found = text.count(mutant.old)
    if (found != 1) if not mutant.nth else (found < mutant.nth or found == 1):
        expected = "once" if not mutant.nth else f"at least {max(2, mutant.nth)} times"
        raise LookupError(f"{mutant.name}: the snippet occurs {found} times in {mutant.file} (expected {expected})")
    at = -1
    for _ in range(max(1, mutant.nth)):
        at = text.index(mutant.old, at + 1)
    path.write_text(text[:at] + mutant.new + text[at + len(mutant.old):], encoding="utf-8")


def run(mutant: Mutant, tests: list[str], workers: str, timeout: float) -> tuple[str, float, str]:
    """``(killed | survived | stale | timeout, seconds, last line of pytest's output)``."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        copy = Path(tmp)
        for name in COPIED:
            src = ROOT / name
            (shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__")) if src.is_dir()
             else shutil.copy2(src, copy / name))
        try:
            apply(mutant, copy)
        except LookupError as exc:
            return "stale", 0.0, str(exc)
        # the copy has no .venv: the third-party oracles' wheels are read from this checkout's, and a missing one
        # fails the oracle tests instead of skipping them (a skip would let a mutant of the reference survive)
        env = {**os.environ, "CI": "true", "PYTHONPATH": str(copy), "CLAIMS_PROFILE": "ci",
               "CLAIMS_ORACLES": os.environ.get("CLAIMS_ORACLES", str(ROOT / ".venv" / "oracles")),
               "CLAIMS_REQUIRE_ORACLES": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests,
               "--claims-results", str(copy / "results.json")]
        if workers != "0":
            cmd += ["-n", workers]
        started = time.time()
        try:
            proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.time() - started, f"over {timeout:.0f} s"
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        tail = lines[-1] if lines else proc.stderr.strip()[-200:]
        return ("killed" if proc.returncode != 0 else "survived"), time.time() - started, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="run only this mutant (repeat)")
    parser.add_argument("--tests", action="append", help="test paths to run (default: properties/)")
    parser.add_argument("--targeted", action="store_true", help="run each mutant against the property files "
                        "that import its module, directly or through impl/ (faster; may miss a kill, never invent one)")
    parser.add_argument("--workers", default="2", help="pytest-xdist workers per mutant, 0 for none (default: 2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per mutant (default: 600)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--out", default=str(ROOT / "results" / "mutants.json"), help="where to write the JSON")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    unknown = set(args.only or []) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutants {sorted(unknown)}")
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:<34} {m.file:<26} {m.description}")
        for e in EQUIVALENT:
            print(f"{e.mutant.name:<34} {e.mutant.file:<26} equivalent: {e.reason}")
        return 0
    if args.targeted and args.tests:
        parser.error("--targeted chooses the tests itself: give --targeted or --tests, not both")
    tests = args.tests or ["properties/"]
    scope = "targeted (the property files importing each mutated module)" if args.targeted else " ".join(tests)
    rows = []
    for m in chosen:
        run_tests = args.tests or list(m.tests) or (targeted_tests(m) if args.targeted else tests)
        outcome, seconds, tail = run(m, run_tests, args.workers, args.timeout)
        print(f"{outcome:<9} {m.name:<34} {seconds:6.1f} s  {m.description}  [{tail}]", flush=True)
        rows.append({"name": m.name, "file": m.file, "description": m.description, "outcome": outcome,
                     "seconds": round(seconds, 1), "detail": tail, "tests": run_tests})
    out = Path(args.out)
    if args.only and out.exists():  # a partial run updates its mutants in the saved set
        ran, saved = {r["name"] for r in rows}, json.loads(out.read_text(encoding="utf-8"))
        kept = [r for r in saved.get("mutants", []) if r.get("name") not in ran and r.get("outcome") != "equivalent"]
        rows = kept + rows
        if kept and saved.get("scope") != scope:
            scope = f"mixed: {saved.get('scope')}; {scope} (each mutant lists its tests)"
    known = {m.name for m in MUTANTS}
    rows = [r for r in rows if r["name"] in known]  # drop mutants no longer in the set
    rows += [{"name": e.mutant.name, "file": e.mutant.file, "description": e.mutant.description,
              "outcome": "equivalent", "detail": e.reason} for e in EQUIVALENT]
    counted = [r for r in rows if r["outcome"] in ("killed", "survived", "timeout")]
    killed = sum(r["outcome"] == "killed" for r in counted)
    print(f"mutants: {killed} of {len(counted)} killed"
          + (f" ({100 * killed / len(counted):.0f}%)" if counted else "")
          + f", {sum(r['outcome'] == 'equivalent' for r in rows)} equivalent, "
          f"{sum(r['outcome'] == 'stale' for r in rows)} stale; tests: {scope}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"scope": scope, "mutants": rows}, indent=1) + "\n", encoding="utf-8")
    if any(r["outcome"] == "stale" for r in rows):
        return 2
    return 0 if killed == len(counted) else 1


if __name__ == "__main__":
    sys.exit(main())
