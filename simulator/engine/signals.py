"""Recent-history windows of a target replica, read by adaptive k controllers.

A replica keeps these only when the run's k controller asks for windowed
signals (its ``signal_window`` is positive), so runs with the static
controller pay nothing for them.
"""

from __future__ import annotations

import math
from collections import deque

NAN = math.nan


class ReplicaWindow:
    """The last ``size`` decode-lane iteration latencies, verified rounds and queue waits of a replica.

    A queue wait is how long a request waited in the verify (or fused) queue
    before the step that served it started; the last ``size`` requests' waits
    are kept.

    Args:
        size: How many iterations (and, separately, rounds) are remembered.
    """

    __slots__ = (
        "_accepted",
        "_drafted",
        "_latencies_ms",
        "_p95_ms",
        "_rounds",
        "_wait_mean_ms",
        "_waits_ms",
        "last_step_s",
        "size",
    )

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._latencies_ms: deque[float] = deque(maxlen=size)
        self._p95_ms = NAN
        """The cached percentile; ``nan`` when stale or no iteration ran yet."""
        self._rounds: deque[tuple[int, int]] = deque(maxlen=size)
        self._accepted = 0
        self._drafted = 0
        self._waits_ms: deque[float] = deque(maxlen=size)
        self._wait_mean_ms = NAN
        """The cached mean wait; ``nan`` when stale or no step was timed yet."""
        self.last_step_s = NAN
        """Duration of the latest verify or fused step (the one whose rounds are being applied)."""

    def add_iteration(self, latency_s: float) -> None:
        """Remember one decode-lane iteration's latency."""
        self._latencies_ms.append(latency_s * 1000.0)
        self._p95_ms = NAN

    def add_waits(self, waits_s: list[float]) -> None:
        """Remember how long each request of a verify or fused step waited in the queue."""
        self._waits_ms.extend(wait_s * 1000.0 for wait_s in waits_s)
        self._wait_mean_ms = NAN

    def wait_ms(self) -> float:
        """Mean queue wait of the remembered steps' requests (``nan`` before any)."""
        if self._wait_mean_ms == self._wait_mean_ms or not self._waits_ms:
            return self._wait_mean_ms
        self._wait_mean_ms = sum(self._waits_ms) / len(self._waits_ms)
        return self._wait_mean_ms

    def add_round(self, accepted: int, drafted: int) -> None:
        """Remember one verified round: ``accepted`` of ``drafted`` draft tokens."""
        rounds = self._rounds
        if len(rounds) == self.size:
            old_accepted, old_drafted = rounds[0]
            self._accepted -= old_accepted
            self._drafted -= old_drafted
        rounds.append((accepted, drafted))
        self._accepted += accepted
        self._drafted += drafted

    def acceptance(self) -> float:
        """Accepted / drafted tokens over the remembered rounds (``nan`` before any)."""
        return self._accepted / self._drafted if self._drafted else NAN

    def p95_ms(self) -> float:
        """The 95th percentile (nearest rank) of the remembered latencies (``nan`` before any)."""
        if self._p95_ms == self._p95_ms or not self._latencies_ms:
            return self._p95_ms
        ordered = sorted(self._latencies_ms)
        self._p95_ms = ordered[math.ceil(0.95 * len(ordered)) - 1]
        return self._p95_ms
