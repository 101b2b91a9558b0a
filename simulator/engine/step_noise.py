"""Random step-time variability of a replica (``simulation.step_noise``).

Each iteration a target replica runs takes the next draw ``z`` of the
replica's own sub-stream of the ``step_noise`` random stream and has its
latency multiplied by ``exp(sigma * z - sigma**2 / 2)``: a lognormal factor
with mean 1, so the mean step time is the LUT's and only its spread changes.
``sigma`` depends on the kind of step (plain decode, speculative round,
prefill; see :mod:`simulator.engine.step_timing`). Energy is left as priced:
the work of the step is the same.

A run of plain decode iterations advanced in one event
(``simulation.fuse_iterations``) looks its draws up ahead with :meth:`peek`
and consumes only the iterations it ran with :meth:`advance`, so it uses
exactly the draws stepping would.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from simulator.engine.step_timing import StepTiming
from simulator.rng import RandomStreams

BLOCK = 1024
"""Normal draws fetched from the generator at a time."""


class StepNoise:
    """One replica's step-time factors.

    Args:
        rng: The replica's sub-stream of ``step_noise``.
        sigma: Dispersion by kind of step (``decode``, ``round``, ``prefill``).
    """

    __slots__ = ("_at", "_draws", "_rng", "_sigma")

    def __init__(self, rng: np.random.Generator, sigma: Iterable[tuple[str, float]]) -> None:
        self._rng = rng
        self._sigma = dict(sigma)
        self._draws: list[float] = []
        self._at = 0

    def _fill(self, count: int) -> None:
        """Make sure ``count`` unused draws are buffered."""
        missing = self._at + count - len(self._draws)
        if missing > 0:
            del self._draws[: self._at]
            self._at = 0
            blocks = -(-missing // BLOCK)
            self._draws.extend(self._rng.standard_normal(blocks * BLOCK).tolist())

    def _factor(self, sigma: float, z: float) -> float:
        return math.exp(sigma * z - 0.5 * sigma * sigma)

    def take(self, kind: str) -> float:
        """The next iteration's latency factor (a step of ``kind``)."""
        self._fill(1)
        z = self._draws[self._at]
        self._at += 1
        return self._factor(self._sigma[kind], z)

    def peek(self, kind: str, count: int) -> list[float]:
        """Factors of the next ``count`` iterations of ``kind``, without using them up."""
        self._fill(count)
        sigma = self._sigma[kind]
        at = self._at
        return [self._factor(sigma, z) for z in self._draws[at : at + count]]

    def advance(self, count: int) -> None:
        """Use up ``count`` draws (the iterations a run peeked at and ran)."""
        self._fill(count)
        self._at += count


def replica_noise(
    timing: StepTiming, streams: RandomStreams | None, index: int
) -> StepNoise | None:
    """Replica ``index``'s step-time noise (``None``: off, or no streams to draw from)."""
    if timing.noise_sigma is None or streams is None:
        return None
    return StepNoise(streams.child("step_noise", index), timing.noise_sigma)
