"""asv benchmarks of transformer-claims (see benchmarks/README.md)."""
