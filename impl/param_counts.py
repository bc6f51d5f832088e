"""Parameter counts by formula, one function per module of :mod:`impl.multihead`, :mod:`impl.ffn`,
:mod:`impl.norms` and :mod:`impl.blocks`, and :func:`count_parameters` to count a real module.

Notation: ``d`` = d_model, ``h`` query heads, ``g`` key/value heads, ``d_head`` the head width
(``d / h`` by default), ``d_ff`` the FFN hidden width, ``V`` the vocabulary size. A bias adds the
output width of its projection. The formulas work on ints and on sympy symbols alike.
"""
from __future__ import annotations

from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Number of scalar parameters of ``module``; a tied (shared) tensor is counted once."""
    return sum(p.numel() for p in module.parameters())


def linear_params(d_in, d_out, bias: bool):
    """``d_in d_out`` weights (+ ``d_out`` biases)."""
    return d_in * d_out + (d_out if bias else 0)


def attention_params(d_model, n_heads, n_kv_heads=None, d_head=None, bias: bool = False):
    """``W_Q (d, h d_head)``, ``W_K, W_V (d, g d_head)``, ``W_O (h d_head, d)``.

    MHA with ``d_head = d / h``: ``4 d^2`` weights (+ ``4 d`` biases), whatever ``h``.
    """
    g = n_heads if n_kv_heads is None else n_kv_heads
    d_head = d_model // n_heads if d_head is None else d_head
    return (linear_params(d_model, n_heads * d_head, bias) + 2 * linear_params(d_model, g * d_head, bias)
            + linear_params(n_heads * d_head, d_model, bias))


def ffn_params(d_model, d_ff, bias: bool = True):
    """Two-matrix FFN: ``2 d d_ff`` weights (+ ``d_ff + d`` biases); ``8 d^2`` when ``d_ff = 4 d``, no bias."""
    return linear_params(d_model, d_ff, bias) + linear_params(d_ff, d_model, bias)


def swiglu_ffn_params(d_model, d_ff, bias: bool = False):
    """SwiGLU FFN (gate, up, down): ``3 d d_ff`` weights (+ ``2 d_ff + d`` biases)."""
    return 2 * linear_params(d_model, d_ff, bias) + linear_params(d_ff, d_model, bias)


def layer_norm_params(d_model):
    """Gain and shift: ``2 d``."""
    return 2 * d_model


def rms_norm_params(d_model):
    """Gain only: ``d``."""
    return d_model


def encoder_layer_params(d_model, n_heads, d_ff, bias: bool = True):
    """Self-attention + FFN + two LayerNorms (pre- and post-norm alike)."""
    return (attention_params(d_model, n_heads, bias=bias) + ffn_params(d_model, d_ff, bias)
            + 2 * layer_norm_params(d_model))


def decoder_layer_params(d_model, n_heads, d_ff, bias: bool = True):
    """Self-attention + cross-attention + FFN + three LayerNorms."""
    return (2 * attention_params(d_model, n_heads, bias=bias) + ffn_params(d_model, d_ff, bias)
            + 3 * layer_norm_params(d_model))


def decoder_only_block_params(d_model, n_heads, n_kv_heads, d_ff):
    """Bias-free GQA + SwiGLU FFN + two RMSNorms."""
    return (attention_params(d_model, n_heads, n_kv_heads) + swiglu_ffn_params(d_model, d_ff)
            + 2 * rms_norm_params(d_model))


def decoder_only_model_params(vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff,
                              tie_embeddings: bool = False):
    """Embedding ``V d`` + ``L`` blocks + final RMSNorm ``d`` + LM head ``V d`` unless tied."""
    embeddings = vocab_size * d_model * (1 if tie_embeddings else 2)
    return (embeddings + n_layers * decoder_only_block_params(d_model, n_heads, n_kv_heads, d_ff)
            + rms_norm_params(d_model))


def kv_cache_elements(n_layers, n_kv_heads, d_head, seq_len, batch: int = 1):
    """Cached keys and values: ``2 L g d_head n B`` numbers; GQA divides MHA's cache by ``h / g``."""
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch
