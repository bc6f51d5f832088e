"""The counter of the IO model (:mod:`impl.io_model`): elements read from and written to slow memory, and
the on-chip working set. A module of its own so that the tiled kernel (:mod:`impl.tiled_attention`) takes
a counter without importing the model that walks it."""
from __future__ import annotations

from dataclasses import dataclass

import torch


class OnChipOverflow(ValueError):
    """The working set of a tile does not fit in the on-chip buffer of ``M`` elements."""


@dataclass
class IOCounter:
    """Counts elements read from and written to slow memory; checks the on-chip working set.

    ``M``: on-chip buffer size in elements (``None``: unbounded). ``peak_on_chip``: the largest
    working set one program (one batch element and head) declared with :meth:`on_chip` or held
    with :meth:`hold`; ``peak_on_chip_bytes``: the largest held in bytes (:meth:`hold` only).
    """

    M: int | None = None
    reads: int = 0
    writes: int = 0
    peak_on_chip: int = 0
    peak_on_chip_bytes: int = 0

    def read(self, *tiles: torch.Tensor) -> None:
        self.reads += sum(t.numel() for t in tiles)

    def write(self, *tiles: torch.Tensor) -> None:
        self.writes += sum(t.numel() for t in tiles)

    def on_chip(self, elements: int) -> None:
        """Declare a working set of ``elements`` per program; raise when it exceeds ``M``."""
        self.peak_on_chip = max(self.peak_on_chip, elements)
        if self.M is not None and elements > self.M:
            raise OnChipOverflow(f"working set of {elements} elements exceeds the on-chip buffer M = {self.M}")

    def hold(self, *buffers: torch.Tensor) -> None:
        """The algorithm's own on-chip buffers of one program, measured from the tensors themselves.

        Each buffer is one program's tile (the batch and head dimensions are the programs): its
        elements are ``numel / programs``. Distinct tensors only (an in-place update is one buffer).
        """
        distinct = list({id(t): t for t in buffers}.values())
        programs = distinct[0].shape[:-2].numel()  # Q_i (..., B_r, d): one program per leading index
        elements = sum(t.numel() for t in distinct) // programs
        self.peak_on_chip_bytes = max(self.peak_on_chip_bytes,
                                      sum(t.numel() * t.element_size() for t in distinct) // programs)
        self.on_chip(elements)

    @property
    def accesses(self) -> int:
        return self.reads + self.writes
