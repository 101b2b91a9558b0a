"""The run's target replicas and draft devices: how many serve, in which roles, since when.

:class:`Fleet` builds every server from the runtime's plans and hands it the
run's :class:`~simulator.engine.lifecycle.ServerContext`. It owns the
replica list (global index order; a planner's new replicas are appended),
the replicas routing may send new requests to, each replica's span of
holding its GPUs, the draft devices (built on first use) and the
configuration servers share mid-run (the decode lane, the signal window).
It changes replica counts and roles, drains and retires replicas and says
when they are ready; it never decides where a request goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from simulator.engine.binding import DecodeLane
from simulator.engine.clock import call_after
from simulator.engine.draft_device import DraftDevice
from simulator.engine.lifecycle import ServerContext
from simulator.engine.runtime import ReplicaPlan, Runtime, loading_plan
from simulator.engine.target import DRAINING, LOADING, RETIRED, SERVING, TargetReplica


def _replica_index(replica: TargetReplica) -> int:
    """Sort key of replicas: their global index."""
    return replica.index


class Fleet:
    """The replicas and devices of one run.

    Args:
        runtime: The resolved runtime (replica plans, client pools).
        start_s: When the run (or what-if window) starts.
        decode_lane: The decode lane in use (a planner may change it).
    """

    def __init__(self, runtime: Runtime, start_s: float, decode_lane: DecodeLane) -> None:
        self.runtime = runtime
        self.decode_lane = decode_lane
        self.replicas: list[TargetReplica] = []
        """Every replica by global index (a planner's new ones are appended)."""
        self.serving: list[TargetReplica] = []
        """The replicas routing may send new requests to (all, unless a planner changed them)."""
        self.devices: dict[tuple[str, int], DraftDevice] = {}
        self._spans: list[list[float]] = []
        """When each replica started and stopped holding its GPUs (see ``replica_spans_s``)."""
        self._start_s = start_s
        self.split = False
        """Whether replicas have draft/verify roles (routing then filters by the request's mode)."""
        self.always_available = True
        self.context: ServerContext | None = None
        """What servers share (bound by :meth:`open`)."""
        self._plans: dict[str, ReplicaPlan] = {}
        """Each pool's plan for the replicas it starts (its first; a planner's degree)."""
        for plan in runtime.replicas:
            self._plans.setdefault(plan.pool, plan)
        self.on_change: Callable[[], None] | None = None
        """Called after replicas start, finish loading, drain or retire (``None``: nobody
        listens; a disaggregated fleet keeps its prefill and decode lists with it)."""

    def open(self, context: ServerContext) -> None:
        """Build the runtime's replicas, sharing ``context``."""
        self.context = context
        for index, plan in enumerate(self.runtime.replicas):
            self.replicas.append(self._new_replica(index, plan))
            self._spans.append([self._start_s, math.inf])
        self.serving.extend(self.replicas)
        self.always_available = all(r.always_available for r in self.replicas)
        self.split = any(r.role != "both" for r in self.replicas)

    def _context(self) -> ServerContext:
        context = self.context
        assert context is not None, "the fleet is opened before its servers are built"
        return context

    def _new_replica(self, index: int, plan: ReplicaPlan) -> TargetReplica:
        """A replica of ``plan`` (its arbitration rule decides how its lanes run)."""
        return TargetReplica(self._context(), index, plan)

    def device(self, pool: str, index: int) -> DraftDevice:
        """Device ``index`` of client class ``pool`` (built on first use)."""
        key = (pool, index)
        device = self.devices.get(key)
        if device is None:
            device = self.devices[key] = DraftDevice(
                self._context(), self.runtime.clients[pool], index
            )
        return device

    # -- shared configuration --------------------------------------------------
    def set_signal_window(self, window: int) -> None:
        """Give every replica (and those built later) a window of ``window`` for the k controller."""
        self.context = replace(self._context(), signal_window=window)
        for replica in self.replicas:
            replica.set_signal_window(window)

    def set_decode_lane(self, lane: DecodeLane) -> None:
        """Form decode-lane iterations with ``lane`` on every replica from now on."""
        self.decode_lane = lane
        context = self._context()
        lanes = {**context.lanes, "verify": lane.verify, "continuous": lane.continuous}
        self.context = replace(context, lanes=lanes, microbatcher=lane.microbatcher)
        for replica in self.replicas:
            replica.set_decode_lane(lane.verify, lane.continuous, lane.microbatcher)

    # -- counts and roles ----------------------------------------------------------
    def set_replica_count(self, pool: str, count: int, load_s: float) -> None:
        """Make ``count`` replicas of ``pool`` serve (at least one), from now on.

        More: draining replicas of the pool serve again first (their model is
        still loaded); the others are new replicas that hold their GPUs from
        now and take work after ``load_s`` (loading their model). Fewer: the
        newest serving (or loading) replicas drain: they take no new
        request, finish their own and then retire (their GPUs are released).
        """
        context = self._context()
        env = context.env
        now = env._now
        plan = self._plans[pool]
        mine = [r for r in self.replicas if r.pool == pool]
        active = [r for r in mine if r.state in (SERVING, LOADING)]
        for replica in reversed(active[count:]):
            self._drain(replica)
        missing = count - len(active)
        degree = plan.tensor_parallel
        draining = [r for r in mine if r.state is DRAINING and r.plan.tensor_parallel == degree]
        for replica in draining[: max(missing, 0)]:  # none when the pool shrinks
            replica.state = SERVING
            self.serving.append(replica)
            missing -= 1
        # A pool left with no serving replica (a reload at another tensor-parallel
        # degree) routes new requests to its loading replicas: they wait for the model.
        routable = not any(r.pool == pool for r in self.serving)
        if missing > 0:
            for _ in range(missing):
                built = loading_plan(plan, now + load_s) if routable else plan
                replica = self._new_replica(len(self.replicas), built)
                replica.state = LOADING
                replica.ready_s = now + load_s
                self.replicas.append(replica)
                if routable:
                    self.serving.append(replica)
                    self.always_available = self.always_available and replica.always_available
                self._spans.append([now, math.inf])
                if context.tracing:
                    context.tracer.event(now, "replica_loading", f"replica {replica.index}", pool)
                call_after(env, load_s, partial(self._replica_ready, replica))
        self.serving.sort(key=_replica_index)
        self._changed()

    def set_replica_plan(self, pool: str, plan: ReplicaPlan, count: int, load_s: float) -> None:
        """Make ``count`` replicas of ``plan`` (a tensor-parallel degree) serve ``pool``, from now on.

        The pool's active replicas of another degree drain (they finish their
        requests, then retire); then the pool is resized to ``count`` as
        :meth:`set_replica_count` does, its new replicas built from ``plan``:
        they hold their GPUs from now and take work after ``load_s``.
        """
        for replica in self.active_replicas(pool):
            if replica.plan.tensor_parallel != plan.tensor_parallel:
                self._drain(replica)
        self._plans[pool] = plan
        self.set_replica_count(pool, count, load_s)

    def tensor_parallel(self, pool: str) -> int:
        """The tensor-parallel degree of the replicas ``pool`` serves with (and starts) now."""
        return self._plans[pool].tensor_parallel

    def set_replica_split(self, pool: str, draft: int, verify: int, load_s: float) -> None:
        """Give ``pool`` ``draft`` draft replicas and ``verify`` verify replicas, from now on.

        The pool is resized to ``draft + verify`` replicas as
        :meth:`set_replica_count` does; then its active (serving or loading)
        replicas, by index, take their roles: the first ``verify`` verify
        bundles, the others draft (serve fused requests). A replica whose role
        changes keeps the requests it has to completion; only new requests
        follow its new role.
        """
        self.set_replica_count(pool, draft + verify, load_s)
        context = self._context()
        for i, replica in enumerate(self.active_replicas(pool)):
            role = "verify" if i < verify else "draft"
            if replica.role != role:
                replica.role = role
                if context.tracing:
                    context.tracer.event(
                        context.env._now, "replica_role", f"replica {replica.index}", role
                    )
        self.split = True

    def role_counts(self, role: str) -> dict[str, int]:
        """Active (serving or loading) replicas of each pool with ``role``.

        ``role`` is ``draft`` or ``verify``; a replica of role ``both`` (before
        any split) counts as ``verify``.
        """
        counts = {plan.pool: 0 for plan in self.runtime.replicas}
        for replica in self.replicas:
            if replica.state in (SERVING, LOADING) and (
                replica.role == role or (role == "verify" and replica.role == "both")
            ):
                counts[replica.pool] += 1
        return counts

    # -- readiness, drain, retire ----------------------------------------------------
    def _replica_ready(self, replica: TargetReplica) -> None:
        """A new replica has loaded its model: it serves, unless drained meanwhile."""
        if replica.state is LOADING:
            replica.state = SERVING
            if replica not in self.serving:
                self.serving.append(replica)
                self.serving.sort(key=_replica_index)
            context = self._context()
            if context.tracing:
                context.tracer.event(
                    context.env._now, "replica_ready", f"replica {replica.index}", ""
                )
            self._changed()

    def _changed(self) -> None:
        """Tell the listener (if any) that the replicas' states changed."""
        if self.on_change is not None:
            self.on_change()

    def _drain(self, replica: TargetReplica) -> None:
        """The replica takes no new request; it retires once its own have ended."""
        if replica in self.serving:
            self.serving.remove(replica)
        replica.state = DRAINING
        context = self._context()
        if context.tracing:
            context.tracer.event(
                context.env._now, "replica_draining", f"replica {replica.index}", ""
            )
        if not replica.outstanding and not replica.holders:
            self._retire(replica)

    def request_ended(self, replica: TargetReplica) -> None:
        """One of the replica's requests ended: a drained replica with none left retires."""
        replica.outstanding -= 1
        if replica.state is DRAINING and not replica.outstanding:
            self._retire(replica)

    def _retire(self, replica: TargetReplica) -> None:
        """A drained replica has no request left: it releases its GPUs."""
        replica.state = RETIRED
        context = self._context()
        self._spans[replica.index][1] = context.env._now
        if context.tracing:
            context.tracer.event(
                context.env._now, "replica_retired", f"replica {replica.index}", ""
            )

    def retire_drained(self) -> None:
        """Retire every drained replica left without requests.

        A disaggregated prefill replica counts a request until its KV
        transfer starts, and holds the KV until the last byte has left: it
        is settled here when a transfer ends.
        """
        for replica in self.replicas:
            if replica.state is DRAINING and not replica.outstanding and not replica.holders:
                self._retire(replica)

    def active_replicas(self, pool: str) -> list[TargetReplica]:
        """The serving or loading replicas of ``pool``, by index."""
        return [r for r in self.replicas if r.pool == pool and r.state in (SERVING, LOADING)]

    def ready_times(self, counts: dict[str, int], load_s: float) -> dict[str, list[float]]:
        """When each of ``counts[pool]`` replicas per pool would take work, were they set now.

        The pool's active replicas first (``-inf``: serving; a loading one:
        when it is ready), then new ones: after ``load_s``.
        """
        now = self._context().env._now
        out: dict[str, list[float]] = {}
        for pool, count in counts.items():
            ready = [r.ready_s for r in self.active_replicas(pool)][:count]
            out[pool] = ready + [now + load_s] * (count - len(ready))
        return out

    def serving_counts(self) -> dict[str, int]:
        """Serving or loading replicas of each target pool (what a planner last set)."""
        counts = {plan.pool: 0 for plan in self.runtime.replicas}
        for replica in self.replicas:
            if replica.state in (SERVING, LOADING):
                counts[replica.pool] += 1
        return counts

    def waiting(self) -> int:
        """Requests queued on the serving replicas (all lanes)."""
        return sum(sum(r.queue_lengths()) for r in self.serving)

    def settle_at_cut(self) -> None:
        """Count the decode iterations that ended before a cut (``simulation.until_s``).

        See :meth:`~simulator.engine.decode_runs.DecodeRuns.settle_at_cut`; a
        run that ran out of events has no decode run under way.
        """
        for replica in self.replicas:
            replica.decode_runs.settle_at_cut()

    def spans_s(self, end_s: float) -> tuple[tuple[float, float], ...]:
        """When each replica started and stopped holding its GPUs, cut at ``end_s``."""
        return tuple((on, min(off, end_s)) for on, off in self._spans)

    def held_s_by_pool(self, end_s: float) -> dict[str, list[float]]:
        """Seconds each replica of each target pool held its GPUs up to ``end_s``.

        Every replica counts from the run's start (or when it was added,
        loading included) until it retired or ``end_s``: what a pool's idle
        energy and hourly price are paid for when a planner resized it. The
        seconds are of the pool's scenario replica: a replica of another
        tensor-parallel degree counts its seconds times its GPUs over the
        scenario replica's (same hardware, so the price and idle power of a
        GPU are the same).
        """
        held: dict[str, list[float]] = {plan.pool: [] for plan in self.runtime.replicas}
        classes = {cls.id: cls for cls in self.runtime.classes}
        for replica, (on, off) in zip(self.replicas, self.spans_s(end_s), strict=True):
            cls = classes.get(replica.pool)
            scale = replica.gpus * cls.units / cls.gpus if cls and cls.gpus and cls.units else 1.0
            held[replica.pool].append(max(0.0, off - on) * scale)
        return held
