"""Implementations under test: reference mathematics in plain torch (float64-capable) and
adapters for fused attention kernels. One module per mathematical object."""
