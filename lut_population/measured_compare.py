"""Catalog section comparing the composed H100 LUTs with the ones built from measurements.

Two tables, from the files about to be written:

* every composed H100 file of a measured model against the measurements
  (the numbers ``python -m lut_population check`` tests,
  :mod:`lut_population.measured_check`);
* every composed fused file against the fused file composed from the
  measured rows, at the measured file's grid points.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd

from lut_population.build import BuiltFile
from lut_population.measured import MEASURED_HARDWARE, measured_models
from lut_population.measured_check import MICROBENCH_DIR, compare_text, render
from simulator.lut import LutManager, LutTable, table_from_frame


def _table(built: BuiltFile) -> LutTable:
    frame = pd.read_csv(io.StringIO(built.text), keep_default_na=False)
    return table_from_frame(frame, built.spec.name)


def _ratio_lines(composed: BuiltFile, measured: BuiltFile) -> list[str]:
    """Composed / measured-file latency at the measured file's grid points, per key."""
    lut = LutManager([_table(composed)])
    own = LutManager([_table(measured)])
    lines = []
    for key in sorted(own.keys(), key=lambda k: k.describe()):
        if not lut.has(key):
            continue
        grid, reach = own.grid(key), lut.grid(key)
        ratios = []
        skipped = 0
        for c in grid.context_len:
            for b in grid.microbatch:
                for k in grid.fanout_k:
                    if not (
                        reach.context_len[0] <= c <= reach.context_len[-1]
                        and reach.microbatch[0] <= b <= reach.microbatch[-1]
                        and reach.fanout_k[0] <= k <= reach.fanout_k[-1]
                    ):
                        skipped += 1
                        continue
                    ratios.append(
                        lut.lookup(key, c, b, k).latency_ms / own.lookup(key, c, b, k).latency_ms
                    )
        if not ratios:
            continue
        worst = max(ratios, key=lambda r: abs(math.log(r)))
        lines.append(
            f"| {composed.spec.name} | {measured.spec.name} | {key.phase} | {len(ratios)} | "
            f"{skipped} | {float(np.median(ratios)):.3f} | {worst:.3f} |"
        )
    return lines


def measured_section(files: tuple[BuiltFile, ...]) -> list[str]:
    """The catalog section (Markdown lines)."""
    by_name = {f.spec.name: f for f in files}
    models = set(measured_models())
    composed = [
        f
        for f in files
        if f.spec.hardware == MEASURED_HARDWARE
        and f.spec.model in models
        and not f.spec.name.startswith(f"{MICROBENCH_DIR}/")
    ]
    comparisons = [c for f in composed for c in compare_text(f.text, f.spec.name, f.spec.method)]
    lines = [
        "## H100: composed LUTs against the measurements",
        "",
        "Ratio composed LUT / measured GPU time (CUDA-graph replay; packed-GQA verify where "
        "measured) at every measured point inside the LUT's grid; `microbench/` files equal "
        "the measurements there. Tolerances and reasons: `lut_population/PLAN.md` section 8.",
        "",
        *render(comparisons),
        "",
        "Fused files: composed / built from measurements, at the measured file's grid points "
        "(which include rows filled for unmeasured inputs).",
        "",
        "| composed file | measured file | phase | points | skipped | median ratio | worst ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for built in files:
        name = built.spec.name
        if not name.startswith(f"{MICROBENCH_DIR}/") or "+" not in built.spec.model:
            continue
        twin = by_name.get(name.removeprefix(f"{MICROBENCH_DIR}/"))
        if twin is not None:
            lines += _ratio_lines(twin, built)
    return [*lines, ""]
