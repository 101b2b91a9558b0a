"""Periodic samples of queue lengths, utilisation, KV occupancy and k, per replica."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import simpy

from simulator.engine.clock import URGENT, call_after
from simulator.engine.target import SERVING, TargetReplica

PLANNER_COLUMNS = ("state", "replicas_active")
"""Columns only a run with a planner has (see ``docs/outputs.md``)."""
COLUMNS = (
    "time_s",
    "replica",
    "pool",
    "prefill_queue",
    "decode_queue",
    "verify_queue",
    "fused_queue",
    "utilization",
    "kv_occupancy",
    "outstanding",
    "running",
    "k_rounds",
    "mean_k",
    "output_tokens",
)
"""The columns of every row, in order (``timeseries.csv``)."""
FLOAT_COLUMNS = frozenset({"time_s", "utilization", "kv_occupancy", "mean_k"})
"""Columns that always hold floats: kept as packed doubles, not float objects."""


class TimeseriesSampler:
    """Samples every ``interval_s`` while the simulation has other events pending.

    Each sample is one row per replica: queue lengths of its lanes, the
    fraction of the interval it was busy, KV occupancy, requests routed to it
    (outstanding) and running on it (prefilled, not finished), and its own
    speculation rounds started in the interval (``k_rounds``), their mean k
    (``mean_k``, NaN without rounds) and the output tokens committed on it
    (``output_tokens``). Column reference: ``docs/outputs.md``.
    In a run with a planner, each row also has the replica's ``state``
    (``loading``, ``serving``, ``draining`` or ``retired``) and
    ``replicas_active``, the serving replicas of its pool.
    Values inside a run of fused decode iterations are those at its start.

    A quiet stretch, more than three intervals with no event at all, is
    written as its first and last samples only: the ones between would repeat
    them but for the time (forward-filling the rows restores the full grid).
    So the rows grow with the events of a run, not with its simulated
    seconds, and a run with a gap of 1e300 s or a 1e-9 s interval stays
    small. Sampling stops once the clock can no longer resolve one interval.
    """

    def __init__(
        self,
        env: simpy.Environment,
        replicas: Sequence[TargetReplica],
        interval_s: float,
        record_state: bool = False,
    ) -> None:
        self.env = env
        self.replicas = replicas
        self.interval_s = interval_s
        names = COLUMNS + PLANNER_COLUMNS if record_state else COLUMNS
        self.columns: dict[str, Any] = {
            name: array("d") if name in FLOAT_COLUMNS else [] for name in names
        }
        """Column name -> its values, one per row: the samples as columns, not a
        mapping per row (a long run samples about as many rows as it has requests)."""
        self._last_busy: list[float] = []
        self._last_counts: list[tuple[int, int, int]] = []
        """Per replica at the previous sample: output tokens, sum of k, rounds."""
        self.record_state = record_state
        """Add each replica's state and its pool's serving replicas (runs with a planner)."""

    def start(self) -> None:
        """Start sampling (called once, when the run starts)."""
        self._last_busy = [0.0] * len(self.replicas)
        self._last_counts = [(0, 0, 0)] * len(self.replicas)
        call_after(self.env, 0.0, self._wait, URGENT, observer=True)

    # A chain of clock actions rather than a SimPy process, so that a stopped
    # engine can be copied (see ``Engine.fork``); the order of its steps is
    # that of the loop: wait one interval, sample; across a quiet stretch
    # (no event for more than three intervals) sample only its first and last.
    def _wait(self) -> None:
        env = self.env
        if env._now + self.interval_s <= env._now:
            # Past about 2**53 intervals the clock no longer resolves one: stop.
            return
        call_after(env, self.interval_s, self._tick, observer=True)

    def _tick(self) -> None:
        env = self.env
        self._sample(env._now)
        next_s = env.peek()
        if next_s == math.inf:
            return
        ahead = (next_s - env._now) / self.interval_s
        if ahead > 3:
            # A quiet stretch: no event before ``next_s``, so its samples are equal
            # but for the time. Only its first and last are written.
            call_after(
                env, self.interval_s, partial(self._quiet_first, next_s, ahead), observer=True
            )
            return
        self._wait()

    def _quiet_first(self, next_s: float, ahead: float) -> None:
        env = self.env
        self._sample(env._now)
        if not math.isfinite(ahead):
            call_after(env, next_s - env._now, self._wait, observer=True)
            return
        call_after(env, (math.ceil(ahead) - 2) * self.interval_s, self._quiet_last, observer=True)

    def _quiet_last(self) -> None:
        self._sample(self.env._now)
        self._wait()

    def _sample(self, now_s: float) -> None:
        if len(self._last_busy) < len(self.replicas):  # replicas a planner added
            added = len(self.replicas) - len(self._last_busy)
            self._last_busy.extend([0.0] * added)
            self._last_counts.extend([(0, 0, 0)] * added)
        serving: dict[str, int] = {}
        if self.record_state:
            for replica in self.replicas:
                serving[replica.pool] = serving.get(replica.pool, 0) + (replica.state == SERVING)
        for i, replica in enumerate(self.replicas):
            prefill, decode, verify, fused = replica.queue_lengths()
            busy = replica.busy_s - self._last_busy[i]
            self._last_busy[i] = replica.busy_s
            tokens_then, k_sum_then, rounds_then = self._last_counts[i]
            rounds = replica.k_rounds - rounds_then
            mean_k = (replica.k_sum - k_sum_then) / rounds if rounds else math.nan
            tokens = replica.tokens_out - tokens_then
            self._last_counts[i] = (replica.tokens_out, replica.k_sum, replica.k_rounds)
            row: tuple[Any, ...] = (
                now_s,
                replica.index,
                replica.pool,
                prefill,
                decode,
                verify,
                fused,
                min(1.0, busy / self.interval_s),
                replica.kv.used_mb / replica.kv.capacity_mb,
                replica.outstanding,
                replica.running,
                rounds,
                mean_k,
                tokens,
            )
            if self.record_state:
                row += (replica.state, serving[replica.pool])
            # No bound ``append`` kept between samples: a copied engine must
            # write its own columns (see ``Engine.fork``).
            for column, value in zip(self.columns.values(), row, strict=True):
                column.append(value)

    def table(self) -> dict[str, Any]:
        """The rows as columns (``{}``: none sampled): float columns as arrays, others as lists."""
        if not len(self.columns["time_s"]):
            return {}
        return {
            name: np.frombuffer(values, dtype=np.float64) if isinstance(values, array) else values
            for name, values in self.columns.items()
        }
