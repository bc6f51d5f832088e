"""Strategies for attention problems: (q, k, v, mask) with odd sizes, GQA and every mask kind.

Sizes are drawn small and deliberately odd so that tiles of 16 (and any drawn block size) miss
the sequence boundaries. Values come from a drawn seed (``torch.randn``), so an example prints as
its shapes, mask and seed and shrinks towards small shapes.

The problems themselves (:class:`AttentionProblem`, its :class:`ProblemSpec`, the fixed problems
every backend sees) live in :mod:`claimcheck.kernel`, which ``claims kernel`` runs outside pytest;
this module is their name in the property suite.
"""
from claimcheck.kernel import (MASK_KINDS, AttentionProblem, ProblemSpec, attention_problems, fixed_problem,
                               fixed_problems, make_mask, make_problem, problem_strategy)

__all__ = ["MASK_KINDS", "AttentionProblem", "ProblemSpec", "attention_problems", "fixed_problem", "fixed_problems",
           "make_mask", "make_problem", "problem_strategy"]
