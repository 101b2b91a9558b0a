"""KV cache accounting of one target replica."""

from __future__ import annotations


class KvPool:
    """KV memory of one replica: capacity, allocations and a time-weighted occupancy.

    Allocation never exceeds the capacity; callers decide what to do when it
    would (wait, or preempt: see ``scheduler.kv.on_full``). With a prefix
    cache, unreferenced cached blocks sit in the free part and are evicted
    by :class:`~simulator.engine.replica_kv.ReplicaKv` before an allocation
    that needs their room.

    ``promised_mb`` is KV the iteration under way will add to its requests
    when it ends: not allocated yet, but counted as taken by :meth:`fits`
    (kept only where KV is reserved while an iteration runs: a decode replica
    of a disaggregated fleet whose KV grows; 0 elsewhere).
    """

    __slots__ = ("_area", "_last_s", "capacity_mb", "peak_mb", "promised_mb", "used_mb")

    def __init__(self, capacity_mb: float) -> None:
        if capacity_mb <= 0:
            raise ValueError(f"KV capacity must be > 0 MB, got {capacity_mb}")
        self.capacity_mb = capacity_mb
        self.used_mb = 0.0
        self.peak_mb = 0.0
        self.promised_mb = 0.0
        self._area = 0.0
        self._last_s = 0.0

    def _advance(self, now_s: float) -> None:
        self._area += self.used_mb * (now_s - self._last_s)
        self._last_s = now_s

    @property
    def free_mb(self) -> float:
        """Unallocated KV memory."""
        return self.capacity_mb - self.used_mb

    def fits(self, amount_mb: float) -> bool:
        """Whether ``amount_mb`` more would fit (beside what is promised)."""
        return self.used_mb + self.promised_mb + amount_mb <= self.capacity_mb + 1e-9

    def allocate(self, amount_mb: float, now_s: float) -> None:
        """Take ``amount_mb``; the caller has checked :meth:`fits`."""
        if not self.fits(amount_mb):
            raise RuntimeError("KV allocation beyond capacity")
        self._advance(now_s)
        self.used_mb += amount_mb
        self.peak_mb = max(self.peak_mb, self.used_mb)

    def free(self, amount_mb: float, now_s: float) -> None:
        """Return ``amount_mb``."""
        self._advance(now_s)
        self.used_mb = max(0.0, self.used_mb - amount_mb)

    def add_area(self, mb_s: float) -> None:
        """Count ``mb_s`` more MB-seconds of occupancy: KV allocated late that was held earlier.

        A fused run of decode iterations grows its requests' KV when it ends
        (:class:`~simulator.engine.decode_runs.DecodeRuns`); stepping grows it at
        each iteration's end, so the run adds the occupancy of its earlier
        iterations' tokens here.
        """
        self._area += mb_s

    def mean_occupancy(self, now_s: float) -> float:
        """Time-weighted mean fraction of capacity in use from 0 to ``now_s``."""
        self._advance(now_s)
        return self._area / (self.capacity_mb * now_s) if now_s > 0 else 0.0
