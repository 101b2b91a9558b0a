"""The grid a profiling run measures, and the memory rule that guards it.

The default axes are the ones of the project's own H100 microbenchmarks
(``microbench_h100/iterations.csv``, described in ``lut_population/PLAN.md``,
"Profiling your own GPU"): context lengths 128 to 4 096 tokens, decode and
verify batches 1 to 64, prefill batches 1 and 4, draft lengths 1, 2, 4, 8, and
EAGLE-style head steps at width 1.

Every LUT key must form a complete rectangular grid (``lut/README.md``, "Grid
rules"), so a point cannot simply be left out. The memory rule is therefore:
**refuse, before anything runs**, when the estimated memory of any point (fp16
weights + live activations + the KV cache the point allocates) exceeds the
limit, naming the points and the largest axis values that would fit
(:func:`check_memory`). The user then drops context lengths or batch sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from lut_population.shapes import BYTES_PER_MIB, ModelShape
from lut_population.work import Work, fp16_activations_mb
from simulator.errors import InputError, Issue, make_issue

TARGET_PHASES = ("prefill", "draft_decode", "verify")
"""Phases measured on the target model (LUT phase names)."""

HEAD = "head"
"""The EAGLE-style draft-head step (written as ``draft_decode`` rows of ``<model>.eagle``)."""

PROFILE_PHASES = (*TARGET_PHASES, HEAD)
"""Everything ``--phases`` accepts."""

DEFAULT_CONTEXTS = (128, 512, 1024, 2048, 4096)
"""Context lengths of the project's H100 decode and prefill microbenchmarks."""

DEFAULT_BATCHES = (1, 4, 16, 64)
"""Decode, verify and head batch sizes (the H100 verify microbenchmark's batches)."""

DEFAULT_PREFILL_BATCHES = (1, 4)
"""Prefill batch sizes of the H100 microbenchmarks."""

DEFAULT_KS = (1, 2, 4, 8)
"""Draft lengths of the H100 verify microbenchmarks."""

DEFAULT_HEAD_WIDTHS = (1,)
"""Candidates per sequence of a head step (the H100 head microbenchmarks also ran 4 and 8)."""

EAGLE_SUFFIX = ".eagle"
"""Model id suffix of the head-drafter rows: ``<target>.eagle`` (width 1), ``<target>.eagle-w4``."""


@dataclass(frozen=True)
class ProfileGrid:
    """What a profiling run measures.

    Attributes:
        phases: Phases to measure, a subset of :data:`PROFILE_PHASES`.
        contexts: Context lengths (prompt length for prefill), ascending.
        batches: Batch sizes of decode, verify and head steps, ascending.
        prefill_batches: Batch sizes of prefill, ascending.
        ks: Draft lengths of verify, ascending.
        head_widths: Candidates per sequence of a head step, ascending.
    """

    phases: tuple[str, ...] = PROFILE_PHASES
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    batches: tuple[int, ...] = DEFAULT_BATCHES
    prefill_batches: tuple[int, ...] = DEFAULT_PREFILL_BATCHES
    ks: tuple[int, ...] = DEFAULT_KS
    head_widths: tuple[int, ...] = DEFAULT_HEAD_WIDTHS


@dataclass(frozen=True)
class Point:
    """One measured step.

    Attributes:
        phase: ``prefill``, ``draft_decode``, ``verify`` or ``head``.
        context_len: Prompt tokens (prefill) or cached tokens per sequence.
        microbatch: Sequences in the batch.
        fanout_k: Draft length of a verify step; 1 otherwise.
        width: Candidates per sequence of a head step; 1 otherwise.
    """

    phase: str
    context_len: int
    microbatch: int
    fanout_k: int = 1
    width: int = 1

    @property
    def new_tokens(self) -> int:
        """Tokens each sequence adds (and writes into its KV cache)."""
        if self.phase == "prefill":
            return self.context_len
        if self.phase == "verify":
            return self.fanout_k + 1
        if self.phase == HEAD:
            return self.width
        return 1

    @property
    def cached_tokens(self) -> int:
        """Tokens already in each sequence's KV cache."""
        return 0 if self.phase == "prefill" else self.context_len

    @property
    def logit_rows(self) -> int:
        """Positions per sequence that go through the final norm and LM head."""
        return 1 if self.phase == "prefill" else self.new_tokens

    @property
    def lut_phase(self) -> str:
        """The LUT phase of the row (a head step is a ``draft_decode`` of the head drafter)."""
        return "draft_decode" if self.phase == HEAD else self.phase

    def work(self) -> Work:
        """The point as the generator's :class:`~lut_population.work.Work`."""
        return Work(
            np.asarray(float(self.microbatch)),
            np.asarray(float(self.new_tokens)),
            np.asarray(float(self.cached_tokens)),
            np.asarray(float(self.logit_rows)),
        )


def head_model_id(target_id: str, width: int) -> str:
    """Model id of the head-drafter rows: ``<target>.eagle``, or ``<target>.eagle-w<width>``."""
    return f"{target_id}{EAGLE_SUFFIX}" if width == 1 else f"{target_id}{EAGLE_SUFFIX}-w{width}"


def head_shape(target: ModelShape, width: int = 1) -> ModelShape:
    """The EAGLE-style head as a one-layer model of the target's shapes (for KV and weights)."""
    return replace(
        target,
        model_id=head_model_id(target.model_id, width),
        name=f"EAGLE-style head of {target.name}",
        num_layers=1,
    )


def model_id_of(target: ModelShape, point: Point) -> str:
    """The LUT model id a point's row belongs to."""
    return head_model_id(target.model_id, point.width) if point.phase == HEAD else target.model_id


def shape_of(target: ModelShape, point: Point) -> ModelShape:
    """The model a point runs: the target, or its one-layer head."""
    return head_shape(target, point.width) if point.phase == HEAD else target


def grid_points(grid: ProfileGrid) -> tuple[Point, ...]:
    """Every point of the grid: target phases first, then head steps, each in axis order."""
    points: list[Point] = []
    for phase in (p for p in PROFILE_PHASES if p in grid.phases):
        batches = grid.prefill_batches if phase == "prefill" else grid.batches
        ks = grid.ks if phase == "verify" else (1,)
        widths = grid.head_widths if phase == HEAD else (1,)
        for width in widths:
            for context in grid.contexts:
                for batch in batches:
                    points.extend(Point(phase, context, batch, k, width) for k in ks)
    return tuple(points)


def weights_mb(target: ModelShape, point: Point) -> float:
    """fp16 weights resident while the point runs.

    The target's phases hold the whole target. A head step holds one decoder
    layer, the ``2 hidden -> hidden`` input projection, its token embedding and
    its LM head (the head is measured on its own, with its own copies).
    """
    if point.phase != HEAD:
        return target.weight_bytes() / BYTES_PER_MIB
    head = target.block_params + 2 * target.hidden_size**2 + 2 * target.embedding_params
    return 2.0 * head / BYTES_PER_MIB


def kv_allocated_mb(target: ModelShape, point: Point) -> float:
    """KV cache a point allocates: ``cached + new`` tokens per sequence, every layer of its model."""
    shape = shape_of(target, point)
    tokens = point.microbatch * (point.cached_tokens + point.new_tokens)
    return tokens * shape.kv_mib_per_token


def estimated_memory_mb(target: ModelShape, point: Point) -> float:
    """Weights + live activations (section 6 of PLAN.md) + allocated KV cache of a point."""
    activations = float(fp16_activations_mb(shape_of(target, point), point.work(), 1))
    return weights_mb(target, point) + activations + kv_allocated_mb(target, point)


def _largest_batches(target: ModelShape, mine: Sequence[Point], limit_mib: float) -> str:
    """``context 128: 64, context 4096: none``: the largest batch that fits at each context."""
    parts = []
    for context in sorted({p.context_len for p in mine}):
        fits = [
            p.microbatch
            for p in mine
            if p.context_len == context and estimated_memory_mb(target, p) <= limit_mib
        ]
        parts.append(f"context {context}: {max(fits) if fits else 'none'}")
    return ", ".join(parts)


def check_memory(target: ModelShape, grid: ProfileGrid, limit_mib: float, where: str) -> None:
    """Refuse a grid any of whose points exceeds ``limit_mib`` of estimated memory.

    Args:
        target: The target model.
        grid: The grid to measure.
        limit_mib: The memory limit (MiB).
        where: How the limit was set, for the message (``--max-memory-gib 60``).

    Raises:
        InputError: One issue per phase with points over the limit, naming how many, the
            largest one and its estimate, and the largest batch that fits at each context.
    """
    issues: list[Issue] = []
    points = grid_points(grid)
    for phase in (p for p in PROFILE_PHASES if p in grid.phases):
        mine = [p for p in points if p.phase == phase]
        over = [p for p in mine if estimated_memory_mb(target, p) > limit_mib]
        if not over:
            continue
        worst = max(over, key=lambda p: estimated_memory_mb(target, p))
        flag = "--prefill-batches" if phase == "prefill" else "--batches"
        issues.append(
            make_issue(
                where,
                f"phase {phase}",
                f"{worst.context_len} x {worst.microbatch}",
                f"at most {limit_mib / 1024.0:.1f} GiB of weights + activations + KV per point. "
                "LUT grids must be complete rectangles, so drop the largest --contexts or "
                f"{flag} values; the largest batch that fits at each context is "
                + _largest_batches(target, mine, limit_mib),
                f"{len(over)} of {len(mine)} points exceed the memory limit, the largest "
                f"(context x batch) needing an estimated "
                f"{estimated_memory_mb(target, worst) / 1024.0:.1f} GiB",
            )
        )
    if issues:
        raise InputError(issues)
