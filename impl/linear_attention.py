"""Linear attention, gated linear recurrences and the (gated) delta rule.

Shapes (one sequence, no batch): features ``phi_q, phi_k (n, d)``, values ``v (n, d_v)``; the state
``S_t`` is (d_v, d) and ``y_t = S_t phi(q_t)``.

* :func:`linear_attention` ``phi(Q) (phi(K)^T V)`` and :func:`quadratic_form_linear_attention`
  ``(phi(Q) phi(K)^T) V``: equal by associativity (Katharopoulos et al. 2020, eq. 5);
  :func:`normalized_linear_attention` divides row t by ``phi(q_t)^T sum_j phi(k_j)`` (their eq. 6);
  :func:`elu_plus_one` is their feature map (sec. 3.2.1).
* FLOPs: :func:`matmul_flops` counts ``2 a b c`` for an (a, b) @ (b, c) product (one multiply and one
  add per term, the convention of ``torch.utils.flop_counter``); :func:`linear_attention_flops` and
  :func:`quadratic_attention_flops` sum the products of the two orders.
* Causal recurrences with scalar gates alpha_t (RetNet's gamma, Mamba-2's a_t):
  :func:`gated_linear_recurrence` ``S_t = alpha_t S_{t-1} + v_t k_t^T`` and its unrolled
  :func:`implicit_attention_matrix` ``M_ti = (prod_{j=i+1}^t alpha_j) q_t^T k_i`` (i <= t), the form of
  linear-algebra.txt line 242 (Zimerman et al. 2024).
* Gated delta rule (Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks", eq. 10):
  :func:`gated_delta_rule` ``S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T``; and
  :func:`gated_delta_rule_gate_after` ``S_t = alpha_t [S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T]``,
  the order of the snippet at linear-algebra.txt lines 276-281.
* :func:`output_coefficients` recovers ``C`` with ``y_t = sum_i C_ti v_i`` from any of these maps
  (they are linear in V) by feeding the standard basis as values.
* Selective SSM (Mamba, diagonal state): :func:`selective_scan` and its materialised
  :func:`hidden_attention_matrix` (Ali, Zimerman & Wolf 2025, eq. 9).
"""
from __future__ import annotations

from typing import Callable

import torch


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1 > 0``."""
    return torch.nn.functional.elu(x) + 1


def _check(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> None:
    if phi_q.ndim != 2 or phi_k.ndim != 2 or v.ndim != 2 or phi_q.shape[1] != phi_k.shape[1] \
            or phi_k.shape[0] != v.shape[0]:
        raise ValueError("expected phi_q (n_q, d), phi_k (n, d), v (n, d_v), got "
                         f"{tuple(phi_q.shape)}, {tuple(phi_k.shape)}, {tuple(v.shape)}")


def linear_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``phi(Q) (phi(K)^T V)``: the (d, d_v) summary first, never an (n, n) matrix: (n_q, d_v)."""
    _check(phi_q, phi_k, v)
    return phi_q @ (phi_k.T @ v)


def quadratic_form_linear_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(phi(Q) phi(K)^T) V``: the same product through the (n_q, n) matrix: (n_q, d_v)."""
    _check(phi_q, phi_k, v)
    return (phi_q @ phi_k.T) @ v


def normalized_linear_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``phi(q_t)^T (phi(K)^T V) / phi(q_t)^T (phi(K)^T 1)`` (Katharopoulos et al. 2020, eq. 6): (n_q, d_v)."""
    _check(phi_q, phi_k, v)
    return (phi_q @ (phi_k.T @ v)) / (phi_q @ phi_k.sum(dim=0, keepdim=True).T)


def matmul_flops(a: int, b: int, c: int) -> int:
    """FLOPs of an (a, b) @ (b, c) product: ``2 a b c``."""
    return 2 * a * b * c


def linear_attention_flops(n: int, d: int, d_v: int) -> int:
    """``phi(K)^T V`` then ``phi(Q) S``: ``2 n d d_v + 2 n d d_v = 4 n d d_v``."""
    return matmul_flops(d, n, d_v) + matmul_flops(n, d, d_v)


def quadratic_attention_flops(n: int, d: int, d_v: int) -> int:
    """``phi(Q) phi(K)^T`` then ``(.) V``: ``2 n^2 d + 2 n^2 d_v``."""
    return matmul_flops(n, d, n) + matmul_flops(n, n, d_v)


def gated_linear_recurrence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``S_t = alpha_t S_{t-1} + v_t k_t^T``, ``S_0 = 0``, ``y_t = S_t q_t``; alpha (n,): (n, d_v)."""
    _check(q, k, v)
    s = torch.zeros(v.shape[1], k.shape[1], dtype=v.dtype)
    out = []
    for t in range(k.shape[0]):
        s = alpha[t] * s + torch.outer(v[t], k[t])  # (d_v, d)
        out.append(s @ q[t])
    return torch.stack(out)


def implicit_attention_matrix(q: torch.Tensor, k: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``M_ti = (prod_{j=i+1}^t alpha_j) q_t^T k_i`` for i <= t, 0 above the diagonal: (n, n)."""
    n = k.shape[0]
    m = torch.zeros(n, n, dtype=q.dtype)
    for t in range(n):
        for i in range(t + 1):
            m[t, i] = torch.prod(alpha[i + 1:t + 1]) * (q[t] @ k[i])
    return m


def _delta_step(s: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor, beta_t: torch.Tensor) -> torch.Tensor:
    """``S (I - beta k k^T) + beta v k^T``."""
    return s - beta_t * torch.outer(s @ k_t, k_t) + beta_t * torch.outer(v_t, k_t)


def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor,
                     beta: torch.Tensor) -> torch.Tensor:
    """``S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T``, ``y_t = S_t q_t``: (n, d_v)."""
    _check(q, k, v)
    s = torch.zeros(v.shape[1], k.shape[1], dtype=v.dtype)
    out = []
    for t in range(k.shape[0]):
        s = _delta_step(alpha[t] * s, k[t], v[t], beta[t])
        out.append(s @ q[t])
    return torch.stack(out)


def gated_delta_rule_gate_after(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor,
                                beta: torch.Tensor) -> torch.Tensor:
    """``S_t = alpha_t [S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T]``, ``y_t = S_t q_t``: (n, d_v)."""
    _check(q, k, v)
    s = torch.zeros(v.shape[1], k.shape[1], dtype=v.dtype)
    out = []
    for t in range(k.shape[0]):
        s = alpha[t] * _delta_step(s, k[t], v[t], beta[t])
        out.append(s @ q[t])
    return torch.stack(out)


def output_coefficients(layer: Callable[[torch.Tensor], torch.Tensor], n: int, dtype=torch.float64) -> torch.Tensor:
    """C (n, n) with ``y_t = sum_i C_ti v_i`` for a map ``layer(v)`` that is linear in v (n, d_v)."""
    return layer(torch.eye(n, dtype=dtype))  # value i = e_i, so y_t = row t of C


def selective_scan(a_bar: torch.Tensor, b_bar: torch.Tensor, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """One channel of a diagonal selective SSM: ``h_t = a_t * h_{t-1} + b_t x_t``, ``y_t = c_t . h_t``.

    a_bar, b_bar, c: (n, N) per-step diagonal transition, input and output vectors; x: (n,). Returns (n,).
    """
    h = torch.zeros(a_bar.shape[1], dtype=x.dtype)
    out = []
    for t in range(x.shape[0]):
        h = a_bar[t] * h + b_bar[t] * x[t]
        out.append(c[t] @ h)
    return torch.stack(out)


def hidden_attention_matrix(a_bar: torch.Tensor, b_bar: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``alpha_ts = c_t . (prod_{k=s+1}^t a_k) * b_s`` for s <= t (Ali et al. 2025, eq. 9): (n, n)."""
    n = a_bar.shape[0]
    m = torch.zeros(n, n, dtype=c.dtype)
    for t in range(n):
        for s in range(t + 1):
            m[t, s] = c[t] @ (torch.prod(a_bar[s + 1:t + 1], dim=0) * b_bar[s])
    return m


def positive_random_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """FAVOR+ features ``exp(omega^T x - |x|^2 / 2) / sqrt(m)`` (Choromanski et al. 2021, Lemma 1).

    x (n, d), omega (m, d) with i.i.d. N(0, 1) rows: ``E[phi(q)^T phi(k)] = exp(q^T k)``, every term > 0.
    """
    m = omega.shape[0]
    return torch.exp(x @ omega.T - (x**2).sum(-1, keepdim=True) / 2) / m**0.5


def trigonometric_random_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """``exp(|x|^2 / 2) [cos(omega^T x), sin(omega^T x)] / sqrt(m)``: random Fourier features of the Gaussian
    kernel rescaled to the softmax kernel, ``E[phi(q)^T phi(k)] = exp(q^T k)`` (Performer's FAVOR, sec. 2.3)."""
    m = omega.shape[0]
    proj = x @ omega.T
    return torch.exp((x**2).sum(-1, keepdim=True) / 2) * torch.cat([torch.cos(proj), torch.sin(proj)], -1) / m**0.5
