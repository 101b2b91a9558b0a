"""How a step is timed: a small backend protocol and the statistics over repetitions.

A :class:`TimingBackend` turns a step (a callable with fixed inputs) into a
callable that runs it once and returns its time in milliseconds. The CUDA
backends (:mod:`lut_population.profile.cuda_timing`) capture the step as a
CUDA graph and time each replay with CUDA events; :class:`WallClockBackend`
times plain calls with the host clock (CPU runs and tests); tests inject
fakes that return fixed times. :func:`measure` runs ``warmup`` repetitions
whose times are discarded, then ``reps`` timed ones, and reports the median,
10th and 90th percentiles (numpy's linear interpolation between order
statistics) of the timed ones only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

Step = Callable[[], object]
"""One step with its inputs bound: calling it runs the forward once."""


class TimingBackend(Protocol):
    """Runs and times steps; reports peak memory where it can."""

    @property
    def name(self) -> str:
        """Short description for the rows' ``source`` (e.g. ``cuda-graph``)."""
        ...

    def prepare(self, step: Step) -> Callable[[], float]:
        """Return a callable that runs ``step`` once and returns the time it took, in ms."""
        ...

    def reset_peak_memory(self) -> None:
        """Start a new peak-memory window."""
        ...

    def peak_memory_mb(self) -> float | None:
        """Peak memory allocated since :meth:`reset_peak_memory` (MiB), or None if unknown."""
        ...


@dataclass(frozen=True)
class Timing:
    """Statistics of the timed repetitions of one step.

    Attributes:
        median_ms: Median time.
        p10_ms: 10th percentile.
        p90_ms: 90th percentile.
        reps: Timed repetitions.
        warmup: Repetitions run before them and discarded.
    """

    median_ms: float
    p10_ms: float
    p90_ms: float
    reps: int
    warmup: int


def summarise(samples_ms: Sequence[float], warmup: int) -> Timing:
    """Drop the first ``warmup`` samples and summarise the rest.

    Raises:
        ValueError: ``warmup`` is negative or no sample is left after it.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    timed = np.asarray(samples_ms[warmup:], dtype=np.float64)
    if timed.size == 0:
        raise ValueError(f"no timed samples: {len(samples_ms)} samples, {warmup} warm-up")
    p10, median, p90 = np.percentile(timed, [10.0, 50.0, 90.0])
    return Timing(float(median), float(p10), float(p90), int(timed.size), warmup)


def measure(backend: TimingBackend, step: Step, warmup: int, reps: int) -> Timing:
    """Run ``step`` ``warmup + reps`` times through ``backend``; summarise the last ``reps``."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    run = backend.prepare(step)
    samples = [run() for _ in range(warmup + reps)]
    return summarise(samples, warmup)


@dataclass(frozen=True)
class WallClockBackend:
    """Times plain calls with :func:`time.perf_counter` (host time; no peak memory)."""

    name: str = "wall-clock"

    def prepare(self, step: Step) -> Callable[[], float]:
        """Return a callable timing one call of ``step``."""

        def run() -> float:
            start = time.perf_counter()
            step()
            return (time.perf_counter() - start) * 1000.0

        return run

    def reset_peak_memory(self) -> None:
        """Nothing to reset."""

    def peak_memory_mb(self) -> float | None:
        """Unknown on the host clock."""
        return None
