"""The project's own H100 measurements: which row gives a point's GPU time.

``inputs/microbench_h100/iterations.csv`` (copied by ``prepare``; method in
``inputs/microbench_h100/README.md``) holds whole-iteration latencies of
Llama-architecture models on one H100 SXM 80GB, fp16, TP 1. Only the
CUDA-graph modes are copied: a replayed graph is GPU time only, the quantity
the LUT rows hold (host time is added by the simulator's engine profiles).

One measured value per point ``(phase, model, context_len, microbatch,
fanout_k)`` is chosen by two rules:

* mode: ``graph-packgqa`` where the model has rows of that mode for the phase
  (Llama-3-8B verify: query heads packed per KV head, as serving kernels run
  GQA; the plain ``graph`` verify of a GQA model reads every KV head once per
  query head), otherwise ``graph``;
* machine: where a point was measured on two machines (machine B repeated
  machine A's Llama-2-7B verify points), the main set's machine A.

The repeats give the measurement's repeatability (:func:`repeatability`):
the largest disagreement between the two machines at the same point.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lut_population.paths import INPUTS_DIR

MEASURED_HARDWARE = "h100-sxm5-80gb"
"""Hardware id of the measured GPU (one H100 SXM 80GB, README of the measurements)."""

MEASURED_DTYPE = "fp16"
MEASURED_TP = 1

MEASUREMENTS_FILE = Path("microbench_h100") / "iterations.csv"
"""The copied measurements, relative to the inputs directory (the CUDA-graph modes are read)."""

PACKED_GQA_MODE = "graph-packgqa"
GRAPH_MODE = "graph"
MAIN_MACHINE = "A"

Point = tuple[int, int, int]
"""(context_len, microbatch, fanout_k)."""


@dataclass(frozen=True)
class Measurement:
    """One measured iteration (one row of the measurements file).

    Attributes:
        phase: LUT phase.
        model: Model id.
        point: (context_len, microbatch, fanout_k).
        mode: Timing mode (``graph`` or ``graph-packgqa``).
        machine: Which H100 ran it.
        latency_ms: Median latency of the repetitions.
        line: Line of the row in the measurements file (header = 1).
    """

    phase: str
    model: str
    point: Point
    mode: str
    machine: str
    latency_ms: float
    line: int


@cache
def load_measurements(inputs_dir: Path = INPUTS_DIR) -> tuple[Measurement, ...]:
    """Every copied measurement row, in file order."""
    with (inputs_dir / MEASUREMENTS_FILE).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return tuple(
        Measurement(
            phase=row["phase"],
            model=row["model"],
            point=(int(row["context_len"]), int(row["microbatch"]), int(row["fanout_k"])),
            mode=row["mode"],
            machine=row["machine"],
            latency_ms=float(row["latency_ms_median"]),
            line=line,
        )
        for line, row in enumerate(rows, start=2)
        if row["dtype"] == MEASURED_DTYPE and row["mode"] in (GRAPH_MODE, PACKED_GQA_MODE)
    )


def measured_models(inputs_dir: Path = INPUTS_DIR) -> tuple[str, ...]:
    """Models with measurements, sorted."""
    return tuple(sorted({m.model for m in load_measurements(inputs_dir)}))


def measured_phases(model: str, inputs_dir: Path = INPUTS_DIR) -> tuple[str, ...]:
    """Phases measured for ``model``, sorted."""
    return tuple(sorted({m.phase for m in load_measurements(inputs_dir) if m.model == model}))


def gpu_time_points(
    phase: str, model: str, inputs_dir: Path = INPUTS_DIR
) -> dict[Point, Measurement]:
    """The measurement that stands for each measured point (rules in the module docstring)."""
    rows = [m for m in load_measurements(inputs_dir) if m.phase == phase and m.model == model]
    mode = PACKED_GQA_MODE if any(m.mode == PACKED_GQA_MODE for m in rows) else GRAPH_MODE
    chosen: dict[Point, Measurement] = {}
    for row in rows:
        if row.mode != mode:
            continue
        held = chosen.get(row.point)
        if held is None or (row.machine == MAIN_MACHINE and held.machine != MAIN_MACHINE):
            chosen[row.point] = row
    return chosen


@cache
def repeatability(inputs_dir: Path = INPUTS_DIR) -> float:
    """Largest relative disagreement of two machines at the same point and mode.

    Returned as a factor ``>= 1``: ``max(a / b, b / a)`` over every point
    measured on two machines.
    """
    by_key: dict[tuple[str, str, str, Point], list[float]] = {}
    for m in load_measurements(inputs_dir):
        by_key.setdefault((m.phase, m.model, m.mode, m.point), []).append(m.latency_ms)
    factors = [max(v) / min(v) for v in by_key.values() if len(v) > 1]
    if not factors:
        raise LookupError("no point of the measurements was measured on two machines")
    return max(factors)
