"""Synthetic arrival processes.

Each process is a frozen dataclass; :func:`sample_arrivals` turns one into
arrival times in seconds. The first arrival is always at t = 0.

* :class:`PoissonArrivals`: exponential inter-arrival times, mean
  ``1 / rate_per_s``.
* :class:`GammaArrivals`: gamma inter-arrival times with mean
  ``1 / rate_per_s`` and coefficient of variation ``cv`` (shape
  ``1 / cv**2``, scale ``cv**2 / rate_per_s``); ``cv > 1`` is burstier than
  Poisson, ``cv < 1`` more regular.
* :class:`OnOffArrivals`: Poisson at ``rate_per_s`` during on periods of
  ``on_s`` seconds, nothing during off periods of ``off_s`` seconds; the
  process starts with an on period. Long-run rate
  ``rate_per_s * on_s / (on_s + off_s)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.workload.arrays import FloatArray


@dataclass(frozen=True)
class PoissonArrivals:
    """Poisson arrivals.

    Attributes:
        rate_per_s: Mean arrival rate (requests per second, > 0).
    """

    rate_per_s: float

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise ValueError(f"rate_per_s must be > 0, got {self.rate_per_s}")


@dataclass(frozen=True)
class GammaArrivals:
    """Renewal arrivals with gamma-distributed gaps.

    Attributes:
        rate_per_s: Mean arrival rate (requests per second, > 0).
        cv: Coefficient of variation of the gaps (> 0).
    """

    rate_per_s: float
    cv: float

    def __post_init__(self) -> None:
        if not (self.rate_per_s > 0 and self.cv > 0):
            raise ValueError(f"rate_per_s and cv must be > 0, got {self.rate_per_s}, {self.cv}")


@dataclass(frozen=True)
class OnOffArrivals:
    """Poisson arrivals switched on and off periodically.

    Attributes:
        rate_per_s: Arrival rate during on periods (requests per second, > 0).
        on_s: Length of each on period (seconds, > 0).
        off_s: Length of each off period (seconds, >= 0).
    """

    rate_per_s: float
    on_s: float
    off_s: float

    def __post_init__(self) -> None:
        if not (self.rate_per_s > 0 and self.on_s > 0 and self.off_s >= 0):
            raise ValueError("OnOffArrivals needs rate_per_s > 0, on_s > 0 and off_s >= 0")


ArrivalProcess = PoissonArrivals | GammaArrivals | OnOffArrivals
"""Any of the arrival processes."""


def mean_rate_per_s(process: ArrivalProcess) -> float:
    """Return the long-run mean arrival rate of ``process`` (requests per second)."""
    if isinstance(process, OnOffArrivals):
        return process.rate_per_s * process.on_s / (process.on_s + process.off_s)
    return process.rate_per_s


def _gaps(process: ArrivalProcess, n: int, rng: np.random.Generator) -> FloatArray:
    """Return ``n`` inter-arrival gaps on the process's own clock (on-time for on/off)."""
    if isinstance(process, GammaArrivals):
        shape = 1.0 / process.cv**2
        return rng.gamma(shape, 1.0 / (shape * process.rate_per_s), size=n)
    return rng.exponential(1.0 / process.rate_per_s, size=n)


def _to_wall(process: ArrivalProcess, times: FloatArray) -> FloatArray:
    """Map process-clock times to wall-clock times (inserting off periods)."""
    if isinstance(process, OnOffArrivals) and process.off_s > 0:
        return times + np.floor(times / process.on_s) * process.off_s
    return times


def sample_arrivals(
    process: ArrivalProcess,
    rng: np.random.Generator,
    *,
    count: int | None = None,
    duration_s: float | None = None,
) -> FloatArray:
    """Draw arrival times (seconds, non-decreasing, the first at 0).

    Give exactly one of ``count`` (that many arrivals) and ``duration_s``
    (every arrival in ``[0, duration_s)``).

    Raises:
        ValueError: Neither or both limits given, or a negative one.
    """
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if count is not None:
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if count == 0:
            return np.zeros(0)
        clock = np.concatenate(([0.0], np.cumsum(_gaps(process, count - 1, rng))))
        return _to_wall(process, clock)
    assert duration_s is not None
    if duration_s <= 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    expected = mean_rate_per_s(process) * duration_s
    chunk = int(expected * 1.1) + 64
    pieces = [np.zeros(1)]
    last = 0.0
    while True:
        clock = last + np.cumsum(_gaps(process, chunk, rng))
        wall = _to_wall(process, clock)
        pieces.append(wall)
        last = float(clock[-1])
        if wall[-1] >= duration_s:
            break
    times = np.concatenate(pieces)
    return times[: int(np.searchsorted(times, duration_s, side="left"))]
