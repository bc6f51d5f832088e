"""RoPE: rotations, the relative-position identity, the two conventions and the complex form.

foundations.txt lines 226-270 (definition and the printed ``apply_rotary_pos_emb``) and 399-487 (the
group-theoretic restatement and the four-step proof); index.txt line 88 (the rotated components).
Identities are proved with sympy on symbolic blocks and checked numerically on impl/rope.py.
"""
from __future__ import annotations

import functools
import math
import random

import pytest
import sympy as sp
import torch
import torch.utils._pytree
from hypothesis import example, given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from claimcheck import claim_assert, control, refutes
from claimcheck.snippets import run_snippet
from impl.rope import (interleaved_to_half_split, plane_rotation, rope_complex, rope_frequencies, rope_half_split,
                       rope_interleaved, rotate_half, rotation_matrix)
from impl.sinusoidal import sinusoidal_encoding
from properties.strategies.positional import (even_head_dims, frequency_vectors, head_vectors_and_frequencies,
                                              integer_positions, odd_head_dims, vectors)

EPS64 = 2.0**-52


class _Drawn:
    """Stands in for ``st.data()`` in an ``@example``: ``draw(strategy, label)`` returns the value given for label."""

    def __init__(self, **values: torch.Tensor):
        self.values = values

    def draw(self, strategy, label: str):
        return self.values[label]

    def __repr__(self) -> str:
        return f"_Drawn({', '.join(f'{k}={v.tolist()}' for k, v in self.values.items())})"


def _f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# an explicit example for the tests drawing (d, q, k, theta): two planes, generic vectors, distinct frequencies
QKT_4 = (4, _f64(1.0, 2.0, -0.5, 0.25), _f64(-1.5, 0.5, 2.0, 1.0), _f64(1.0, 0.3))


def _rot(phi):
    """The 2x2 block of foundations.txt line 240, symbolically."""
    return sp.Matrix([[sp.cos(phi), -sp.sin(phi)], [sp.sin(phi), sp.cos(phi)]])


def _rot_clockwise(phi):
    """A wrong variant of line 240's block: its transpose, the clockwise rotation."""
    return sp.Matrix([[sp.cos(phi), sp.sin(phi)], [-sp.sin(phi), sp.cos(phi)]])


def _reflection(phi):
    """A wrong variant of line 240's block: [[cos, sin], [sin, -cos]], orthogonal but a reflection (det -1)."""
    return sp.Matrix([[sp.cos(phi), sp.sin(phi)], [sp.sin(phi), -sp.cos(phi)]])


def _block_rot(m, thetas, rot=_rot):
    """R_Theta(m) of line 252 with symbolic frequencies: block_diag of rot(m theta_i)."""
    return sp.diag(*[rot(m * t) for t in thetas])


def _zero(expr) -> bool:
    return sp.simplify(sp.expand_trig(sp.expand(expr))) == 0


def _norm_bound(v: torch.Tensor) -> float:
    """sqrt(n) max|v_i| >= |v|, without the underflow of squaring tiny entries."""
    return v.abs().max().item() * v.numel() ** 0.5


def _logit_tolerance(q: torch.Tensor, k: torch.Tensor, max_angle: float) -> float:
    # Each rotated coordinate inherits the rounding of its angle (|angle| eps) and of two products; the
    # d-term inner product adds d roundings: bound 4 eps |q| |k| (d + |angle|), plus subnormal spacings (2^-1074)
    # for results below 2^-1022, which lose their relative precision: a rotated subnormal coordinate is off by
    # ~1.5 spacings, which the dot product multiplies by the other vector's entries, and each product adds one.
    floor = 2 * q.numel() * 2.0**-1074 * (1 + q.abs().max().item() + k.abs().max().item())
    return 4 * EPS64 * _norm_bound(q) * _norm_bound(k) * (q.numel() + max_angle) + floor


def _rope(v: torch.Tensor, m: float, theta: torch.Tensor, impl=rope_interleaved) -> torch.Tensor:
    """RoPE of one vector (d,) at position m, interleaved convention (``impl``: the (..., T, d) rotation)."""
    return impl(v[None], torch.tensor([float(m)]), theta)[0]


# --- wrong variants for the negative controls: each is the claim's formula with one plausible bug --------------

def _rope_clockwise(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Every pair turned by -m theta_i: the clockwise rotation."""
    return rope_interleaved(x, -torch.as_tensor(positions), theta)


def _rope_complex_conjugate(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """The complex form multiplied by e^{-i m theta_i} instead of e^{i m theta_i}."""
    return rope_complex(x, -torch.as_tensor(positions), theta)


def _adds_absolute_code(v: torch.Tensor, m: float, theta: torch.Tensor) -> torch.Tensor:
    """f(x, m) = x + PE_m: the sinusoidal code of the absolute position added instead of a rotation."""
    return v + sinusoidal_encoding(torch.tensor(float(m)), v.shape[-1])


def _reflection_matrix(position, theta: torch.Tensor) -> torch.Tensor:
    """R_Theta(m) with every block [[cos, sin], [sin, -cos]]: orthogonal, but a reflection (det -1 per block)."""
    a = torch.as_tensor(position, dtype=theta.dtype) * theta
    c, s = torch.cos(a), torch.sin(a)
    return torch.block_diag(*torch.stack([torch.stack([c, s], -1), torch.stack([s, -c], -1)], -2))


def _half_split_rotation_matrix(position, theta: torch.Tensor) -> torch.Tensor:
    """R_Theta(m) with its blocks on the half-split pairs (i, i + d/2) instead of the adjacent (2i, 2i+1)."""
    perm = interleaved_to_half_split(2 * len(theta))
    return rotation_matrix(position, theta)[perm][:, perm]


# --- the 2x2 rotation (foundations:240, :634; index:88) -------------------------------------------------------

@pytest.mark.claim("rope.rotation-matrix-2d-definition", "rope.rope-circuit-block-rotation-sign")
@pytest.mark.parametrize("rot", [
    pytest.param(_rot, id="printed"),
    pytest.param(_rot_clockwise, id="clockwise", marks=control(
        "the clockwise block [[cos, sin], [-sin, cos]] (the printed one transposed): orthogonal, det 1, a group")),
])
def test_the_2x2_block_is_the_counterclockwise_rotation_by_m_theta_symbolically(rot):
    a, b = sp.symbols("a b", real=True)
    r = rot(a)
    claim_assert(all(_zero(e) for e in r.T * r - sp.eye(2)), "R^T R != I")
    claim_assert(_zero(r.det() - 1), "det R != 1")
    claim_assert(all(_zero(e) for e in rot(a) * rot(b) - rot(a + b)), "R(a) R(b) != R(a + b)")
    # counter-clockwise: e_1 goes to (cos a, sin a)
    claim_assert(list(r * sp.Matrix([1, 0])) == [sp.cos(a), sp.sin(a)], "R does not rotate e_1 counter-clockwise")


def _index_components(q0, q1, phi):
    """index.txt line 88: (q~_2i, q~_2i+1) = (q_2i cos - q_2i+1 sin, q_2i sin + q_2i+1 cos)."""
    return q0 * sp.cos(phi) - q1 * sp.sin(phi), q0 * sp.sin(phi) + q1 * sp.cos(phi)


def _index_components_even_sign_flipped(q0, q1, phi):
    return q0 * sp.cos(phi) + q1 * sp.sin(phi), q0 * sp.sin(phi) + q1 * sp.cos(phi)


def _index_components_odd_sign_flipped(q0, q1, phi):
    return q0 * sp.cos(phi) - q1 * sp.sin(phi), -q0 * sp.sin(phi) + q1 * sp.cos(phi)


@pytest.mark.claim("rope.index-rotation-even-component", "rope.index-rotation-odd-component")
@pytest.mark.parametrize("components", [
    pytest.param(_index_components, id="printed"),
    pytest.param(_index_components_even_sign_flipped, id="even-sine-sign", marks=control(
        "the even component with the sine's other sign, q_2i cos + q_2i+1 sin")),
    pytest.param(_index_components_odd_sign_flipped, id="odd-sine-sign", marks=control(
        "the odd component with the sine's other sign, -q_2i sin + q_2i+1 cos")),
])
def test_index_rotated_components_are_the_2x2_rotation_symbolically(components):
    q0, q1, phi = sp.symbols("q_2i q_2i+1 phi", real=True)
    even, odd = components(q0, q1, phi)
    rotated = _rot(phi) * sp.Matrix([q0, q1])
    claim_assert(_zero(even - rotated[0]), "the even component is not the first row of R(m theta_i)")
    claim_assert(_zero(odd - rotated[1]), "the odd component is not the second row of R(m theta_i)")


@pytest.mark.claim("rope.index-rotation-even-component", "rope.index-rotation-odd-component",
                   "rope.rotation-matrix-2d-definition")
@pytest.mark.parametrize("rope", [
    pytest.param(rope_interleaved, id="impl"),
    pytest.param(_rope_clockwise, id="clockwise", marks=control("each pair turned by -m theta_i (clockwise)")),
])
@given(d=even_head_dims(), data=st.data(), m=integer_positions())
@example(d=4, data=_Drawn(q=_f64(1.0, 2.0, -0.5, 0.25)), m=3)
def test_index_component_formulas_match_the_implementation(rope, d, data, m):
    q = data.draw(vectors(d), label="q")
    theta = rope_frequencies(d)
    out = _rope(q, m, theta, rope)
    phi = m * theta
    even = q[0::2] * torch.cos(phi) - q[1::2] * torch.sin(phi)
    odd = q[0::2] * torch.sin(phi) + q[1::2] * torch.cos(phi)
    tol = _logit_tolerance(q, torch.ones(1), abs(m))
    claim_assert((out[0::2] - even).abs().max() <= tol and (out[1::2] - odd).abs().max() <= tol,
                 "RoPE output differs from index.txt line 88", q=q, m=m)


# --- relative position (foundations:232, :244, :413-419, :473-477) -------------------------------------------

@pytest.mark.claim("rope.2d-relative-identity-rm-rn", "rope.relative-logit-q-rnm-k", "rope.proof-step2-logit-q-rnm-k",
                   "rope.relative-invariance-rm-transpose-rn", "rope.transpose-equals-negative-position",
                   "rope.proof-rm-transpose-rn-chain")
@pytest.mark.parametrize("rot, offset", [
    pytest.param(_rot, lambda m, n: n - m, id="printed"),
    pytest.param(_rot, lambda m, n: m - n, id="offset-sign", marks=control(
        "the offset with the other sign: R(m - n) where the claims have R(n - m)")),
    pytest.param(_reflection, lambda m, n: n - m, id="reflection", marks=control(
        "blocks [[cos, sin], [sin, -cos]]: orthogonal reflections (det -1), not rotations")),
])
def test_relative_identities_hold_symbolically_for_two_planes(rot, offset):
    m, n = sp.symbols("m n", real=True)
    t1, t2 = sp.symbols("theta_1 theta_2", positive=True)
    q = sp.Matrix(sp.symbols("q0:4", real=True))
    k = sp.Matrix(sp.symbols("k0:4", real=True))
    R = functools.partial(_block_rot, thetas=(t1, t2), rot=rot)
    delta = offset(m, n)  # n - m
    claim_assert(all(_zero(e) for e in R(m).T - R(-m)), "R(m)^T != R(-m) (line 415)")
    claim_assert(all(_zero(e) for e in R(-m) * R(n) - R(delta)), "R(-m) R(n) != R(n - m) (line 417)")
    claim_assert(all(_zero(e) for e in R(m).T * R(n) - R(delta)), "R(m)^T R(n) != R(n - m) (line 413)")
    logit = (R(m) * q).dot(R(n) * k)
    claim_assert(_zero(logit - q.dot(R(delta) * k)), "<R(m) q, R(n) k> != <q, R(n - m) k> (lines 419, 477)")
    claim_assert(_zero(logit - (R(-delta) * q).dot(k)), "<R_m q, R_n k> != <R_{m-n} q, k> (line 244)")


@pytest.mark.claim("rope.2d-relative-identity-rm-rn", "rope.relative-logit-q-rnm-k", "rope.proof-step1-logit-definition",
                   "rope.proof-step2-logit-q-rnm-k", "rope.design-goal-relative-inner-product")
@pytest.mark.parametrize("f", [
    pytest.param(_rope, id="rope"),
    pytest.param(_adds_absolute_code, id="additive", marks=control(
        "f(x, m) = x + PE_m, the absolute sinusoidal code added instead of the rotation R_m")),
])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions(), n=integer_positions(), shift=integer_positions())
@example(qkt=QKT_4, m=2, n=5, shift=3)
def test_rope_logit_depends_only_on_the_offset(f, qkt, m, n, shift):
    d, q, k, theta = qkt
    logit = f(q, m, theta) @ f(k, n, theta)  # l_{m,n} = <R(m) q, R(n) k> (line 473)
    relative = q @ (rotation_matrix(n - m, theta) @ k)  # <q, R(n - m) k> (line 419)
    shifted = f(q, m + shift, theta) @ f(k, n + shift, theta)  # g(x_m, x_n, m - n) (line 232)
    angle = 2.0 * (max(abs(m), abs(n)) + abs(shift)) * theta.max().item()
    tol = _logit_tolerance(q, k, angle)
    claim_assert(abs(logit - relative) <= tol, "<R(m) q, R(n) k> != <q, R(n-m) k>", q=q, k=k, theta=theta, m=m, n=n)
    claim_assert(abs(logit - shifted) <= tol, "the logit changes under a common shift", m=m, n=n, shift=shift)


@pytest.mark.claim("rope.relative-invariance-rm-transpose-rn", "rope.transpose-equals-negative-position",
                   "rope.proof-rm-transpose-rn-chain", "rope.plane-rotation-unitary-representation",
                   "rope.rotation-operator-in-so-dk")
@pytest.mark.parametrize("rotation", [
    pytest.param(rotation_matrix, id="impl"),
    pytest.param(_reflection_matrix, id="reflection", marks=control(
        "blocks [[cos, sin], [sin, -cos]]: orthogonal reflections (det -1), not rotations")),
])
@given(d=even_head_dims(), data=st.data(), m=integer_positions(), n=integer_positions())
@example(d=4, data=_Drawn(theta=_f64(1.0, 0.3)), m=2, n=5)
def test_rotation_matrices_form_an_orthogonal_representation_of_position_addition(rotation, d, data, m, n):
    theta = data.draw(frequency_vectors(d // 2), label="theta")
    R = functools.partial(rotation, theta=theta)
    eye = torch.eye(d, dtype=torch.float64)
    # entries are cos/sin of angles up to |m| max theta; products of two rotations add one rounding per entry.
    tol = 8 * EPS64 * (d + (abs(m) + abs(n)) * theta.max().item())
    checks = {
        "R(m)^T R(m) = I": (R(m).T @ R(m) - eye),
        "R(m)^T = R(-m)": (R(m).T - R(-m)),
        "R(-m) R(n) = R(n - m)": (R(-m) @ R(n) - R(n - m)),
        "R(m)^T R(n) = R(n - m)": (R(m).T @ R(n) - R(n - m)),
        "R(0) = I": (R(0) - eye),
    }
    for name, diff in checks.items():
        claim_assert(diff.abs().max().item() <= tol, f"{name} fails", theta=theta, m=m, n=n)
    claim_assert(abs(torch.linalg.det(R(m)).item() - 1) <= tol, "det R(m) != 1", theta=theta, m=m)


@pytest.mark.claim("rope.rotation-preserves-dot-product-ordering")
@refutes()
@given(q=vectors(2), k1=vectors(2), k2=vectors(2), n=integer_positions(50))
def test_rotation_preserves_the_order_of_dot_products(q, k1, k2, n):
    theta = torch.ones(1, dtype=torch.float64)
    before = (q @ k1 - q @ k2).item()
    after = (_rope(q, 0, theta) @ _rope(k1, n, theta) - _rope(q, 0, theta) @ _rope(k2, n, theta)).item()
    claim_assert(before * after >= 0, "the query prefers a different key after RoPE at offset n",
                 q=q, k1=k1, k2=k2, offset=n, before=before, after=after)


@pytest.mark.claim("rope.rotation-preserves-dot-product-ordering")
@pytest.mark.parametrize("key_offset", [pytest.param(0, id="same-position"), pytest.param(
    1, id="key-one-position-on", marks=control(
        "the key rotated at m + 1, as RoPE rotates query and key at their own positions: the claim has the dot "
        "product unchanged there too", models="rope.rotation-preserves-dot-product-ordering"))])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions())
@example(qkt=QKT_4, m=3)
def test_rotation_preserves_norms_and_same_position_dot_products(key_offset, qkt, m):
    d, q, k, theta = qkt
    rq, rk = _rope(q, m, theta), _rope(k, m + key_offset, theta)
    tol = _logit_tolerance(q, k, abs(m) * theta.max().item())
    claim_assert(abs(rq @ rq - q @ q) <= _logit_tolerance(q, q, abs(m) * theta.max().item()), "|R(m) q| != |q|",
                 q=q, m=m)
    claim_assert(abs(rq @ rk - q @ k) <= tol, "<R(m) q, R(m) k> != <q, k>", q=q, k=k, m=m, key_at=m + key_offset)


# --- block structure (foundations:250-256, :399-405, :597) ---------------------------------------------------

@pytest.mark.claim("rope.nd-split-into-d-over-2-pairs", "rope.block-diagonal-rotation-matrix",
                   "rope.rotation-operator-product-of-plane-rotations", "rope.rotation-matrix-decomposes-dk-over-2-blocks",
                   "rope.rotation-operator-in-so-dk")
@pytest.mark.parametrize("rotation", [
    pytest.param(rotation_matrix, id="impl"),
    pytest.param(_reflection_matrix, id="reflection", marks=control(
        "blocks [[cos, sin], [sin, -cos]]: orthogonal reflections (det -1), not rotations")),
    pytest.param(_half_split_rotation_matrix, id="half-split-pairs", marks=control(
        "the 2x2 blocks on the pairs (i, i + d/2) instead of the adjacent (2i, 2i+1)")),
])
@given(d=even_head_dims(), data=st.data(), m=integer_positions(), order_seed=st.randoms(use_true_random=False))
@example(d=4, data=_Drawn(theta=_f64(1.0, 0.3), x=_f64(1.0, 2.0, -0.5, 0.25)), m=3, order_seed=random.Random(0))
def test_rope_is_the_block_diagonal_product_of_commuting_plane_rotations(rotation, d, data, m, order_seed):
    theta = data.draw(frequency_vectors(d // 2), label="theta")
    x = data.draw(vectors(d), label="x")
    R = rotation(m, theta)
    planes = []
    for i in range(d // 2):  # R_{2i}(m theta_i): the identity except on coordinates (2i, 2i+1)
        p = torch.eye(d, dtype=torch.float64)
        p[2 * i:2 * i + 2, 2 * i:2 * i + 2] = plane_rotation(m * theta[i])
        planes.append(p)
    order_seed.shuffle(planes)
    product = functools.reduce(torch.matmul, planes, torch.eye(d, dtype=torch.float64))
    # cos/sin of angles up to |m| max theta, ~|angle| u if computed apart; d-term products per entry (the identity's
    # zeros and ones are exact): (d + |angle|) u; 8 eps of that, times |x| for R x
    tol = 8 * EPS64 * (d + abs(m) * theta.max().item()) * max(x.norm().item(), 1.0)
    off_block = R.clone()
    for i in range(d // 2):
        off_block[2 * i:2 * i + 2, 2 * i:2 * i + 2] = 0
    claim_assert(off_block.abs().max() == 0, "R_Theta(m) has entries outside its 2x2 diagonal blocks", m=m)
    for i in range(d // 2):  # an oracle sharing no code with impl/: the printed block (line 252), written out
        a = m * theta[i].item()
        printed = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64)
        claim_assert((R[2 * i:2 * i + 2, 2 * i:2 * i + 2] - printed).abs().max() <= tol,
                     "a block of R is not the printed [[cos m theta, -sin m theta], [sin m theta, cos m theta]]",
                     i=i, m=m, block=R[2 * i:2 * i + 2, 2 * i:2 * i + 2], printed=printed)
    claim_assert((product - R).abs().max() <= tol, "the product of plane rotations (in any order) is not R", m=m)
    claim_assert((rope_interleaved(x[None], torch.tensor([float(m)]), theta)[0] - R @ x).abs().max() <= tol,
                 "pairwise rotation of (x_2i, x_2i+1) is not R_Theta(m) x", x=x, m=m)
    claim_assert(abs(torch.linalg.det(R).item() - 1) <= tol, "det R != 1", m=m)


@pytest.mark.claim("rope.block-rotations-form-torus-group", "rope.rotation-operator-product-of-plane-rotations")
@pytest.mark.parametrize("rotation", [
    pytest.param(rotation_matrix, id="impl"),
    pytest.param(_reflection_matrix, id="reflection", marks=control(
        "blocks [[cos, sin], [sin, -cos]]: plane reflections, which neither commute nor compose to another "
        "reflection, so they are no direct product group SO(2) x ... x SO(2)",
        models=("rope.block-rotations-form-torus-group", "rope.rotation-operator-product-of-plane-rotations"))),
])
@given(d=even_head_dims(4), data=st.data(), a=integer_positions(), b=integer_positions())
def test_block_rotations_commute_and_are_closed_a_direct_product_torus(rotation, d, data, a, b):
    """Line 399 (and 417) call the group a direct product (直积群); the (x) of SO(2)^{(x) d_k/2} is read as the
    direct-product sign that names it, as in SU(3) (x) SU(2) (x) U(1): its elements are the block rotations."""
    theta1 = data.draw(frequency_vectors(d // 2), label="theta1")  # two arbitrary torus elements
    theta2 = data.draw(frequency_vectors(d // 2), label="theta2")
    g, h = rotation(a, theta1), rotation(b, theta2)
    # the direct product SO(2)^{d/2}: elements are block-diagonal rotations with angles adding per plane
    gh = rotation(1.0, a * theta1 + b * theta2)
    # cos/sin of angles up to (|a| + |b|) max theta <= 2 (|a| + |b|), ~|angle| u apart; d-term products per entry
    tol = 8 * EPS64 * (d + (abs(a) + abs(b)) * 2.0)
    claim_assert((g @ h - h @ g).abs().max() <= tol, "two block rotations do not commute", a=a, b=b)
    claim_assert((g @ h - gh).abs().max() <= tol, "the product is not the block rotation with added angles")
    claim_assert((g.T - rotation(1.0, -a * theta1)).abs().max() <= tol, "the inverse is not a block rotation")
    claim_assert(abs(torch.linalg.det(g).item() - 1) <= tol and g.shape == (d, d),
                 "a block rotation is not an element of SO(d_k) acting on R^{d_k}", d=d)


class _ElementsWritten(TorchDispatchMode):
    """Counts the elements written by every aten op run inside it: a measure of element-wise work."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.count += sum(o.numel() for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor))
        return out


def _rope_half_split_by_matmul(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE as one d x d matrix-vector product per vector (the permuted R_Theta(m))."""
    perm = interleaved_to_half_split(x.shape[-1])
    return torch.stack([rotation_matrix(p, theta)[perm][:, perm] @ v for p, v in zip(positions, x)])


def _rope_half_split_clockwise(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """x cos - rotate_half(x) sin: the element-wise form with the sine's other sign."""
    return rope_half_split(x, -torch.as_tensor(positions), theta)


@pytest.mark.claim("rope.elementwise-implementation-replaces-matmul")
@pytest.mark.parametrize("elementwise_rope", [
    pytest.param(rope_half_split, id="impl"),
    pytest.param(_rope_half_split_by_matmul, id="matmul", marks=control(
        "the same rotation computed with a d x d matrix product per vector (O(d^2))")),
    pytest.param(_rope_half_split_clockwise, id="clockwise", marks=control(
        "x cos - rotate_half(x) sin: the sine's other sign")),
])
@given(d=even_head_dims(2, 32), t=st.integers(1, 6), data=st.data())
@example(d=4, t=2, data=_Drawn(x0=_f64(1.0, 2.0, -0.5, 0.25), x1=_f64(-1.5, 0.5, 2.0, 1.0)))
def test_elementwise_rope_equals_the_matrix_product_in_linear_work(elementwise_rope, d, t, data):
    theta = rope_frequencies(d)
    perm = interleaved_to_half_split(d)
    x = torch.stack([data.draw(vectors(d), label=f"x{j}") for j in range(t)])
    x_half = x[:, perm]
    pos = torch.arange(t, dtype=torch.float64)
    rotations = [rotation_matrix(p, theta) for p in pos]
    with FlopCounterMode(display=False) as dense_flops:
        dense = torch.stack([(r @ x[j][:, None])[:, 0] for j, r in enumerate(rotations)])
    with FlopCounterMode(display=False) as elementwise_flops, _ElementsWritten() as written:
        elementwise = elementwise_rope(x_half, pos, theta)
    # angles up to t (theta <= 1) may round apart (t u); cos, sin (1 ulp each) and c x_a -+ s x_b (3 u) on both sides,
    # R x's other d - 2 terms are exact zeros: (t + 8) eps |x|, and subnormal products' absolute spacing
    tol = (t + 8) * EPS64 * x.abs().max().item() + 4 * 2.0**-1074
    claim_assert((elementwise - dense[:, perm]).abs().max() <= tol, "x cos + rotate_half(x) sin != R x", d=d)
    # dense: one d x d matrix-vector product, 2 d^2 FLOPs per vector; element-wise: no matrix product, and each of
    # its ~10 ops (angles, cos, sin, two cats, rotate_half, two products, a sum) writes at most d elements per vector.
    claim_assert(dense_flops.get_total_flops() == 2 * d * d * t and elementwise_flops.get_total_flops() == 0,
                 "FLOP counts are not 2 d^2 per vector (dense) and no matmul (element-wise)",
                 dense=dense_flops.get_total_flops(), elementwise=elementwise_flops.get_total_flops())
    claim_assert(written.count <= 16 * d * t, "the element-wise form does more than O(d) work per vector",
                 d=d, t=t, elements_written=written.count)


# --- the two conventions and the complex form (foundations:258-270, :485-487) --------------------------------

@pytest.mark.claim("rope.proof-step4-complexification")
@pytest.mark.parametrize("complexify", [
    pytest.param(lambda a, b: a + sp.I * b, id="printed"),
    pytest.param(lambda a, b: b + sp.I * a, id="pair-swapped", marks=control(
        "the pair complexified in the other order, q_2i+1 + i q_2i")),
])
def test_multiplying_by_e_i_phi_is_the_2x2_rotation_symbolically(complexify):
    a, b, phi = sp.symbols("a b phi", real=True)
    z = sp.expand_complex(complexify(a, b) * sp.exp(sp.I * phi))
    rotated = _rot(phi) * sp.Matrix([a, b])
    claim_assert(_zero(sp.re(z) - rotated[0]) and _zero(sp.im(z) - rotated[1]),
                 "(a + ib) e^{i phi} is not R(phi) (a, b)")


@pytest.mark.claim("rope.proof-step4-complexification")
@pytest.mark.parametrize("complex_rope", [
    pytest.param(rope_complex, id="impl"),
    pytest.param(_rope_complex_conjugate, id="conjugate", marks=control(
        "the complex pairs multiplied by e^{-i m theta_i} instead of e^{i m theta_i}")),
])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions())
@example(qkt=QKT_4, m=3)
def test_complex_rope_equals_interleaved_rope(complex_rope, qkt, m):
    d, q, _, theta = qkt
    pos = torch.tensor([float(m)])
    diff = (complex_rope(q[None], pos, theta) - rope_interleaved(q[None], pos, theta)).abs().max().item()
    claim_assert(diff <= _logit_tolerance(q, torch.ones(1), abs(m) * theta.max().item()),
                 "complex-form RoPE differs from the pairwise rotation", q=q, m=m, theta=theta)


@pytest.mark.claim("rope.proof-step4-complex-form")
def test_complex_form_of_the_logit_symbolically():
    qa, qb, ka, kb, phi = sp.symbols("q_a q_b k_a k_b phi", real=True)
    q_t, k_t = qa + sp.I * qb, ka + sp.I * kb
    complex_form = sp.re(sp.expand_complex(sp.conjugate(q_t) * k_t * sp.exp(sp.I * phi)))
    real_form = (sp.Matrix([qa, qb]).T * _rot(phi) * sp.Matrix([ka, kb]))[0]
    claim_assert(_zero(complex_form - real_form), "Re[conj(q~) k~ e^{i phi}] != q^T R(phi) k for one plane")


def _printed_range_pairs(x: torch.Tensor) -> torch.Tensor:
    """Negative control: x~_i = x_{2i} + i x_{2i+1} over the printed range i = 1 .. d_k/2, coordinates past the last
    read as 0 (d_k/2 complex numbers)."""
    padded = torch.cat([x, torch.zeros(2, dtype=x.dtype)])
    return torch.complex(padded[2::2], padded[3::2])


@pytest.mark.claim("rope.proof-step4-complex-form")
@pytest.mark.parametrize("pairs", [
    pytest.param(lambda x: torch.complex(x[0::2], x[1::2]), id="i=0..d/2-1"),  # x~_i = x_{2i} + i x_{2i+1}
    pytest.param(_printed_range_pairs, id="printed-range", marks=control(
        "the printed range i = 1 .. d_k/2 of pairs (2i, 2i+1)", models="rope.proof-step4-complex-form"))])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions(), n=integer_positions())
def test_complex_form_with_zero_based_pairs_equals_the_logit(pairs, qkt, m, n):
    d, q, k, theta = qkt
    q_t, k_t = pairs(q), pairs(k)
    complex_form = (q_t.conj() * k_t * torch.polar(torch.ones_like(theta), (n - m) * theta)).sum().real
    logit = _rope(q, m, theta) @ _rope(k, n, theta)
    tol = _logit_tolerance(q, k, 2 * max(abs(m), abs(n)) * theta.max().item())
    claim_assert(abs(complex_form - logit) <= tol, "Re sum conj(q~) k~ e^{i(n-m)theta} != the RoPE logit",
                 q=q, k=k, m=m, n=n)


@pytest.mark.claim("rope.proof-step4-complex-form")
@refutes(reason="d_k = 2, a single plane, is the smallest head: the printed range i = 1 .. d_k/2 with pairs (2i, 2i+1) "
                "already names coordinates that do not exist")
def test_printed_index_range_of_the_complex_sum_covers_the_coordinates():
    d_k = 2
    used = {j for i in range(1, d_k // 2 + 1) for j in (2 * i, 2 * i + 1)}  # sum_{i=1}^{d_k/2} over (q_2i, q_2i+1)
    zero_based, one_based = set(range(d_k)), set(range(1, d_k + 1))
    claim_assert(used in (zero_based, one_based), "the pairs (2i, 2i+1), i = 1..d_k/2 are not the coordinates of q",
                 d_k=d_k, coordinates_used=sorted(used), zero_based=sorted(zero_based), one_based=sorted(one_based))


@pytest.mark.claim("rope.proof-step3-expansion-sin-sign")
@refutes(reason="the smallest case: one plane (d_k = 2), unit vectors q = e_1, k = e_2 and a quarter turn, where "
                "only the sine term is non-zero")
def test_printed_expansion_of_q_rnm_k():
    q, k = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
    phi = torch.tensor(torch.pi / 2, dtype=torch.float64)  # (n - m) theta_i
    true = (q @ (plane_rotation(phi) @ k)).item()
    # line 481 with its one pair (q_a, q_b) = (q[0], q[1]): q_a k_a cos + q_b k_b cos + (q_a k_b - q_b k_a) sin
    printed = q[0] * k[0] * torch.cos(phi) + q[1] * k[1] * torch.cos(phi) + (q[0] * k[1] - q[1] * k[0]) * torch.sin(phi)
    # both are a 2-term sum of O(1) products: equal up to a few eps if the printed expansion were right
    claim_assert(abs(true - printed.item()) <= 4 * EPS64, "the printed expansion differs from q^T R(n-m) k",
                 q=q, k=k, n_minus_m_theta=phi.item(), true=true, printed=printed.item())


@pytest.mark.claim("rope.proof-step3-expansion-sin-sign")
@pytest.mark.parametrize("sine_sign", [pytest.param(1, id="corrected"), pytest.param(
    -1, id="printed-sign", marks=control("line 481's sine coefficient, q_{2i} k_{2i+1} - q_{2i+1} k_{2i}",
                                         models="rope.proof-step3-expansion-sin-sign"))])
def test_corrected_expansion_symbolically(sine_sign):
    t1, t2, delta = sp.symbols("theta_0 theta_1 delta", real=True)
    q = sp.symbols("q0:4", real=True)
    k = sp.symbols("k0:4", real=True)
    lhs = (sp.Matrix(q).T * _block_rot(delta, (t1, t2)) * sp.Matrix(k))[0]
    corrected = sum(
        (q[2 * i] * k[2 * i] + q[2 * i + 1] * k[2 * i + 1]) * sp.cos(delta * t)
        + sine_sign * (q[2 * i + 1] * k[2 * i] - q[2 * i] * k[2 * i + 1]) * sp.sin(delta * t)
        for i, t in enumerate((t1, t2)))
    printed = sum(
        (q[2 * i] * k[2 * i] + q[2 * i + 1] * k[2 * i + 1]) * sp.cos(delta * t)
        + (q[2 * i] * k[2 * i + 1] - q[2 * i + 1] * k[2 * i]) * sp.sin(delta * t)
        for i, t in enumerate((t1, t2)))
    claim_assert(_zero(lhs - corrected), "the corrected expansion (sine coefficient q_{2i+1}k_{2i} - q_{2i}k_{2i+1}, "
                 "i = 0 .. d_k/2 - 1) is not q^T R(delta) k")
    # and the printed one is exactly the expansion of q^T R(m - n) k: the sign of the offset is flipped
    claim_assert(_zero(printed - lhs.subs(delta, -delta)), "the printed expansion is not q^T R(m-n) k either")


# --- the printed apply_rotary_pos_emb (foundations:258-270) ---------------------------------------------------

@functools.lru_cache(maxsize=1)
def _apply_rotary_pos_emb():
    run = run_snippet("rope.snippet-apply-rotary-pos-emb")
    assert run.ran, run.describe()
    return run.namespace["apply_rotary_pos_emb"]


def _printed_apply_rotary(x, cos, sin):
    return _apply_rotary_pos_emb()(x, cos, sin)


def _apply_rotary_clockwise(x, cos, sin):
    """The printed function with rotate_half's other sign, (x2, -x1): x cos - rotate_half(x) sin."""
    return x * torch.cat([cos, cos], -1) - rotate_half(x) * torch.cat([sin, sin], -1)


def _apply_rotary_keeping_the_odd_tail(x, cos, sin):
    """A version that accepts odd d_k: rotates the first 2 floor(d_k/2) coordinates, passes the last one through."""
    h = x.shape[-1] // 2
    c, s = cos[..., :h], sin[..., :h]
    x1, x2, tail = x[..., :h], x[..., h:2 * h], x[..., 2 * h:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c, tail], -1)


def _half_width_cos_sin(t: int, d: int):
    angles = torch.arange(t, dtype=torch.float64)[:, None] * rope_frequencies(d)  # (T, d/2)
    return torch.cos(angles), torch.sin(angles)


@pytest.mark.claim("rope.snippet-apply-rotary-computes-half-split-rope", "rope.snippet-rotation-comment-formula")
@pytest.mark.parametrize("apply_rotary", [
    pytest.param(_printed_apply_rotary, id="printed"),
    pytest.param(_apply_rotary_clockwise, id="clockwise", marks=control(
        "rotate_half with the other sign, (x2, -x1): x cos - rotate_half(x) sin")),
])
@given(d=even_head_dims(), t=st.integers(1, 6), h=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
@example(d=4, t=3, h=1, seed=0)  # two pairs, three positions: every sine non-zero past position 0
def test_printed_apply_rotary_pos_emb_is_half_split_rope(apply_rotary, d, t, h, seed):
    x = torch.randn(2, h, t, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    cos, sin = _half_width_cos_sin(t, d)
    out = apply_rotary(x, cos, sin)
    theta, pos = rope_frequencies(d), torch.arange(t, dtype=torch.float64)
    comment = x * torch.cat([cos, cos], -1) + rotate_half(x) * torch.cat([sin, sin], -1)  # line 266
    # as in the element-wise test: angles up to t (t u), cos and sin, c x_a -+ s x_b: (t + 8) eps |x|
    tol = (t + 8) * EPS64 * x.abs().max().item()
    claim_assert(out.shape == x.shape, "the output shape differs from x", x_shape=list(x.shape), out=list(out.shape))
    claim_assert((out - comment).abs().max() <= tol, "the return value is not x*cos + (-x2, x1)*sin", d=d)
    claim_assert((out - rope_half_split(x, pos, theta)).abs().max() <= tol,
                 "apply_rotary_pos_emb does not rotate the pairs (x_j, x_{j+d/2}) by m theta_j", d=d)


@pytest.mark.claim("rope.snippet-apply-rotary-requires-even-dk")
@pytest.mark.parametrize("apply_rotary", [
    pytest.param(_printed_apply_rotary, id="printed"),
    pytest.param(_apply_rotary_keeping_the_odd_tail, id="odd-tail-kept", marks=control(
        "a version that accepts odd d_k: the last coordinate passed through unrotated")),
])
@given(d=odd_head_dims(), t=st.integers(1, 4), round_up=st.booleans())
@example(d=5, t=2, round_up=False)
def test_printed_apply_rotary_pos_emb_does_not_rotate_odd_heads(apply_rotary, d, t, round_up):
    x = torch.randn(1, 1, t, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    width = (d + 1) // 2 if round_up else max(d // 2, 1)  # the caller's cos/sin width: ceil or floor of d/2
    angles = torch.arange(t, dtype=torch.float64)[:, None] * rope_frequencies(d + 1)[:width]
    try:
        out = apply_rotary(x, torch.cos(angles), torch.sin(angles))
    except RuntimeError:  # the halves of widths d//2 and d//2 + 1 do not broadcast
        return
    claim_assert(out.shape != x.shape, "an odd head dimension was rotated into a tensor of the input's shape",
                 d_k=d, out_shape=list(out.shape))


@pytest.mark.claim("rope.snippet-half-split-comment-odd-even-wrong")
@refutes(reason="d_k = 4 is the smallest head with two pairs, where a contiguous half differs from every other "
                "coordinate")
def test_x1_holds_the_odd_dimensions_and_x2_the_even_ones():
    d_k = 4
    x = torch.arange(d_k)
    x1, x2 = x[..., :d_k // 2], x[..., d_k // 2:]  # lines 263-264
    odd_even = [(x[1::2], x[0::2]), (x[0::2], x[1::2])]  # 0-based odd/even, or 1-based odd (= 0-based even)/even
    claim_assert(any(torch.equal(x1, o) and torch.equal(x2, e) for o, e in odd_even),
                 "x1 and x2 are the first and second halves, not the odd and even dimensions",
                 x=x, x1=x1, x2=x2)


@pytest.mark.claim("rope.snippet-half-split-comment-odd-even-wrong")
@pytest.mark.parametrize("permutation", [pytest.param(interleaved_to_half_split, id="P"), pytest.param(
    torch.arange, id="no-reordering", marks=control(
        "the halves taken for the odd and even dimensions, as the comment has them: the two layouts then need no "
        "reordering", models="rope.snippet-half-split-comment-odd-even-wrong"))])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions(), n=integer_positions())
@example(qkt=QKT_4, m=2, n=5)  # d_k = 4: two pairs (at d_k = 2 the layouts coincide)
def test_half_split_and_interleaved_conventions_differ_by_a_fixed_permutation(permutation, qkt, m, n):
    d, q, k, theta = qkt
    perm = permutation(d)
    pos_q, pos_k = torch.tensor([float(m)]), torch.tensor([float(n)])
    tol = _logit_tolerance(q, k, 2 * max(abs(m), abs(n)) * theta.max().item())
    half_q = rope_half_split(q[perm][None], pos_q, theta)[0]
    claim_assert((half_q - rope_interleaved(q[None], pos_q, theta)[0][perm]).abs().max()
                 <= tol / max(_norm_bound(k), 1.0), "rope_half(P q) != P rope_interleaved(q)", q=q, m=m)
    logit_half = half_q @ rope_half_split(k[perm][None], pos_k, theta)[0]
    logit_inter = rope_interleaved(q[None], pos_q, theta)[0] @ rope_interleaved(k[None], pos_k, theta)[0]
    claim_assert(abs(logit_half - logit_inter) <= tol, "the conventions give different logits after the permutation",
                 q=q, k=k, m=m, n=n)


@pytest.mark.claim("rope.snippet-apply-rotary-computes-half-split-rope")
@pytest.mark.parametrize("apply_rotary", [
    pytest.param(_printed_apply_rotary, id="printed"),
    pytest.param(_apply_rotary_clockwise, id="clockwise", marks=control(
        "rotate_half with the other sign, (x2, -x1): x cos - rotate_half(x) sin")),
])
@given(qkt=head_vectors_and_frequencies(), m=integer_positions(), n=integer_positions())
@example(qkt=QKT_4, m=2, n=5)
def test_printed_apply_rotary_pos_emb_gives_relative_logits(apply_rotary, qkt, m, n):
    d, q, k, theta = qkt
    rot = apply_rotary
    angle_q, angle_k = m * theta, n * theta  # (d/2,)
    rq = rot(q[None, None, None], torch.cos(angle_q), torch.sin(angle_q))[0, 0, 0]
    rk = rot(k[None, None, None], torch.cos(angle_k), torch.sin(angle_k))[0, 0, 0]
    relative = q @ rope_half_split(k[None], torch.tensor([float(n - m)]), theta)[0]  # pairs (j, j + d/2)
    tol = _logit_tolerance(q, k, 2 * max(abs(m), abs(n)) * theta.max().item())
    claim_assert(abs(rq @ rq - q @ q) <= _logit_tolerance(q, q, abs(m) * theta.max().item()),
                 "the printed rotation changes the norm", q=q, m=m)
    claim_assert(abs(rq @ rk - relative) <= tol, "the printed rotation's logit is not a function of n - m",
                 q=q, k=k, m=m, n=n)


# --- the default base b = 10000 (RoFormer eq. 15): a value and a law ---------------------------------------------

@pytest.mark.claim("rope.frequency-geometric-base-10000")
def test_default_rope_frequencies_are_the_decimal_powers_of_10000():
    """d = 8: theta = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001; d = 4: 1, 0.01 (RoFormer's base, no argument given)."""
    for d, expected in ((8, [1.0, 0.1, 0.01, 0.001]), (4, [1.0, 0.01])):
        theta = rope_frequencies(d).tolist()
        # one float64 pow per entry, exponent <= 1 (<= 1 ulp each); 4 ulps
        claim_assert(all(abs(t - e) <= 4 * 2.0**-52 * e for t, e in zip(theta, expected)),
                     "the default RoPE frequencies are not the powers of 10000^(-2/d)", d=d, theta=theta,
                     expected=expected)


@pytest.mark.claim("rope.frequency-geometric-base-10000")
@given(d=even_head_dims(4, 256))
def test_default_rope_frequencies_fall_by_10000_to_the_minus_2_over_d_per_plane(d):
    theta = rope_frequencies(d)
    ratios = theta[1:] / theta[:-1]
    # consecutive pows (<= 1 ulp each) and one division: 3 ulps of the ratio; 8 ulps spare
    ratio = 10000.0 ** (-2 / d)
    claim_assert(theta[0].item() == 1.0 and bool(((ratios - ratio).abs() <= 8 * 2.0**-52 * ratio).all()),
                 "the default schedule is not geometric with ratio 10000^(-2/d) from theta_0 = 1", d=d,
                 worst=(ratios / ratio - 1).abs().max().item())
