"""Measurements as LUT rows, in the format of ``lut/README.md``.

One row per measured point. ``latency_ms`` is the median of the timed
repetitions; the 10th/90th percentiles, the repetitions and (for prefill) the
eager median go into ``notes``. ``peak_mem_mb`` is the peak the timing backend
reported (``torch.cuda.max_memory_allocated``: weights, KV cache and the
graph's activations), or, where the backend cannot measure memory, the
estimate of :func:`~lut_population.profile.points.estimated_memory_mb`, said
so in ``notes``. ``kv_delta_mb`` is the shape formula of PLAN.md section 6
(:func:`lut_population.work.kv_delta_mb`). Energy is not measured: 0, with
``energy not measured`` in ``notes``.

Numbers are written with six significant digits and rows are sorted by
(model, phase, context, batch, k), as ``python -m lut_population build`` does.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lut_population.csv_format import COLUMNS, format_number, quote_cell
from lut_population.profile import PROFILER_VERSION
from lut_population.profile.points import (
    estimated_memory_mb,
    model_id_of,
    shape_of,
)
from lut_population.profile.runner import Measurement
from lut_population.shapes import ModelShape
from lut_population.work import kv_delta_mb

TENSOR_PARALLEL = 1
"""The profiler runs one GPU."""

PIPELINE_PARALLEL = 1
"""No pipeline stages."""


@dataclass(frozen=True)
class RunInfo:
    """What every row of a run shares.

    Attributes:
        target: The profiled model.
        hardware: The hardware id (``--hardware``).
        dtype: ``fp16`` or ``bf16``.
        backend: The timing backend's description (e.g. ``cuda-graph``).
    """

    target: ModelShape
    hardware: str
    dtype: str
    backend: str

    @property
    def source(self) -> str:
        """The rows' ``source``: ``microbench:profile_v1:<backend>``."""
        return f"microbench:{PROFILER_VERSION}:{self.backend}"


def _notes(item: Measurement, measured_peak: bool) -> str:
    t = item.timing
    notes = [f"median of {t.reps} reps after {t.warmup} warm-up; p10 {t.p10_ms:.4g} ms"]
    notes.append(f"p90 {t.p90_ms:.4g} ms")
    if item.eager is not None:
        notes.append(f"eager median {item.eager.median_ms:.4g} ms")
    if item.point.phase == "head":
        notes.append(f"EAGLE-style head step, width {item.point.width}")
    if not measured_peak:
        notes.append("peak memory estimated, not measured")
    notes.append("energy not measured")
    return "; ".join(notes)


def row_cells(info: RunInfo, item: Measurement) -> list[str]:
    """The cells of one row, in :data:`~lut_population.build.COLUMNS` order."""
    point = item.point
    peak = item.peak_mem_mb
    measured = peak is not None
    if peak is None:
        peak = estimated_memory_mb(info.target, point)
    kv = float(kv_delta_mb(shape_of(info.target, point), point.work()))
    return [
        point.lut_phase,
        model_id_of(info.target, point),
        info.hardware,
        str(TENSOR_PARALLEL),
        str(PIPELINE_PARALLEL),
        str(point.context_len),
        str(point.microbatch),
        str(point.fanout_k),
        info.dtype,
        format_number(item.timing.median_ms),
        format_number(peak),
        format_number(kv),
        "0",
        info.source,
        _notes(item, measured),
    ]


def render_csv(info: RunInfo, items: Iterable[Measurement]) -> str:
    """CSV text (header + rows) of the measurements, sorted by model, phase and grid point."""

    def order(item: Measurement) -> tuple[str, str, int, int, int]:
        p = item.point
        return (model_id_of(info.target, p), p.lut_phase, p.context_len, p.microbatch, p.fanout_k)

    out = io.StringIO()
    out.write(",".join(COLUMNS) + "\n")
    for item in sorted(items, key=order):
        out.write(",".join(quote_cell(c) for c in row_cells(info, item)) + "\n")
    return out.getvalue()


def split_by_model(info: RunInfo, items: Sequence[Measurement]) -> dict[str, list[Measurement]]:
    """Group measurements by the LUT model id their rows carry (target, ``<target>.eagle``...)."""
    groups: dict[str, list[Measurement]] = {}
    for item in items:
        groups.setdefault(model_id_of(info.target, item.point), []).append(item)
    return groups
