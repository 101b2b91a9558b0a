"""A request's way between its client and its replica, from prompt upload to its last token.

:class:`RequestFlow` implements :class:`~simulator.engine.lifecycle.RequestLifecycle`:
servers report a request's progress to it (prefilled, verified, finished,
rejected) and it moves the request's tokens over the network (prompt,
first token, bundles, results, last token), times their arrival, and ends
requests (completed or rejected), counting them. It owns the outcome
counters and the requests migrating between replicas at a what-if window's
start. It touches servers only to hand them work and the fleet only to
report a replica's ended request; the next admission is asked through a
hook (``on_freed``), so it does not know the dispatcher.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import simpy

from policies.lanes import VERIFY
from simulator.acceptance import AcceptanceModel
from simulator.engine.clock import call_at
from simulator.engine.fleet import Fleet
from simulator.engine.request_state import Drafter, RequestState
from simulator.engine.target import TargetReplica
from simulator.engine.tracing import Span, Tracer
from simulator.scenario.model import PayloadSpec


def _nothing() -> None:
    """The default ``on_freed`` hook."""


class RequestFlow:
    """Moves requests between clients and replicas and ends them.

    Args:
        env: The run's clock.
        fleet: The run's replicas.
        payload: Bytes per prompt, draft and result token.
        tracer: Receives engine events.
        tracing: Whether events are traced (hot paths skip formatting them otherwise).
        predicts_ttft: Whether the replicas' predicted prefill queues are kept.
        on_end: Called with each request that ends (closed loop only; ``None``: nothing).
        start_s: When the run (or what-if window) starts.
    """

    def __init__(
        self,
        env: simpy.Environment,
        fleet: Fleet,
        payload: PayloadSpec,
        tracer: Tracer,
        tracing: bool,
        predicts_ttft: bool,
        on_end: Callable[[RequestState], None] | None,
        start_s: float,
        acceptance_for: Callable[[RequestState, AcceptanceModel], AcceptanceModel],
    ) -> None:
        self.env = env
        self.fleet = fleet
        self.replicas = fleet.replicas
        self.payload = payload
        self.tracer = tracer
        self.tracing = tracing
        self.predicts_ttft = predicts_ttft
        self.on_end = on_end
        self.acceptance_for = acceptance_for
        """A request's own view of a curve (its category and level)."""
        self.on_freed: Callable[[], None] = _nothing
        """Called when a request ended and made room (the dispatcher offers the waiting ones)."""
        self.outstanding = 0
        """Requests admitted and not ended."""
        self.completed = 0
        """Requests completed so far (for progress reports)."""
        self.last_outcome_s = start_s
        """When the last request ended (a run to completion ends then)."""
        self.migrating: set[int] = set()
        """Ids of window-start requests moved off a replica the window lacks, until re-prefilled."""
        self.hand_over: Callable[[RequestState, str, TargetReplica], None] | None = None
        """Disaggregated serving: moves a prefilled request to a decode replica (``None``: off)."""
        self.on_kv_freed: Callable[[], None] | None = None
        """Disaggregated serving: a finished request freed KV on its replica (its last
        token committed: none and fused, or verified: distributed; ``None``: off)."""

    # -- transfers -------------------------------------------------------------
    def at(self, time_s: float, action: Callable[[], None]) -> None:
        """Deliver ``action`` at ``time_s``: right away when that is now."""
        if time_s <= self.env._now:
            action()
        else:
            call_at(self.env, time_s, action)

    @staticmethod
    def upload(req: RequestState, nbytes: float, sent_s: float) -> float:
        """Send ``nbytes`` to the target at ``sent_s``; return when they arrive."""
        channel = req.uplink
        return sent_s if channel is None else channel.send(nbytes, sent_s)

    @staticmethod
    def download(req: RequestState, nbytes: float, sent_s: float) -> float:
        """Send ``nbytes`` to the client at ``sent_s``; return when they arrive."""
        channel = req.downlink
        return sent_s if channel is None else channel.send(nbytes, sent_s)

    def trace_transfer(
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

    def send_prompt(self, req: RequestState, replica: TargetReplica, kind: str) -> None:
        """Upload the admitted request's prompt; its replica queues it for prefill on arrival."""
        now = self.env._now
        arrive_s = self.upload(req, req.prompt_tokens * self.payload.bytes_per_prompt_token, now)
        if self.tracing:
            self.trace_transfer(req, "prompt", True, now, arrive_s, req.prompt_tokens)
        self.at(arrive_s, partial(replica.enqueue_prefill, req, kind))

    # -- the predicted prefill queues --------------------------------------------
    def prefill_done(self, req: RequestState) -> None:
        """Take the request's prefill out of its replica's predicted prefill queue."""
        if req.prefill_estimate_s > 0:
            replica = self.replicas[req.replica]
            replica.pending_prefill_s = max(0.0, replica.pending_prefill_s - req.prefill_estimate_s)
            req.prefill_estimate_s = 0.0

    # -- what servers report ---------------------------------------------------------
    def on_prefilled(self, req: RequestState, kind: str) -> None:
        """Prefill done (first token committed, or a preempted context recomputed)."""
        replica = self.replicas[req.replica]
        if req.generated > 0:
            if self.migrating and req.request_id in self.migrating:
                self.migrating.discard(req.request_id)
                if req.drafter is not None:
                    # Context rebuilt on its new replica: the device drafts the next round.
                    req.drafter.resume(req)
                    return
            if self.hand_over is not None and replica.serves == "prefill":
                # Disaggregated: a context recomputed on a prefill replica (a what-if
                # window's migrated request) moves on to a decode replica; one a decode
                # replica preempted and recomputed itself decodes on there.
                self.hand_over(req, kind, replica)
                return
            replica.enqueue_step(req, kind)
            return
        req.generated = 1
        replica.tokens_out += 1
        if self.predicts_ttft:
            self.prefill_done(req)
        if self.hand_over is not None and req.remaining > 0:
            self.hand_over(req, kind, replica)
            return
        self.first_token_out(req, replica, kind)

    def first_token_out(self, req: RequestState, replica: TargetReplica, kind: str) -> None:
        """The request's first token leaves ``replica``; it goes on decoding there (or ends)."""
        now = self.env._now
        req.first_token_server_s = now
        req.tpot_origin_s = now
        arrive_s = self.download(req, self.payload.bytes_per_result_token, now)
        if self.tracing:
            self.trace_transfer(req, "first_token", False, now, arrive_s, 1)
        drafter = req.drafter
        if drafter is not None:
            self.at(arrive_s, partial(self._first_token_reaches_device, req, drafter))
            return
        if req.remaining > 0:
            self.at(arrive_s, partial(self._first_token_arrives, req))
            replica.enqueue_step(req, kind)
            return
        # A one-token request is finished by its first token.
        replica.release(req)
        req.finish_server_s = now
        self.at(arrive_s, partial(self._only_token_arrives, req, replica))

    def _first_token_reaches_device(self, req: RequestState, drafter: Drafter) -> None:
        req.first_token_s = self.env._now
        drafter.on_first_token(req)

    def _first_token_arrives(self, req: RequestState) -> None:
        req.first_token_s = self.env._now

    def _only_token_arrives(self, req: RequestState, replica: TargetReplica) -> None:
        req.first_token_s = self.env._now
        self.complete(req, replica)

    def on_finished_server(self, req: RequestState, now_s: float) -> None:
        """The target committed the last token of a none/fused request."""
        replica = self.replicas[req.replica]
        req.finish_server_s = now_s
        if self.on_kv_freed is not None:
            self.on_kv_freed()
        payload = self.payload.bytes_per_result_token
        if req.downlink is not None and req.output_tokens > 2:
            # Tokens between the first and the last stream as they are made;
            # their bytes count, their delay is the last token's.
            req.downlink.count((req.output_tokens - 2) * payload)
        arrive_s = self.download(req, payload, now_s)
        if self.tracing:
            self.trace_transfer(req, "last_token", False, now_s, arrive_s, 1)
        self.at(arrive_s, partial(self.complete, req, replica))

    def complete(self, req: RequestState, replica: TargetReplica) -> None:
        """The request's last token reached its client: it ends, completed."""
        now = self.env._now
        if math.isnan(req.first_token_s):
            req.first_token_s = now
        req.finish_s = max(now, req.first_token_s)
        req.outcome = "completed"
        self.completed += 1
        self.last_outcome_s = max(self.last_outcome_s, now)
        self.outstanding -= 1
        self.fleet.request_ended(replica)
        if self.tracing:
            self.tracer.event(
                now, "complete", f"request {req.request_id}", f"tokens={req.generated}"
            )
        if self.on_end is not None:
            self.on_end(req)
        self.on_freed()

    def send_bundle(self, req: RequestState, sent_s: float) -> None:
        """The request's device finishes drafting at ``sent_s`` (now or later): upload the bundle."""
        req.round_sent_s = sent_s
        channel = req.uplink  # self.upload, inlined: this runs once a round
        nbytes = req.k * self.payload.bytes_per_draft_token
        arrive_s = sent_s if channel is None else channel.send(nbytes, sent_s)
        if self.tracing:
            self.trace_transfer(req, "bundle", True, sent_s, arrive_s, req.k)
        self.replicas[req.replica].enqueue_step(req, VERIFY, arrive_s)

    def on_verified(self, req: RequestState, gained: int, now_s: float) -> None:
        """A verify iteration committed ``gained`` tokens: send them back."""
        channel = req.downlink  # self.download and self.at, inlined: this runs once a round
        nbytes = gained * self.payload.bytes_per_result_token
        arrive_s = now_s if channel is None else channel.send(nbytes, now_s)
        if self.tracing:
            self.trace_transfer(req, "result", False, now_s, arrive_s, gained)
        if req.output_tokens <= req.generated:
            req.finish_server_s = now_s
            if self.on_kv_freed is not None:
                self.on_kv_freed()  # its replica released its KV
        if arrive_s <= self.env._now:
            self._result_arrives(req)
        else:
            call_at(self.env, arrive_s, partial(self._result_arrives, req))

    def _result_arrives(self, req: RequestState) -> None:
        """A round's verified tokens reached the client: record its TVT, go on or finish."""
        tvt = self.env._now - req.round_sent_s
        if not tvt <= req.tvt_max_s:  # also when no round was timed yet (nan)
            req.tvt_max_s = tvt
        drafter = req.drafter
        assert drafter is not None
        if req.output_tokens <= req.generated:
            self.finish_distributed(req)
        else:
            drafter.next_round(req)

    def finish_distributed(self, req: RequestState) -> None:
        """The last verified tokens reached the client."""
        replica = self.replicas[req.replica]
        if req.kv_mb > 0:
            replica.finish(req)
        self.complete(req, replica)
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
        curve = replica.fused_acceptance
        assert curve is not None
        req.acceptance = self.acceptance_for(req, curve)
        drafter = req.drafter
        if drafter is not None:
            req.drafter = None
            drafter.finish(req)

    def reject_on_replica(self, req: RequestState, reason: str) -> None:
        """A replica cannot ever serve the request (e.g. its KV exceeds the capacity)."""
        req.outcome = "rejected"
        req.reason = reason
        self.last_outcome_s = max(self.last_outcome_s, self.env._now)
        self.outstanding -= 1
        self.fleet.request_ended(self.replicas[req.replica])
        if self.tracing:
            self.tracer.event(self.env._now, "reject", f"request {req.request_id}", reason)
        if self.predicts_ttft:
            self.prefill_done(req)
        if req.drafter is not None:
            req.drafter.finish(req)
        if self.on_end is not None:
            self.on_end(req)
        self.on_freed()

    def reject_at_admission(self, req: RequestState, reason: str) -> None:
        """The admission policy turned the request away: it ends here."""
        now = self.env._now
        req.outcome = "rejected"
        req.reason = reason
        self.last_outcome_s = max(self.last_outcome_s, now)
        if self.tracing:
            self.tracer.event(now, "reject", f"request {req.request_id}", req.reason)
        if self.on_end is not None:
            self.on_end(req)
