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

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from policies import registry
from policies.views import AdmissionQuery, KSignals, ModeQuery, ReplicaLoad, RoutingQuery
from simulator.acceptance import AcceptanceModel
from simulator.engine.clock import call_at
from simulator.engine.costs import PhaseCost
from simulator.engine.draft_device import DraftDevice
from simulator.engine.kv import KvPool
from simulator.engine.network import Network
from simulator.engine.request_state import RequestRecord, RequestState, to_record
from simulator.engine.target import DECODE, FUSED, VERIFY, ReplicaCosts, TargetReplica
from simulator.engine.timeseries import TimeseriesSampler
from simulator.engine.tracing import NullTracer, Tracer
from simulator.errors import InputError, make_issue
from simulator.rng import BufferedDraws, RandomStreams
from simulator.scenario.model import DeviceClass, Link, ModelSpec, PolicyChoice, Scenario
from simulator.workload import RequestTable

MB_PER_GB = 1024.0
LANE_OF_MODE = {"none": DECODE, "fused": FUSED, "distributed": VERIFY}
"""The decode-lane work of a request by its mode."""
PROGRESS_EVERY = 500

ProgressHook = Callable[[int, int, float], None]
"""``progress(arrived, total, simulated_s)``."""


@dataclass(frozen=True)
class InFlight:
    """A request already past prefill when a what-if window starts.

    Attributes:
        request_id: Its id.
        prompt_tokens: Prompt length.
        output_tokens: Requested output length.
        generated: Output tokens already produced (0: still waiting for prefill).
        slo_class: Its SLO class.
        origin: Its client device class ("" if none).
        replica: Global index of the replica serving it.
        mode: ``none``, ``fused`` or ``distributed``.
        device: Index of its device within the origin class (-1 if none).
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
    in_flight: tuple[InFlight, ...] = ()
    """Requests past prefill and unfinished when the run stopped: the state a
    what-if window starting at ``simulated_s`` continues from."""


def _instantiate(choice: PolicyChoice, *args: Any) -> Any:
    cls = registry(choice.family).get(choice.name)
    return cls(*args, choice.params)


class Engine:
    """One simulation run (or what-if window) of a scenario over a request table.

    Construct, then call :meth:`run`. The constructor does no I/O: everything
    comes from the loaded :class:`~simulator.scenario.Scenario`.
    """

    def __init__(
        self,
        scenario: Scenario,
        requests: RequestTable,
        streams: RandomStreams,
        tracer: Tracer | None = None,
        in_flight: Sequence[InFlight] = (),
        progress: ProgressHook | None = None,
    ) -> None:
        self.scenario = scenario
        self.progress = progress
        self.requests = requests
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self.tracing = tracer is not None
        """Whether events are traced (hot paths skip formatting them otherwise)."""
        self.env = simpy.Environment()
        spec = scenario.speculation
        self.mode = spec.mode
        self.fuse_iterations = scenario.simulation.fuse_iterations
        self.kv_policy = scenario.scheduler.kv_on_full
        self.k_reserve = (spec.k_max + 1) if spec.mode != "none" else 0
        self.acceptance_rng = BufferedDraws(streams.get("acceptance"))
        self.device_rng = streams.get("devices")
        self.network = Network(scenario.network.jitter, streams.get("jitter"))
        sched = scenario.scheduler
        self.lanes = {
            "prefill": _instantiate(sched.prefill.policy, sched.prefill.limits),
            "draft": _instantiate(sched.draft.policy, sched.draft.limits),
            "verify": _instantiate(sched.verify.policy, sched.verify.limits),
        }
        self.router = _instantiate(sched.routing)
        self.admission = _instantiate(sched.admission)
        self.k_controller = _instantiate(spec.k_control, spec.k)
        self._k_default = spec.k
        self._k_min = spec.k_min
        self._k_max = spec.k_max
        self._temperature = spec.temperature
        self._payload = scenario.network.payload
        self.hybrid = _instantiate(spec.hybrid) if spec.mode == "hybrid" else None
        self._costs: dict[tuple[str, str, str], PhaseCost] = {}
        self._links: dict[tuple[str, str], Link | None] = {}
        self._acceptance_by_owner: dict[tuple[str, str], AcceptanceModel] = {}
        self.replicas: list[TargetReplica] = []
        self._build_replicas()
        self._devices: dict[tuple[str, int], DraftDevice] = {}
        self._states: list[RequestState] = []
        self._outstanding = 0
        self._last_outcome_s = 0.0
        self._active_total = 0
        self._tokens_out = 0
        self._k_sum = 0
        self._k_rounds = 0
        self.sampler = TimeseriesSampler(self, scenario.metrics.timeseries_interval_s)
        self._in_flight = tuple(in_flight)

    # -- construction --------------------------------------------------------
    def _cost(self, model: ModelSpec, device: DeviceClass, phase: str) -> PhaseCost:
        key = (model.name, device.id, phase)
        cost = self._costs.get(key)
        if cost is None:
            lut_key = self.scenario.lut_key(model, device, phase)
            cost = PhaseCost(self.scenario.luts, lut_key, self.scenario.simulation.lut_out_of_range)
            self._costs[key] = cost
        return cost

    def _build_replicas(self) -> None:
        spec = self.scenario.speculation
        for device in self.scenario.targets():
            verifier = spec.models[device.model] if device.model else None
            fused = spec.models[device.fused_model] if device.fused_model else None
            costs = ReplicaCosts(
                prefill_verifier=self._cost(verifier, device, "prefill") if verifier else None,
                prefill_fused=self._cost(fused, device, "prefill") if fused else None,
                decode=self._cost(verifier, device, "draft_decode")
                if verifier and self.mode == "none"
                else None,
                verify=self._cost(verifier, device, "verify")
                if verifier and self.mode in ("distributed", "hybrid")
                else None,
                fused=self._cost(fused, device, "fused_decode") if fused else None,
            )
            per_token: dict[str, float] = {}
            static_mb = 0.0
            for kind, prefill in ((VERIFY, costs.prefill[VERIFY]), (FUSED, costs.prefill[FUSED])):
                if prefill is not None:
                    per_token[kind] = prefill.kv_mb_per_token()
                    static_mb = max(static_mb, prefill.static_mem_mb())
            if VERIFY in per_token:
                per_token[DECODE] = per_token[VERIFY]
            capacity = self._kv_capacity_mb(device, static_mb)
            for _ in range(device.count):
                index = len(self.replicas)
                replica = TargetReplica(self, index, device.id, costs, KvPool(capacity), per_token)
                self.replicas.append(replica)

    def _kv_capacity_mb(self, device: DeviceClass, static_mb: float) -> float:
        memory = device.profile.memory
        limit = memory.kv_cache_limit_mb
        if limit is not None:
            return float(limit)
        total_mb = (memory.device_memory_gb or 0.0) * MB_PER_GB
        capacity = total_mb - static_mb
        if capacity <= 0:
            raise InputError(
                [
                    make_issue(
                        device.profile_path,
                        "memory.device_memory_gb",
                        memory.device_memory_gb,
                        f"enough memory for the model ({static_mb:.0f} MB of weights and activations per replica)",
                        f"no room for a KV cache on {device.id}",
                    )
                ]
            )
        return capacity

    def _device(self, pool: str, index: int) -> DraftDevice:
        key = (pool, index)
        device = self._devices.get(key)
        if device is None:
            cls = self.scenario.device(pool)
            model = self.scenario.speculation.models[cls.model or ""]
            compute = cls.profile.compute
            device = DraftDevice(
                self,
                pool,
                index,
                self._cost(model, cls, "prefill"),
                self._cost(model, cls, "draft_decode"),
                max_concurrent=compute.max_concurrent_requests or 1,
                thermal=compute.thermal,
                availability=cls.availability,
            )
            self._devices[key] = device
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
        key = (req.origin, replica.pool)
        try:
            return self._links[key]
        except KeyError:
            link = self._links[key] = self.scenario.network.link_between(*key)
            return link

    def _resolve(self, req: RequestState, replica: TargetReplica) -> None:
        """Fix what the admitted request uses on every round: channels, drafter, curve."""
        link = self._link(req, replica)
        if link is not None:
            req.uplink, req.downlink = self.network.channels(link, req.device)
        if req.mode == "distributed":
            req.drafter = self._device(req.origin, req.device)
        if req.mode != "none":
            kind = VERIFY if req.mode == "distributed" else FUSED
            req.acceptance = self._acceptance(req.origin if kind == VERIFY else replica.pool, kind)

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

    def choose_k(self, req: RequestState, replica: TargetReplica | None) -> None:
        """Ask the k controller for the request's next draft length."""
        target = replica if replica is not None else self.replicas[req.replica]
        generated = req.generated
        signals = KSignals(
            self.env.now,
            req.k or self._k_default,
            self._k_min,
            self._k_max,
            req.accepted / req.drafted if req.drafted else math.nan,
            target.waiting(VERIFY),
            req.prompt_tokens + generated,
        )
        k = int(self.k_controller.next_k(signals))
        # Never draft past the output: the round's bonus token is the last one.
        most = req.output_tokens - generated - 1
        if k > most:
            k = most
        if k < 1:
            k = 1
        req.k = k
        self._k_sum += k
        self._k_rounds += 1

    def _acceptance(self, owner: str, kind: str) -> AcceptanceModel:
        """The acceptance curve of the model that drafts: ``owner``'s draft or fused model."""
        key = (kind, owner)
        found = self._acceptance_by_owner.get(key)
        if found is None:
            spec = self.scenario.speculation
            cls = self.scenario.device(owner)
            name = cls.model if kind == VERIFY else cls.fused_model
            model = spec.models[name or ""]
            found = self._acceptance_by_owner[key] = spec.acceptance[model.acceptance or ""].model
        return found

    def verify_round(self, req: RequestState) -> int:
        """Sample the accepted prefix of a round; commit the tokens; return how many."""
        model = req.acceptance
        assert model is not None
        accepted = model.sample_accepted(req.k, req.context, self.acceptance_rng, self._temperature)
        gained = accepted + 1
        remaining = req.output_tokens - req.generated
        if gained > remaining:
            gained = remaining
        req.generated += gained
        req.drafted += req.k
        req.accepted += accepted
        req.rounds += 1
        self._tokens_out += gained
        return gained

    # -- request flow ----------------------------------------------------------
    def _arrivals(self) -> Generator[simpy.Event, Any, None]:
        table = self.requests
        arrival = table.arrival_s
        for i in range(len(table)):
            delay = float(arrival[i]) - self.env.now
            if delay > 0:
                yield self.env.timeout(delay)
            self._arrive(self._states[i])
            if self.progress is not None and (i + 1) % PROGRESS_EVERY == 0:
                self.progress(i + 1, len(table), self.env.now)

    def _arrive(self, req: RequestState) -> None:
        now = self.env.now
        self.tracer.event(
            now,
            "arrival",
            f"request {req.request_id}",
            f"prompt={req.prompt_tokens} output={req.output_tokens}",
        )
        slo = self.requests.slo_of(req.slo_class)
        query = AdmissionQuery(
            now,
            req.request_id,
            req.prompt_tokens,
            req.output_tokens,
            slo.ttft_ms,
            self._outstanding,
            sum(r.kv.free_mb for r in self.replicas),
        )
        decision = self.admission.decide(query)
        if not decision.admit:
            req.outcome = "rejected"
            req.reason = decision.reason or "admission"
            self._last_outcome_s = max(self._last_outcome_s, now)
            self.tracer.event(now, "reject", f"request {req.request_id}", req.reason)
            return
        self._outstanding += 1
        if req.origin:
            cls = self.scenario.device(req.origin)
            req.device = int(self.device_rng.integers(cls.count))
        candidates = self._candidate_replicas(req)
        loads = [ReplicaLoad(r.index, r.outstanding, r.kv.free_mb) for r in candidates]
        replica = self.replicas[
            self.router.route(RoutingQuery(req.request_id, req.origin, req.prompt_tokens), loads)
        ]
        req.replica = replica.index
        replica.outstanding += 1
        req.mode = self._mode_for(req, replica)
        self.tracer.event(
            now, "admit", f"request {req.request_id}", f"replica {replica.index} mode {req.mode}"
        )
        self._resolve(req, replica)
        kind = LANE_OF_MODE[req.mode]
        if self._exceeds_context_window(req, replica, kind):
            self.reject_on_replica(req, "context_window")
            return
        arrive_s = self._upload(req, req.prompt_tokens * self._payload.bytes_per_prompt_token, now)
        self._at(arrive_s, lambda: replica.enqueue_prefill(req, kind))
        if req.drafter is not None:
            req.drafter.admit(req)

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
            window = min(window, req.drafter.context_window)
        return needed > window

    def _candidate_replicas(self, req: RequestState) -> list[TargetReplica]:
        if not req.origin:
            return self.replicas
        linked = [
            r for r in self.replicas if self.scenario.network.link_between(req.origin, r.pool)
        ]
        return linked or self.replicas

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
        return str(self.hybrid.choose(query))

    def on_prefilled(self, replica: TargetReplica, req: RequestState, kind: str) -> None:
        """Prefill done (first token committed, or a preempted context recomputed)."""
        now = self.env.now
        if req.generated > 0:
            replica.enqueue_step(req, kind)
            return
        req.generated = 1
        self._tokens_out += 1
        req.first_token_server_s = now
        arrive_s = self._download(req, self._payload.bytes_per_result_token, now)
        drafter = req.drafter
        if drafter is not None:

            def first_token_reaches_device() -> None:
                req.first_token_s = self.env.now
                drafter.on_first_token(req)

            self._at(arrive_s, first_token_reaches_device)
            return
        if req.remaining > 0:

            def first_token_arrives() -> None:
                req.first_token_s = self.env.now

            self._at(arrive_s, first_token_arrives)
            replica.enqueue_step(req, kind)
            return
        # A one-token request is finished by its first token.
        replica.release(req)
        req.finish_server_s = now

        def only_token_arrives() -> None:
            req.first_token_s = self.env.now
            self._complete(req, replica)

        self._at(arrive_s, only_token_arrives)

    def on_finished_server(self, replica: TargetReplica, req: RequestState, now_s: float) -> None:
        """The target committed the last token of a none/fused request."""
        req.finish_server_s = now_s
        payload = self._payload.bytes_per_result_token
        if req.downlink is not None and req.output_tokens > 2:
            # Tokens between the first and the last stream as they are made;
            # their bytes count, their delay is the last token's.
            req.downlink.count((req.output_tokens - 2) * payload)
        arrive_s = self._download(req, payload, now_s)
        self._at(arrive_s, lambda: self._complete(req, replica))

    def _complete(self, req: RequestState, replica: TargetReplica) -> None:
        now = self.env.now
        if math.isnan(req.first_token_s):
            req.first_token_s = now
        req.finish_s = max(now, req.first_token_s)
        req.outcome = "completed"
        self._last_outcome_s = max(self._last_outcome_s, now)
        replica.outstanding -= 1
        self._outstanding -= 1
        self.tracer.event(now, "complete", f"request {req.request_id}", f"tokens={req.generated}")

    def send_bundle(self, req: RequestState, sent_s: float) -> None:
        """The request's device finishes drafting at ``sent_s`` (now or later): upload the bundle."""
        req.round_sent_s = sent_s
        arrive_s = self._upload(req, req.k * self._payload.bytes_per_draft_token, sent_s)
        self.replicas[req.replica].enqueue_step(req, VERIFY, arrive_s)

    def on_verified(self, req: RequestState, gained: int, now_s: float) -> None:
        """A verify iteration committed ``gained`` tokens: send them back."""
        arrive_s = self._download(req, gained * self._payload.bytes_per_result_token, now_s)
        if req.remaining <= 0:
            req.finish_server_s = now_s
        self._at(arrive_s, lambda: self._result_arrives(req))

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
            replica.release(req)
        self._complete(req, replica)
        assert req.drafter is not None
        req.drafter.finish(req)

    def reject_on_replica(self, req: RequestState, reason: str) -> None:
        """A replica cannot ever serve the request (e.g. its KV exceeds the capacity)."""
        req.outcome = "rejected"
        req.reason = reason
        self._last_outcome_s = max(self._last_outcome_s, self.env.now)
        replica = self.replicas[req.replica]
        replica.outstanding -= 1
        self._outstanding -= 1
        self.tracer.event(self.env.now, "reject", f"request {req.request_id}", reason)
        if req.drafter is not None:
            req.drafter.finish(req)

    # -- what-if windows -----------------------------------------------------
    def _place_in_flight(self) -> None:
        """Put a what-if window's starting requests where the snapshot found them.

        Requests waiting for prefill are queued for it again (and, when
        distributed, admitted on their device); the others hold their KV and
        join their decode lane, distributed ones starting a new draft round.
        Their latencies in the window's records count from the window start.
        """
        for item in self._in_flight:
            replica = self.replicas[item.replica]
            req = RequestState(
                item.request_id,
                0.0,
                item.prompt_tokens,
                item.output_tokens,
                item.slo_class,
                item.origin,
            )
            req.generated = item.generated
            req.mode = item.mode
            req.replica = replica.index
            req.device = item.device
            self._resolve(req, replica)
            replica.outstanding += 1
            self._outstanding += 1
            self._in_flight_states.append(req)
            kind = LANE_OF_MODE[item.mode]
            if item.generated == 0:
                replica.enqueue_prefill(req, kind)
                if req.drafter is not None:
                    req.drafter.admit(req)
                continue
            replica.hold(req, kind)
            if req.drafter is not None:
                req.drafter.resume(req)
            else:
                replica.enqueue_step(req, kind)

    def snapshot(self) -> tuple[InFlight, ...]:
        """Return the admitted, unfinished requests: the state a what-if window starts from."""
        out: list[InFlight] = []
        for req in self._states + self._in_flight_states:
            if req.outcome == "unfinished" and req.replica >= 0 and req.remaining > 0:
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
                    )
                )
        return tuple(out)

    # -- run -----------------------------------------------------------------
    def run(self, until_s: float | None = None) -> EngineOutput:
        """Run to completion (or ``until_s``) and return the flat results."""
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
        self._in_flight_states: list[RequestState] = []
        self._place_in_flight()
        self.env.process(self._arrivals())
        self.sampler.start()
        stop = until_s if until_s is not None else self.scenario.simulation.until_s
        if stop is not None:
            self.env.run(until=stop)
        else:
            self.env.run()
        # A run to completion ends with its last request, not the sampler's last tick.
        end_s = self.env.now if stop is not None else self._last_outcome_s
        return self._output(end_s)

    def _output(self, end_s: float) -> EngineOutput:
        now = end_s
        records = tuple(to_record(s) for s in self._states + self._in_flight_states)
        pools = tuple(r.pool for r in self.replicas)
        classes = {d.id: d for d in self.scenario.targets()}
        return EngineOutput(
            records=records,
            timeseries=tuple(self.sampler.rows),
            simulated_s=now,
            replica_busy_s=tuple(r.busy_s for r in self.replicas),
            replica_pools=pools,
            replica_gpus=tuple(classes[p].profile.compute.gpus_per_replica for p in pools),
            replica_energy_j=tuple(r.energy_j for r in self.replicas),
            replica_idle_power_w=tuple(classes[p].profile.energy.idle_power_w for p in pools),
            replica_usd_per_hour=tuple(classes[p].usd_per_hour for p in pools),
            kv_occupancy_mean=tuple(r.kv.mean_occupancy(now) for r in self.replicas),
            device_energy_j=sum(d.energy_j for d in self._devices.values()),
            device_busy_s=sum(d.busy_s for d in self._devices.values()),
            network_bytes={
                f"{src}<->{dst}": c.bytes_up + c.bytes_down
                for (src, dst), c in sorted(self.network.counters.items())
            },
            in_flight=self.snapshot(),
        )
