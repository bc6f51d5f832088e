"""Softmax over the last dimension: the two printed forms and torch's fused kernel.

``naive``: ``exp(x) / sum exp(x)`` (foundations.txt line 75); ``stable``: the max-subtracted
form (line 85), both from :mod:`impl.softmax`; ``torch``: ``torch.softmax``, one fused pass;
``logsumexp``: :func:`impl.softmax.logsumexp`, the normaliser the tiled algorithms keep per row.
Each call processes a fixed number of elements (rows x n) so that the lengths compare.
"""
import torch

from benchmarks._common import DTYPES, randn, require_device, synchronize, synchronized
from impl import softmax

VARIANTS = {
    "naive": softmax.naive_softmax,
    "stable": softmax.stable_softmax,
    "torch": lambda x: torch.softmax(x, dim=-1),
    "logsumexp": softmax.logsumexp,
}
ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 26}  # rows * n per call


class Softmax:
    """One softmax over ``(ELEMENTS // n, n)`` standard-normal logits."""

    version = "1"
    params = [["cpu", "cuda"], list(VARIANTS), [256, 4096, 65536], ["float32", "bfloat16"]]
    param_names = ["device", "variant", "n", "dtype"]

    def setup(self, device, variant, n, dtype):
        require_device(device)
        x = randn((ELEMENTS[device] // n, n), DTYPES[dtype], device, seed=0)
        fn = VARIANTS[variant]
        self.call = synchronized(lambda: fn(x), device)
        self.call()
        synchronize(device)

    def time_softmax(self, device, variant, n, dtype):
        self.call()
