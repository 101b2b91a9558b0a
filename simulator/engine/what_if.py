"""What-if windows: the requests a stopped run leaves, placing them in a new one, copying a run.

:func:`in_flight` freezes a run's unfinished requests into
:class:`~simulator.engine.records.InFlight` records; :func:`place_in_flight`
puts such records where a window's fleet can take them up (through the
dispatcher's routing checks and the flow's transfers); :func:`fork` copies a
stopped run, pending events and random streams included. None of them
knows the engine's kernel.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Container, Iterable, Sequence
from functools import partial
from typing import Any, TypeVar

import simpy

from simulator.engine.clock import call_after
from simulator.engine.disaggregation import Disaggregation
from simulator.engine.dispatcher import Dispatcher
from simulator.engine.fleet import Fleet
from simulator.engine.flow import RequestFlow
from simulator.engine.handover_start import HandoverStart
from simulator.engine.records import InFlight
from simulator.engine.request_state import RequestState, past_first_token
from simulator.engine.speculation import LANE_OF_MODE
from simulator.engine.target import TargetReplica

T = TypeVar("T")


def recomputing(replicas: Iterable[TargetReplica]) -> set[int]:
    """Ids of the requests past their first token that hold no KV: preempted, to recompute.

    A preempted request waits in its replica's prefill lane to rebuild its
    context, or is parked while its device drafts (it recomputes when its
    bundle arrives); either way its replica holds none of its KV.
    """
    ids: set[int] = set()
    for replica in replicas:
        ids.update(req.request_id for req, _kind, _queued in replica.prefill_q if req.generated)
        ids.update(replica.kv_rule.parked)
    return ids


def in_flight(
    states: Iterable[RequestState],
    disaggregation: Disaggregation | None = None,
    recompute_ids: Container[int] = (),
) -> tuple[InFlight, ...]:
    """The unfinished requests of ``states``: the records a what-if window starts from.

    With a disaggregated fleet, the records of requests between prefill and
    decode say where their KV is
    (:meth:`~simulator.engine.disaggregation.Disaggregation.handovers`).
    Requests in ``recompute_ids`` (see :func:`recomputing`) are marked
    ``recompute``.
    """
    handovers = disaggregation.handovers() if disaggregation is not None else None
    out: list[InFlight] = []
    for req in states:
        if req.outcome != "unfinished":
            continue
        handover = handovers.get(req.request_id) if handovers else None
        kv_from, kv_arrive_s, kv_since_s, kv_rank = (
            handover if handover is not None else (-1, math.nan, math.nan, -1)
        )
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
                req.category,
                kv_from,
                kv_arrive_s,
                kv_since_s,
                kv_rank,
                recompute=req.request_id in recompute_ids,
            )
        )
    return tuple(out)


def _state_of(item: InFlight) -> RequestState:
    """A request state carrying the record's arrival, times and counters."""
    req = RequestState(
        item.request_id,
        item.arrival_s,
        item.prompt_tokens,
        item.output_tokens,
        item.slo_class,
        item.origin,
        item.category,
    )
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
    return req


def place_in_flight(
    items: Sequence[InFlight],
    env: simpy.Environment,
    fleet: Fleet,
    dispatcher: Dispatcher,
    flow: RequestFlow,
    disaggregation: Disaggregation | None = None,
) -> list[RequestState]:
    """Put a what-if window's starting requests where the records found them; return their states.

    Each keeps its arrival, first-token times, TPOT origin, TVT and
    counters, so its latencies are those of the run's clock. Requests not
    admitted yet are offered to admission again (before any new arrival);
    requests waiting for prefill are queued for it again (and, when
    distributed, admitted on their device); the others hold their KV and
    join their decode lane, distributed ones starting a new draft round;
    a first token or result still on its way reaches the client at the
    start. A request the run had preempted (``recompute``: it held no KV),
    or whose KV does not fit its replica at the start (the run shared its
    cached prefix blocks, or held fewer tokens than :meth:`TargetReplica.hold`
    reserves), recomputes its context on its replica first, a distributed
    one drafting a new round after. A request whose replica
    the window lacks (a candidate with fewer replicas, or a replica no
    longer linked to its origin) migrates: it goes to the linked replica
    with the fewest outstanding requests (ties: lowest index), which
    rebuilds its context (prompt and tokens so far) with a prefill before
    it continues (recompute; KV is never moved between target replicas).

    In a disaggregated fleet (``disaggregation``), requests past their
    prefill are placed by :class:`~simulator.engine.handover_start.HandoverStart`.
    """
    handovers = (
        HandoverStart(disaggregation, dispatcher, flow) if disaggregation is not None else None
    )
    now = env._now
    replicas = fleet.replicas
    states: list[RequestState] = []
    for item in items:
        req = _state_of(item)
        dispatcher.set_slo(req)
        states.append(req)
        if item.replica < 0:
            dispatcher.deferred.append(req)
            continue
        if handovers is not None and item.generated > 0:
            handovers.place(item, req)
            continue
        if item.generated > 0:
            past_first_token(req, now)
        migrate = item.replica >= len(replicas) or (
            replicas[item.replica] not in dispatcher.linked_replicas(req)
        )
        if migrate:
            candidates = dispatcher.candidate_replicas(req)
            if fleet.split:
                candidates = dispatcher.serving_mode(candidates, item.mode)
            replica = min(candidates, key=lambda r: (r.outstanding, r.index))
        else:
            replica = replicas[item.replica]
        req.mode = item.mode
        req.replica = replica.index
        req.device = item.device
        dispatcher.resolve(req, replica)
        replica.outstanding += 1
        flow.outstanding += 1
        kind = LANE_OF_MODE[item.mode]
        if item.generated >= item.output_tokens:
            # Its last tokens were on their way to the client: they arrive at the start.
            req.finish_server_s = now
            call_after(env, 0.0, partial(flow.complete, req, replica))
            continue
        if item.generated == 0:
            if dispatcher.predicts_ttft:
                dispatcher.expect_prefill(req, replica)
            replica.enqueue_prefill(req, kind)
            if req.drafter is not None:
                req.drafter.admit(req)
            continue
        # Preempted in the run (it held no KV), or its KV does not fit here (the run
        # shared its cached prefix blocks, or held fewer tokens than a start reserves):
        # it recomputes its context on its replica first.
        recompute = item.recompute or not replica.can_hold(req, kind)
        if migrate or recompute:
            if migrate and dispatcher.tracing:
                dispatcher.tracer.event(
                    now, "migrate", f"request {req.request_id}", f"replica {replica.index}"
                )
            if req.drafter is not None:
                flow.migrating.add(req.request_id)
            replica.enqueue_prefill(req, kind)
            continue
        replica.hold(req, kind)
        if req.drafter is not None:
            req.drafter.resume(req)
        else:
            replica.enqueue_step(req, kind)
    if handovers is not None:
        handovers.finish()
    dispatcher.offer_waiting()
    return states


def fork(run: T, env: simpy.Environment, shared: Sequence[Any]) -> T:
    """Return an independent copy of the stopped ``run``, pending events and streams included.

    Running the copy on continues exactly as ``run`` would: same requests in
    the same places, same queues, same transfers under way, same
    random-stream states and same event order. The objects of ``shared``
    are not copied (they must never be changed by a run).
    """
    memo: dict[int, Any] = {id(obj): obj for obj in shared}
    # SimPy numbers events with an itertools.count, which newer Pythons no
    # longer copy: the copy counts on from this run's next number (the
    # number taken here only shifts this run's later events, not their order).
    counter = env._eid
    memo[id(counter)] = itertools.count(next(counter))
    return copy.deepcopy(run, memo)
