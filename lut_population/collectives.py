"""Tensor-parallel all-reduce time, fitted to Vidur's NCCL profiles inside one node.

For each GPU and worker count, ``t = a + size_bytes / (b * 1e6)`` is fitted by
least squares (relative residuals, non-negative coefficients) to the medians of
all profiled message sizes (2 KiB to 64 MiB). The fit is monotone in the size,
which the raw medians are not at small sizes (launch noise), and continues
linearly past 64 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.optimize import least_squares

from lut_population.arrays import FloatArray
from lut_population.inputs import load_all_reduce


@dataclass(frozen=True)
class AllReduceFit:
    """All-reduce latency model for one GPU type and worker count.

    Attributes:
        gpu: ``a100`` or ``h100``.
        workers: Number of GPUs taking part.
        latency_ms: Fitted fixed cost.
        bandwidth_gb_per_s: Fitted algorithm bandwidth (bytes per second / 1e9).
        error: Median and 90th-percentile relative error on the profiled sizes.
        rows: Number of profiled sizes.
    """

    gpu: str
    workers: int
    latency_ms: float
    bandwidth_gb_per_s: float
    error: tuple[float, float]
    rows: int

    def time_ms(self, size_bytes: FloatArray) -> FloatArray:
        """Time of one all-reduce of ``size_bytes`` bytes."""
        return np.asarray(self.latency_ms + size_bytes / (self.bandwidth_gb_per_s * 1e6))


@cache
def all_reduce_fit(gpu: str, workers: int) -> AllReduceFit:
    """Fit the all-reduce profile of ``gpu`` for ``workers`` GPUs."""
    curves = load_all_reduce(gpu)
    if workers not in curves:
        raise KeyError(f"no all-reduce profile for {workers} workers on {gpu}")
    size = curves[workers].tokens
    measured = curves[workers].time_ms

    def model(p: FloatArray) -> FloatArray:
        return np.asarray(p[0] + size * p[1] / 1e6)

    fit = least_squares(
        lambda p: (model(p) - measured) / measured,
        x0=np.array([0.03, 1.0 / 100.0]),
        bounds=(0.0, np.inf),
    ).x
    rel = np.abs(model(fit) - measured) / measured
    return AllReduceFit(
        gpu=gpu,
        workers=workers,
        latency_ms=float(fit[0]),
        bandwidth_gb_per_s=float(1.0 / fit[1]),
        error=(float(np.median(rel)), float(np.quantile(rel, 0.9))),
        rows=int(size.size),
    )
