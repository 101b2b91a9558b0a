"""Measure every point of a grid: build the step, time it, record its peak memory.

The runner knows nothing of PyTorch: a :class:`StepFactory` builds the step of
a point (allocating its KV cache and inputs) and frees it afterwards, and a
:class:`~lut_population.profile.timing.TimingBackend` times it. Prefill points
are also timed with an optional eager backend (engines run prefill without a
graph); that time goes into the row's notes, the graph time into
``latency_ms`` (LUT rows are GPU time only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from lut_population.profile.points import Point
from lut_population.profile.timing import Step, Timing, TimingBackend, measure


class StepFactory(Protocol):
    """Builds the step of one point, and frees it."""

    def load(self, point: Point) -> None:
        """Make the weights of the model ``point`` runs resident, freeing any other model's."""
        ...

    def build(self, point: Point) -> Step:
        """Allocate the point's KV cache and inputs; return the step with them bound."""
        ...

    def release(self) -> None:
        """Free what the last :meth:`build` allocated."""
        ...


@dataclass(frozen=True)
class Measurement:
    """What was measured at one point.

    Attributes:
        point: The point.
        timing: The graph (or main backend) timing.
        eager: The eager timing of a prefill point, when measured.
        peak_mem_mb: Peak memory allocated while the point ran (MiB), None if unknown.
    """

    point: Point
    timing: Timing
    eager: Timing | None
    peak_mem_mb: float | None


def run_points(
    points: Iterable[Point],
    factory: StepFactory,
    backend: TimingBackend,
    warmup: int,
    reps: int,
    eager_backend: TimingBackend | None = None,
    progress: Callable[[Measurement], None] | None = None,
) -> list[Measurement]:
    """Measure ``points`` in order.

    Args:
        points: The points.
        factory: Builds each point's step.
        backend: Times every step (its median is the row's latency).
        warmup: Repetitions discarded before timing.
        reps: Timed repetitions.
        eager_backend: Also times prefill steps, for the notes; None to skip.
        progress: Called after each point.
    """
    results: list[Measurement] = []
    for point in points:
        factory.load(point)
        backend.reset_peak_memory()  # the window holds the weights, the KV cache and the step
        step = factory.build(point)
        try:
            timing = measure(backend, step, warmup, reps)
            eager = None
            if eager_backend is not None and point.phase == "prefill":
                eager = measure(eager_backend, step, warmup, reps)
            peak = backend.peak_memory_mb()
        finally:
            del step
            factory.release()
        result = Measurement(point, timing, eager, peak)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
