"""Where an arrived request goes: admission, routing, its mode and its drafter model.

:class:`Dispatcher` owns the routing, admission, hybrid and drafter-selection
policies (bound by :class:`~simulator.engine.binding.PolicyBinder`), the
queue of arrived requests admission deferred and its retry time, and the
device draws. For each admitted request it picks a replica among the
fleet's serving ones, the request's mode and drafter model, resolves its
network channels and acceptance curve, and hands its prompt to the
:class:`~simulator.engine.flow.RequestFlow`. It reads replicas' loads and
LUTs; it never changes the fleet.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import simpy

from policies.base import promised_by_method
from policies.lanes import FUSED, VERIFY
from policies.views import (
    AdmissionQuery,
    DraftCandidate,
    DraftModelQuery,
    ModeQuery,
    ReplicaLoad,
    RoutingQuery,
)
from simulator.engine.binding import HybridMode, Routing
from simulator.engine.clock import call_at
from simulator.engine.draft_device import DraftDevice
from simulator.engine.fleet import Fleet
from simulator.engine.flow import RequestFlow
from simulator.engine.network import Network
from simulator.engine.request_state import RequestState
from simulator.engine.runtime import ROLE_MODES, Runtime
from simulator.engine.speculation import LANE_OF_MODE, Speculation
from simulator.engine.target import TargetReplica
from simulator.engine.tracing import Tracer
from simulator.scenario.model import Link
from simulator.workload import RequestTable


class Dispatcher:
    """Admits, routes and resolves the requests of one run.

    Args:
        runtime: The resolved runtime (client pools and their links).
        requests: The request table (SLO classes).
        env: The run's clock.
        fleet: The run's replicas and devices.
        flow: Moves requests and ends them.
        speculation: The draft-length loop (its first-round k and temperature).
        network: The run's links.
        tracer: Receives engine events.
        routing: The routing and admission policies.
        hybrid: The hybrid policy (hybrid mode).
        draft_selector: Chooses each distributed request's drafter model (``None``:
            one model per class).
        device_rng: Draws each request's device within its class.
    """

    def __init__(
        self,
        runtime: Runtime,
        requests: RequestTable,
        env: simpy.Environment,
        fleet: Fleet,
        flow: RequestFlow,
        speculation: Speculation,
        network: Network,
        tracer: Tracer,
        routing: Routing,
        hybrid: HybridMode,
        draft_selector: Any,
        device_rng: np.random.Generator,
    ) -> None:
        self.runtime = runtime
        self.clients = runtime.clients
        self.entry_replicas: list[TargetReplica] = fleet.serving
        """The replicas new requests are routed to: those serving (a disaggregated
        fleet's prefill replicas)."""
        self.rounds_replica: Callable[[RequestState, TargetReplica], TargetReplica] | None = None
        """Disaggregated serving: a replica of the decode pool where a request routed to
        a prefill replica will run its rounds (``None``: the replica it is routed to)."""
        self.requests = requests
        self.env = env
        self.fleet = fleet
        self.flow = flow
        self.speculation = speculation
        self.network = network
        self.tracer = tracer
        self.tracing = flow.tracing
        """Whether a tracer is set (events are built only then)."""
        self.mode = runtime.settings.mode
        self.router = routing.router
        self.decode_router = routing.decode_router
        """Chooses a prefilled request's decode replica (``None``: a colocated fleet)."""
        self.admission = routing.admission
        self._admission_predicts = routing.admission_predicts
        self._admits_all = promised_by_method(type(self.admission), "admits_all", "decide")
        """Admission admits every request: it is neither asked nor given a query."""
        self._routing_detail = routing.routing_detail
        self._routing_prefix = routing.routing_prefix
        self.predicts_ttft = routing.predicts_ttft
        """Whether the predicted prefill queues are kept (only when a policy reads them)."""
        self.hybrid = hybrid
        """The hybrid policy in use and its parameters (a planner may change it)."""
        self.draft_selector = draft_selector
        """Chooses each distributed request's drafter model (``None``: one model per class)."""
        self.device_rng = device_rng
        self.deferred: deque[RequestState] = deque()
        """Arrived requests not yet admitted or rejected, in arrival order."""
        self._admitting = False
        self._retry_due_s = math.inf

    # -- arrival and admission -------------------------------------------------------
    def arrive(self, req: RequestState) -> None:
        """A request arrived: it waits for admission behind the ones already waiting."""
        if self.tracing:
            self.tracer.event(
                self.env._now,
                "arrival",
                f"request {req.request_id}",
                f"prompt={req.prompt_tokens} output={req.output_tokens}",
            )
        self.set_slo(req)
        self.deferred.append(req)
        self._admit_deferred()

    def set_slo(self, req: RequestState) -> None:
        """Store the request's SLO targets on it, in seconds (read by the queues' deadlines)."""
        slo = self.requests.slo_of(req.slo_class)
        req.ttft_slo_s = slo.ttft_ms / 1000.0
        req.tpot_slo_s = slo.tpot_ms / 1000.0
        req.tvt_slo_s = slo.tvt_ms / 1000.0 if slo.tvt_ms is not None else math.inf

    def offer_waiting(self) -> None:
        """Offer the waiting requests to admission again (a request ended)."""
        if self.deferred:
            self._admit_deferred()

    def _admission_query(self, req: RequestState) -> AdmissionQuery:
        """What the admission policy sees of the request now (predictions only when it reads them)."""
        now = self.env._now
        slo = self.requests.slo_of(req.slo_class)
        query = AdmissionQuery(
            now,
            req.request_id,
            req.prompt_tokens,
            req.output_tokens,
            slo.ttft_ms,
            self.flow.outstanding,
            sum(r.kv.free_mb for r in self.fleet.serving),
            now - req.arrival_s,
            slo.tpot_ms,
        )
        if not self._admission_predicts:
            return query
        best: tuple[float, float, TargetReplica] | None = None
        for replica in self.candidate_replicas(req):
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
        """Batch-1 prefill time of the request's context on ``replica`` (from its LUT).

        With a prefix cache, less what the prompt would find cached there now
        (``F(L) - F(p)``; see :meth:`~simulator.engine.prefill.PrefillLane.predicted_s`).
        """
        return replica.prefill.predicted_s(req, kind)

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
            deferred = self.deferred
            if self._admits_all:
                while deferred:
                    self._admit(deferred.popleft())
                return
            while deferred:
                req = deferred[0]
                decision = self.admission.decide(self._admission_query(req))
                if not decision.admit and decision.defer:
                    if not req.deferred:
                        req.deferred = True
                        if self.tracing:
                            self.tracer.event(
                                self.env._now, "defer", f"request {req.request_id}", decision.reason
                            )
                    if decision.retry_at_s is not None:
                        self._retry_admission_at(decision.retry_at_s)
                    return
                deferred.popleft()
                if decision.admit:
                    self._admit(req)
                else:
                    self.flow.reject_at_admission(req, decision.reason or "admission")
        finally:
            self._admitting = False

    def _retry_admission_at(self, at_s: float) -> None:
        """Ask the admission policy again at ``at_s`` (a time not after now is ignored)."""
        if self.env._now < at_s < self._retry_due_s:
            self._retry_due_s = at_s
            call_at(self.env, at_s, partial(self._on_retry_time, at_s))

    def _on_retry_time(self, at_s: float) -> None:
        """A retry time a deferral asked for has come: offer the waiting requests again."""
        if at_s != self._retry_due_s:
            return  # superseded by an earlier retry
        self._retry_due_s = math.inf
        self._admit_deferred()

    def _admit(self, req: RequestState) -> None:
        """The request enters the system: route it and send its prompt."""
        flow = self.flow
        flow.outstanding += 1
        if req.origin:
            req.device = int(self.device_rng.integers(self.clients[req.origin].count))
        candidates = self.candidate_replicas(req)
        replica = self._route(req, candidates)
        req.replica = replica.index
        replica.outstanding += 1
        req.mode = self._mode_for(req, replica)
        if self.fleet.split and req.mode not in ROLE_MODES[replica.role]:
            # A draft/verify split: the request goes to a replica of its mode's role.
            replica.outstanding -= 1
            replica = self._route(req, self.serving_mode(candidates, req.mode))
            req.replica = replica.index
            replica.outstanding += 1
        if self.tracing:
            self.tracer.event(
                self.env._now,
                "admit",
                f"request {req.request_id}",
                f"replica {replica.index} mode {req.mode}",
            )
        self.resolve(req, replica)
        kind = LANE_OF_MODE[req.mode]
        if self._exceeds_context_window(req, replica, kind):
            flow.reject_on_replica(req, "context_window")
            return
        if replica.kv_rule.grows and not replica.kv_ever_fits(req, kind):
            # KV that grows: refused up front (a queue reserve is refused at its prefill).
            flow.reject_on_replica(req, "kv_capacity")
            return
        if req.drafter is not None and not req.drafter.can_ever_fit(req):
            flow.reject_on_replica(req, "device_kv_capacity")
            return
        if self.predicts_ttft:
            self.expect_prefill(req, replica)
        flow.send_prompt(req, replica, kind)
        if req.drafter is not None:
            req.drafter.admit(req)

    def expect_prefill(self, req: RequestState, replica: TargetReplica) -> None:
        """Count the request's prefill in its replica's predicted prefill queue."""
        req.prefill_estimate_s = self._prefill_estimate_s(req, replica, LANE_OF_MODE[req.mode])
        replica.pending_prefill_s += req.prefill_estimate_s

    def _exceeds_context_window(self, req: RequestState, replica: TargetReplica, kind: str) -> bool:
        """Whether the request's longest context is beyond a model's LUT range.

        The longest context is prompt + output, plus ``k_max`` draft tokens
        when it speculates. LUT grids end at the model's context window, so a
        request past it could not be served by that model at all.
        """
        reserve = self.speculation.k_max if req.mode != "none" else 0
        needed = req.prompt_tokens + req.output_tokens + reserve
        window = replica.costs.context_window(kind)
        if req.drafter is not None:
            window = min(window, req.drafter.context_window(req))
        return needed > window

    # -- routing -------------------------------------------------------------------------
    def _route(self, req: RequestState, candidates: list[TargetReplica]) -> TargetReplica:
        """The replica the routing policy chooses for the request among ``candidates``."""
        if self._routing_detail:
            loads = [self._detailed_load(req, r) for r in candidates]
        else:
            loads = [ReplicaLoad(r.index, r.outstanding, r.kv.free_mb) for r in candidates]
        if self._routing_prefix:
            loads = [
                replace(load, cached_prefix_tokens=r.kv_rule.cached_tokens(req, kind))
                for load, r in zip(loads, candidates, strict=True)
                for kind in (self._prefill_kind(r),)
            ]
        chosen = self.router.route(
            RoutingQuery(req.request_id, req.origin, req.prompt_tokens), loads
        )
        return self.fleet.replicas[int(chosen)]

    @staticmethod
    def serving_mode(candidates: list[TargetReplica], mode: str) -> list[TargetReplica]:
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

    def candidate_replicas(self, req: RequestState) -> list[TargetReplica]:
        """Replicas linked to the request's origin, those available now when any are."""
        candidates = self.linked_replicas(req)
        if not self.fleet.always_available:
            now = self.env._now
            available = [r for r in candidates if r.available(now)]
            return available or candidates
        return candidates

    def linked_replicas(self, req: RequestState) -> list[TargetReplica]:
        """Replicas linked to the request's origin (all when it has none, or none is linked)."""
        serving = self.entry_replicas
        if req.origin:
            links = self.clients[req.origin].links
            linked = [r for r in serving if r.pool in links]
            return linked or serving
        return serving

    def _link(self, req: RequestState, replica: TargetReplica) -> Link | None:
        if not req.origin:
            return None
        return self.clients[req.origin].links.get(replica.pool)

    # -- mode and drafter ----------------------------------------------------------------
    def _rounds_on(self, req: RequestState, replica: TargetReplica) -> TargetReplica:
        """The replica whose link and LUTs a request routed to ``replica`` runs its rounds with.

        ``replica`` itself, except in a disaggregated fleet, where the rounds
        run on a decode replica (see :attr:`rounds_replica`).
        """
        rounds = self.rounds_replica
        return replica if rounds is None else rounds(req, replica)

    def _mode_for(self, req: RequestState, replica: TargetReplica) -> str:
        """The request's mode; in hybrid mode, the hybrid policy's choice.

        The policy sees the link and the LUTs of the replica the request's
        rounds will run on (in a disaggregated fleet, its client's link to the
        decode pool) and the outstanding requests of ``replica``, where it is
        routed.
        """
        if self.mode != "hybrid":
            return self.mode
        hybrid = self.hybrid
        assert hybrid.policy is not None
        rounds = self._rounds_on(req, replica)
        link = self._link(req, rounds)
        query = ModeQuery(
            req.origin,
            link.rtt_ms if link else 0.0,
            link.bw_mbps if link else math.inf,
            replica.outstanding,
        )
        if hybrid.predicts_latency:
            query = self._predict_round(req, rounds, query)
        return str(hybrid.policy.choose(query))

    def _predict_round(
        self, req: RequestState, replica: TargetReplica, query: ModeQuery
    ) -> ModeQuery:
        """Fill a mode query with one round's predicted times and tokens, both ways.

        At the request's current context, batch 1 and ``speculation.k``, from
        the LUTs of the origin's draft model and the replica's verify and fused
        models, and from their acceptance curves. A request whose origin does
        not draft gets an infinite draft time (it cannot go distributed).
        """
        k = self.speculation.k_default
        context = req.context
        temperature = self.speculation.temperature
        client = self.clients.get(req.origin)
        draft = client.draft if client is not None else None
        curve = client.acceptance if client is not None else None
        if draft is None or curve is None:
            draft_s, tokens = math.inf, 1.0
        else:
            draft_s = draft.curve(1, 1).sum_steps(context, k)[0]
            own = self.speculation.acceptance_for(req, curve)
            tokens = own.expected_tokens_per_verify(k, context, temperature)
        verify = replica.costs.step[VERIFY]
        fused = replica.costs.step[FUSED]
        fused_curve = replica.fused_acceptance
        assert verify is not None and fused is not None and fused_curve is not None
        payload = self.flow.payload
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
            fused_tokens=self.speculation.acceptance_for(
                req, fused_curve
            ).expected_tokens_per_verify(k, context, temperature),
        )

    def resolve(self, req: RequestState, replica: TargetReplica) -> None:
        """Fix what the admitted request uses on every round: channels, drafter, curve."""
        link = self._link(req, replica)
        if link is not None:
            req.uplink, req.downlink = self.network.channels(link, req.device)
        if req.mode == "distributed":
            drafter = req.drafter = self.fleet.device(req.origin, req.device)
            pool = self.clients[req.origin]
            if self.draft_selector is not None and len(pool.models) > 1:
                req.draft_slot = self._choose_drafter(req, self._rounds_on(req, replica), drafter)
            model = pool.models[req.draft_slot]
            req.draft_model = model.name
            assert model.acceptance is not None
            req.acceptance = self.speculation.acceptance_for(req, model.acceptance)
        elif req.mode == "fused":
            assert replica.fused_acceptance is not None
            req.acceptance = self.speculation.acceptance_for(req, replica.fused_acceptance)

    def _choose_drafter(
        self, req: RequestState, replica: TargetReplica, drafter: DraftDevice
    ) -> int:
        """Ask the draft-selection policy for the request's drafter model; return its index.

        Candidates are the models whose LUTs cover the request's longest
        context and whose KV for it fits the device's budget (none: the first
        model, which the admission checks then reject). Predictions are at the
        context of its first round (prompt + the first token) with ``k`` the
        first round's draft length, the verify step's from the LUT of
        ``replica``, where its rounds run.
        """
        pool = self.clients[req.origin]
        context = req.prompt_tokens + 1
        speculation = self.speculation
        needed = req.prompt_tokens + req.output_tokens + speculation.k_max
        k = speculation.k_default
        slots: list[int] = []
        candidates: list[DraftCandidate] = []
        for slot, model in enumerate(pool.models):
            if needed > drafter.context_window(req, slot) or not drafter.can_ever_fit(req, slot):
                continue
            curve = model.acceptance
            assert curve is not None
            own = speculation.acceptance_for(req, curve)
            expected = own.expected_accepted(k, context, speculation.temperature)
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
        if self.tracing:
            self.tracer.event(
                self.env._now,
                "draft_model",
                f"request {req.request_id}",
                pool.models[chosen].name,
            )
        return chosen
