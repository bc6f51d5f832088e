"""N-dimensional (axial) RoPE: the construction of foundations.txt lines 431-445 and the printed
``NDimensionalRoPE`` of lines 504-560, against impl/rope_nd.py.

The printed class definition executes, but constructing it raises NameError at line 527. To test
what its later lines would compute, line 527's loop (lines 524-528) is executed with the name it
lacks bound, and the class's own ``_build_cache``/``apply``/``rotate_half`` run on an object whose
``__init__`` is skipped.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from claimcheck import claim_assert, control, premise, record, refutes
from claimcheck.plugin import registry
from claimcheck.snippets import SnippetRun, load_snippet, run_snippet
from claimcheck.sources import load_sources
from impl.rope import rope_frequencies, rope_half_split, rope_interleaved
from impl.rope_nd import axial_frequencies, axial_rope, axial_rotation_matrix, kronecker_rotation
from properties.strategies.positional import axial_configurations, vectors

EPS64 = 2.0**-52


@functools.lru_cache(maxsize=1)
def _ndim_rope_class():
    run = run_snippet("rope.snippet-ndimensional-rope")
    assert run.ran, run.describe()
    return run.namespace["NDimensionalRoPE"]


def _frequency_run(base: float, pairs_per_dim: int, n_dims: int, max_pos_per_dim: int = 512,
                   bind_pairs: bool = True) -> SnippetRun:
    """Lines 524-528 executed with ``pairs_per_dim`` (= self.pairs_per_dim, unless ``bind_pairs`` is False, as in the
    printed ``__init__``), ``n_dims`` and the constructor's other arguments (``base``, ``max_pos_per_dim``) bound."""
    names = {"base": base, "n_dims": n_dims, "max_pos_per_dim": max_pos_per_dim}
    if bind_pairs:
        names["pairs_per_dim"] = pairs_per_dim
    return load_snippet("foundations", 524, 528, requires=(SnippetRun("foundations", 0, 0, "", namespace=names),))


def _frequency_loop(base: float, pairs_per_dim: int, n_dims: int,
                    max_pos_per_dim: int = 512) -> tuple[SnippetRun, list[torch.Tensor]]:
    """:func:`_frequency_run` with the name bound, and the frequencies it builds (one tensor per axis)."""
    run = _frequency_run(base, pairs_per_dim, n_dims, max_pos_per_dim)
    assert run.ran, run.describe()
    return run, run.namespace["inv_freq_list"]


def _completed_instance(head_dim: int, n_dims: int, max_pos: int, base: float = 10000.0):
    """An NDimensionalRoPE whose __init__ (which raises at line 527) is replaced by its intended effect."""
    cls = _ndim_rope_class()
    obj = cls.__new__(cls)
    torch.nn.Module.__init__(obj)
    obj.head_dim, obj.n_dims, obj.pairs_per_dim, obj.base = head_dim, n_dims, head_dim // (2 * n_dims), base
    _, freqs = _frequency_loop(base, obj.pairs_per_dim, n_dims)
    obj.register_buffer("inv_freq", torch.cat(freqs))  # line 531
    obj._build_cache(max_pos)  # the printed method
    return obj


def _construct(head_dim: int, n_dims: int, max_pos: int = 8) -> str:
    try:
        _ndim_rope_class()(head_dim, n_dims, max_pos)
    except Exception as exc:  # the snippet's own failure is what is observed
        return f"{type(exc).__name__}: {exc}"
    return "constructed"


def _ceil_half(p: int) -> int:
    return (p + 1) // 2


# --- the axial construction (foundations:431-445) -------------------------------------------------------------

def _axial_rope_with_a_scalar_position(x: torch.Tensor, positions: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Axial RoPE fed a scalar position: every axis's block rotated by the first coordinate m_1."""
    positions = torch.as_tensor(positions)
    return axial_rope(x, positions[..., :1].expand(positions.shape), thetas)


def _kronecker_rope(x: torch.Tensor, positions: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Negative control: x (1, d) rotated by line 435's Kronecker product of the per-axis rotations."""
    return (kronecker_rotation(positions[0], thetas) @ x[0])[None]


def _printed_ndim_rope(x: torch.Tensor, positions: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Negative control: the printed NDimensionalRoPE(head_dim, n_dims, max_pos_per_dim) applied to x (1, d)."""
    n_axes, d = len(thetas), x.shape[-1]
    try:
        rope = _ndim_rope_class()(d, n_axes, 1024)
    except NameError as exc:
        claim_assert(False, "NDimensionalRoPE cannot be constructed", n_dims=n_axes, head_dim=d,
                     error=f"{type(exc).__name__}: {exc}")
    return rope.apply(x[None, None], positions[None].long())[0, 0]


@pytest.mark.claim("rope.ndim-position-vector-definition", "rope.ndim-tensor-product-formula",
                   "rope.ndim-snippet-supports-arbitrary-dims")
@pytest.mark.parametrize("axial,rotation", [
    pytest.param(axial_rope, axial_rotation_matrix, id="impl"),
    pytest.param(_axial_rope_with_a_scalar_position, axial_rotation_matrix, id="scalar-position", marks=control(
        "a scalar position: every axis's block rotated by the first coordinate m_1")),
    pytest.param(_kronecker_rope, kronecker_rotation, id="kronecker-product", marks=control(
        "line 435's Kronecker product of the per-axis rotations", models="rope.ndim-tensor-product-formula")),
    pytest.param(_printed_ndim_rope, axial_rotation_matrix, id="printed-class", marks=control(
        "the printed NDimensionalRoPE, taken to support every n_dims", models="rope.ndim-snippet-supports-arbitrary-dims")),
])
@given(config=axial_configurations(), data=st.data())
def test_axial_rope_logit_depends_on_each_axis_only_through_its_offset(axial, rotation, config, data):
    n_axes, d = config
    thetas = axial_frequencies(d, n_axes)
    q, k = data.draw(vectors(d), label="q"), data.draw(vectors(d), label="k")
    pos = st.lists(st.integers(-500, 500), min_size=n_axes, max_size=n_axes).map(
        lambda v: torch.tensor(v, dtype=torch.float64))
    m, n, shift = data.draw(pos, label="m"), data.draw(pos, label="n"), data.draw(pos, label="shift")
    R = rotation(m, thetas)
    # R^T R: per plane cos^2 + sin^2 of the same computed angle (cos, sin within 1 ulp, squares and sum: ~3.5 eps
    # whatever the angle) and c s - s c = 0 exactly; the other d - 2 terms are exact zeros
    claim_assert(R.shape == (d, d) and (R.T @ R - torch.eye(d, dtype=torch.float64)).abs().max() <= 8 * EPS64,
                 "the axial rotation is not a d x d orthogonal matrix", n_axes=n_axes, d=d, shape=list(R.shape))
    logit = axial(q[None], m[None], thetas)[0] @ axial(k[None], n[None], thetas)[0]
    relative = q @ rotation(n - m, thetas) @ k
    shifted = axial(q[None], (m + shift)[None], thetas)[0] @ axial(k[None], (n + shift)[None], thetas)[0]
    # angles up to 1000 rad carry ~1000 ulp; the d-term inner products add d roundings of |q||k|.
    tol = 8 * EPS64 * (d + 2000) * (q.abs().max().item() * k.abs().max().item() * d + 1e-300)
    claim_assert(abs(logit - relative) <= tol, "<R(m) q, R(n) k> != <q, R(n - m) k> for position vectors",
                 m=m, n=n, n_axes=n_axes)
    claim_assert(abs(logit - shifted) <= tol, "the logit changes under a common shift of the position vectors",
                 m=m, n=n, shift=shift)


@pytest.mark.claim("rope.ndim-tensor-product-formula")
@refutes(reason="three axes of two coordinates each (d_k = 6) is the smallest head where the Kronecker product's size "
                "(d_k/N)^N differs from d_k")
def test_ndim_rope_is_the_kronecker_product_of_per_axis_rotations():
    thetas = axial_frequencies(6, 3)
    kron = kronecker_rotation(torch.tensor([1.0, 2.0, 3.0]), thetas)
    claim_assert(kron.shape == (6, 6), "the tensor product of the per-axis rotations does not act on R^{d_k}",
                 d_k=6, n_axes=3, kronecker_size=list(kron.shape))


@pytest.mark.claim("rope.ndim-tensor-product-formula")
@refutes(reason="two axes of two coordinates (d_k = 4) is the one size where the Kronecker product is d_k x d_k; "
                "there it is still not the axial (direct-sum) rotation")
def test_kronecker_product_equals_the_axial_rotation_at_d_4():
    thetas, m = axial_frequencies(4, 2), torch.tensor([1.0, 2.0])
    kron, axial = kronecker_rotation(m, thetas), axial_rotation_matrix(m, thetas)
    claim_assert(torch.allclose(kron, axial), "the Kronecker product is not the axial rotation", kron=kron, axial=axial)


SCENARIOS = [  # foundations.txt lines 442-445, one row of the table each
    pytest.param("rope.ndim-ddim-text-1", marks=pytest.mark.claim("rope.ndim-ddim-text-1"), id="text"),
    pytest.param("rope.ndim-ddim-image-2", marks=pytest.mark.claim("rope.ndim-ddim-image-2"), id="image"),
    pytest.param("rope.ndim-ddim-video-3", marks=pytest.mark.claim("rope.ndim-ddim-video-3"), id="video"),
    pytest.param("rope.ndim-ddim-spatiotemporal-3", marks=pytest.mark.claim("rope.ndim-ddim-spatiotemporal-3"),
                 id="spatiotemporal"),
]


def _scenario(config: pytest.Config, claim_id: str) -> tuple[int, tuple[int, ...]]:
    """``(D_dim the table states, a grid with one axis per name of its structure column)``, both read from the
    document's table row at the claim's line ("2D 图像<TAB>(高, 宽)<TAB>2"): the test's input is never the claim."""
    claim = registry(config).by_id[claim_id]
    row = load_sources(Path(str(config.rootpath)))[claim.source].lines[claim.line - 1].split("\t")
    premise(len(row) == 3 and row[1].startswith("(") and row[1].endswith(")") and row[2].strip().isdigit(),
            "the claim's line is not a row (scenario, (axes), D_dim) of the table", row=row)
    axes = [a.strip() for a in row[1][1:-1].replace("，", ",").split(",") if a.strip()]
    return int(row[2]), tuple(2 + i for i in range(len(axes)))  # sizes 2, 3, ...: every axis has two or more tokens


def _grid_positions(grid: tuple[int, ...]) -> torch.Tensor:
    """One position vector per token of the grid, one coordinate per axis: (prod(grid), D_dim)."""
    return torch.cartesian_prod(*(torch.arange(s, dtype=torch.float64) for s in grid)).reshape(-1, len(grid))


def _grid_positions_without_the_last_axis(grid: tuple[int, ...]) -> torch.Tensor:
    """One axis too few (video read as images, text with no position): (prod(grid), D_dim - 1)."""
    return _grid_positions(grid)[:, :-1]


@pytest.mark.parametrize("positions_of", [
    pytest.param(_grid_positions, id="per-axis"),
    pytest.param(_grid_positions_without_the_last_axis, id="axis-dropped", marks=control(
        "D_dim one less than the data's axes: the last axis's coordinate dropped")),
])
@pytest.mark.parametrize("claim_id", SCENARIOS)
def test_grid_positions_have_one_coordinate_per_axis_and_axial_rope_is_relative_on_each(claim_id, positions_of,
                                                                                      pytestconfig):
    stated, grid = _scenario(pytestconfig, claim_id)
    n_axes = len(grid)
    claim_assert(stated == n_axes, "the table's D_dim is not the number of axes of its structure column",
                 claim=claim_id, d_dim=stated, axes=n_axes)
    positions = positions_of(grid)
    # every token of the grid (each axis of size >= 2) needs its own position vector
    claim_assert(len({tuple(p) for p in positions.tolist()}) == math.prod(grid),
                 "two tokens of the grid share a position vector", claim=claim_id, shape=list(positions.shape))
    d = 4 * n_axes
    g = torch.Generator().manual_seed(len(grid))
    q, k = torch.randn(d, dtype=torch.float64, generator=g), torch.randn(d, dtype=torch.float64, generator=g)
    thetas = axial_frequencies(d, n_axes)
    rq = axial_rope(q.expand(len(positions), d), positions, thetas)  # one token per grid point
    rk = axial_rope(k.expand(len(positions), d), positions, thetas)
    logits = rq @ rk.T
    offsets = positions[None, :, :] - positions[:, None, :]  # (tokens, tokens, D_dim)
    expected = torch.stack([torch.stack([q @ axial_rotation_matrix(o, thetas) @ k for o in row]) for row in offsets])
    record("D_dim", n_axes)
    claim_assert(positions.shape == (math.prod(grid), n_axes), "a grid position does not have D_dim coordinates",
                 claim=claim_id, shape=list(positions.shape))
    # grid angles are < 4 rad: each rotated coordinate errs by a few eps |v|, a d-term logit by ~d eps |q| |k|
    claim_assert((logits - expected).abs().max() <= 64 * EPS64 * d * q.norm() * k.norm(),
                 "logits are not functions of the per-axis offsets", claim=claim_id)
    if n_axes == 1:  # the same rotation computed twice: two products and a sum per coordinate, a few eps |q|
        claim_assert((rq - rope_interleaved(q.expand(len(positions), d), positions[:, 0], rope_frequencies(d))).abs().max()
                     <= 16 * EPS64 * d * q.abs().max(), "one-axis RoPE is not 1-D RoPE")


@pytest.mark.claim("rope.ndim-snippet-head-dim-split-per-axis")
@given(head_dim=st.integers(1, 24), n_dims=st.integers(1, 4))
def test_printed_assert_and_impl_accept_exactly_head_dims_divisible_by_2_n_dims(head_dim, n_dims):
    outcome = _construct(head_dim, n_dims)
    divisible = head_dim % (2 * n_dims) == 0
    claim_assert(outcome.startswith("AssertionError") == (not divisible),
                 "the printed assert does not reject exactly the head dims not divisible by 2 n_dims",
                 head_dim=head_dim, n_dims=n_dims, outcome=outcome)
    try:
        axial_frequencies(head_dim, n_dims)
        accepted = True
    except ValueError:
        accepted = False
    claim_assert(accepted == divisible, "impl/rope_nd does not enforce head_dim % (2 N) == 0",
                 head_dim=head_dim, n_dims=n_dims)


# --- what the printed NDimensionalRoPE does (foundations:504-560) ---------------------------------------------

@pytest.mark.claim("rope.ndim-snippet-supports-arbitrary-dims")
@refutes(reason="n_dims = 1 with the smallest valid head (head_dim = 2): construction already fails for one axis, "
                "and the failing line does not depend on n_dims")
def test_printed_ndim_rope_can_be_constructed_for_some_n_dims():
    outcomes = {n: _construct(2 * n, n) for n in (1, 2, 3)}
    claim_assert(any(o == "constructed" for o in outcomes.values()),
                 "NDimensionalRoPE(head_dim, n_dims, max_pos) raises for every n_dims", outcomes=outcomes)


@pytest.mark.claim("rope.ndim-snippet-freq-formula-line-527")
@refutes(reason="the smallest valid configuration (head_dim = 2, n_dims = 1); line 527 reads a name that __init__ "
                "never binds, whatever the sizes")
def test_line_527_runs_inside_the_printed_constructor():
    outcome = _construct(2, 1)
    claim_assert(outcome == "constructed", "line 527 raises inside __init__", outcome=outcome)


@pytest.mark.claim("rope.ndim-snippet-freq-formula-line-527")
@pytest.mark.parametrize("bind_pairs", [pytest.param(True, id="name-bound"), pytest.param(
    False, id="as-printed", marks=control("line 527 as printed in __init__, pairs_per_dim never bound, taken to run",
                                          models="rope.ndim-snippet-freq-formula-line-527"))])
@given(p=st.integers(1, 16), base=st.floats(2.0, 1e6))
def test_line_527_with_its_name_bound_computes_base_to_the_minus_j_over_p(bind_pairs, p, base):
    run = _frequency_run(base, p, 1, bind_pairs=bind_pairs)
    claim_assert(run.ran, "line 527 does not run", error=run.describe())
    freqs = run.namespace["inv_freq_list"]
    j = torch.arange(0, p, 2, dtype=torch.float64)
    expected = base ** (-j / p)
    # float32 arithmetic (the printed .float()): a few float32 ulps of the result.
    claim_assert(torch.allclose(freqs[0].double(), expected, rtol=8 * 2.0**-23 * (1 + math.log(base)), atol=0),
                 "line 527 does not compute base^(-j/p), j = 0, 2, ... < p", p=p, base=base, got=freqs[0])


@pytest.mark.claim("rope.ndim-snippet-freqs-per-axis-count", "rope.ndim-snippet-head-dim-split-per-axis")
@refutes(reason="pairs_per_dim = 2 (head_dim = 4, one axis) is the smallest size where arange(0, p, 2) has fewer "
                "than p entries")
def test_each_axis_gets_pairs_per_dim_frequencies():
    p = 2
    _, freqs = _frequency_loop(10000.0, p, 1)
    claim_assert(len(freqs[0]) == p, "an axis gets ceil(p/2) frequencies, not pairs_per_dim", pairs_per_dim=p,
                 frequencies=len(freqs[0]))


@pytest.mark.claim("rope.ndim-snippet-freqs-per-axis-count", "rope.ndim-snippet-head-dim-split-per-axis")
@pytest.mark.parametrize("count", [pytest.param(_ceil_half, id="ceil(p/2)"), pytest.param(
    lambda p: p, id="pairs_per_dim", marks=control("pairs_per_dim frequencies per axis, as the claims have it",
        models=("rope.ndim-snippet-freqs-per-axis-count", "rope.ndim-snippet-head-dim-split-per-axis")))])
@given(config=axial_configurations(max_axes=3, max_pairs_per_axis=8))
@example(config=(1, 4))  # p = 2: ceil(p/2) != p
def test_printed_frequency_loop_gives_ceil_half_frequencies_per_axis_while_impl_gives_one_per_pair(count, config):
    n_dims, head_dim = config
    p = head_dim // (2 * n_dims)
    _, freqs = _frequency_loop(10000.0, p, n_dims)
    claim_assert(len(freqs) == n_dims and all(len(f) == count(p) for f in freqs),
                 "the printed loop does not give ceil(p/2) frequencies per axis", p=p, n_dims=n_dims)
    claim_assert(tuple(axial_frequencies(head_dim, n_dims).shape) == (n_dims, p),
                 "impl/rope_nd does not give one frequency per rotation pair", p=p, n_dims=n_dims)


@pytest.mark.claim("rope.ndim-snippet-comment-formula-not-implemented")
@refutes(reason="two maximum lengths and the smallest head with two frequencies per axis (pairs_per_dim = 3): "
                "the formula's frequency ratio depends on T_max, the code's cannot")
def test_printed_frequencies_follow_2pi_over_t_max_power_formula():
    d_k, p = 6, 3
    ratios = {}
    for t_max in (16, 4096):  # max_pos_per_dim: the only length the class receives, bound for lines 524-528
        _, freqs = _frequency_loop(10000.0, p, 1, max_pos_per_dim=t_max)
        ratios[t_max] = (freqs[0][1] / freqs[0][0]).item()
    formula = {t: t ** (-2 / d_k) for t in ratios}  # theta_1/theta_0 = T_max^{-2/d_k} * lambda_1/lambda_0, lambda fixed
    claim_assert(ratios[16] != ratios[4096] or formula[16] == formula[4096],
                 "the code's frequencies do not change with T_max while the formula's do",
                 code_ratio=ratios, formula_ratio_for_equal_lambdas=formula, code_theta_0=1.0, formula_theta_0="2 pi lambda_0")


def _comment_formula(p: int, base: float) -> torch.Tensor:
    """Negative control: the comment's theta_i = 2 pi / T_max^{2i/d_k} lambda_i (T_max = max_pos_per_dim = 512,
    d_k = 2p, lambda_i = 1), i = 0 .. ceil(p/2) - 1."""
    return 2 * math.pi * 512.0 ** (-2 * torch.arange(_ceil_half(p), dtype=torch.float64) / (2 * p))


@pytest.mark.claim("rope.ndim-snippet-comment-formula-not-implemented")
@pytest.mark.parametrize("expected", [
    pytest.param(lambda p, base: rope_frequencies(2 * p, base)[: _ceil_half(p)] ** 2, id="base^(-j/p)"),
    pytest.param(_comment_formula, id="comment-formula", marks=control(
        "the comment's 2 pi / T_max^{2i/d_k} lambda_i (lambda_i = 1)",
        models="rope.ndim-snippet-comment-formula-not-implemented"))])
@given(p=st.integers(1, 12), base=st.floats(10.0, 1e5))
def test_printed_frequencies_are_the_standard_rope_inverse_frequencies_of_a_2p_block(expected, p, base):
    _, freqs = _frequency_loop(base, p, 1)
    standard = expected(p, base)  # base^{-2i/(2p)} squared = base^{-2i/p}
    claim_assert(torch.allclose(freqs[0].double(), standard, rtol=8 * 2.0**-23 * (1 + math.log(base)), atol=0),
                 "the printed inverse frequencies are not base^{-j/p}: no 2 pi, no T_max, no lambda", p=p, base=base)


@st.composite
def ndim_cache_configs(draw):
    n_dims, head_dim = draw(axial_configurations(max_axes=3, max_pairs_per_axis=4), label="axial")
    max_pos = draw(st.integers(2, 12), label="max_pos")
    return head_dim, n_dims, max_pos


def _cache_shapes(head_dim: int, n_dims: int, max_pos: int) -> dict[str, tuple[int, ...]]:
    """The shapes lines 539-542 give: freqs (max_pos, W), emb (max_pos, 2 W), cos_cached (1, 1, max_pos, 2 W),
    W = len(inv_freq) = n_dims ceil(p/2)."""
    width = n_dims * _ceil_half(head_dim // (2 * n_dims))
    return {"freqs": (max_pos, width), "emb": (max_pos, 2 * width), "cos_cached": (1, 1, max_pos, 2 * width)}


def _commented(name: str, shape):
    """Negative control: the shapes with ``name``'s replaced by the comment's ``shape(head_dim, n_dims, max_pos)``."""
    def shapes(head_dim: int, n_dims: int, max_pos: int) -> dict[str, tuple[int, ...]]:
        return {**_cache_shapes(head_dim, n_dims, max_pos), name: shape(head_dim, n_dims, max_pos)}
    return shapes


@pytest.mark.claim("rope.ndim-snippet-cache-shape-comment", "rope.ndim-snippet-einsum-shape-comment",
                   "rope.ndim-snippet-emb-shape-comment")
@pytest.mark.parametrize("shapes", [
    pytest.param(_cache_shapes, id="two-dimensional"),
    pytest.param(_commented("cos_cached", lambda hd, n, t: (n, t, hd // 2)), id="cache-comment", marks=control(
        "the cache comment's (n_dims, max_pos, head_dim/2)", models="rope.ndim-snippet-cache-shape-comment")),
    pytest.param(_commented("freqs", lambda hd, n, t: (n, t, hd // (2 * n))), id="einsum-comment", marks=control(
        "the einsum comment's (n_dims, max_pos, pairs_per_dim)", models="rope.ndim-snippet-einsum-shape-comment")),
    pytest.param(_commented("emb", lambda hd, n, t: (n, t, hd // n)), id="emb-comment", marks=control(
        "the emb comment's (n_dims, max_pos, head_dim/n_dims)", models="rope.ndim-snippet-emb-shape-comment")),
])
@given(config=ndim_cache_configs())
def test_printed_cache_shapes_are_two_dimensional_with_no_axis_dimension(shapes, config):
    head_dim, n_dims, max_pos = config
    obj = _completed_instance(head_dim, n_dims, max_pos)
    expected = shapes(head_dim, n_dims, max_pos)
    freqs = torch.einsum("d,p->dp", torch.arange(max_pos).float(), obj.inv_freq)  # line 539's expression
    claim_assert(tuple(freqs.shape) == expected["freqs"], "freqs is not (max_pos, len(inv_freq))",
                 shape=list(freqs.shape), expected=expected["freqs"])
    emb_shape = tuple(obj.cos_cached.shape[2:])  # cos_cached = emb.cos() unsqueezed twice (line 542)
    claim_assert(emb_shape == expected["emb"], "emb is not (max_pos, 2 len(inv_freq))", shape=list(emb_shape),
                 expected=expected["emb"])
    claim_assert(tuple(obj.cos_cached.shape) == expected["cos_cached"],
                 "cos_cached is not (1, 1, max_pos, 2 len(inv_freq))", shape=list(obj.cos_cached.shape),
                 expected=expected["cos_cached"])


@pytest.mark.claim("rope.ndim-snippet-cache-shape-comment")
@refutes(reason="two axes, one pair each (head_dim = 4), max_pos = 3: the smallest multi-axis cache")
def test_printed_cache_has_shape_n_dims_max_pos_half_head_dim():
    obj = _completed_instance(4, 2, 3)
    claim_assert(tuple(obj.cos_cached.shape[-3:]) == (2, 3, 2) and obj.cos_cached.dim() == 3 + 2,
                 "the cache is not (n_dims, max_pos, head_dim/2) (behind the two unsqueezes)",
                 cos_cached_shape=list(obj.cos_cached.shape), comment="(n_dims, max_pos, head_dim/2) = (2, 3, 2)")


@pytest.mark.claim("rope.ndim-snippet-einsum-shape-comment")
@refutes(reason="two axes, one pair each (head_dim = 4), max_pos = 3: the smallest multi-axis case")
def test_printed_einsum_has_shape_n_dims_max_pos_pairs_per_dim():
    obj = _completed_instance(4, 2, 3)
    freqs = torch.einsum("d,p->dp", torch.arange(3).float(), obj.inv_freq)  # line 539
    claim_assert(tuple(freqs.shape) == (2, 3, 1), "einsum('d,p->dp', ...) is not (n_dims, max_pos, pairs_per_dim)",
                 shape=list(freqs.shape), comment="(n_dims, max_pos, pairs_per_dim) = (2, 3, 1)")


@pytest.mark.claim("rope.ndim-snippet-emb-shape-comment")
@refutes(reason="two axes, one pair each (head_dim = 4), max_pos = 3: the smallest multi-axis case")
def test_printed_emb_has_shape_n_dims_max_pos_head_dim_over_n_dims():
    obj = _completed_instance(4, 2, 3)
    emb_shape = tuple(obj.cos_cached.shape[2:])  # cos_cached = emb.cos() unsqueezed twice (line 542)
    claim_assert(emb_shape == (2, 3, 2), "emb is not (n_dims, max_pos, head_dim/n_dims)", shape=list(emb_shape),
                 comment="(n_dims, max_pos, head_dim/n_dims) = (2, 3, 2)")


def _printed_rotate_half(x: torch.Tensor) -> torch.Tensor:
    return _ndim_rope_class().rotate_half(x)


def _rotate_half_other_sign(x: torch.Tensor) -> torch.Tensor:
    """cat([x2, -x1]): rotate_half with the other sign."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x2, -x1], dim=-1)


@pytest.mark.claim("rope.ndim-snippet-rotate-half")
@pytest.mark.parametrize("rotate_half", [
    pytest.param(_printed_rotate_half, id="printed"),
    pytest.param(_rotate_half_other_sign, id="other-sign", marks=control(
        "rotate_half with the other sign, cat([x2, -x1]): the clockwise rotation")),
])
@given(half=st.integers(1, 8), t=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
@example(half=1, t=3, seed=0)  # positions 1 and 2 have non-zero sines
def test_printed_rotate_half_with_duplicated_cos_sin_is_half_split_rope(rotate_half, half, t, seed):
    d = 2 * half
    x = torch.randn(2, t, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    theta, pos = rope_frequencies(d), torch.arange(t, dtype=torch.float64)
    angles = pos[:, None] * theta
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    rotated = x * cos + rotate_half(x) * sin  # line 560's expression with a full-width cache
    # same products in another order; cos/sin of angles up to t rad carry ~t eps: 16 eps (d + t) max|x| bounds both
    claim_assert((rotated - rope_half_split(x, pos, theta)).abs().max() <= 16 * EPS64 * (d + t) * x.abs().max(),
                 "x cos + rotate_half(x) sin does not rotate the pairs (x_j, x_{j+d/2})", d=d, t=t)


def _apply_outcome(obj, x, positions) -> str:
    try:
        out = obj.apply(x, positions)
    except RuntimeError as exc:
        return f"RuntimeError: {str(exc).splitlines()[0]}"
    return f"returned shape {list(out.shape)}"


@pytest.mark.claim("rope.ndim-snippet-apply-shape-comment")
@refutes(reason="two axes, one pair each (head_dim = 4), batch 2, 3 heads, 5 tokens: the smallest case where "
                "B, H, T and n_dims are all distinct, so no dimension can be mistaken for another")
def test_printed_cache_lookup_has_shape_b_h_t_n_dims_head_dim_over_n_dims():
    b, h, t, n_dims, head_dim = 2, 3, 5, 2, 4
    obj = _completed_instance(head_dim, n_dims, 8)
    positions = torch.zeros(b, t, n_dims, dtype=torch.long)
    cos = obj.cos_cached[:, :, positions]  # line 557
    claim_assert(tuple(cos.shape) == (b, h, t, n_dims, head_dim // n_dims),
                 "cos_cached[:, :, positions] is not (B, H, T, n_dims, head_dim/n_dims)", shape=list(cos.shape),
                 comment=[b, h, t, n_dims, head_dim // n_dims])


@pytest.mark.claim("rope.ndim-snippet-apply-shape-comment", "rope.ndim-snippet-apply-returns-rotation")
@pytest.mark.parametrize("lookup_shape", [
    pytest.param(lambda b, h, t, n_dims, width, head_dim: (1, 1, b, t, n_dims, width), id="index-prepended"),
    pytest.param(lambda b, h, t, n_dims, width, head_dim: (b, h, t, n_dims, head_dim // n_dims), id="comment",
                 marks=control("the comment's (B, H, T, n_dims, head_dim/n_dims)",
                               models="rope.ndim-snippet-apply-shape-comment"))])
@given(config=ndim_cache_configs(), b=st.integers(1, 3), h=st.integers(1, 3), t=st.integers(1, 4))
def test_printed_cache_lookup_prepends_the_index_shape_and_never_rotates_like_rope(lookup_shape, config, b, h, t):
    head_dim, n_dims, max_pos = config
    obj = _completed_instance(head_dim, n_dims, max_pos)
    positions = torch.randint(0, max_pos, (b, t, n_dims), generator=torch.Generator().manual_seed(b * t))
    width = obj.cos_cached.shape[-1]
    claim_assert(tuple(obj.cos_cached[:, :, positions].shape) == lookup_shape(b, h, t, n_dims, width, head_dim),
                 "cos_cached[:, :, positions] is not (1, 1, B, T, n_dims, W)")
    x = torch.randn(b, h, t, head_dim, generator=torch.Generator().manual_seed(t))
    outcome = _apply_outcome(obj, x, positions)
    if outcome.startswith("returned"):  # broadcasting happened to succeed: the result is not x's RoPE
        out = obj.apply(x, positions)
        claim_assert(out.shape != x.shape, "apply returned a tensor of x's shape", outcome=outcome)


@pytest.mark.claim("rope.ndim-snippet-apply-returns-rotation")
@refutes(reason="the same smallest fully distinct sizes as for the shape comment: B = 2, H = 3, T = 5, two axes, "
                "head_dim = 4")
def test_printed_apply_returns_a_rotation_of_x_shape():
    b, h, t, n_dims, head_dim = 2, 3, 5, 2, 4
    obj = _completed_instance(head_dim, n_dims, 8)
    x = torch.randn(b, h, t, head_dim, generator=torch.Generator().manual_seed(0))
    positions = torch.randint(0, 8, (b, t, n_dims), generator=torch.Generator().manual_seed(1))
    outcome = _apply_outcome(obj, x, positions)
    claim_assert(outcome == f"returned shape {[b, h, t, head_dim]}", "apply(x, positions) does not return x's rotation",
                 outcome=outcome)


def _printed_apply(x: torch.Tensor, positions: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Negative control: the printed apply(x, positions) (B, H, T, head_dim), (B, T, n_dims), on an instance
    completed past line 527."""
    obj = _completed_instance(x.shape[-1], len(thetas), 50)
    try:
        return obj.apply(x, positions[:, 0].long())
    except RuntimeError as exc:
        claim_assert(False, "apply(x, positions) raises", error=f"RuntimeError: {str(exc).splitlines()[0]}")


@pytest.mark.claim("rope.ndim-snippet-apply-returns-rotation")
@pytest.mark.parametrize("rope", [pytest.param(axial_rope, id="impl"), pytest.param(
    _printed_apply, id="printed-apply", marks=control("the printed apply in place of impl/rope_nd.axial_rope",
                                                      models="rope.ndim-snippet-apply-returns-rotation"))])
@given(config=axial_configurations(), t=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_impl_axial_rope_returns_x_shape_and_preserves_norms(rope, config, t, seed):
    n_axes, d = config
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, t, d, dtype=torch.float64, generator=g)
    positions = torch.randint(0, 50, (2, 3, t, n_axes), generator=g).double()
    out = rope(x, positions, axial_frequencies(d, n_axes))
    claim_assert(out.shape == x.shape, "axial RoPE changed the shape", shape=list(out.shape))
    # angles up to 50 rad (~50 eps each) and a d-term norm: 32 eps (d + 100) max|x| bounds the rounding of |R x| - |x|
    claim_assert((out.norm(dim=-1) - x.norm(dim=-1)).abs().max() <= 32 * EPS64 * (d + 100) * x.abs().max(),
                 "axial RoPE changed a norm")
