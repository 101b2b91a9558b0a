"""Long context: the attention rule beyond the profiled range, checked against H100 measurements.

The only attention profile (Vidur's A100 FlashAttention table) stops at 4 096
tokens of context; the LUT grids of the 128k-window models run to 131 072.
Beyond the table the cost model of :mod:`lut_population.attention` is used as
a roofline rule, unchanged:

* decode and verify: ``bytes of KV read / bandwidth``, i.e. the fitted
  ``m1 + m2 x GB_read`` line, linear in the context (``m2`` is the inverse
  KV-read bandwidth, scaled to H100 by the bandwidth-bound ratio);
* prefill: ``FLOPs / throughput``, quadratic in the prompt (causal
  ``4 x heads x head_dim x n (n + 1) / 2`` per layer), the fitted ``c1``.

Extrapolating beyond 4 096 tokens rests only on these slopes, so this module
checks them where a measurement exists: the project's own H100 whole-iteration
medians (``inputs/microbench_h100/iterations.csv``, GPU time only, context 128
to 4 096) against the composed latency of the same model, phase, batch and k on
``h100-sxm5-80gb`` at TP 1. The compared quantity is the **context slope**:
the least-squares slope of latency against context (ms per 1 000 tokens of
context) over the measured contexts from :data:`MIN_CONTEXT` up, at fixed
batch (and k). At fixed batch everything but attention and the KV read is
constant in the context for decode and verify, so the slope is the attention
part alone; for prefill the context is the prompt, and the slope is that of
the whole iteration (matrix products included).

Measured rows: ``mode == "graph"`` (one CUDA graph per shape: GPU time, no
host time, the same meaning as a LUT row), except the GQA verify rows of
Llama-3-8B, which use ``graph-packgqa`` (query heads packed per KV head, as
serving kernels do; the plain ``graph`` rows read each KV head four times,
see the data's README). Repeated points (two machines) take the median of
their medians.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from lut_population.inputs import load_microbench_iterations
from lut_population.phases import SinglePhaseCost
from lut_population.plan import gpu_model

HARDWARE = "h100-sxm5-80gb"
"""The measured GPU (one H100 SXM 80 GB)."""

MODELS = ("llama-2-7b", "llama-3-8b")
"""Measured models that are LUT targets."""

MIN_CONTEXT = 512
"""Smallest context in the slope fit (the 128-token points sit on launch floors)."""

PHASE_MODES: dict[tuple[str, str], str] = {
    ("draft_decode", "llama-2-7b"): "graph",
    ("draft_decode", "llama-3-8b"): "graph",
    ("verify", "llama-2-7b"): "graph",
    ("verify", "llama-3-8b"): "graph-packgqa",
    ("prefill", "llama-2-7b"): "graph",
    ("prefill", "llama-3-8b"): "graph",
}
"""(phase, model) -> measured mode compared."""


@dataclass(frozen=True)
class SlopeComparison:
    """Composed against measured context slope of one series (fixed model, phase, batch, k).

    Attributes:
        phase: LUT phase.
        model: Model id.
        mode: Measured mode.
        batch: microbatch.
        fanout_k: fanout_k.
        contexts: Measured contexts used (from :data:`MIN_CONTEXT` up).
        measured_ms_per_1k: Least-squares slope of the measured medians.
        composed_ms_per_1k: Least-squares slope of the composed latency at the same contexts.
        level_ratio: Composed / measured latency at the largest context.
    """

    phase: str
    model: str
    mode: str
    batch: int
    fanout_k: int
    contexts: tuple[int, ...]
    measured_ms_per_1k: float
    composed_ms_per_1k: float
    level_ratio: float

    @property
    def slope_ratio(self) -> float:
        """Composed / measured slope."""
        return self.composed_ms_per_1k / self.measured_ms_per_1k


@dataclass(frozen=True)
class SlopeSummary:
    """Median and worst slope ratio of a group of series.

    Attributes:
        label: Group name (a phase, or ``all``).
        series: Number of series.
        median_ratio: Median composed / measured slope.
        worst_ratio: The ratio farthest from 1 (in log terms).
        median_level_ratio: Median composed / measured latency at the largest context.
    """

    label: str
    series: int
    median_ratio: float
    worst_ratio: float
    median_level_ratio: float


def _slope_per_1k(context: np.ndarray, latency: np.ndarray) -> float:
    slope, _ = np.polyfit(context / 1000.0, latency, 1)
    return float(slope)


def measured_series(frame: pd.DataFrame) -> dict[tuple[str, str, int, int], pd.Series]:
    """Measured medians by (phase, model, batch, k): latency against context, ascending."""
    out: dict[tuple[str, str, int, int], pd.Series] = {}
    for (phase, model), mode in PHASE_MODES.items():
        rows = frame[
            (frame["phase"] == phase) & (frame["model"] == model) & (frame["mode"] == mode)
        ]
        rows = rows[rows["context_len"] >= MIN_CONTEXT]
        grouped = rows.groupby(["microbatch", "fanout_k", "context_len"])["latency_ms_median"]
        medians = grouped.median()
        for (batch, k), series in medians.groupby(level=[0, 1]):
            curve = series.droplevel([0, 1]).sort_index()
            if len(curve) >= 2:
                out[(phase, model, int(batch), int(k))] = curve
    return out


@cache
def slope_comparisons() -> tuple[SlopeComparison, ...]:
    """Every measured series with at least two contexts, compared with the composed latency."""
    out = []
    for (phase, model, batch, k), curve in sorted(
        measured_series(load_microbench_iterations()).items()
    ):
        contexts = curve.index.to_numpy(dtype=np.float64)
        measured = curve.to_numpy(dtype=np.float64)
        cost = SinglePhaseCost(gpu_model(model, HARDWARE, 1), phase)
        composed = np.asarray(
            cost.evaluate(
                contexts, np.full_like(contexts, batch), np.full_like(contexts, k)
            ).latency_ms,
            dtype=np.float64,
        )
        out.append(
            SlopeComparison(
                phase=phase,
                model=model,
                mode=PHASE_MODES[(phase, model)],
                batch=batch,
                fanout_k=k,
                contexts=tuple(int(c) for c in contexts),
                measured_ms_per_1k=_slope_per_1k(contexts, measured),
                composed_ms_per_1k=_slope_per_1k(contexts, composed),
                level_ratio=float(composed[-1] / measured[-1]),
            )
        )
    return tuple(out)


def summarise(label: str, items: list[SlopeComparison]) -> SlopeSummary:
    """Median and worst slope ratio (and median level ratio) of ``items``."""
    ratios = np.asarray([c.slope_ratio for c in items], dtype=np.float64)
    worst = float(ratios[int(np.argmax(np.abs(np.log(ratios))))])
    levels = np.asarray([c.level_ratio for c in items], dtype=np.float64)
    return SlopeSummary(
        label=label,
        series=len(items),
        median_ratio=float(np.median(ratios)),
        worst_ratio=worst,
        median_level_ratio=float(np.median(levels)),
    )


def slope_summaries() -> tuple[SlopeSummary, ...]:
    """One summary per phase, then batch 1 and batch >= 2 apart, then every series."""
    items = list(slope_comparisons())
    phases = sorted({c.phase for c in items})
    per_phase = [summarise(p, [c for c in items if c.phase == p]) for p in phases]
    single = summarise("batch 1", [c for c in items if c.batch == 1])
    batched = summarise("batch >= 2", [c for c in items if c.batch > 1])
    return (*per_phase, single, batched, summarise("all", items))
