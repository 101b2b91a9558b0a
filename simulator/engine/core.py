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
"""

from __future__ import annotations

import copy
import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import simpy

from policies.views import (
    AdmissionQuery,
    DraftCandidate,
    DraftModelQuery,
    KSignals,
    ModeQuery,
    ReplicaLoad,
    RoundOutcome,
    RoutingQuery,
)
from simulator.engine.clock import URGENT, call_after, call_at
from simulator.engine.closed_loop import ClosedLoopDriver
from simulator.engine.costs import DECODE, FUSED, VERIFY, LutStepPredictor
from simulator.engine.draft_device import DraftDevice
from simulator.engine.lifecycle import ServerContext
from simulator.engine.microbatch import Microbatcher
from simulator.engine.network import Network
from simulator.engine.policy_build import instantiate
from simulator.engine.request_state import Drafter, RequestRecord, RequestState, to_record
from simulator.engine.runtime import ROLE_MODES, ReplicaPlan, Runtime
from simulator.engine.target import DRAINING, LOADING, RETIRED, SERVING, TargetReplica
from simulator.engine.timeseries import TimeseriesSampler
from simulator.engine.tracing import NullTracer, Span, Tracer
from simulator.engine.usage import ClassUsage, class_usage
from simulator.rng import BufferedDraws, RandomStreams
from simulator.scenario.model import LaneSpec, Link, PolicyChoice
from simulator.workload import RequestTable

LANE_OF_MODE = {"none": DECODE, "fused": FUSED, "distributed": VERIFY}
"""The decode-lane work of a request by its mode."""
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


REQUEST_ACCEPTANCE_WEIGHT = 0.3
"""Weight of the newest round in a request's moving acceptance (``KSignals.request_acceptance``)."""


@dataclass(frozen=True)
class InFlight:
    """A request of a run that was unfinished when it stopped: where a what-if window takes it up.

    The timing fields are on the run's absolute clock, so a window started
    at the stop time (``Engine(..., start_s=...)``) reports the request's
    TTFT from its real arrival and its TPOT from its real first token.

    Attributes:
        request_id: Its id.
        prompt_tokens: Prompt length.
        output_tokens: Requested output length.
        generated: Output tokens already produced (0: still waiting for prefill).
        slo_class: Its SLO class.
        origin: Its client device class ("" if none).
        replica: Global index of the replica serving it (-1: not admitted yet).
        mode: ``none``, ``fused`` or ``distributed`` ("" when not admitted yet).
        device: Index of its device within the origin class (-1 if none).
        arrival_s: When it arrived.
        first_token_server_s: When its first token was made (``nan``: not yet).
        first_token_s: When its first token reached the client (``nan``: not yet).
        tpot_origin_s: Origin of its TPOT deadlines (``inf``: not set yet).
        tvt_max_s: Its longest TVT so far (``nan``: no round timed yet).
        drafted: Draft tokens proposed so far.
        accepted: Draft tokens accepted so far.
        rounds: Verify rounds so far.
        preemptions: Times it was preempted so far.
        kv_peak_mb: Its peak target KV so far.
        draft_energy_j: Energy its drafting used so far.
        target_energy_j: Energy its target iterations used so far.
        deferred: Whether admission deferred it.
        spilled: Whether it moved from distributed to fused.
        acceptance_recent: Its moving per-round acceptance (``nan``: no round yet).
        draft_slot: Index of its drafter model among its class's models.
    """

    request_id: int
    prompt_tokens: int
    output_tokens: int
    generated: int
    slo_class: str
    origin: str
    replica: int
    mode: str
    device: int = -1
    arrival_s: float = 0.0
    first_token_server_s: float = math.nan
    first_token_s: float = math.nan
    tpot_origin_s: float = math.inf
    tvt_max_s: float = math.nan
    drafted: int = 0
    accepted: int = 0
    rounds: int = 0
    preemptions: int = 0
    kv_peak_mb: float = 0.0
    draft_energy_j: float = 0.0
    target_energy_j: float = 0.0
    deferred: bool = False
    spilled: bool = False
    acceptance_recent: float = math.nan
    draft_slot: int = 0


@dataclass(frozen=True)
class EngineOutput:
    """Flat results of a run, for the metrics layer."""

    records: tuple[RequestRecord, ...]
    timeseries: tuple[dict[str, float | int | str], ...]
    simulated_s: float
    replica_busy_s: tuple[float, ...]
    replica_pools: tuple[str, ...]
    replica_gpus: tuple[int, ...]
    replica_energy_j: tuple[float, ...]
    replica_idle_power_w: tuple[float | None, ...]
    replica_usd_per_hour: tuple[float | None, ...]
    kv_occupancy_mean: tuple[float, ...]
    device_energy_j: float
    device_busy_s: float
    network_bytes: dict[str, float]
    device_classes: tuple[ClassUsage, ...] = ()
    """Per device class: busy time, energy, idle power and price (scenario order)."""
    in_flight: tuple[InFlight, ...] = ()
    """Requests arrived and unfinished when the run stopped: the records a what-if
    window of another configuration starting at ``simulated_s`` continues from."""
    not_arrived: int = 0
    """Requests of the table still due when the run stopped (not in ``records``)."""
    replica_spans_s: tuple[tuple[float, float], ...] = ()
    """Runs with a planner: when each replica started holding its GPUs (added, or the
    run's start) and when it stopped (retired; the end of the run if it did not).
    Empty: every replica held its GPUs for the whole run."""
    planner_rounds: tuple[dict[str, Any], ...] = ()
    """Runs with a planner: its decisions, one row per candidate per round."""


def _replica_index(replica: TargetReplica) -> int:
    """Sort key of replicas: their global index."""
    return replica.index


def _instantiate(choice: PolicyChoice, *args: Any, streams: RandomStreams | None = None) -> Any:
    """Build the chosen policy (see :func:`simulator.engine.policy_build.instantiate`)."""
    return instantiate(choice, *args, streams=streams)


def _decode_lanes(lane: LaneSpec) -> dict[str, Any]:
    """The decode lane's batching policies: ``verify`` and ``continuous``.

    ``continuous`` takes work that is ready again at the end of its own
    iteration (it never waits for a batch).
    """
    return {
        "verify": _instantiate(lane.policy, lane.limits),
        "continuous": _instantiate(lane.policy, replace(lane.limits, max_wait_ms=0.0)),
    }


class Engine:
    """One simulation run (or what-if window) of a resolved scenario over a request table.

    Construct, then call :meth:`run`. The constructor does no I/O: everything
    comes from the :class:`~simulator.engine.runtime.Runtime` (a scenario
    resolved by :func:`~simulator.engine.runtime.build_runtime`, or a
    candidate configuration built from one). It implements
    :class:`~simulator.engine.lifecycle.RequestLifecycle` for the servers.
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
        self.progress = progress
        self.requests = requests
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self.tracing = tracer is not None
        """Whether events are traced (hot paths skip formatting them otherwise)."""
        self.env = simpy.Environment(initial_time=start_s)
        """The one clock; a what-if window starts it at its start time (absolute time)."""
        settings = runtime.settings
        self.mode = settings.mode
        self.acceptance_rng = BufferedDraws(streams.get("acceptance"))
        self.device_rng = streams.get("devices")
        self.network = Network(settings.jitter, streams.get("jitter"))
        sched = settings.scheduler
        k_controller = _instantiate(settings.k_control, settings.k)
        signal_window = int(getattr(k_controller, "signal_window", 0))
        micro = sched.verify.microbatch
        assert micro is not None  # the verify lane always has microbatch settings
        self.context = ServerContext(
            env=self.env,
            lifecycle=self,
            tracer=self.tracer,
            tracing=self.tracing,
            lanes={
                "prefill": _instantiate(sched.prefill.policy, sched.prefill.limits),
                "draft": _instantiate(sched.draft.policy, sched.draft.limits),
                **_decode_lanes(sched.verify),
            },
            new_arbiter=partial(_instantiate, sched.arbitration),
            microbatcher=Microbatcher(micro, sched.verify.limits.max_batch),
            kv_policy=sched.kv_on_full,
            k_reserve=(settings.k_max + 1) if settings.mode != "none" else 0,
            k_max=settings.k_max,
            fuse_iterations=settings.fuse_iterations,
            max_running=sched.max_running_requests,
            prefill_max_batch=sched.prefill.limits.max_batch,
            signal_window=signal_window,
            split_lanes=sched.lanes,
        )
        self.router = _instantiate(sched.routing, streams=streams)
        self.admission = _instantiate(sched.admission)
        self._admission_predicts = bool(getattr(self.admission, "predicts_ttft", False))
        """Whether the admission policy reads the TTFT prediction."""
        self._routing_detail = bool(getattr(self.router, "reads_replica_detail", False))
        """Whether the router reads the detailed replica loads (pool, KV, queue, link)."""
        self._predicts_ttft = self._admission_predicts or self._routing_detail
        """Whether the predicted prefill queues are kept (only when a policy reads them)."""
        self._deferred: deque[RequestState] = deque()
        """Arrived requests not yet admitted or rejected, in arrival order."""
        self._admitting = False
        self._retry_due_s = math.inf
        self.k_controller = k_controller
        self._windowed = signal_window > 0
        """Whether the controller reads the extended (windowed) signals."""
        self._predicts = self._windowed and bool(getattr(k_controller, "predicts_iteration", False))
        """Whether the controller reads ``KSignals.predictor`` (built only then)."""
        self._predictors: dict[tuple[int, str], LutStepPredictor] = {}
        self._k_default = settings.k
        self._k_min = settings.k_min
        self._k_floor = 0 if settings.k_min == 0 else 1
        """Smallest k a round drafts: 0 (a plain decode step) only when k_min allows it."""
        self._k_max = settings.k_max
        self._temperature = settings.temperature
        self._payload = settings.payload
        self.hybrid = (
            _instantiate(settings.hybrid, streams=streams) if settings.hybrid is not None else None
        )
        self.hybrid_choice: PolicyChoice | None = settings.hybrid
        """The hybrid policy in use and its parameters (changed by :meth:`set_hybrid`)."""
        self._predicts_latency = bool(getattr(self.hybrid, "predicts_latency", False))
        """Whether the hybrid policy reads the predicted per-round times (computed only then)."""
        self.draft_selector = (
            _instantiate(settings.draft_selection, streams=streams)
            if settings.draft_selection is not None
            else None
        )
        """Chooses each distributed request's drafter model (``None``: one model per class)."""
        self.decode_lane = sched.verify
        """The decode (verify) lane's policy, limits and microbatching (a planner may change it)."""
        self.replicas = [
            self._new_replica(index, plan) for index, plan in enumerate(runtime.replicas)
        ]
        self._always_available = all(r.always_available for r in self.replicas)
        self._split = any(r.role != "both" for r in self.replicas)
        """Whether replicas have draft/verify roles (routing then filters by the request's mode)."""
        self._serving = list(self.replicas)
        """The replicas routing may send new requests to (all, unless a planner changed them)."""
        self._spans: list[list[float]] = [[start_s, math.inf] for _ in self.replicas]
        """When each replica started and stopped holding its GPUs (see ``replica_spans_s``)."""
        self._devices: dict[tuple[str, int], DraftDevice] = {}
        self._states: list[RequestState] = []
        self._outstanding = 0
        self._arrived = 0
        """Requests of the table that have arrived (a prefix: they arrive in table order)."""
        self._completed = 0
        """Requests completed so far (for progress reports)."""
        self._last_outcome_s = start_s
        self._active_total = 0
        self.sampler = TimeseriesSampler(
            self.env,
            self.replicas,
            settings.timeseries_interval_s,
            record_state=planner is not None,
        )
        self._in_flight = tuple(in_flight)
        self._migrating: set[int] = set()
        """Ids of window-start requests moved off a replica the window lacks, until re-prefilled."""
        self._in_flight_states: list[RequestState] = []
        loop = settings.closed_loop
        self._closed_loop = (
            ClosedLoopDriver(self.env, self._arrive, loop, streams.get("think_time"))
            if loop is not None
            else None
        )
        self._on_end = self._closed_loop.on_end if self._closed_loop is not None else None
        """Called with each request that ends (completes or is rejected); closed loop only."""

    def _device(self, pool: str, index: int) -> DraftDevice:
        key = (pool, index)
        device = self._devices.get(key)
        if device is None:
            device = self._devices[key] = DraftDevice(
                self.context, self.runtime.clients[pool], index
            )
        return device

    # -- helpers -------------------------------------------------------------
    def _at(self, time_s: float, action: Callable[[], None]) -> None:
        """Deliver ``action`` at ``time_s``: right away when that is now."""
        if time_s <= self.env.now:
            action()
        else:
            call_at(self.env, time_s, action)

    def _link(self, req: RequestState, replica: TargetReplica) -> Link | None:
        if not req.origin:
            return None
        return self.runtime.clients[req.origin].links.get(replica.pool)

    def _resolve(self, req: RequestState, replica: TargetReplica) -> None:
        """Fix what the admitted request uses on every round: channels, drafter, curve."""
        link = self._link(req, replica)
        if link is not None:
            req.uplink, req.downlink = self.network.channels(link, req.device)
        if req.mode == "distributed":
            drafter = req.drafter = self._device(req.origin, req.device)
            pool = self.runtime.clients[req.origin]
            if self.draft_selector is not None and len(pool.models) > 1:
                req.draft_slot = self._choose_drafter(req, replica, drafter)
            model = pool.models[req.draft_slot]
            req.draft_model = model.name
            req.acceptance = model.acceptance
        elif req.mode == "fused":
            req.acceptance = replica.fused_acceptance

    def _choose_drafter(
        self, req: RequestState, replica: TargetReplica, drafter: DraftDevice
    ) -> int:
        """Ask the draft-selection policy for the request's drafter model; return its index.

        Candidates are the models whose LUTs cover the request's longest
        context and whose KV for it fits the device's budget (none: the first
        model, which the admission checks then reject). Predictions are at the
        context of its first round (prompt + the first token) with ``k`` the
        first round's draft length.
        """
        pool = self.runtime.clients[req.origin]
        context = req.prompt_tokens + 1
        needed = req.prompt_tokens + req.output_tokens + self._k_max
        k = self._k_default
        slots: list[int] = []
        candidates: list[DraftCandidate] = []
        for slot, model in enumerate(pool.models):
            if needed > drafter.context_window(req, slot) or not drafter.can_ever_fit(req, slot):
                continue
            curve = model.acceptance
            assert curve is not None
            expected = curve.expected_accepted(k, context, self._temperature)
            slots.append(slot)
            candidates.append(
                DraftCandidate(
                    model.name,
                    expected / k,
                    expected + 1.0,
                    model.draft.at(context, 1, 1)[0],
                    model.weights_mb,
                )
            )
        if len(candidates) <= 1:
            return slots[0] if slots else 0
        verify = replica.costs.step[VERIFY]
        assert verify is not None
        query = DraftModelQuery(
            req.request_id,
            req.origin,
            req.prompt_tokens,
            k,
            verify.at(context, 1, k)[0],
            tuple(candidates),
        )
        selector = self.draft_selector
        assert selector is not None
        chosen = slots[int(selector.choose(query))]
        self.tracer.event(
            self.env.now,
            "draft_model",
            f"request {req.request_id}",
            pool.models[chosen].name,
        )
        return chosen

    @staticmethod
    def _upload(req: RequestState, nbytes: float, sent_s: float) -> float:
        """Send ``nbytes`` to the target at ``sent_s``; return when they arrive."""
        channel = req.uplink
        return sent_s if channel is None else channel.send(nbytes, sent_s)

    @staticmethod
    def _download(req: RequestState, nbytes: float, sent_s: float) -> float:
        """Send ``nbytes`` to the client at ``sent_s``; return when they arrive."""
        channel = req.downlink
        return sent_s if channel is None else channel.send(nbytes, sent_s)

    def _trace_transfer(
        self,
        req: RequestState,
        phase: str,
        uplink: bool,
        sent_s: float,
        arrive_s: float,
        tokens: int,
    ) -> None:
        """Report a transfer of the request's (``phase``: what it carries) to the tracer."""
        channel = req.uplink if uplink else req.downlink
        if channel is None:
            return
        link = channel.link
        self.tracer.span(
            Span(
                "link",
                f"{link.src}->{link.dst}/{req.device}",
                "up" if uplink else "down",
                phase,
                sent_s,
                arrive_s - sent_s,
                (req.request_id,),
                tokens,
            )
        )

    def choose_k(self, req: RequestState) -> None:
        """Ask the k controller for the request's next draft length."""
        target = self.replicas[req.replica]
        generated = req.generated
        signals = KSignals(
            self.env.now,
            req.k if req.rounds else self._k_default,
            self._k_min,
            self._k_max,
            req.accepted / req.drafted if req.drafted else math.nan,
            target.waiting(LANE_OF_MODE[req.mode]),
            req.prompt_tokens + generated,
        )
        window = target.window
        if window is not None:
            signals = signals._replace(
                replica=target.index,
                request_acceptance=req.acceptance_recent,
                window_acceptance=window.acceptance(),
                running_batch=len(target.holders),
                decode_p95_ms=window.p95_ms(),
                queue_delay_ms=window.wait_ms(),
            )
            if self._predicts:
                signals = signals._replace(predictor=self._predictor(target, req.mode))
        k = int(self.k_controller.next_k(signals))
        # Never draft past the output: the round's bonus token is the last one.
        most = req.output_tokens - generated - 1
        if k > most:
            k = most
        if k < self._k_floor:
            k = self._k_floor
        req.k = k
        target.k_sum += k
        target.k_rounds += 1

    def _predictor(self, replica: TargetReplica, mode: str) -> LutStepPredictor:
        """The replica's iteration-time predictor for a request of ``mode`` (built once)."""
        kind = LANE_OF_MODE[mode]
        key = (replica.index, kind)
        predictor = self._predictors.get(key)
        if predictor is None:
            step = replica.costs.step[kind]
            assert step is not None
            plain = replica.costs.step[DECODE] if kind == VERIFY else None
            predictor = self._predictors[key] = LutStepPredictor(step, plain)
        return predictor

    def verify_round(self, req: RequestState) -> int:
        """Sample the accepted prefix of a round; commit the tokens; return how many.

        A round of k = 0 drafted nothing: the target decoded one token, no
        acceptance is drawn (no random number is used).
        """
        model = req.acceptance
        assert model is not None
        accepted = (
            model.sample_accepted(req.k, req.context, self.acceptance_rng, self._temperature)
            if req.k
            else 0
        )
        gained = accepted + 1
        remaining = req.output_tokens - req.generated
        if gained > remaining:
            gained = remaining
        req.generated += gained
        req.drafted += req.k
        req.accepted += accepted
        req.rounds += 1
        if self._windowed:
            window = self.replicas[req.replica].window
            assert window is not None
            window.add_round(accepted, req.k)
            self.k_controller.observe(
                RoundOutcome(self.env.now, req.replica, req.k, accepted, gained, window.last_step_s)
            )
            if req.k:  # a k = 0 round says nothing about acceptance
                rate = accepted / req.k
                recent = req.acceptance_recent
                req.acceptance_recent = (
                    rate
                    if recent != recent
                    else recent + REQUEST_ACCEPTANCE_WEIGHT * (rate - recent)
                )
        self.replicas[req.replica].tokens_out += gained
        return gained

    # -- request flow ----------------------------------------------------------
    def _arrivals(self) -> None:
        """Deliver the arrivals due now, then wait for the next one.

        A chain of clock actions (not a SimPy process) so that a stopped
        engine can be copied (see :meth:`fork`).
        """
        arrival = self.requests.arrival_s
        states = self._states
        count = len(states)
        while self._arrived < count:
            delay = float(arrival[self._arrived]) - self.env.now
            if delay > 0:
                call_after(self.env, delay, self._arrivals)
                return
            self._arrive(states[self._arrived])

    def _arrive(self, req: RequestState) -> None:
        now = self.env.now
        self._arrived += 1
        if self.progress is not None and self._arrived % PROGRESS_EVERY == 0:
            self.progress(self._arrived, self._completed, len(self.requests), now)
        self.tracer.event(
            now,
            "arrival",
            f"request {req.request_id}",
            f"prompt={req.prompt_tokens} output={req.output_tokens}",
        )
        self._set_slo(req)
        self._deferred.append(req)
        self._admit_deferred()

    def _admission_query(self, req: RequestState) -> AdmissionQuery:
        """What the admission policy sees of the request now (predictions only when it reads them)."""
        now = self.env.now
        slo = self.requests.slo_of(req.slo_class)
        query = AdmissionQuery(
            now,
            req.request_id,
            req.prompt_tokens,
            req.output_tokens,
            slo.ttft_ms,
            self._outstanding,
            sum(r.kv.free_mb for r in self._serving),
            now - req.arrival_s,
            slo.tpot_ms,
        )
        if not self._admission_predicts:
            return query
        best: tuple[float, float, TargetReplica] | None = None
        for replica in self._candidate_replicas(req):
            own_s = self._prefill_estimate_s(req, replica, self._prefill_kind(replica))
            if best is None or replica.pending_prefill_s + own_s < best[0] + best[1]:
                best = (replica.pending_prefill_s, own_s, replica)
        assert best is not None
        queue_s, own_s, replica = best
        return replace(
            query,
            predicted_queue_s=queue_s,
            predicted_prefill_s=own_s,
            kv_need_mb=replica.kv_need_mb(req, self._prefill_kind(replica)),
            replica_kv_free_mb=replica.kv.free_mb,
        )

    def _prefill_kind(self, replica: TargetReplica) -> str:
        """The decode-lane kind whose model prefills a new request (verifier in hybrid)."""
        kind = LANE_OF_MODE.get(self.mode, VERIFY)
        return kind if replica.costs.prefill[kind] is not None else FUSED

    @staticmethod
    def _prefill_estimate_s(req: RequestState, replica: TargetReplica, kind: str) -> float:
        """Batch-1 prefill time of the request's context on ``replica`` (from its LUT)."""
        return replica.prefill_time_s(kind, req.context, 1)

    def _admit_deferred(self) -> None:
        """Offer the waiting requests to the admission policy, in arrival order.

        Admission is strictly in arrival order: the first request the policy
        defers stays at the head and the ones behind it keep waiting. Called
        when a request arrives, when one ends (completes or is rejected on a
        replica) and at the retry time the policy asked for.
        """
        if self._admitting:
            return  # the loop under way asks again after each change
        self._admitting = True
        try:
            deferred = self._deferred
            while deferred:
                req = deferred[0]
                decision = self.admission.decide(self._admission_query(req))
                if not decision.admit and decision.defer:
                    if not req.deferred:
                        req.deferred = True
                        self.tracer.event(
                            self.env.now, "defer", f"request {req.request_id}", decision.reason
                        )
                    if decision.retry_at_s is not None:
                        self._retry_admission_at(decision.retry_at_s)
                    return
                deferred.popleft()
                if decision.admit:
                    self._admit(req)
                else:
                    self._reject_at_admission(req, decision.reason or "admission")
        finally:
            self._admitting = False

    def _retry_admission_at(self, at_s: float) -> None:
        """Ask the admission policy again at ``at_s`` (a time not after now is ignored)."""
        if self.env.now < at_s < self._retry_due_s:
            self._retry_due_s = at_s
            call_at(self.env, at_s, partial(self._on_retry_time, at_s))

    def _on_retry_time(self, at_s: float) -> None:
        """A retry time a deferral asked for has come: offer the waiting requests again."""
        if at_s != self._retry_due_s:
            return  # superseded by an earlier retry
        self._retry_due_s = math.inf
        self._admit_deferred()

    def _reject_at_admission(self, req: RequestState, reason: str) -> None:
        """The admission policy turned the request away: it ends here."""
        now = self.env.now
        req.outcome = "rejected"
        req.reason = reason
        self._last_outcome_s = max(self._last_outcome_s, now)
        self.tracer.event(now, "reject", f"request {req.request_id}", req.reason)
        if self._on_end is not None:
            self._on_end(req)

    def _admit(self, req: RequestState) -> None:
        """The request enters the system: route it and send its prompt."""
        now = self.env.now
        self._outstanding += 1
        if req.origin:
            req.device = int(self.device_rng.integers(self.runtime.clients[req.origin].count))
        candidates = self._candidate_replicas(req)
        replica = self._route(req, candidates)
        req.replica = replica.index
        replica.outstanding += 1
        req.mode = self._mode_for(req, replica)
        if self._split and req.mode not in ROLE_MODES[replica.role]:
            # A draft/verify split: the request goes to a replica of its mode's role.
            replica.outstanding -= 1
            replica = self._route(req, self._serving_mode(candidates, req.mode))
            req.replica = replica.index
            replica.outstanding += 1
        self.tracer.event(
            now, "admit", f"request {req.request_id}", f"replica {replica.index} mode {req.mode}"
        )
        self._resolve(req, replica)
        kind = LANE_OF_MODE[req.mode]
        if self._exceeds_context_window(req, replica, kind):
            self.reject_on_replica(req, "context_window")
            return
        if req.drafter is not None and not req.drafter.can_ever_fit(req):
            self.reject_on_replica(req, "device_kv_capacity")
            return
        if self._predicts_ttft:
            self._expect_prefill(req, replica)
        arrive_s = self._upload(req, req.prompt_tokens * self._payload.bytes_per_prompt_token, now)
        if self.tracing:
            self._trace_transfer(req, "prompt", True, now, arrive_s, req.prompt_tokens)
        self._at(arrive_s, partial(replica.enqueue_prefill, req, kind))
        if req.drafter is not None:
            req.drafter.admit(req)

    def _route(self, req: RequestState, candidates: list[TargetReplica]) -> TargetReplica:
        """The replica the routing policy chooses for the request among ``candidates``."""
        if self._routing_detail:
            loads = [self._detailed_load(req, r) for r in candidates]
        else:
            loads = [ReplicaLoad(r.index, r.outstanding, r.kv.free_mb) for r in candidates]
        chosen = self.router.route(
            RoutingQuery(req.request_id, req.origin, req.prompt_tokens), loads
        )
        return self.replicas[int(chosen)]

    @staticmethod
    def _serving_mode(candidates: list[TargetReplica], mode: str) -> list[TargetReplica]:
        """The candidates whose role takes requests of ``mode`` (all of them when none does)."""
        return [r for r in candidates if mode in ROLE_MODES[r.role]] or candidates

    def _detailed_load(self, req: RequestState, replica: TargetReplica) -> ReplicaLoad:
        """A replica's load with its pool, KV, predicted prefill queue and the origin's link."""
        link = self._link(req, replica)
        return ReplicaLoad(
            replica.index,
            replica.outstanding,
            replica.kv.free_mb,
            replica.pool,
            replica.kv.capacity_mb,
            replica.kv_need_mb(req, self._prefill_kind(replica)),
            replica.pending_prefill_s,
            link.rtt_ms if link else 0.0,
            link.bw_mbps if link else math.inf,
        )

    def _set_slo(self, req: RequestState) -> None:
        """Store the request's SLO targets on it, in seconds (read by the queues' deadlines)."""
        slo = self.requests.slo_of(req.slo_class)
        req.ttft_slo_s = slo.ttft_ms / 1000.0
        req.tpot_slo_s = slo.tpot_ms / 1000.0
        req.tvt_slo_s = slo.tvt_ms / 1000.0 if slo.tvt_ms is not None else math.inf

    def _expect_prefill(self, req: RequestState, replica: TargetReplica) -> None:
        """Count the request's prefill in its replica's predicted prefill queue."""
        req.prefill_estimate_s = self._prefill_estimate_s(req, replica, LANE_OF_MODE[req.mode])
        replica.pending_prefill_s += req.prefill_estimate_s

    def _prefill_done(self, req: RequestState) -> None:
        """Take the request's prefill out of its replica's predicted prefill queue."""
        if req.prefill_estimate_s > 0:
            replica = self.replicas[req.replica]
            replica.pending_prefill_s = max(0.0, replica.pending_prefill_s - req.prefill_estimate_s)
            req.prefill_estimate_s = 0.0

    def _exceeds_context_window(self, req: RequestState, replica: TargetReplica, kind: str) -> bool:
        """Whether the request's longest context is beyond a model's LUT range.

        The longest context is prompt + output, plus ``k_max`` draft tokens
        when it speculates. LUT grids end at the model's context window, so a
        request past it could not be served by that model at all.
        """
        reserve = self._k_max if req.mode != "none" else 0
        needed = req.prompt_tokens + req.output_tokens + reserve
        window = replica.costs.context_window(kind)
        if req.drafter is not None:
            window = min(window, req.drafter.context_window(req))
        return needed > window

    def _candidate_replicas(self, req: RequestState) -> list[TargetReplica]:
        """Replicas linked to the request's origin, those available now when any are."""
        candidates = self._linked_replicas(req)
        if not self._always_available:
            now = self.env.now
            available = [r for r in candidates if r.available(now)]
            return available or candidates
        return candidates

    def _linked_replicas(self, req: RequestState) -> list[TargetReplica]:
        """Replicas linked to the request's origin (all when it has none, or none is linked)."""
        if req.origin:
            links = self.runtime.clients[req.origin].links
            linked = [r for r in self._serving if r.pool in links]
            return linked or self._serving
        return self._serving

    def _mode_for(self, req: RequestState, replica: TargetReplica) -> str:
        if self.mode != "hybrid":
            return self.mode
        assert self.hybrid is not None
        link = self._link(req, replica)
        query = ModeQuery(
            req.origin,
            link.rtt_ms if link else 0.0,
            link.bw_mbps if link else math.inf,
            replica.outstanding,
        )
        if self._predicts_latency:
            query = self._predict_round(req, replica, query)
        return str(self.hybrid.choose(query))

    def _predict_round(
        self, req: RequestState, replica: TargetReplica, query: ModeQuery
    ) -> ModeQuery:
        """Fill a mode query with one round's predicted times and tokens, both ways.

        At the request's current context, batch 1 and ``speculation.k``, from
        the LUTs of the origin's draft model and the replica's verify and fused
        models, and from their acceptance curves. A request whose origin does
        not draft gets an infinite draft time (it cannot go distributed).
        """
        k = self._k_default
        context = req.context
        temperature = self._temperature
        client = self.runtime.clients.get(req.origin)
        draft = client.draft if client is not None else None
        curve = client.acceptance if client is not None else None
        if draft is None or curve is None:
            draft_s, tokens = math.inf, 1.0
        else:
            draft_s = draft.curve(1, 1).sum_steps(context, k)[0]
            tokens = curve.expected_tokens_per_verify(k, context, temperature)
        verify = replica.costs.step[VERIFY]
        fused = replica.costs.step[FUSED]
        fused_curve = replica.fused_acceptance
        assert verify is not None and fused is not None and fused_curve is not None
        payload = self._payload
        nbytes = k * payload.bytes_per_draft_token + tokens * payload.bytes_per_result_token
        bw_bps = query.link_bw_mbps * 1e6
        return replace(
            query,
            k=k,
            draft_s=draft_s,
            verify_s=verify.at(context, 1, k)[0],
            transfer_s=nbytes * 8.0 / bw_bps,
            distributed_tokens=tokens,
            fused_step_s=fused.at(context, 1, k)[0],
            fused_tokens=fused_curve.expected_tokens_per_verify(k, context, temperature),
        )

    def on_prefilled(self, req: RequestState, kind: str) -> None:
        """Prefill done (first token committed, or a preempted context recomputed)."""
        now = self.env.now
        replica = self.replicas[req.replica]
        if req.generated > 0:
            if self._migrating and req.request_id in self._migrating:
                self._migrating.discard(req.request_id)
                if req.drafter is not None:
                    # Context rebuilt on its new replica: the device drafts the next round.
                    req.drafter.resume(req)
                    return
            replica.enqueue_step(req, kind)
            return
        req.generated = 1
        replica.tokens_out += 1
        if self._predicts_ttft:
            self._prefill_done(req)
        req.first_token_server_s = now
        req.tpot_origin_s = now
        arrive_s = self._download(req, self._payload.bytes_per_result_token, now)
        if self.tracing:
            self._trace_transfer(req, "first_token", False, now, arrive_s, 1)
        drafter = req.drafter
        if drafter is not None:
            self._at(arrive_s, partial(self._first_token_reaches_device, req, drafter))
            return
        if req.remaining > 0:
            self._at(arrive_s, partial(self._first_token_arrives, req))
            replica.enqueue_step(req, kind)
            return
        # A one-token request is finished by its first token.
        replica.release(req)
        req.finish_server_s = now
        self._at(arrive_s, partial(self._only_token_arrives, req, replica))

    def _first_token_reaches_device(self, req: RequestState, drafter: Drafter) -> None:
        req.first_token_s = self.env.now
        drafter.on_first_token(req)

    def _first_token_arrives(self, req: RequestState) -> None:
        req.first_token_s = self.env.now

    def _only_token_arrives(self, req: RequestState, replica: TargetReplica) -> None:
        req.first_token_s = self.env.now
        self._complete(req, replica)

    def on_finished_server(self, req: RequestState, now_s: float) -> None:
        """The target committed the last token of a none/fused request."""
        replica = self.replicas[req.replica]
        req.finish_server_s = now_s
        payload = self._payload.bytes_per_result_token
        if req.downlink is not None and req.output_tokens > 2:
            # Tokens between the first and the last stream as they are made;
            # their bytes count, their delay is the last token's.
            req.downlink.count((req.output_tokens - 2) * payload)
        arrive_s = self._download(req, payload, now_s)
        if self.tracing:
            self._trace_transfer(req, "last_token", False, now_s, arrive_s, 1)
        self._at(arrive_s, partial(self._complete, req, replica))

    def _complete(self, req: RequestState, replica: TargetReplica) -> None:
        now = self.env.now
        if math.isnan(req.first_token_s):
            req.first_token_s = now
        req.finish_s = max(now, req.first_token_s)
        req.outcome = "completed"
        self._completed += 1
        self._last_outcome_s = max(self._last_outcome_s, now)
        replica.outstanding -= 1
        self._outstanding -= 1
        if replica.state is DRAINING and not replica.outstanding:
            self._retire(replica)
        self.tracer.event(now, "complete", f"request {req.request_id}", f"tokens={req.generated}")
        if self._on_end is not None:
            self._on_end(req)
        if self._deferred:
            self._admit_deferred()

    def send_bundle(self, req: RequestState, sent_s: float) -> None:
        """The request's device finishes drafting at ``sent_s`` (now or later): upload the bundle."""
        req.round_sent_s = sent_s
        arrive_s = self._upload(req, req.k * self._payload.bytes_per_draft_token, sent_s)
        if self.tracing:
            self._trace_transfer(req, "bundle", True, sent_s, arrive_s, req.k)
        self.replicas[req.replica].enqueue_step(req, VERIFY, arrive_s)

    def on_verified(self, req: RequestState, gained: int, now_s: float) -> None:
        """A verify iteration committed ``gained`` tokens: send them back."""
        arrive_s = self._download(req, gained * self._payload.bytes_per_result_token, now_s)
        if self.tracing:
            self._trace_transfer(req, "result", False, now_s, arrive_s, gained)
        if req.remaining <= 0:
            req.finish_server_s = now_s
        self._at(arrive_s, partial(self._result_arrives, req))

    def _result_arrives(self, req: RequestState) -> None:
        """A round's verified tokens reached the client: record its TVT, go on or finish."""
        tvt = self.env.now - req.round_sent_s
        if not tvt <= req.tvt_max_s:  # also when no round was timed yet (nan)
            req.tvt_max_s = tvt
        drafter = req.drafter
        assert drafter is not None
        if req.remaining <= 0:
            self.finish_distributed(req)
        else:
            drafter.next_round(req)

    def finish_distributed(self, req: RequestState) -> None:
        """The last verified tokens reached the client."""
        replica = self.replicas[req.replica]
        if req.kv_mb > 0:
            replica.finish(req)
        self._complete(req, replica)
        assert req.drafter is not None
        req.drafter.finish(req)

    def spill_to_fused(self, req: RequestState) -> None:
        """The request leaves the distributed path: its replica drafts for it with the fused model.

        Its device slot is freed and its next rounds use the fused model's
        acceptance curve; the replica rebuilds its context on the fused model.
        """
        replica = self.replicas[req.replica]
        req.spilled = True
        req.mode = "fused"
        req.acceptance = replica.fused_acceptance
        drafter = req.drafter
        if drafter is not None:
            req.drafter = None
            drafter.finish(req)

    def reject_on_replica(self, req: RequestState, reason: str) -> None:
        """A replica cannot ever serve the request (e.g. its KV exceeds the capacity)."""
        req.outcome = "rejected"
        req.reason = reason
        self._last_outcome_s = max(self._last_outcome_s, self.env.now)
        replica = self.replicas[req.replica]
        replica.outstanding -= 1
        self._outstanding -= 1
        if replica.state is DRAINING and not replica.outstanding:
            self._retire(replica)
        self.tracer.event(self.env.now, "reject", f"request {req.request_id}", reason)
        if self._predicts_ttft:
            self._prefill_done(req)
        if req.drafter is not None:
            req.drafter.finish(req)
        if self._on_end is not None:
            self._on_end(req)
        if self._deferred:
            self._admit_deferred()

    # -- configuration changes (planner) ---------------------------------------
    def set_replica_count(self, pool: str, count: int, load_s: float) -> None:
        """Make ``count`` replicas of ``pool`` serve (at least one), from now on.

        More: draining replicas of the pool serve again first (their model is
        still loaded); the others are new replicas that hold their GPUs from
        now and take work after ``load_s`` (loading their model). Fewer: the
        newest serving (or loading) replicas drain: they take no new
        request, finish their own and then retire (their GPUs are released).
        """
        now = self.env.now
        mine = [r for r in self.replicas if r.pool == pool]
        active = [r for r in mine if r.state in (SERVING, LOADING)]
        for replica in reversed(active[count:]):
            self._drain(replica)
        missing = count - len(active)
        for replica in [r for r in mine if r.state is DRAINING][:missing]:
            replica.state = SERVING
            self._serving.append(replica)
            missing -= 1
        if missing > 0:
            plan = mine[0].plan
            for _ in range(missing):
                replica = self._new_replica(len(self.replicas), plan)
                replica.state = LOADING
                replica.ready_s = now + load_s
                self.replicas.append(replica)
                self._spans.append([now, math.inf])
                self.tracer.event(now, "replica_loading", f"replica {replica.index}", pool)
                call_after(self.env, load_s, partial(self._replica_ready, replica))
        self._serving.sort(key=_replica_index)

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
        for i, replica in enumerate(self.active_replicas(pool)):
            role = "verify" if i < verify else "draft"
            if replica.role != role:
                replica.role = role
                self.tracer.event(self.env.now, "replica_role", f"replica {replica.index}", role)
        self._split = True

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

    def _new_replica(self, index: int, plan: ReplicaPlan) -> TargetReplica:
        """A replica of ``plan`` (its arbitration rule decides how its lanes run)."""
        return TargetReplica(self.context, index, plan)

    def _replica_ready(self, replica: TargetReplica) -> None:
        """A new replica has loaded its model: it serves, unless drained meanwhile."""
        if replica.state is LOADING:
            replica.state = SERVING
            self._serving.append(replica)
            self._serving.sort(key=_replica_index)
            self.tracer.event(self.env.now, "replica_ready", f"replica {replica.index}", "")

    def _drain(self, replica: TargetReplica) -> None:
        """The replica takes no new request; it retires once its own have ended."""
        if replica in self._serving:
            self._serving.remove(replica)
        replica.state = DRAINING
        self.tracer.event(self.env.now, "replica_draining", f"replica {replica.index}", "")
        if not replica.outstanding:
            self._retire(replica)

    def _retire(self, replica: TargetReplica) -> None:
        """A drained replica has no request left: it releases its GPUs."""
        replica.state = RETIRED
        self._spans[replica.index][1] = self.env.now
        self.tracer.event(self.env.now, "replica_retired", f"replica {replica.index}", "")

    def set_hybrid(self, choice: PolicyChoice) -> None:
        """Route the next hybrid requests with the policy ``choice`` (hybrid mode)."""
        self.hybrid = _instantiate(choice)
        self.hybrid_choice = choice

    def set_k_control(self, choice: PolicyChoice, k: int) -> None:
        """Choose the draft length of rounds chosen from now on with ``choice``.

        ``k`` is the draft length of a request's first round (and the
        controller's starting k). Rounds under way keep their k. A controller
        reading windowed signals gets fresh per-replica windows of its size
        (a replica keeps its window when the size is unchanged).
        """
        controller = _instantiate(choice, k)
        window = int(getattr(controller, "signal_window", 0))
        self.k_controller = controller
        self._k_default = k
        self._windowed = window > 0
        self._predicts = self._windowed and bool(getattr(controller, "predicts_iteration", False))
        self.context = replace(self.context, signal_window=window)
        for replica in self.replicas:
            replica.set_signal_window(window)

    def set_decode_lane(self, lane: LaneSpec) -> None:
        """Form decode-lane (verify) iterations with ``lane``'s policy, limits and microbatching.

        Applies on every replica to iterations formed from now on: a fused
        run of unchanged decode iterations is cut at its next boundary (as a
        waiting prompt cuts it), so the next iteration is formed anew. The
        lane in use already changes nothing.
        """
        if lane == self.decode_lane:
            return
        self.decode_lane = lane
        lanes = _decode_lanes(lane)
        assert lane.microbatch is not None  # the verify lane always has microbatch settings
        microbatcher = Microbatcher(lane.microbatch, lane.limits.max_batch)
        self.context = replace(
            self.context, lanes={**self.context.lanes, **lanes}, microbatcher=microbatcher
        )
        for replica in self.replicas:
            replica.set_decode_lane(lanes["verify"], lanes["continuous"], microbatcher)

    def set_draft_selection(self, choice: PolicyChoice) -> None:
        """Choose the drafter model of requests admitted from now on with ``choice``."""
        self.draft_selector = _instantiate(choice)

    def active_replicas(self, pool: str) -> list[TargetReplica]:
        """The serving or loading replicas of ``pool``, by index."""
        return [r for r in self.replicas if r.pool == pool and r.state in (SERVING, LOADING)]

    def ready_times(self, counts: dict[str, int], load_s: float) -> dict[str, list[float]]:
        """When each of ``counts[pool]`` replicas per pool would take work, were they set now.

        The pool's active replicas first (``-inf``: serving; a loading one:
        when it is ready), then new ones: after ``load_s``.
        """
        now = self.env.now
        out: dict[str, list[float]] = {}
        for pool, count in counts.items():
            ready = [r.ready_s for r in self.active_replicas(pool)][:count]
            out[pool] = ready + [now + load_s] * (count - len(ready))
        return out

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
        return self._outstanding + len(self._deferred)

    def waiting(self) -> int:
        """Requests queued on the serving replicas (all lanes)."""
        return sum(sum(r.queue_lengths()) for r in self._serving)

    def serving_counts(self) -> dict[str, int]:
        """Serving or loading replicas of each target pool (what a planner last set)."""
        counts = {plan.pool: 0 for plan in self.runtime.replicas}
        for replica in self.replicas:
            if replica.state in (SERVING, LOADING):
                counts[replica.pool] += 1
        return counts

    # -- what-if windows -----------------------------------------------------
    def _place_in_flight(self) -> None:
        """Put a what-if window's starting requests where the records found them.

        Each keeps its arrival, first-token times, TPOT origin, TVT and
        counters, so its latencies are those of the run's clock. Requests not
        admitted yet are offered to admission again (before any new arrival);
        requests waiting for prefill are queued for it again (and, when
        distributed, admitted on their device); the others hold their KV and
        join their decode lane, distributed ones starting a new draft round;
        a first token or result still on its way reaches the client at the
        start. A request whose replica the window lacks (a candidate with
        fewer replicas, or a replica no longer linked to its origin)
        migrates: it goes to the linked replica with the fewest outstanding
        requests (ties: lowest index), which rebuilds its context (prompt and
        tokens so far) with a prefill before it continues (recompute; KV is
        never moved between target replicas).
        """
        now = self.env.now
        for item in self._in_flight:
            req = RequestState(
                item.request_id,
                item.arrival_s,
                item.prompt_tokens,
                item.output_tokens,
                item.slo_class,
                item.origin,
            )
            self._set_slo(req)
            req.generated = item.generated
            req.first_token_server_s = item.first_token_server_s
            req.first_token_s = item.first_token_s
            req.tpot_origin_s = item.tpot_origin_s
            req.tvt_max_s = item.tvt_max_s
            req.drafted = item.drafted
            req.accepted = item.accepted
            req.rounds = item.rounds
            req.preemptions = item.preemptions
            req.kv_peak_mb = item.kv_peak_mb
            req.draft_energy_j = item.draft_energy_j
            req.target_energy_j = item.target_energy_j
            req.deferred = item.deferred
            req.spilled = item.spilled
            req.acceptance_recent = item.acceptance_recent
            req.draft_slot = item.draft_slot
            self._in_flight_states.append(req)
            if item.replica < 0:
                self._deferred.append(req)
                continue
            if item.generated > 0:
                if math.isnan(req.first_token_server_s):
                    req.first_token_server_s = now
                if not math.isfinite(req.tpot_origin_s):
                    req.tpot_origin_s = req.first_token_server_s
                if math.isnan(req.first_token_s):
                    req.first_token_s = now
            migrate = item.replica >= len(self.replicas) or (
                self.replicas[item.replica] not in self._linked_replicas(req)
            )
            if migrate:
                candidates = self._candidate_replicas(req)
                if self._split:
                    candidates = self._serving_mode(candidates, item.mode)
                replica = min(candidates, key=lambda r: (r.outstanding, r.index))
            else:
                replica = self.replicas[item.replica]
            req.mode = item.mode
            req.replica = replica.index
            req.device = item.device
            self._resolve(req, replica)
            replica.outstanding += 1
            self._outstanding += 1
            kind = LANE_OF_MODE[item.mode]
            if item.generated >= item.output_tokens:
                # Its last tokens were on their way to the client: they arrive at the start.
                req.finish_server_s = now
                call_after(self.env, 0.0, partial(self._complete, req, replica))
                continue
            if item.generated == 0:
                if self._predicts_ttft:
                    self._expect_prefill(req, replica)
                replica.enqueue_prefill(req, kind)
                if req.drafter is not None:
                    req.drafter.admit(req)
                continue
            if migrate:
                self.tracer.event(
                    now, "migrate", f"request {req.request_id}", f"replica {replica.index}"
                )
                if req.drafter is not None:
                    self._migrating.add(req.request_id)
                replica.enqueue_prefill(req, kind)
                continue
            replica.hold(req, kind)
            if req.drafter is not None:
                req.drafter.resume(req)
            else:
                replica.enqueue_step(req, kind)
        if self._deferred:
            self._admit_deferred()

    def snapshot(self) -> tuple[InFlight, ...]:
        """Return the arrived, unfinished requests: the records a what-if window starts from."""
        out: list[InFlight] = []
        for req in self._states[: self._arrived] + self._in_flight_states:
            if req.outcome != "unfinished":
                continue
            out.append(
                InFlight(
                    req.request_id,
                    req.prompt_tokens,
                    req.output_tokens,
                    req.generated,
                    req.slo_class,
                    req.origin,
                    req.replica,
                    req.mode,
                    req.device,
                    req.arrival_s,
                    req.first_token_server_s,
                    req.first_token_s,
                    req.tpot_origin_s,
                    req.tvt_max_s,
                    req.drafted,
                    req.accepted,
                    req.rounds,
                    req.preemptions,
                    req.kv_peak_mb,
                    req.draft_energy_j,
                    req.target_energy_j,
                    req.deferred,
                    req.spilled,
                    req.acceptance_recent,
                    req.draft_slot,
                )
            )
        return tuple(out)

    def fork(self) -> Engine:
        """Return an independent copy of this stopped engine, pending events and streams included.

        Running the copy on continues exactly as this engine would: same
        requests in the same places, same queues, same transfers under way,
        same random-stream states and same event order. The resolved
        runtime, the request table, the tracer and the progress hook are
        shared (the first two are never changed by a run).
        """
        memo: dict[int, Any] = {
            id(self.runtime): self.runtime,
            id(self.requests): self.requests,
            id(self.tracer): self.tracer,
        }
        # SimPy numbers events with an itertools.count, which newer Pythons no
        # longer copy: the copy counts on from this engine's next number (the
        # number taken here only shifts this engine's later events, not their order).
        counter = self.env._eid
        memo[id(counter)] = itertools.count(next(counter))
        return copy.deepcopy(self, memo)

    # -- run -----------------------------------------------------------------
    def start(self) -> None:
        """Create the request states, place the starting requests and start arrivals and sampling."""
        table = self.requests
        arrival = table.arrival_s
        prompt = table.prompt_tokens
        output = table.output_tokens
        classes = table.slo_class_names()
        origins = table.origin_names()
        self._states = [
            RequestState(
                int(table.request_id[i]),
                float(arrival[i]),
                int(prompt[i]),
                int(output[i]),
                classes[i],
                origins[i],
            )
            for i in range(len(table))
        ]
        self._place_in_flight()
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
        return self._output(self.env.now)

    def run(self, until_s: float | None = None) -> EngineOutput:
        """Run to completion (or ``until_s``) and return the flat results."""
        self.start()
        stop = until_s if until_s is not None else self.runtime.settings.until_s
        if stop is not None:
            self.env.run(until=stop)
        else:
            self.env.run()
        # A run to completion ends with its last request, not the sampler's last tick.
        end_s = self.env.now if stop is not None else self._last_outcome_s
        return self._output(end_s)

    def _output(self, end_s: float) -> EngineOutput:
        now = end_s
        # Requests still due after the cut never arrived: they are not reported.
        arrived = self._states[: self._arrived]
        records = tuple(to_record(s) for s in arrived + self._in_flight_states)
        pools = tuple(r.pool for r in self.replicas)
        classes = {c.id: c for c in self.runtime.classes}
        return EngineOutput(
            records=records,
            timeseries=tuple(self.sampler.rows),
            simulated_s=now,
            replica_busy_s=tuple(r.busy_s for r in self.replicas),
            replica_pools=pools,
            replica_gpus=tuple(r.gpus for r in self.replicas),
            replica_energy_j=tuple(r.energy_j for r in self.replicas),
            replica_idle_power_w=tuple(classes[p].idle_power_w for p in pools),
            replica_usd_per_hour=tuple(classes[p].usd_per_hour for p in pools),
            kv_occupancy_mean=tuple(r.kv.mean_occupancy(now) for r in self.replicas),
            device_energy_j=sum(d.energy_j for d in self._devices.values()),
            device_busy_s=sum(d.busy_s for d in self._devices.values()),
            network_bytes={
                f"{src}<->{dst}": c.bytes_up + c.bytes_down
                for (src, dst), c in sorted(self.network.counters.items())
            },
            in_flight=self.snapshot(),
            device_classes=class_usage(
                self.runtime.classes,
                self.runtime.luts,
                [*self.replicas, *self._devices.values()],
            ),
            not_arrived=len(self._states) - self._arrived,
            replica_spans_s=tuple((on, min(off, now)) for on, off in self._spans)
            if self.planner is not None
            else (),
            planner_rounds=self.planner.rounds() if self.planner is not None else (),
        )
