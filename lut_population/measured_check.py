"""Spot checks of the H100 LUTs against the project's own H100 measurements.

Every bundled H100 LUT of a measured model (``lut/<model>__h100-sxm5-80gb.csv``
and the measured ``lut/microbench/<model>__h100-sxm5-80gb.csv``) is looked up
through the simulator's :class:`~simulator.lut.LutManager` (interpolating
where a measured point is not a grid point) at every measured point of every
measured phase (:func:`lut_population.measured.gpu_time_points`: CUDA-graph
GPU time, packed-GQA verify where measured). Points outside a LUT's grid are
skipped and counted. Per file, model and phase the check reports the number
of points, the median of ``LUT / measured`` and the worst ratio (the one
farthest from 1 in log terms).

A comparison fails when the median or the worst ratio leaves its tolerance,
a factor ``f`` meaning the band ``[1 / f, f]``. The tolerance depends on how
the LUT was made (its ``source`` tag); the reasons for each number are in
``lut_population/PLAN.md`` section 8.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lut_population.measured import (
    MEASURED_DTYPE,
    MEASURED_HARDWARE,
    MEASURED_TP,
    Point,
    gpu_time_points,
    measured_models,
    measured_phases,
)
from simulator.lut import LutKey, LutManager, LutTable, load_lut, table_from_frame

MICROBENCH_DIR = "microbench"
"""Sub-folder of ``lut/`` holding the LUTs built from the measurements."""


@dataclass(frozen=True)
class Tolerance:
    """Accepted band of ``LUT / measured`` ratios, as factors ``>= 1``.

    Attributes:
        median: The median ratio must lie in ``[1 / median, median]``.
        worst: Every ratio must lie in ``[1 / worst, worst]``.
        why: One line on where the numbers come from (PLAN.md section 8 has the full reasoning).
    """

    median: float
    worst: float
    why: str


TOLERANCES: dict[str, Tolerance] = {
    "profiled": Tolerance(
        1.15,
        1.30,
        "composed from the model's own Vidur operator profile: attention-model median error "
        "11 % + measurement repeatability 3.5 % (median); worst operator-smoothing p90 22 % + "
        "repeatability (per point)",
    ),
    "roofline": Tolerance(
        1.35,
        2.0,
        "no profile of the model (operator roofline): the 35 % spot-check band for a different "
        "engine (median); per point, two correct implementations of these models differ by up "
        "to 1.6x in the same measurements (plain PyTorch vs Triton element-wise ops)",
    ),
    "measured": Tolerance(
        1.00001,
        1.00001,
        "built from these measurements: equal to six significant digits",
    ),
}
"""Tolerance per way of making a LUT (see :func:`tier_of`)."""


def tier_of(source: str) -> str:
    """The tolerance tier of a LUT ``source`` tag.

    Raises:
        ValueError: A tag this check has no tolerance for.
    """
    if source.startswith("microbench"):
        return "measured"
    if source.startswith("vidur_profile@"):
        return "profiled"
    if source.startswith("vidur_op_roofline@"):
        return "roofline"
    raise ValueError(f"no measurement tolerance for LUT source {source!r}")


@dataclass(frozen=True)
class Comparison:
    """LUT against measurements for one file, model and phase.

    Attributes:
        file: The LUT file (relative to the LUT directory).
        model: Model id.
        phase: LUT phase.
        tier: Tolerance tier (:data:`TOLERANCES`).
        points: Measured points compared.
        skipped: Measured points outside the LUT's grid.
        median_ratio: Median of LUT / measured.
        worst_ratio: The ratio farthest from 1 (log scale).
        worst_point: (context_len, microbatch, fanout_k) of the worst ratio.
    """

    file: str
    model: str
    phase: str
    tier: str
    points: int
    skipped: int
    median_ratio: float
    worst_ratio: float
    worst_point: Point

    @property
    def tolerance(self) -> Tolerance:
        """The tier's tolerance."""
        return TOLERANCES[self.tier]

    @property
    def ok(self) -> bool:
        """Median and worst ratio within the tolerance (and at least one point compared)."""
        tol = self.tolerance
        return (
            self.points > 0
            and _factor(self.median_ratio) <= tol.median
            and _factor(self.worst_ratio) <= tol.worst
        )


def _factor(ratio: float) -> float:
    return math.exp(abs(math.log(ratio))) if ratio > 0 else math.inf


def _inside(grid: tuple[int, ...], value: int) -> bool:
    return grid[0] <= value <= grid[-1]


def compare_table(table: LutTable, file: str, source: str) -> list[Comparison]:
    """Compare every measured model and phase the table holds (TP 1, fp16, H100)."""
    manager = LutManager([table])
    tier = tier_of(source)
    out = []
    for model in measured_models():
        for phase in measured_phases(model):
            key = LutKey(phase, model, MEASURED_HARDWARE, MEASURED_TP, 1, MEASURED_DTYPE)
            if not manager.has(key):
                continue
            grid = manager.grid(key)
            ratios: list[tuple[float, Point]] = []
            skipped = 0
            for point, measured in sorted(gpu_time_points(phase, model).items()):
                context, batch, k = point
                if not (
                    _inside(grid.context_len, context)
                    and _inside(grid.microbatch, batch)
                    and _inside(grid.fanout_k, k)
                ):
                    skipped += 1
                    continue
                lut = manager.lookup(key, context, batch, k).latency_ms
                ratios.append((lut / measured.latency_ms, point))
            if not ratios:
                out.append(Comparison(file, model, phase, tier, 0, skipped, 1.0, 1.0, (0, 0, 0)))
                continue
            worst, where = max(ratios, key=lambda r: abs(math.log(r[0])))
            median = float(np.median([r for r, _ in ratios]))
            out.append(
                Comparison(file, model, phase, tier, len(ratios), skipped, median, worst, where)
            )
    return out


def lut_files(lut_dir: Path) -> list[Path]:
    """The H100 LUT files of measured models present in ``lut_dir`` (composed, then measured)."""
    names = [f"{model}__{MEASURED_HARDWARE}.csv" for model in measured_models()]
    found = [lut_dir / n for n in names if (lut_dir / n).is_file()]
    found += [
        lut_dir / MICROBENCH_DIR / n for n in names if (lut_dir / MICROBENCH_DIR / n).is_file()
    ]
    return found


def _source_of(path: Path) -> str:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        first = next(csv.DictReader(handle), None)
    return "" if first is None else str(first.get("source") or "")


def compare_dir(lut_dir: Path) -> list[Comparison]:
    """Compare every H100 LUT file of a measured model in ``lut_dir``."""
    out = []
    for path in lut_files(lut_dir):
        name = path.relative_to(lut_dir).as_posix()
        out += compare_table(load_lut(path, use_cache=False), name, _source_of(path))
    return out


def compare_text(text: str, file: str, source: str) -> list[Comparison]:
    """Compare a LUT held as CSV text (a file about to be written)."""
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False)
    return compare_table(table_from_frame(frame, file), file, source)


def render(comparisons: list[Comparison]) -> list[str]:
    """A Markdown table of the comparisons."""
    lines = [
        "| file | phase | tier | points | skipped | median LUT/measured | worst (at ctx, batch, k) "
        "| tolerance median / worst | result |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in comparisons:
        tol = c.tolerance
        context, batch, k = c.worst_point
        lines.append(
            f"| {c.file} | {c.phase} | {c.tier} | {c.points} | {c.skipped} | "
            f"{c.median_ratio:.3f} | {c.worst_ratio:.3f} ({context}, {batch}, {k}) | "
            f"x{tol.median:g} / x{tol.worst:g} | {'ok' if c.ok else 'FAIL'} |"
        )
    return lines
