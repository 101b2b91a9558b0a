"""LUTs built directly from the project's H100 measurements (``source: microbench_h100_v1``).

For every measured model (H100 SXM 80GB, TP 1, fp16) and measured phase the
latency of a row is the measured GPU time of that point
(:func:`lut_population.measured.gpu_time_points`). The files are
``lut/microbench/<model>__h100-sxm5-80gb.csv`` with the same model ids as the
composed files, so a scenario switches between the two by its ``lut`` path.

Grid rule. The LUT format needs a complete rectangular grid per key; the
measurements are not (points whose weights and KV exceeded 60 GiB were
skipped, batch-4 prefill was measured at two prompt lengths only). Each key's
axes are the measured values of context_len, microbatch and fanout_k (up to
the model's maximum context, as for the composed files); a grid point that
was not measured gets the composed latency (the model behind the composed
LUT, :func:`lut_population.plan.gpu_model`) times the ratio measured /
composed at the nearest measured points of the same key, nearest by
Euclidean distance of log2(context), log2(batch) and log2(k), the geometric
mean of the ratios where several are equally near. Every such row says so in
``notes``; measured rows name their mode, machine and line in the
measurements file.

Energy, peak memory and KV delta come from the composed build's formulas at
the same point (:class:`~lut_population.phases.SinglePhaseCost`): H100 power
at the iteration's token count times the measured latency, weights +
activations + KV, and the KV shape formula.

Fused pairs (``lut_population.plan.FUSED_PAIRS`` whose target and draft were
both measured) are composed exactly as in the composed build
(:class:`~lut_population.phases.FusedRoundCost`): k draft decode steps at
contexts ``c .. c + k - 1`` plus one verify, GPU time only; the draft steps
between measured contexts are interpolated linearly along context_len (as the
simulator interpolates a LUT). Their grid is the target's verify grid (and the
prefill grid both models share), up to the shorter maximum context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.gpu_compose import ComposedGpuModel
from lut_population.grid import Grid
from lut_population.measured import (
    MEASURED_HARDWARE,
    MEASURED_TP,
    Point,
    gpu_time_points,
    measured_models,
    measured_phases,
)
from lut_population.measured_check import MICROBENCH_DIR
from lut_population.phases import FusedPrefillCost, FusedRoundCost, SinglePhaseCost
from lut_population.plan import FUSED_PAIRS, FileSpec, KeySpec, file_name, gpu_model
from lut_population.shapes import ModelShape
from lut_population.work import Work

SOURCE = "microbench_h100_v1"
"""``source`` tag of the measured rows."""

FUSED_SOURCE = f"fused_v1[{SOURCE}|{SOURCE}]"
"""``source`` tag of fused rows composed from measured rows."""

FILLED_NOTE = "not measured"
"""Start of the ``notes`` of a filled row."""


def _log2(point: Point) -> tuple[float, float, float]:
    return (math.log2(point[0]), math.log2(point[1]), math.log2(point[2]))


@dataclass(frozen=True, eq=False)
class MeasuredPhase:
    """One measured phase of one model on its rectangular grid.

    Attributes:
        phase: LUT phase.
        model: Model id.
        grid: Every measured value of each axis.
        latency_ms: Latency at every grid point, shaped (context, batch, k).
        notes: Note of every grid point (measured row or fill rule).
        filled: Grid points that were not measured.
    """

    phase: str
    model: str
    grid: Grid
    latency_ms: FloatArray
    notes: dict[Point, str]
    filled: frozenset[Point]

    def latency_at(self, context: FloatArray, batch: FloatArray, k: FloatArray) -> FloatArray:
        """Latency at grid values of batch and k, linear along context (held beyond its ends).

        Raises:
            ValueError: A batch or k that is not a grid value.
        """
        c, b, kk = np.broadcast_arrays(
            np.asarray(context, float), np.asarray(batch, float), np.asarray(k, float)
        )
        contexts = np.asarray(self.grid.context, float)
        out = np.empty(c.shape)
        for index in np.ndindex(c.shape):
            j = self._index(self.grid.batch, b[index], "microbatch")
            m = self._index(self.grid.fanout_k, kk[index], "fanout_k")
            out[index] = np.interp(c[index], contexts, self.latency_ms[:, j, m])
        return out

    def _index(self, axis: tuple[int, ...], value: float, name: str) -> int:
        if value not in axis:
            raise ValueError(f"{self.model} {self.phase}: {name} {value} is not measured")
        return axis.index(int(value))

    def context_inputs(self, context: float, batch: int, k: int) -> list[Point]:
        """Grid points a lookup at ``context`` (interpolated) reads."""
        axis = self.grid.context
        low = max((c for c in axis if c <= context), default=axis[0])
        high = min((c for c in axis if c >= context), default=axis[-1])
        return sorted({(low, batch, k), (high, batch, k)})


def _fill(
    composed: FloatArray, grid: Grid, measured: dict[Point, float]
) -> tuple[FloatArray, dict[Point, str]]:
    """Latencies of unmeasured points by the nearest-ratio rule (module docstring)."""
    latency = np.array(composed, dtype=np.float64)
    notes: dict[Point, str] = {}
    ratios = {
        p: value
        / composed[grid.context.index(p[0]), grid.batch.index(p[1]), grid.fanout_k.index(p[2])]
        for p, value in measured.items()
    }
    for i, c in enumerate(grid.context):
        for j, b in enumerate(grid.batch):
            for m, k in enumerate(grid.fanout_k):
                point = (c, b, k)
                if point in measured:
                    latency[i, j, m] = measured[point]
                    continue
                where = np.asarray(_log2(point))
                dist = {q: float(np.linalg.norm(np.asarray(_log2(q)) - where)) for q in ratios}
                nearest = sorted(q for q, d in dist.items() if d <= min(dist.values()) + 1e-9)
                ratio = math.exp(float(np.mean([math.log(ratios[q]) for q in nearest])))
                latency[i, j, m] = composed[i, j, m] * ratio
                near = " + ".join(f"{q[0]}/{q[1]}/{q[2]}" for q in nearest)
                notes[point] = (
                    f"{FILLED_NOTE}: composed latency x {ratio:.4f} (measured/composed at the "
                    f"nearest measured context/batch/k {near})"
                )
    return latency, notes


@cache
def measured_phase(model: str, phase: str) -> MeasuredPhase:
    """The measured phase on its rectangular grid, unmeasured points filled."""
    points = gpu_time_points(phase, model)
    grid = Grid(
        tuple(sorted({p[0] for p in points})),
        tuple(sorted({p[1] for p in points})),
        tuple(sorted({p[2] for p in points})),
    )
    cost = SinglePhaseCost(gpu_model(model, MEASURED_HARDWARE, MEASURED_TP), phase)
    c = np.asarray(grid.context, float)[:, None, None]
    b = np.asarray(grid.batch, float)[None, :, None]
    k = np.asarray(grid.fanout_k, float)[None, None, :]
    shape = (len(grid.context), len(grid.batch), len(grid.fanout_k))
    composed = np.broadcast_to(cost.evaluate(c, b, k).latency_ms, shape)
    latency, notes = _fill(composed, grid, {p: m.latency_ms for p, m in points.items()})
    filled = frozenset(notes)
    for point, row in points.items():
        notes[point] = f"measured: mode {row.mode}, machine {row.machine}, line {row.line}"
    return MeasuredPhase(phase, model, grid, latency, notes, filled)


@dataclass
class MeasuredModel:
    """An :class:`~lut_population.work.IterationModel` whose latency is measured.

    Latency comes from the measured phases; power, weights and activations
    from the composed model of the same GPU. An iteration's phase is read
    from its work: no cached tokens is a prefill of ``new`` tokens, one new
    token a decode step at ``cached`` tokens, otherwise a verify of
    ``new - 1`` drafted tokens at ``cached`` tokens.
    """

    composed: ComposedGpuModel
    phases: dict[str, MeasuredPhase]

    @property
    def shape(self) -> ModelShape:
        """The model."""
        return self.composed.shape

    @property
    def tensor_parallel(self) -> int:
        """TP degree."""
        return self.composed.tensor_parallel

    @property
    def capacity_mb(self) -> float | None:
        """Memory of the GPU."""
        return self.composed.capacity_mb

    @property
    def source(self) -> str:
        """:data:`SOURCE`."""
        return SOURCE

    def latency_ms(self, work: Work) -> FloatArray:
        """Measured latency of the iteration."""
        ones = np.ones_like(np.asarray(work.batch * work.new * work.cached, dtype=float))
        if np.all(work.cached == 0):
            return self.phases["prefill"].latency_at(work.new, work.batch, ones)
        if np.all(work.new == 1):
            return self.phases["draft_decode"].latency_at(work.cached, work.batch, ones)
        return self.phases["verify"].latency_at(work.cached, work.batch, work.new - 1.0)

    def power_w(self, work: Work) -> FloatArray | None:
        """The composed model's power."""
        return self.composed.power_w(work)

    def weights_mb(self) -> float:
        """fp16 weights."""
        return self.composed.weights_mb()

    def activations_mb(self, work: Work) -> FloatArray:
        """Live activations."""
        return self.composed.activations_mb(work)


@cache
def measured_model(model: str) -> MeasuredModel:
    """The measured model with every measured phase."""
    phases = {phase: measured_phase(model, phase) for phase in measured_phases(model)}
    return MeasuredModel(gpu_model(model, MEASURED_HARDWARE, MEASURED_TP), phases)


def _clip(grid: Grid, max_context: int) -> Grid:
    return Grid(tuple(c for c in grid.context if c <= max_context), grid.batch, grid.fanout_k)


def _points(grid: Grid) -> list[Point]:
    return [(c, b, k) for c in grid.context for b in grid.batch for k in grid.fanout_k]


def _single_keys(model: MeasuredModel) -> list[KeySpec]:
    keys = []
    for phase, measured in sorted(model.phases.items()):
        grid = _clip(measured.grid, model.shape.max_context)
        keys.append(
            KeySpec(
                phase,
                model.shape.model_id,
                MEASURED_HARDWARE,
                MEASURED_TP,
                SinglePhaseCost(model, phase),
                grid,
                refine=False,
                point_notes=tuple((p, measured.notes[p]) for p in _points(grid)),
            )
        )
    return keys


def _fused_note(inputs: list[tuple[str, MeasuredPhase, Point]]) -> str:
    filled = sorted(
        {f"{ph.model} {ph.phase} {p[0]}/{p[1]}/{p[2]}" for _, ph, p in inputs if p in ph.filled}
    )
    if not filled:
        return "composed from measured rows only"
    return "composed with unmeasured (filled) inputs: " + ", ".join(filled)


def _round_inputs(
    target: MeasuredModel, draft: MeasuredModel, point: Point
) -> list[tuple[str, MeasuredPhase, Point]]:
    context, batch, k = point
    verify = target.phases["verify"]
    decode = draft.phases["draft_decode"]
    inputs = [("verify", verify, point)]
    for i in range(k):
        inputs += [("draft", decode, p) for p in decode.context_inputs(context + i, batch, 1)]
    return inputs


def _fused_keys(target: MeasuredModel, draft: MeasuredModel) -> list[KeySpec]:
    fused_id = f"{target.shape.model_id}+{draft.shape.model_id}"
    max_context = min(target.shape.max_context, draft.shape.max_context)
    t_pre, d_pre = target.phases["prefill"].grid, draft.phases["prefill"].grid
    prefill_grid = _clip(
        Grid(
            tuple(sorted(set(t_pre.context) & set(d_pre.context))),
            tuple(sorted(set(t_pre.batch) & set(d_pre.batch))),
            (1,),
        ),
        max_context,
    )
    round_grid = _clip(target.phases["verify"].grid, max_context)
    prefill_notes = tuple(
        (
            p,
            _fused_note(
                [
                    ("prefill", target.phases["prefill"], p),
                    ("prefill", draft.phases["prefill"], p),
                ]
            ),
        )
        for p in _points(prefill_grid)
    )
    round_notes = tuple(
        (p, _fused_note(_round_inputs(target, draft, p))) for p in _points(round_grid)
    )
    return [
        KeySpec(
            "prefill",
            fused_id,
            MEASURED_HARDWARE,
            MEASURED_TP,
            FusedPrefillCost(target, draft, FUSED_SOURCE),
            prefill_grid,
            refine=False,
            point_notes=prefill_notes,
        ),
        KeySpec(
            "fused_decode",
            fused_id,
            MEASURED_HARDWARE,
            MEASURED_TP,
            FusedRoundCost(target, draft, FUSED_SOURCE),
            round_grid,
            refine=False,
            point_notes=round_notes,
        ),
    ]


def fused_pairs() -> list[tuple[str, str]]:
    """Pairs of :data:`~lut_population.plan.FUSED_PAIRS` with both models measured as needed."""
    measured = set(measured_models())
    return [
        (t, d)
        for t, d in sorted(FUSED_PAIRS)
        if {t, d} <= measured
        and {"prefill", "verify"} <= set(measured_phases(t))
        and {"prefill", "draft_decode"} <= set(measured_phases(d))
    ]


def microbench_plan() -> tuple[FileSpec, ...]:
    """The measured LUT files: one per measured model, one per measured fused pair."""
    files = []
    for model_id in measured_models():
        keys = _single_keys(measured_model(model_id))
        name = f"{MICROBENCH_DIR}/{file_name(model_id, MEASURED_HARDWARE)}"
        files.append(FileSpec(name, model_id, MEASURED_HARDWARE, SOURCE, tuple(keys)))
    for target_id, draft_id in fused_pairs():
        keys = _fused_keys(measured_model(target_id), measured_model(draft_id))
        fused_id = f"{target_id}+{draft_id}"
        name = f"{MICROBENCH_DIR}/{file_name(fused_id, MEASURED_HARDWARE)}"
        files.append(FileSpec(name, fused_id, MEASURED_HARDWARE, FUSED_SOURCE, tuple(keys)))
    return tuple(files)
