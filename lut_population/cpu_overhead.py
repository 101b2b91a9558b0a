"""Host-side time per iteration (scheduling, input preparation, sampling, output processing).

Vidur's CPU-overhead profile (A100 host, CodeLlama-34B at TP 2, batch sizes 8
to 128) gives the median of each step. Each step is fitted by least squares
as ``a + b * batch`` and continued linearly outside 8..128. Sampling works on
every position that needs a next-token distribution, so it is evaluated at
the number of LM-head rows (batch for prefill and decode, batch x (k + 1) for
verify); the other steps at the batch size. The same host cost is used for
every model, TP degree and GPU (there is one profile); the Ray communication
time of that profile is left out (it belongs to the old Ray-based executor).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.inputs import CPU_PARTS, load_cpu_overheads


@dataclass(frozen=True)
class CpuOverheadFit:
    """Linear fits ``a + b * n`` of the host-side steps.

    Attributes:
        parts: ``{step: (a_ms, b_ms_per_item)}``.
        error: Median and maximum relative error of the summed fit on the profiled rows.
        batches: (smallest, largest) profiled batch size.
    """

    parts: dict[str, tuple[float, float]]
    error: tuple[float, float]
    batches: tuple[int, int]

    def time_ms(self, batch: FloatArray, sampled: FloatArray) -> FloatArray:
        """Host time of one iteration of ``batch`` sequences with ``sampled`` LM-head rows."""
        total = np.zeros_like(np.asarray(batch, dtype=np.float64))
        for part, (a, b) in self.parts.items():
            n = sampled if part == "sampler_e2e_median" else batch
            total = total + a + b * n
        return np.asarray(total)


@cache
def cpu_overhead_fit() -> CpuOverheadFit:
    """Fit every host-side step of the Vidur CPU-overhead profile."""
    frame = load_cpu_overheads()
    batch = frame["batch_size"].to_numpy(dtype=np.float64)
    design = np.column_stack([np.ones_like(batch), batch])
    parts: dict[str, tuple[float, float]] = {}
    total_fit = np.zeros_like(batch)
    total = np.zeros_like(batch)
    for part in CPU_PARTS:
        y = frame[part].to_numpy(dtype=np.float64)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        parts[part] = (float(coef[0]), float(coef[1]))
        total_fit += design @ coef
        total += y
    rel = np.abs(total_fit - total) / total
    return CpuOverheadFit(
        parts=parts,
        error=(float(np.median(rel)), float(np.max(rel))),
        batches=(int(batch.min()), int(batch.max())),
    )
