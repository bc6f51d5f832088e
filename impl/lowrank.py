"""Low-rank updates and approximations of weight matrices.

* LoRA (Hu et al. 2021, eq. 3): ``W' = W + (alpha / r) B A`` with B (d, r), A (r, k): :func:`lora_delta`,
  :func:`lora_weight`; the update has rank <= r and ``r (d + k)`` trainable parameters.
* DoRA (Liu et al. 2024, eq. 5): ``W' = m (W_0 + B A) / ||W_0 + B A||_c`` where ``||.||_c`` is the
  Euclidean norm of each column (a (1, k) row vector) and m (1, k) the magnitudes: :func:`column_norm`,
  :func:`dora_weight`; at initialisation m = ||W_0||_c and B = 0 give W' = W_0.
* Best rank-k approximation (Eckart & Young 1936; Mirsky 1960): :func:`truncated_svd` keeps the top k
  singular triplets; its error is ``s_{k+1}`` in spectral norm and ``sqrt(sum_{i>k} s_i^2)`` in Frobenius norm.
* :func:`singular_value_threshold` ``U max(S - tau, 0) V^T``, the proximal operator of ``tau ||.||_*``
  (Cai, Candes & Shen 2010, Thm. 2.1).
"""
from __future__ import annotations

import torch


def lora_delta(b: torch.Tensor, a: torch.Tensor, alpha: float) -> torch.Tensor:
    """``(alpha / r) B A`` for B (d, r), A (r, k): (d, k)."""
    if b.ndim != 2 or a.ndim != 2 or b.shape[1] != a.shape[0]:
        raise ValueError(f"lora_delta needs B (d, r) and A (r, k), got {tuple(b.shape)} and {tuple(a.shape)}")
    r = b.shape[1]
    return (alpha / r) * (b @ a)


def lora_weight(w: torch.Tensor, b: torch.Tensor, a: torch.Tensor, alpha: float) -> torch.Tensor:
    """``W + (alpha / r) B A``: (d, k)."""
    delta = lora_delta(b, a, alpha)
    if w.shape != delta.shape:
        raise ValueError(f"lora_weight: W {tuple(w.shape)} does not match B A {tuple(delta.shape)}")
    return w + delta


def lora_parameter_count(d: int, k: int, r: int) -> int:
    """Trainable parameters of B (d, r) and A (r, k)."""
    return r * (d + k)


def column_norm(w: torch.Tensor) -> torch.Tensor:
    """``||W||_c``: the Euclidean norm of each column of W (d, k), as a (1, k) row."""
    if w.ndim != 2:
        raise ValueError(f"column_norm needs a matrix (d, k), got shape {tuple(w.shape)}")
    return torch.linalg.vector_norm(w, dim=0, keepdim=True)


def dora_weight(w0: torch.Tensor, b: torch.Tensor, a: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``m (W_0 + B A) / ||W_0 + B A||_c`` with m (1, k): (d, k)."""
    v = w0 + b @ a
    if m.shape != (1, v.shape[1]):
        raise ValueError(f"dora_weight: magnitude must be (1, {v.shape[1]}), got {tuple(m.shape)}")
    return m * v / column_norm(v)


def truncated_svd(w: torch.Tensor, k: int) -> torch.Tensor:
    """Best rank-k approximation ``U_k diag(s_1..s_k) V_k^T`` of W (m, n), 0 <= k <= min(m, n)."""
    if w.ndim != 2 or not 0 <= k <= min(w.shape):
        raise ValueError(f"truncated_svd needs a matrix and 0 <= k <= min(m, n), got {tuple(w.shape)}, k={k}")
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    return (u[:, :k] * s[:k]) @ vh[:k]


def singular_value_threshold(w: torch.Tensor, tau: float) -> torch.Tensor:
    """``U diag(max(s - tau, 0)) V^T``: argmin_X ``(1/2)||X - W||_F^2 + tau ||X||_*``."""
    if tau < 0:
        raise ValueError(f"singular_value_threshold needs tau >= 0, got {tau}")
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    return (u * torch.clamp(s - tau, min=0)) @ vh


def nystrom(k: torch.Tensor, landmarks: list[int]) -> torch.Tensor:
    """Nystrom approximation ``K[:, S] K[S, S]^+ K[S, :]`` of a square kernel matrix from landmarks S.

    It reproduces the landmark columns and rows exactly when K[S, S] is invertible (Williams & Seeger 2001;
    Xiong et al. 2021, Nystromformer, eq. 6).
    """
    c, w, r = k[:, landmarks], k[landmarks][:, landmarks], k[landmarks]
    return c @ torch.linalg.pinv(w) @ r
