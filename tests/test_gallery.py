"""The gallery of real kernels (``impl/gallery.py``) and the calling conventions ``claims kernel`` applies
around a function (``claimcheck/conventions.py``): each gallery kernel passes under its own declaration,
each convention is applied as declared, a wrong declaration is rejected and named, and the README shows
a one-line check of every gallery kernel.

The gallery is checked at the smoke tier in float32 with one drawn problem a case (the README's lines
run the default tier, ci); a compiled kernel (FlexAttention) on one fixed problem, each new shape being a
CPU compile. transformers' adapters skip, saying so, when the optional package is absent.
"""
import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from claimcheck import conventions, kernel
from claimcheck.cli import main
from impl import gallery
from impl.attention import Mask, attention

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ["--tier", "smoke", "--dtype", "float32", "--examples", "1"]
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
NEEDS_TRANSFORMERS = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed (an optional "
                                        "extra: pip install 'transformer-claims[transformers]')")
ONE_PROBLEM = "B=1,H_q=4,H_kv=2,n_q=9,n_k=20,d_k=16,d_v=16,seed=1000,logit_scale=1.0"  # gqa-4/2


def _run(capsys, *argv) -> tuple[int, str]:
    code = main(["kernel", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def _record(name: str, argv: list[str], code: int, out: str) -> None:
    """The verdict of one gallery line, for the report's backends section (``results/kernel-gallery/``, one
    file a line: pytest-xdist workers write apart)."""
    summary = re.search(r"claims kernel: (\d+ of \d+ cases passed[^\n]*)", out)
    diagnosis = re.search(r"the output matches: ([^\n]*)", out)
    folder = ROOT / "results" / "kernel-gallery"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name).strip('-')}.json").write_text(json.dumps({
        "kernel": name, "command": "claims kernel " + " ".join(argv), "accepted": code == 0,
        "summary": summary.group(1) if summary else out.strip().splitlines()[-1][:200],
        "diagnosis": diagnosis.group(1) if diagnosis else None}, indent=1) + "\n")


def _marks(name: str):
    return [NEEDS_TRANSFORMERS] if name.startswith("transformers") else []


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in gallery.GALLERY if n not in gallery.COMPILED])
def test_every_gallery_kernel_passes_under_its_own_declaration(name, capsys):
    code, out = _run(capsys, f"impl.gallery:{name}", *SMOKE)
    _record(name, [f"impl.gallery:{name}", *SMOKE], code, out)
    assert code == 0 and "FAIL" not in out and "ERROR" not in out, out
    assert re.search(r"ok +float32-key-padding", out) and re.search(r"ok +float32-fully-masked", out), out


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in gallery.COMPILED])
def test_every_compiled_gallery_kernel_passes_one_problem_of_each_structure(name, capsys):
    for mask in ("causal-bottom-right", "key-padding"):
        argv = [f"impl.gallery:{name}", "--dtype", "float32", "--mask", mask, "--problem", ONE_PROBLEM]
        code, out = _run(capsys, *argv)
        _record(f"{name} ({mask})", argv, code, out)
        assert code == 0 and "1 of 1 cases passed" in out, out


@pytest.mark.parametrize("function", [pytest.param("impl.gallery:transformers_sdpa", marks=NEEDS_TRANSFORMERS),
                                      "tests.kernel_zoo:causal_dropped_for_one_query"])
def test_transformers_sdpa_declared_top_left_is_reported_as_bottom_right_causal(function, capsys):
    """The mismatch transformers users meet: with the top-left causal of SDPA's ``is_causal`` declared, the
    single query of the ``decode`` problem sees every key (bottom-right); the verdict says so. Without
    transformers, the zoo's kernel that drops causality for one query has the same convention."""
    argv = [function, "--causal", "top-left", "--no-key-padding", "--no-bias", "--dtype", "float32", "--mask",
            "causal-top-left", "--examples", "0"]
    code, out = _run(capsys, *argv)
    if function.startswith("impl.gallery:"):
        _record("transformers_sdpa declared top-left", argv, code, out)
    assert code == 1 and "decode:out" in out, out
    assert "the output matches: bottom-right causal alignment (declared top-left)" in out, out
    code, out = _run(capsys, function, "--causal", "bottom-right", "--no-key-padding", "--no-bias", "--dtype", "float32",
                     "--mask", "causal-bottom-right", "--examples", "0")
    assert code == 0, out  # transformers' own alignment


# ---- the conventions, one at a time ---------------------------------------------------------------


def bshd_attention(q, k, v, scale=None, mask=None):
    """The reference in the (B, n, H, d) layout of flash-attn."""
    return attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale, mask).transpose(1, 2)


def padding_true_means_ignore(q, k, v, scale=None, mask=None):
    if mask is not None and mask.key_padding is not None:
        mask = Mask(mask.causal, ~mask.key_padding, mask.bias)
    return attention(q, k, v, scale, mask)


def out_and_lse(q, k, v, scale=None, mask=None):
    return attention(q, k, v, scale, mask, return_lse=True)


def lse_and_out(q, k, v, scale=None, mask=None):
    out, lse = attention(q, k, v, scale, mask, return_lse=True)
    return lse, out


@pytest.mark.parametrize("function,options", [
    ("bshd_attention", ["--layout", "bshd"]),
    ("padding_true_means_ignore", ["--padding", "true-means-ignore"]),
    ("out_and_lse", ["--output-index", "0"]),
    ("lse_and_out", ["--output-index", "1"]),
])
def test_a_declared_convention_is_applied_around_the_function_and_the_undeclared_one_is_rejected(function, options,
                                                                                                 capsys):
    narrow = [*SMOKE, "--mask", "none", "--mask", "key-padding", "--examples", "0", "--backward"]
    code, out = _run(capsys, f"tests.test_gallery:{function}", *narrow, *options)
    assert code == 0, out
    code, out = _run(capsys, f"tests.test_gallery:{function}", *narrow)
    assert code == 1 and f"the output matches: the reference when called with" in out and " ".join(options) in out, out


def test_the_capability_line_says_every_convention_and_whether_it_was_declared(capsys):
    code, out = _run(capsys, "impl.gallery:multihead_attention", *SMOKE, "--mask", "none")
    assert code == 0, out
    assert ("layout bshd; key padding True = ignore; output element 0 of a tuple; non-contiguous q, k, v checked"
            in out), out
    code, out = _run(capsys, "impl.attention:attention", *SMOKE, "--mask", "none")
    assert "layout bhsd (not declared: the contract's); key padding True = attend (not declared: the contract's)" in out


def test_a_layout_transposes_in_and_out_keeping_contiguity_as_given():
    x = torch.randn(2, 3, 5, 4)
    assert conventions.to_other_layout(x).shape == (2, 5, 3, 4) and conventions.to_other_layout(x).is_contiguous()
    for strides in conventions.STRIDES:
        views = conventions.strided_views(x, x.clone(), x.clone(), strides) if strides == "bshd" else \
            conventions.strided_views(x, x + 1, x + 2, strides)
        # the last dim contiguous but for the head-dim layout, whose point is its stride
        assert all(not t.is_contiguous() and (t.stride(-1) == 1) == (strides != "head-dim") for t in views)
        assert torch.equal(views[0], x)
        assert not conventions.to_other_layout(views[0]).is_contiguous()  # non-contiguous for the kernel too


def test_the_repro_of_a_failure_carries_the_declared_conventions(capsys):
    code, out = _run(capsys, "tests.kernel_zoo:gqa_modulo", *SMOKE, "--mask", "none", "--layout", "bhsd",
                     "--padding", "true-means-ignore", "--output-index", "0")
    assert code == 1, out  # it returns a tensor, not a tuple: an error, and the repro says how it was called
    assert "--padding true-means-ignore --output-index 0" in re.search(r"repro: (.*)", out).group(1), out


@pytest.mark.parametrize("argv,needle", [
    (["--layout", "bsdh"], "invalid choice: 'bsdh'"),
    (["--padding", "yes"], "invalid choice: 'yes'"),
    (["--output-index", "-1"], "output=-1: expected the index (0, 1, ...)"),
])
def test_bad_convention_values_exit_2_saying_why(argv, needle, capsys):
    try:
        code, out = _run(capsys, "impl.attention:attention", *SMOKE, *argv)
    except SystemExit as exc:  # argparse's own refusal of a value outside the choices
        code, out = exc.code, capsys.readouterr().err
    assert code == 2 and needle in out, out


@pytest.mark.parametrize("caps,needle", [
    ({"layout": "BSHD"}, "layout='BSHD': expected one of bhsd, bshd"),
    ({"out_layout": "sbhd"}, "out_layout='sbhd'"),
    ({"padding": True}, "padding=True: expected true-means-keep"),
    ({"output": "0"}, "output='0': expected the index"),
    ({"strided": "no"}, "strided='no': expected True"),
])
def test_bad_convention_declarations_are_refused_naming_the_value(caps, needle):
    def fn(q, k, v, scale=None, mask=None):
        return attention(q, k, v, scale, mask)

    fn.claims_capabilities = caps
    with pytest.raises(ValueError, match=re.escape(needle)):
        kernel.declared_backend(fn, "fn")


# ---- the README ------------------------------------------------------------------------------------


def test_the_readme_shows_a_one_line_check_of_every_gallery_kernel():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### A gallery of real kernels")[1].split("\n## ")[0].split("\n### ")[0]
    shown = set(re.findall(r"claims kernel impl\.gallery:(\w+)", section))
    assert shown == set(gallery.GALLERY), shown ^ set(gallery.GALLERY)
    assert "--causal top-left" in section and "bottom-right causal alignment (declared top-left)" in section
