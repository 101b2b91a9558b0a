"""A what-if window's start in a disaggregated fleet: requests past their prefill, put back.

A run stopped with prefill and decode pools has requests in three places
past their prefill: decoding on a decode replica, their KV moving from a
prefill replica to a decode replica, and prefilled on a prefill replica
waiting for a decode replica (``InFlight.kv_from``, ``kv_arrive_s``,
``kv_rank``). :class:`HandoverStart` puts each back where the window's
fleet has its replicas:

- **Decoding** on a decode replica the window has: it holds its KV there
  and decodes on (one the run had preempted there, ``InFlight.recompute``,
  or whose KV does not fit there at the start, holds none: the decode
  replica recomputes its context first, as in a run).
- **Moving**: the decode replica holds its KV from the start, the prefill
  replica holds its copy until the KV arrives at the run's arrival time
  (the run counted its bytes); its first token leaves on arrival, as in the
  run. Without the decode replica it waits for one on its prefill replica
  (at the head of the queue).
- **Waiting** on a prefill replica the window has: it holds its KV there
  and waits in the run's queue order; the queue is retried at the start
  (a window with more decode replicas places them at once).
- **Otherwise** (its decode replica, or its prefill replica while its KV
  has not left, is one the window lacks) it migrates by recompute: it is
  queued for a prefill on the linked prefill replica with the fewest
  outstanding requests (ties: lowest index), which rebuilds its context
  (prompt and tokens so far) and hands it over to a decode replica again;
  a request whose first token was already out decodes on from there.

A distributed request (mode ``distributed``, or ``hybrid`` drafting on its
device) decoding on a decode replica resumes drafting on its device at the
start; one whose first token is not out yet (moving, waiting, or migrating
before its first token) is taken by its device again, which prefills its
draft model, as a colocated window does for requests waiting for prefill,
and drafts once the first token reaches it; one migrating after its first
token resumes drafting when its KV has reached the decode replica again.

A request whose last token was on its way completes at the start on its
replica (a decode replica the window lacks: the first linked one).
"""

from __future__ import annotations

import math
from functools import partial

from simulator.engine.clock import call_after
from simulator.engine.disaggregation import DECODE, PREFILL, Disaggregation
from simulator.engine.dispatcher import Dispatcher
from simulator.engine.flow import RequestFlow
from simulator.engine.records import InFlight
from simulator.engine.request_state import RequestState, past_first_token
from simulator.engine.speculation import LANE_OF_MODE
from simulator.engine.target import TargetReplica


class HandoverStart:
    """Places a disaggregated window's requests past prefill (see the module docstring).

    Args:
        disaggregation: The window's prefill and decode pools.
        dispatcher: The window's dispatcher.
        flow: The window's request flow.
    """

    def __init__(
        self, disaggregation: Disaggregation, dispatcher: Dispatcher, flow: RequestFlow
    ) -> None:
        self.disaggregation = disaggregation
        self.dispatcher = dispatcher
        self.flow = flow
        self._waiting: list[tuple[tuple[int, int, float], RequestState, str, TargetReplica]] = []

    def _replica(self, index: int, serves: str, req: RequestState) -> TargetReplica | None:
        """Replica ``index`` of the window when it has it, serving ``serves``, linked to the client."""
        replicas = self.disaggregation.replicas
        if not 0 <= index < len(replicas):
            return None
        replica = replicas[index]
        if replica.serves != serves:
            return None
        if req.origin and replica.pool not in self.dispatcher.clients[req.origin].links:
            return None
        if serves == PREFILL and replica not in self.dispatcher.linked_replicas(req):
            return None
        return replica

    def _admit(self, req: RequestState, item: InFlight, replica: TargetReplica) -> None:
        """Count the request on ``replica``, with its mode, device and channels."""
        req.mode = item.mode
        req.device = item.device
        req.replica = replica.index
        self.dispatcher.resolve(req, replica)
        replica.outstanding += 1
        self.flow.outstanding += 1

    def place(self, item: InFlight, req: RequestState) -> None:
        """Put one request past its prefill (``item.generated > 0``) in the window."""
        kind = LANE_OF_MODE[item.mode]
        handing = item.kv_from >= 0 or math.isfinite(item.kv_arrive_s)
        if not handing:
            past_first_token(req, self.flow.env._now)
        decode = self._replica(item.replica, DECODE, req)
        if item.generated >= item.output_tokens:
            replica = decode or self._first_decode(req)
            self._admit(req, item, replica)
            req.finish_server_s = self.flow.env._now
            call_after(self.flow.env, 0.0, partial(self.flow.complete, req, replica))
            return
        prefill = self._replica(item.kv_from, PREFILL, req) if item.kv_from >= 0 else None
        transfers = self.disaggregation.transfers
        moving = math.isfinite(item.kv_arrive_s)
        if not handing and decode is not None:
            self._admit(req, item, decode)  # resolves its drafter
            if item.recompute or not decode.can_hold(req, kind):
                # Preempted there (or its KV does not fit at the start): the decode
                # replica recomputes its context, as it does in a run.
                if req.drafter is not None:
                    self.flow.migrating.add(req.request_id)  # then its device drafts anew
                decode.enqueue_prefill(req, kind)
                return
            decode.hold(req, kind)
            if req.drafter is not None:
                req.drafter.resume(req)  # its device drafts the next round
            else:
                decode.enqueue_step(req, kind)
            return
        if moving and decode is not None:
            self._admit(req, item, decode)
            transfers.resume_moving(req, kind, prefill, decode, item.kv_arrive_s, item.kv_since_s)
        elif handing and prefill is not None:
            self._admit(req, item, prefill)
            rank = (0, 0, item.kv_since_s) if moving else (1, item.kv_rank, item.kv_since_s)
            self._waiting.append((rank, req, kind, prefill))
        else:
            self._migrate(req, item, kind)
        if req.drafter is not None and math.isnan(req.first_token_server_s):
            # Its first token is not out yet: the device takes it again and prefills its
            # draft model, as a colocated window's request waiting for prefill.
            req.drafter.admit(req)

    def _first_decode(self, req: RequestState) -> TargetReplica:
        """The first decode replica linked to the request's client (any, when none is)."""
        decode = [r for r in self.disaggregation.replicas if r.serves == DECODE]
        links = self.dispatcher.clients[req.origin].links if req.origin else None
        return next((r for r in decode if links is None or r.pool in links), decode[0])

    def _migrate(self, req: RequestState, item: InFlight, kind: str) -> None:
        """Recompute the request's context on a prefill replica; it is handed over again after."""
        candidates = self.dispatcher.candidate_replicas(req)
        replica = min(candidates, key=lambda r: (r.outstanding, r.index))
        self._admit(req, item, replica)
        now = self.flow.env._now
        if self.dispatcher.tracing:
            self.dispatcher.tracer.event(
                now, "migrate", f"request {req.request_id}", f"replica {replica.index}"
            )
        replica.enqueue_prefill(req, kind)

    def finish(self) -> None:
        """Queue the waiting requests in the run's order, then place what fits."""
        transfers = self.disaggregation.transfers
        for (_moving, _rank, since_s), req, kind, prefill in sorted(
            self._waiting, key=lambda w: w[0]
        ):
            transfers.resume_waiting(req, kind, prefill, since_s)
        self._waiting = []
        transfers.retry()
