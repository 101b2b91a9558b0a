"""Thermal throttling of one device or replica under sustained work.

A device whose profile has a ``compute.thermal`` block slows down once it has
been busy for ``throttle_after_s`` seconds, counting busy time since it last
rested idle for at least that long: from then on its iterations take
``1 / throttle_factor`` times as long and use as much more energy. A profile
whose onset is unknown (``throttle_after_s: null``) runs at its sustained,
throttled rate throughout. The same rule applies to draft devices and to
target replicas.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from simulator.devices.model import ThermalSpec

INF = float("inf")


class Heat:
    """The busy time a device has accumulated toward throttling.

    Args:
        thermal: The device's thermal behaviour (``None``: it never throttles).
    """

    __slots__ = ("_after_s", "_factor", "_heat_s", "_last_end_s", "constant", "fixed_factor")

    def __init__(self, thermal: ThermalSpec | None) -> None:
        self._factor = 1.0 if thermal is None else thermal.throttle_factor
        self._after_s = None if thermal is None else thermal.throttle_after_s
        self._heat_s = 0.0
        self._last_end_s = -INF
        self.constant = thermal is None or thermal.throttle_after_s is None
        """Whether the speed factor never changes (no throttling, or throttled throughout):
        then it is :attr:`fixed_factor` and nothing needs booking (hot paths skip the calls)."""
        self.fixed_factor = self._factor

    def _rested(self, start_s: float) -> None:
        after = self._after_s
        if after is not None and start_s - self._last_end_s >= after:
            self._heat_s = 0.0

    def factor(self, start_s: float) -> float:
        """Return the throughput factor of work starting at ``start_s`` (1 when cool)."""
        if self.constant:
            return self._factor
        self._rested(start_s)
        after = self._after_s
        assert after is not None
        return self._factor if self._heat_s >= after else 1.0

    def cool_steps(self, start_s: float, elapsed_s: Sequence[float]) -> int:
        """Return how many of back-to-back steps from ``start_s`` start before throttling.

        ``elapsed_s[i]`` is the time from ``start_s`` to the end of step ``i``
        at the cool rate. Every step starting while the accumulated busy time
        is below the onset runs cool; the first one starting at or after it
        is throttled. Returns ``len(elapsed_s)`` when none is.
        """
        if self.constant:
            return len(elapsed_s)
        self._rested(start_s)
        after = self._after_s
        assert after is not None
        left_s = after - self._heat_s
        if left_s <= 0.0:
            return 0
        # Step i + 1 starts when step i ends; it is throttled once elapsed_s[i] >= left_s.
        return min(len(elapsed_s), bisect_left(elapsed_s, left_s) + 1)

    def book(self, start_s: float, busy_s: float) -> None:
        """Count work from ``start_s`` lasting ``busy_s`` toward the onset."""
        self._rested(start_s)
        self._heat_s += busy_s
        self._last_end_s = start_s + busy_s
