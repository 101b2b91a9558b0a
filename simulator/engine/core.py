"""The event engine: replays a workload through clients, network and target replicas.

SimPy owns the clock. Events at the same instant run in SimPy's order (time,
then priority, then the order they were scheduled), which is deterministic
for a given scenario and seed; deliveries of work come before the decisions
of servers (see :mod:`simulator.engine.clock`). An event stands for a batch
iteration (or an unchanged run of decode iterations) on a replica, the end
of a prefill on a device, a network arrival, or a request arrival — never
one token. A draft burst on a device needs no event of its own: its bundles
are handed to the network at the instants they are done, and a bundle's
arrival is an event only when it finds its replica idle (a busy replica
takes in the arrived bundles when its iteration ends).

Request life by mode:

- ``none``: prompt upload → prefill (first token) → plain decode iterations
  (continuous batching) → last token streamed to the client.
- ``fused``: as ``none`` but each decode-lane iteration is a fused draft +
  verify round of the target, producing accepted + 1 tokens per request.
- ``distributed``: prompt upload → target prefill (first token, sent back)
  and, in parallel, prefill of the draft model on the client device → rounds
  of: draft k tokens on the device → bundle upload → batched verify on the
  target → accepted + 1 tokens sent back (TVT = bundle sent → result back).
- ``hybrid``: a policy picks ``distributed`` or ``fused`` per request.

The kernel (:class:`Engine`) owns the clock, the request states and the run
loop (arrivals, start, stop, output). Every job is a collaborator with its
own state (see :mod:`simulator.engine` for the map): the
:class:`~simulator.engine.binding.PolicyBinder` builds policies, the
:class:`~simulator.engine.fleet.Fleet` holds the servers, the
:class:`~simulator.engine.dispatcher.Dispatcher` admits and routes, the
:class:`~simulator.engine.flow.RequestFlow` moves and ends requests, the
:class:`~simulator.engine.speculation.Speculation` runs the draft-length loop
and :mod:`~simulator.engine.what_if` snapshots, places and forks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import simpy

from simulator.engine.binding import PolicyBinder
from simulator.engine.clock import URGENT, call_after
from simulator.engine.closed_loop import ClosedLoopDriver
from simulator.engine.disaggregation import Disaggregation, disaggregation_output
from simulator.engine.dispatcher import Dispatcher
from simulator.engine.fleet import Fleet
from simulator.engine.flow import RequestFlow
from simulator.engine.lifecycle import ServerContext
from simulator.engine.network import Network
from simulator.engine.prefix_cache import cache_output
from simulator.engine.records import EngineOutput, InFlight, RequestRecord
from simulator.engine.request_state import RequestState, record_columns, to_record
from simulator.engine.runtime import ClassInfo, ReplicaPlan, RunSettings, Runtime
from simulator.engine.speculation import Speculation
from simulator.engine.step_timing import StepTiming
from simulator.engine.target import TargetReplica
from simulator.engine.timeseries import TimeseriesSampler
from simulator.engine.tracing import NullTracer, Tracer
from simulator.engine.usage import class_usage
from simulator.engine.what_if import fork, in_flight, place_in_flight, recomputing
from simulator.rng import BufferedDraws, RandomStreams, RequestUniforms
from simulator.scenario.model import LaneSpec, PolicyChoice
from simulator.workload import RequestTable

PROGRESS_EVERY = 500

ProgressHook = Callable[[int, int, int, float], None]
"""``progress(arrived, completed, total, simulated_s)``."""


class PlannerHook(Protocol):
    """An online planner the engine starts with the run (see :mod:`simulator.planner.online`).

    It schedules its own rounds on the engine's clock (bound methods or
    ``functools.partial`` only, so that :meth:`Engine.fork` can copy it),
    reads the engine's state and changes its configuration through
    :meth:`Engine.set_replica_count` and :meth:`Engine.set_hybrid`.
    """

    def start(self, engine: Engine) -> None:
        """Schedule the first planning round of ``engine``'s run."""
        ...

    def rounds(self) -> tuple[dict[str, Any], ...]:
        """The rows of ``planner_log.csv`` so far (one per candidate per round)."""
        ...


class Engine:
    """One simulation run (or what-if window) of a resolved scenario over a request table.

    Construct, then call :meth:`run`. The constructor does no I/O: everything
    comes from the :class:`~simulator.engine.runtime.Runtime` (a scenario
    resolved by :func:`~simulator.engine.runtime.build_runtime`, or a
    candidate configuration built from one). It wires the collaborators
    together; the planner reads and changes the run through the methods
    below, which delegate to them.
    """

    def __init__(
        self,
        runtime: Runtime,
        requests: RequestTable,
        streams: RandomStreams,
        tracer: Tracer | None = None,
        in_flight: Sequence[InFlight] = (),
        progress: ProgressHook | None = None,
        start_s: float = 0.0,
        planner: PlannerHook | None = None,
    ) -> None:
        self.runtime = runtime
        self.planner = planner
        """Changes the configuration during the run (``None``: it never changes)."""
        self.start_s = start_s
        """When the run (or what-if window) starts."""
        self.progress = progress
        self.requests = requests
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        tracing = tracer is not None
        self.step_timing: StepTiming = runtime.settings.step_timing
        """The ragged-batch rule and step-time noise (``simulation.*``)."""
        self.env = simpy.Environment(initial_time=start_s)
        """The one clock; a what-if window starts it at its start time (absolute time)."""
        settings = runtime.settings
        sched = settings.scheduler
        self.binder = binder = PolicyBinder(streams)
        """Builds every policy, at the start and for the planner's changes."""
        self.network = Network(settings.jitter, streams.get("jitter"))
        control = binder.k_control(settings.k_control, settings.k)
        decode = binder.decode_lane(sched.verify)
        routing = binder.routing(sched)
        self.fleet = fleet = Fleet(runtime, start_s, decode)
        self.speculation = speculation = Speculation(
            self.env,
            fleet.replicas,
            control,
            settings.k_min,
            settings.k_max,
            settings.temperature,
            BufferedDraws(streams.get("acceptance")),
            RequestUniforms(streams, "acceptance_levels"),
            settings.request_spread,
        )
        loop = settings.closed_loop
        self._closed_loop = (
            ClosedLoopDriver(self.env, self._arrive, loop, streams.get("think_time"))
            if loop is not None
            else None
        )
        self.flow = flow = RequestFlow(
            self.env,
            fleet,
            settings.payload,
            self.tracer,
            tracing,
            routing.predicts_ttft,
            self._closed_loop.on_end if self._closed_loop is not None else None,
            start_s,
            speculation.acceptance_for,
        )
        fleet.open(
            ServerContext(
                env=self.env,
                lifecycle=flow,
                speculation=speculation,
                tracer=self.tracer,
                tracing=tracing,
                lanes=binder.lanes(sched, decode),
                new_arbiter=binder.arbiter_factory(sched),
                microbatcher=decode.microbatcher,
                kv_policy=sched.kv_on_full,
                k_reserve=_k_reserve(settings),
                k_max=settings.k_max,
                fuse_iterations=settings.fuse_iterations,
                max_running=sched.max_running_requests,
                prefill_max_batch=sched.prefill.limits.max_batch,
                signal_window=control.signal_window,
                split_lanes=sched.lanes,
                step_timing=self.step_timing,
                streams=streams,
                tree_nodes=settings.tree.nodes if settings.tree is not None else None,
                prefix_cache=sched.prefix_cache,
                prefixes=requests.prefixes(sched.prefix_cache.block_tokens)
                if sched.prefix_cache is not None
                else {},
            )
        )
        self.dispatcher = dispatcher = Dispatcher(
            runtime,
            requests,
            self.env,
            fleet,
            flow,
            speculation,
            self.network,
            self.tracer,
            routing,
            binder.hybrid(settings.hybrid),
            binder.draft_selection(settings.draft_selection),
            streams.get("devices"),
        )
        flow.on_freed = dispatcher.offer_waiting
        self.disaggregation = Disaggregation.of(dispatcher, flow, self.network)
        self.replicas = fleet.replicas
        """Every replica by global index (the fleet's list)."""
        self.sampler = TimeseriesSampler(
            self.env,
            fleet.replicas,
            settings.timeseries_interval_s,
            record_state=planner is not None,
        )
        self._states: list[RequestState] = []
        self._arrived = 0
        """Requests of the table that have arrived (a prefix: they arrive in table order)."""
        self._in_flight = tuple(in_flight)
        self._in_flight_states: list[RequestState] = []

    # -- configuration changes (planner) ---------------------------------------
    def set_replica_count(self, pool: str, count: int, load_s: float) -> None:
        """Make ``count`` replicas of ``pool`` serve (see :meth:`Fleet.set_replica_count`)."""
        self.fleet.set_replica_count(pool, count, load_s)

    def set_replica_plan(self, pool: str, plan: ReplicaPlan, count: int, load_s: float) -> None:
        """Make ``count`` replicas of ``plan`` serve ``pool`` (see :meth:`Fleet.set_replica_plan`)."""
        self.fleet.set_replica_plan(pool, plan, count, load_s)

    def tensor_parallel(self, pool: str) -> int:
        """The tensor-parallel degree ``pool`` serves with now (see :meth:`Fleet.tensor_parallel`)."""
        return self.fleet.tensor_parallel(pool)

    def set_replica_split(self, pool: str, draft: int, verify: int, load_s: float) -> None:
        """Give ``pool`` draft and verify replicas (see :meth:`Fleet.set_replica_split`)."""
        self.fleet.set_replica_split(pool, draft, verify, load_s)

    def set_hybrid(self, choice: PolicyChoice) -> None:
        """Route the next hybrid requests with the policy ``choice`` (hybrid mode)."""
        self.dispatcher.hybrid = self.binder.hybrid(choice)

    def set_k_control(self, choice: PolicyChoice, k: int) -> None:
        """Choose the draft length of rounds chosen from now on with ``choice``.

        ``k`` is the draft length of a request's first round (and the
        controller's starting k). Rounds under way keep their k. A controller
        reading windowed signals gets fresh per-replica windows of its size
        (a replica keeps its window when the size is unchanged).
        """
        control = self.binder.k_control(choice, k)
        self.speculation.set_control(control)
        self.fleet.set_signal_window(control.signal_window)

    def set_decode_lane(self, lane: LaneSpec) -> None:
        """Form decode-lane (verify) iterations with ``lane``'s policy, limits and microbatching.

        Applies on every replica to iterations formed from now on: a fused
        run of unchanged decode iterations is cut at its next boundary (as a
        waiting prompt cuts it), so the next iteration is formed anew. The
        lane in use already changes nothing.
        """
        if lane != self.fleet.decode_lane.spec:
            self.fleet.set_decode_lane(self.binder.decode_lane(lane))

    def set_draft_selection(self, choice: PolicyChoice) -> None:
        """Choose the drafter model of requests admitted from now on with ``choice``."""
        self.dispatcher.draft_selector = self.binder.draft_selection(choice)

    # -- what the planner reads ------------------------------------------------------
    @property
    def k_controller(self) -> Any:
        """The k controller in use."""
        return self.speculation.controller

    @property
    def hybrid_choice(self) -> PolicyChoice | None:
        """The hybrid policy in use and its parameters."""
        return self.dispatcher.hybrid.choice

    @property
    def draft_selector(self) -> Any:
        """The drafter-model selection policy in use (``None``: one model per class)."""
        return self.dispatcher.draft_selector

    @property
    def decode_lane(self) -> LaneSpec:
        """The decode (verify) lane's policy, limits and microbatching in use."""
        return self.fleet.decode_lane.spec

    def role_counts(self, role: str) -> dict[str, int]:
        """Active replicas of each pool with ``role`` (see :meth:`Fleet.role_counts`)."""
        return self.fleet.role_counts(role)

    def active_replicas(self, pool: str) -> list[TargetReplica]:
        """The serving or loading replicas of ``pool``, by index."""
        return self.fleet.active_replicas(pool)

    def ready_times(self, counts: dict[str, int], load_s: float) -> dict[str, list[float]]:
        """When replicas would take work, were ``counts`` set now (see :meth:`Fleet.ready_times`)."""
        return self.fleet.ready_times(counts, load_s)

    def serving_counts(self) -> dict[str, int]:
        """Serving or loading replicas of each target pool (what a planner last set)."""
        return self.fleet.serving_counts()

    def waiting(self) -> int:
        """Requests queued on the serving replicas (all lanes)."""
        return self.fleet.waiting()

    def completed_since(self, since_s: float) -> list[RequestRecord]:
        """Records of the requests that completed at or after ``since_s`` (a planner's sample)."""
        return [
            to_record(state)
            for state in self._states[: self._arrived] + self._in_flight_states
            if state.outcome == "completed" and state.finish_s >= since_s
        ]

    def pending_arrivals(self) -> int:
        """Requests of the table not arrived yet."""
        return len(self._states) - self._arrived

    def outstanding(self) -> int:
        """Requests arrived and not ended (admitted, or waiting for admission)."""
        return self.flow.outstanding + len(self.dispatcher.deferred)

    # -- what-if windows ---------------------------------------------------------------
    def snapshot(self) -> tuple[InFlight, ...]:
        """Return the arrived, unfinished requests: the records a what-if window starts from."""
        states = self._states[: self._arrived] + self._in_flight_states
        return in_flight(states, self.disaggregation, recomputing(self.fleet.replicas))

    def fork(self) -> Engine:
        """Return an independent copy of this stopped engine, pending events and streams included.

        Running the copy on continues exactly as this engine would (see
        :func:`~simulator.engine.what_if.fork`). The resolved runtime, the
        request table, the tracer and the progress hook are shared (the first
        two are never changed by a run).
        """
        return fork(self, self.env, (self.runtime, self.requests, self.tracer))

    # -- run -----------------------------------------------------------------
    def _arrivals(self) -> None:
        """Deliver the arrivals due now, then wait for the next one.

        A chain of clock actions (not a SimPy process) so that a stopped
        engine can be copied (see :meth:`fork`).
        """
        arrival = self.requests.arrival_s
        states = self._states
        count = len(states)
        while self._arrived < count:
            delay = float(arrival[self._arrived]) - self.env._now
            if delay > 0:
                call_after(self.env, delay, self._arrivals)
                return
            self._arrive(states[self._arrived])

    def _arrive(self, req: RequestState) -> None:
        self._arrived += 1
        if self.progress is not None and self._arrived % PROGRESS_EVERY == 0:
            self.progress(self._arrived, self.flow.completed, len(self.requests), self.env._now)
        self.dispatcher.arrive(req)

    def start(self) -> None:
        """Create the request states, place the starting requests and start arrivals and sampling."""
        table = self.requests
        arrival = table.arrival_s
        prompt = table.prompt_tokens
        output = table.output_tokens
        classes = table.slo_class_names()
        origins = table.origin_names()
        categories = table.category_names()
        self._states = [
            RequestState(
                int(table.request_id[i]),
                float(arrival[i]),
                int(prompt[i]),
                int(output[i]),
                classes[i],
                origins[i],
                categories[i],
            )
            for i in range(len(table))
        ]
        self._in_flight_states = place_in_flight(
            self._in_flight, self.env, self.fleet, self.dispatcher, self.flow, self.disaggregation
        )
        if self.planner is not None:
            self.planner.start(self)
        if self._closed_loop is not None:
            self._closed_loop.start(self._states)
        else:
            call_after(self.env, 0.0, self._arrivals, URGENT)
        self.sampler.start()

    def advance(self, until_s: float) -> None:
        """Process every event before ``until_s`` and stop there (later than now)."""
        self.env.run(until=until_s)

    def output(self) -> EngineOutput:
        """The flat results of the run so far (stopped at the current time)."""
        return self._output(self.env._now)

    def run(self, until_s: float | None = None) -> EngineOutput:
        """Run to completion (or ``until_s``) and return the flat results."""
        self.start()
        stop = until_s if until_s is not None else self.runtime.settings.until_s
        self.env.run(until=stop)  # None: until no event is left
        self.fleet.settle_at_cut()
        # A run to completion ends with its last request, not the sampler's last tick.
        end_s = self.env._now if stop is not None else self.flow.last_outcome_s
        return self._output(end_s, final=True, ran_out=stop is None)

    def _output(self, end_s: float, final: bool = False, ran_out: bool = False) -> EngineOutput:
        """The flat results at ``end_s``.

        ``final``: the run is over, so the request states are consumed as
        their columns are filled (the engine reports nothing more after).
        ``ran_out``: no event was left (unfinished requests: it stalled, ending at its last event).
        """
        in_flight_now = self.snapshot()
        now = self.env._now if ran_out and in_flight_now else end_s
        not_arrived = len(self._states) - self._arrived
        # Requests still due after the cut never arrived: they are not reported.
        if final:
            reported = self._states
            del reported[self._arrived :]
            reported.extend(self._in_flight_states)
            self._in_flight_states = []
            requests = record_columns(reported, consume=True)
        else:
            requests = record_columns(self._states[: self._arrived] + self._in_flight_states)
        replicas = self.fleet.replicas
        devices = self.fleet.devices.values()
        pools = tuple(r.pool for r in replicas)
        classes = {c.id: c for c in self.runtime.classes}
        return EngineOutput(
            requests=requests,
            timeseries=self.sampler.table(),
            simulated_s=now,
            replica_busy_s=tuple(r.busy_s for r in replicas),
            replica_gpu_time=tuple(r.gpu_time for r in replicas),
            replica_pools=pools,
            replica_gpus=tuple(r.gpus for r in replicas),
            replica_energy_j=tuple(r.energy_j for r in replicas),
            replica_idle_power_w=tuple(
                _by_gpus(classes[r.pool].idle_power_w, r, classes[r.pool]) for r in replicas
            ),
            replica_usd_per_hour=tuple(
                _by_gpus(classes[r.pool].usd_per_hour, r, classes[r.pool]) for r in replicas
            ),
            kv_occupancy_mean=tuple(r.kv.mean_occupancy(now) for r in replicas),
            device_energy_j=sum(d.energy_j for d in devices),
            device_busy_s=sum(d.busy_s for d in devices),
            network_bytes={
                f"{src}<->{dst}": c.bytes_up + c.bytes_down
                for (src, dst), c in sorted(self.network.counters.items())
            },
            in_flight=in_flight_now,
            device_classes=class_usage(
                self.runtime.classes,
                self.runtime.luts,
                [*replicas, *devices],
                run_s=now - self.start_s,
                # A planner's pools: each replica while it held its GPUs.
                held_s=self.fleet.held_s_by_pool(now) if self.planner is not None else {},
            ),
            not_arrived=not_arrived,
            stalled_at_s=self.env._now if ran_out and in_flight_now else None,
            replica_spans_s=self.fleet.spans_s(now) if self.planner is not None else (),
            planner_rounds=self.planner.rounds() if self.planner is not None else (),
            prefix_cache=cache_output([r.kv_rule.cache for r in replicas], replicas[0].context),
            disaggregation=disaggregation_output(self.disaggregation),
        )


def _by_gpus(per_unit: float | None, replica: TargetReplica, cls: ClassInfo) -> float | None:
    """A class's figure per scenario replica, for ``replica`` (scaled by its GPUs over theirs).

    Differs only for a replica of another tensor-parallel degree (a planner's
    ``tensor_parallel`` candidates): the same hardware, so the same figure per GPU.
    """
    if per_unit is None or not cls.gpus or not cls.units:
        return per_unit
    return per_unit * replica.gpus * cls.units / cls.gpus


def _k_reserve(settings: RunSettings) -> int:
    """Tokens a request's KV reserves beyond its prompt and output under ``queue``.

    A round writes its ``k + 1`` tokens (a token tree: its ``nodes``) before
    the rejected ones are dropped.
    """
    if settings.mode == "none":
        return 0
    if settings.tree is not None:
        return settings.tree.nodes
    return settings.k_max + 1
