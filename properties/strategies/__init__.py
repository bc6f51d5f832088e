"""Hypothesis strategies named after the mathematical objects they generate.

One module per family; this package only re-exports.
"""
from properties.strategies.core import dims, finite_floats, logit_vectors, logit_matrices, seeds

__all__ = ["dims", "finite_floats", "logit_vectors", "logit_matrices", "seeds"]
