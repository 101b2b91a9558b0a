"""Token-tree verifies: the target LUT's ``verify`` rows against the H100 tree-mask measurements.

``inputs/microbench_h100/trees_heads.csv`` (machine C, one H100 80GB HBM3, CUDA
graphs, GPU time, TP 1) has ``verify_tree`` rows: one target forward over
``T`` = 4-64 new tokens per sequence on top of the context, with a tree mask
inside the new block (each node sees its ancestors and itself). Flash
attention takes no mask, so the masked rows run on cuDNN
(``graph-treemask-cudnn``, never slower than the memory-efficient kernel) or
PyTorch's memory-efficient kernel; ``graph`` is the same block with no mask,
which is what a LUT ``verify`` row composes (Llama-3-8B: the ``-packgqa``
variants, the layout serving kernels use for grouped-query attention).

Two comparisons per measured point (Llama-2-7B and Llama-3-8B, context 512
and 2048, batch 1-32, T = 4, 8, 16, 32, 64):

* (a) the shipped target LUT's ``verify`` row at ``fanout_k = T - 1``
  against the measured tree-masked forward (cuDNN);
* (b) the measured tree-masked forward (cuDNN) against the same block
  without a mask: the mask's own cost.

(b) decides whether tree verifies need a mask factor on top of the LUT: its
median is within the machines' repeatability (``PLAN.md`` 4.9), so none is
applied. Tolerances are the head spot check's (:data:`HEAD_MEDIAN_TOLERANCE`,
:data:`HEAD_POINT_TOLERANCE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lut_population.head_spot_checks import HARDWARE, HeadSummary
from lut_population.inputs import load_trees_heads
from lut_population.plan import file_name
from simulator.lut import LutKey, LutManager, load_lut

MASKED_MODES = {"llama-2-7b": "graph-treemask-cudnn", "llama-3-8b": "graph-treemask-cudnn-packgqa"}
"""The tree-masked mode compared for each model (cuDNN; packed GQA for Llama-3-8B)."""

UNMASKED_MODES = {"llama-2-7b": "graph", "llama-3-8b": "graph-packgqa"}
"""The same block without a mask (what a LUT verify row composes)."""


@dataclass(frozen=True)
class TreePoint:
    """One measured tree-verify shape.

    Attributes:
        target: Target model id.
        context: Context per sequence.
        batch: Sequences.
        nodes: New tokens per sequence (``T``).
        masked_ms: Measured forward with the tree mask (cuDNN).
        unmasked_ms: Measured forward without a mask.
        lut_ms: The target LUT's ``verify`` row at ``fanout_k = T - 1``.
    """

    target: str
    context: int
    batch: int
    nodes: int
    masked_ms: float
    unmasked_ms: float
    lut_ms: float


def tree_points(lut_dir: Path) -> list[TreePoint]:
    """Every measured tree-verify shape with the LUT row it is compared with."""
    frame = load_trees_heads()
    rows = frame[frame["phase"] == "verify_tree"]
    managers: dict[str, LutManager] = {}
    points = []
    for (target, context, batch, nodes), group in rows.groupby(
        ["model", "context_len", "microbatch", "tokens_per_seq"], sort=True
    ):
        target = str(target)
        by_mode = dict(zip(group["mode"], group["latency_ms_median"], strict=True))
        masked = by_mode.get(MASKED_MODES.get(target, ""))
        unmasked = by_mode.get(UNMASKED_MODES.get(target, ""))
        if masked is None or unmasked is None:
            continue
        if target not in managers:
            managers[target] = LutManager([load_lut(lut_dir / file_name(target, HARDWARE))])
        key = LutKey("verify", target, HARDWARE, 1, 1, "fp16")
        lut = managers[target].lookup(key, float(context), float(batch), int(nodes) - 1)
        points.append(
            TreePoint(
                target,
                int(context),
                int(batch),
                int(nodes),
                float(masked),
                float(unmasked),
                float(lut.latency_ms),
            )
        )
    return points


def tree_summaries(points: list[TreePoint]) -> list[HeadSummary]:
    """(a) LUT row / masked measurement; (b) masked / unmasked measurement."""
    return [
        HeadSummary(
            "(a) target LUT verify at fanout_k = T - 1 / measured tree-masked forward",
            tuple(p.lut_ms / p.masked_ms for p in points),
        ),
        HeadSummary(
            "(b) measured tree-masked (cuDNN) / unmasked forward (the mask's cost)",
            tuple(p.masked_ms / p.unmasked_ms for p in points),
        ),
    ]


def tree_table(points: list[TreePoint]) -> list[str]:
    """One line per point: shape | masked, unmasked, LUT (ratio)."""
    lines = ["  model context batch T | masked unmasked (ratio) | LUT (LUT / masked)"]
    for p in points:
        lines.append(
            f"    {p.target} {p.context} {p.batch} {p.nodes} | {p.masked_ms:.2f} "
            f"{p.unmasked_ms:.2f} ({p.masked_ms / p.unmasked_ms:.2f}) | {p.lut_ms:.2f} "
            f"({p.lut_ms / p.masked_ms:.2f})"
        )
    return lines
