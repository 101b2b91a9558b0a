"""Spot checks of the draft-head rows against the H100 measurements made for this project.

``inputs/microbench_h100/trees_heads.csv`` (machine C, one H100 80GB HBM3, CUDA
graphs, GPU time only, TP 1) times an EAGLE-style head step (``draft_head``:
fc 2h -> h, one decoder layer with its own KV cache, the target's final norm
and LM head) on the Llama-2-7B and Llama-3-8B shapes, and one target decoder
layer (``target_layer``) and the final norm + LM head (``lm_head``) alone at the
same shapes, for ``tokens_per_seq`` = width 1, 4 or 8 candidates per sequence.
Only the rows without a tree mask are compared (``graph``; for Llama-3-8B at
width > 1 ``graph-packgqa``, the layout serving kernels use for grouped-query
attention; the masked rows run on a different attention kernel).

Three comparisons per measured point (context 512 or 2048, batch 1-64):

* (a) the shipped head LUT row (``draft_decode`` at width 1, ``verify`` with
  ``fanout_k = width - 1`` above) against the measured head step;
* (b) the composed head step against the composed target layer + final norm +
  LM head, next to the same ratio measured;
* (c) the composed target layer + final norm + LM head against the measured one.

Tolerances (:data:`HEAD_MEDIAN_TOLERANCE`, :data:`HEAD_POINT_TOLERANCE`) are
explained in ``PLAN.md`` section 4.9.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lut_population.inputs import load_trees_heads
from lut_population.plan import file_name, gpu_model, head_model
from lut_population.work import Work
from simulator.lut import LutKey, LutManager, load_lut

HEAD_MEDIAN_TOLERANCE = 0.10
"""Largest accepted median relative deviation of one comparison over all measured points."""

HEAD_POINT_TOLERANCE = 0.50
"""Largest accepted relative deviation at any single measured point."""

HARDWARE = "h100-sxm5-80gb"
MEASURED_MODES = ("graph", "graph-packgqa")
"""Modes compared: no tree mask (the packed-GQA rows where present)."""


@dataclass(frozen=True)
class HeadPoint:
    """One measured shape and its comparisons.

    Attributes:
        target: Target model id.
        context: Context per sequence.
        batch: Sequences.
        width: Candidates per sequence.
        mode: Measurement mode of the rows used.
        measured_head_ms: Measured ``draft_head``.
        lut_head_ms: The head LUT row.
        measured_layer_lm_ms: Measured ``target_layer`` + ``lm_head``.
        composed_head_ms: Composed head step.
        composed_layer_lm_ms: Composed target layer + final norm + LM head.
    """

    target: str
    context: int
    batch: int
    width: int
    mode: str
    measured_head_ms: float
    lut_head_ms: float
    measured_layer_lm_ms: float
    composed_head_ms: float
    composed_layer_lm_ms: float

    @property
    def lut_ratio(self) -> float:
        """(a) LUT head row / measured head step."""
        return self.lut_head_ms / self.measured_head_ms

    @property
    def composed_over_layer(self) -> float:
        """(b) composed head step / composed (target layer + LM head)."""
        return self.composed_head_ms / self.composed_layer_lm_ms

    @property
    def measured_over_layer(self) -> float:
        """(b) measured head step / measured (target layer + LM head)."""
        return self.measured_head_ms / self.measured_layer_lm_ms

    @property
    def layer_ratio(self) -> float:
        """(c) composed / measured (target layer + LM head)."""
        return self.composed_layer_lm_ms / self.measured_layer_lm_ms


def _pick(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one shape in the preferred mode (packed GQA where measured)."""
    for mode in reversed(MEASURED_MODES):
        rows: pd.DataFrame = frame[frame["mode"] == mode]
        if {"draft_head", "target_layer"} <= set(rows["phase"]):
            return rows
    empty: pd.DataFrame = frame.iloc[0:0]
    return empty


def _lut_ms(lut_dir: Path, head_id: str, context: int, batch: int, width: int) -> float:
    table = load_lut(lut_dir / file_name(head_id, HARDWARE))
    phase = "draft_decode" if width == 1 else "verify"
    key = LutKey(phase, head_id, HARDWARE, 1, 1, "fp16")
    k = 1 if width == 1 else width - 1
    return float(LutManager([table]).lookup(key, context, batch, k).latency_ms)


def head_points(lut_dir: Path | None) -> list[HeadPoint]:
    """Every measured head shape with its comparisons.

    Args:
        lut_dir: Where the head LUT files are; None compares the composed head
            step instead of the LUT row (the two agree at these grid points;
            used by the catalog, which is rendered before the files are written).
    """
    frame = load_trees_heads()
    rows = frame[frame["phase"].isin(["draft_head", "target_layer", "lm_head"])]
    points = []
    shape_keys = ["model", "context_len", "microbatch", "tokens_per_seq"]
    for (target_id, context, batch, width), group in rows.groupby(shape_keys, sort=True):
        chosen = _pick(group[group["phase"] != "lm_head"])
        lm_rows = group[(group["phase"] == "lm_head") & (group["mode"] == "graph")]
        if chosen.empty or lm_rows.empty:
            continue
        measured = dict(zip(chosen["phase"], chosen["latency_ms_median"], strict=True))
        head_id = f"{target_id}.eagle"
        head = head_model(head_id, HARDWARE, 1)
        target = gpu_model(str(target_id), HARDWARE, 1)
        w = float(width)
        work = Work(np.array(float(batch)), np.array(w), np.array(float(context)), np.array(w))
        layer_lm = (
            target.block_ms(work.tokens)
            + target.attention.time_ms(work.batch, work.new, work.cached)
            + target.ops.time_ms("input_layernorm", work.tokens)
            + target.ops.lm_head_ms(work.logit_rows)
        )
        composed = float(head.latency_ms(work))
        points.append(
            HeadPoint(
                target=str(target_id),
                context=int(context),
                batch=int(batch),
                width=int(width),
                mode=str(chosen["mode"].iloc[0]),
                measured_head_ms=float(measured["draft_head"]),
                lut_head_ms=composed
                if lut_dir is None
                else _lut_ms(lut_dir, head_id, int(context), int(batch), int(width)),
                measured_layer_lm_ms=float(measured["target_layer"])
                + float(lm_rows["latency_ms_median"].iloc[0]),
                composed_head_ms=composed,
                composed_layer_lm_ms=float(layer_lm),
            )
        )
    return points


@dataclass(frozen=True)
class HeadSummary:
    """Median and worst relative deviation of one comparison.

    Attributes:
        name: The comparison.
        ratios: Its ratios, one per point.
    """

    name: str
    ratios: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median ratio."""
        return float(np.median(self.ratios))

    @property
    def worst(self) -> float:
        """The ratio farthest from 1."""
        return max(self.ratios, key=lambda r: abs(r - 1.0))

    @property
    def ok(self) -> bool:
        """Median within :data:`HEAD_MEDIAN_TOLERANCE`, every point within :data:`HEAD_POINT_TOLERANCE`."""
        median_ok = abs(self.median - 1.0) <= HEAD_MEDIAN_TOLERANCE
        return median_ok and abs(self.worst - 1.0) <= HEAD_POINT_TOLERANCE


def head_summaries(points: list[HeadPoint]) -> list[HeadSummary]:
    """The three comparisons over all points ((b) as composed ratio / measured ratio)."""
    return [
        HeadSummary("(a) head LUT row / measured head step", tuple(p.lut_ratio for p in points)),
        HeadSummary(
            "(b) composed / measured [head step / (target layer + LM head)]",
            tuple(p.composed_over_layer / p.measured_over_layer for p in points),
        ),
        HeadSummary(
            "(c) composed / measured target layer + LM head", tuple(p.layer_ratio for p in points)
        ),
    ]


def head_table(points: list[HeadPoint]) -> list[str]:
    """The comparison table, one line per measured point."""
    lines = [
        "target ctx batch width mode | head meas LUT (a) | head/(layer+LM) meas comp (b)"
        " | layer+LM meas comp (c)"
    ]
    for p in points:
        lines.append(
            f"{p.target} {p.context} {p.batch} {p.width} {p.mode} | "
            f"{p.measured_head_ms:.3f} {p.lut_head_ms:.3f} ({p.lut_ratio:.2f}) | "
            f"{p.measured_over_layer:.2f} {p.composed_over_layer:.2f} | "
            f"{p.measured_layer_lm_ms:.3f} {p.composed_layer_lm_ms:.3f} ({p.layer_ratio:.2f})"
        )
    return lines
