"""Softmax variants over the last dimension."""
import torch
from impl.softmax import stable_softmax


class Softmax:
    params = [[256, 4096]]
    param_names = ["n"]

    def setup(self, n):
        self.x = torch.randn(64, n, generator=torch.Generator().manual_seed(0))

    def time_stable(self, n):
        stable_softmax(self.x)
