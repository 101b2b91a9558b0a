"""Closed-loop clients: a fixed number of users, each waiting for its previous request.

With ``workload.closed_loop``, the request table still fixes *what* is sent
(lengths, SLO class and origin, in table order) but not *when*: each of the
``users`` sends its first request at t = 0 and its next one when its previous
request ends (completes or is rejected) plus a think time. The engine's
driver is :class:`simulator.engine.closed_loop.ClosedLoopDriver`.

Think times are seconds: :class:`FixedThinkTime` (the scenario gives a
number) or :class:`ExponentialThinkTime` (``{dist: exponential, mean_s}``),
drawn from the ``think_time`` random stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class FixedThinkTime:
    """The same think time after every request.

    Attributes:
        seconds: The think time (>= 0).
    """

    seconds: float

    def __post_init__(self) -> None:
        if not self.seconds >= 0:
            raise ValueError(f"FixedThinkTime.seconds must be >= 0, got {self.seconds}")

    def sample(self, rng: np.random.Generator) -> float:
        """Return the think time (``rng`` is not used)."""
        return self.seconds


@dataclass(frozen=True)
class ExponentialThinkTime:
    """Exponentially distributed think times.

    Attributes:
        mean_s: Mean think time (seconds, > 0).
    """

    mean_s: float

    def __post_init__(self) -> None:
        if not self.mean_s > 0:
            raise ValueError(f"ExponentialThinkTime.mean_s must be > 0, got {self.mean_s}")

    def sample(self, rng: np.random.Generator) -> float:
        """Return one think time drawn from ``rng``."""
        return float(rng.exponential(self.mean_s))


ThinkTime = FixedThinkTime | ExponentialThinkTime
"""Any think-time distribution."""


@dataclass(frozen=True)
class ClosedLoop:
    """A closed-loop client population.

    Attributes:
        users: Number of users (>= 1); at most this many requests are in flight.
        think_time: Delay between the end of a user's request and its next one.
    """

    users: int
    think_time: ThinkTime = field(default_factory=lambda: FixedThinkTime(0.0))

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError(f"ClosedLoop.users must be >= 1, got {self.users}")
