"""Spectral metrics of attention matrices (:mod:`impl.spectral`).

Each metric is timed on a batch of 8 row-stochastic attention matrices ``softmax(q k^T / sqrt(d))``
of size n x n (``stationary_distribution`` takes one matrix). The metrics are eigen- and singular
value computations, O(n^3) per matrix; they run once per matrix in the report's analyses.
"""
from benchmarks._common import DTYPES, randn, require_device, safe_import, synchronize, synchronized

with safe_import() as _spectral:
    from impl import spectral

with safe_import() as _attention:
    from impl.attention import attention_weights

METRICS = ("eigenvalues", "singular_values", "effective_rank", "stable_rank", "spectral_concentration",
           "spectral_norm", "stationary_distribution")


class SpectralMetrics:
    """One metric of 8 attention matrices (n x n) from standard-normal q, k with d = 64."""

    version = "1"
    params = [["cpu", "cuda"], list(METRICS), [64, 256], ["float32", "float64"]]
    param_names = ["device", "metric", "n", "dtype"]

    def setup(self, device, metric, n, dtype):
        require_device(device)
        for imported in (_spectral, _attention):
            if imported.error:
                raise NotImplementedError(f"not in this commit: {imported.error}")
        q, k = (randn((8, n, 64), DTYPES[dtype], device, seed) for seed in range(2))
        a = attention_weights(q, k)  # (8, n, n), rows sum to 1
        fn = getattr(spectral, metric)
        arg = a[0] if metric == "stationary_distribution" else a
        self.call = synchronized(lambda: fn(arg), device)
        self.call()
        synchronize(device)

    def time_metric(self, device, metric, n, dtype):
        self.call()
