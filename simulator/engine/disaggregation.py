"""Disaggregated serving wired into a run: prefill replicas, decode replicas and their KV links.

Built once, when the run starts, only when the scenario has prefill pools
(``hardware_profiles[].role``); otherwise nothing of it exists and no hot
path asks about it. It routes new requests to prefill replicas only, hands
each prefilled request to :class:`~simulator.engine.kv_transfer.KvTransfers`
(which chooses its decode replica, reserves its KV there and moves it), and
on the KV's arrival resolves the request's channels to its client's link
with the decode pool and lets its first token leave from there: the
request's TTFT includes the transfer. Whenever a decode replica finishes a
request (freeing KV: its last token committed, or verified), requests waiting
for a decode replica are retried. Under ``scheduler.kv.on_full:
preempt_recompute`` a request a decode replica preempts recomputes its
context on that replica, first in line (:mod:`~simulator.engine.kv_transfer`,
"KV that grows"). A prefilled request that no decode replica it could move
to could ever hold (its need there beyond the replica's whole KV budget) is
rejected, reason ``kv_capacity``, instead of waiting for room forever.

Speculation runs on the decode side. In mode ``fused`` the decode replica
runs the fused rounds. In modes ``distributed`` and ``hybrid`` a request that
drafts on its client's device is, on the device, what it is in a colocated
fleet: when it is admitted its prompt goes up the client's link to the
prefill pool and, at the same time, the device takes it (its KV budget held
from then until the request ends) and prefills its draft model; the device
drafts the first round once that prefill is done and the first token has
reached it, from the decode replica after the transfer. Every bundle then
goes up the client's link to the decode pool, the decode replica verifies
it and the verified tokens come back down that link: no round runs on a
prefill replica. The decode replica's KV reservation is a colocated
replica's: prompt, output and the ``k_max + 1`` tokens (a tree: its nodes) a
round writes. A request's mode (hybrid) and drafter model are chosen when it
is routed to a prefill replica, before its decode replica is: they see the
client's link to, and the LUTs of, the first decode pool linked to both the
prefill replica's pool and the client (:meth:`Disaggregation._rounds_replica`).

A planner may resize the pools (:class:`~simulator.engine.fleet.Fleet`
tells of every change): new requests go to the serving (or loading)
prefill replicas, KV goes to the decode replicas that are serving (a
loading one takes KV once its model is loaded, and the waiting requests
are retried then), and a drained prefill replica retires once the last KV
it holds has left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial

from simulator.engine.dispatcher import Dispatcher
from simulator.engine.flow import RequestFlow
from simulator.engine.kv_records import DisaggregationOutput
from simulator.engine.kv_transfer import KvHolder, KvTransfers
from simulator.engine.network import Channel, Network
from simulator.engine.request_state import RequestState
from simulator.engine.target import SERVING, TargetReplica
from simulator.scenario.model import Link

PREFILL = "prefill"
DECODE = "decode"


class Disaggregation:
    """The run's prefill and decode pools (see the module docstring).

    Args:
        dispatcher: The run's dispatcher (its fleet's replicas, clients and links).
        flow: The run's request flow.
        network: The run's network.
    """

    def __init__(self, dispatcher: Dispatcher, flow: RequestFlow, network: Network) -> None:
        self.fleet = fleet = dispatcher.fleet
        replicas = fleet.replicas
        self.replicas = replicas
        self.flow = flow
        self.network = network
        self.kv_links: Mapping[tuple[str, str], Link] = dispatcher.runtime.kv_links
        """``(prefill pool, decode pool)`` -> the link between them."""
        self.clients = dispatcher.clients
        self.prefill = [r for r in replicas if r.serves == PREFILL]
        self.decode = [r for r in replicas if r.serves == DECODE]
        now = flow.env._now
        self.transfers = KvTransfers(
            self._now,
            flow.at,
            [r for r in self.decode if r.available(now)],
            self._channel,
            self._arrived,
            dispatcher.decode_router,
        )
        for replica in self.decode:
            if not replica.available(now) and replica.availability is not None:
                # A what-if window's decode replica still loading its model takes KV once loaded.
                at_s = replica.availability.next_available_s(now)
                flow.at(at_s, partial(self._decode_ready, replica))
        dispatcher.entry_replicas = self.prefill
        dispatcher.rounds_replica = self._rounds_replica
        flow.hand_over = self._hand_over
        flow.on_kv_freed = self.transfers.retry
        self.resized = False
        """Whether the fleet changed since the start (a planner's resize)."""
        fleet.on_change = self._fleet_changed

    @staticmethod
    def of(dispatcher: Dispatcher, flow: RequestFlow, network: Network) -> Disaggregation | None:
        """The run's disaggregation, ``None`` when it has no prefill pool."""
        if not any(r.serves == PREFILL for r in dispatcher.fleet.replicas):
            return None
        return Disaggregation(dispatcher, flow, network)

    def output(self) -> DisaggregationOutput:
        """What the hand-overs did, for the run's output."""
        transfers = self.transfers
        return DisaggregationOutput(
            tuple(transfers.records),
            tuple(r.serves for r in self.replicas),
            len(transfers.waiting),
        )

    def _now(self) -> float:
        """The clock (a method, not a closure: a forked run's copy reads its own)."""
        return self.flow.env._now

    def _decode_ready(self, replica: TargetReplica) -> None:
        """A decode replica unavailable at the start takes KV from now on."""
        if replica not in self.transfers.decode_replicas:
            self.transfers.decode_replicas.append(replica)
            self.transfers.decode_replicas.sort(key=lambda r: r.index)
        self.transfers.retry()

    def handovers(self) -> dict[int, tuple[int, float, float, int]]:
        """Requests between prefill and decode, by id: (prefill replica, KV arrival, since, rank).

        The arrival is ``nan`` for a request waiting for a decode replica,
        whose ``rank`` is its place in the queue (-1: its KV is moving).
        """
        transfers = self.transfers
        out = {
            rid: (prefill, arrive_s, since_s, -1)
            for rid, (prefill, arrive_s, since_s) in transfers.moving.items()
        }
        for rank, (req, _kind, prefill, since_s) in enumerate(transfers.waiting):
            out[req.request_id] = (prefill.index, math.nan, since_s, rank)
        return out

    def _fleet_changed(self) -> None:
        """Replicas started, loaded or drained: route to and hand over to those serving now."""
        self.resized = True
        self.prefill[:] = [r for r in self.fleet.serving if r.serves == PREFILL]
        self.transfers.decode_replicas[:] = [
            r for r in self.fleet.serving if r.serves == DECODE and r.state is SERVING
        ]
        self.transfers.retry()

    def _hand_over(self, req: RequestState, kind: str, replica: TargetReplica) -> None:
        """Move the request's KV on, or reject it when no decode replica could ever hold it."""
        if not self._ever_fits(req, kind, replica):
            replica.finish(req)  # its prefill replica frees the KV
            self.flow.reject_on_replica(req, "kv_capacity")
            return
        self.transfers.hand_over(req, kind, replica)

    def _ever_fits(self, req: RequestState, kind: str, prefill: TargetReplica) -> bool:
        """Whether a decode replica it could move to has the KV it needs there when empty."""
        return any(
            replica.kv_ever_fits(req, kind)
            and self._channel(req, prefill, replica.pool) is not None
            for replica in self.decode
        )

    def _rounds_replica(self, req: RequestState, prefill: TargetReplica) -> TargetReplica:
        """The decode replica standing for where a request routed to ``prefill`` runs its rounds.

        The first one whose pool is linked to ``prefill``'s pool and to the
        request's client. A request's mode and drafter model are chosen when it
        is routed to a prefill replica, before its decode replica is; they are
        chosen with the client's link to this replica's pool and this
        replica's LUTs (the replicas of a pool share both).
        """
        links = self.clients[req.origin].links if req.origin else None
        for replica in self.decode:
            pool = replica.pool
            if (prefill.pool, pool) in self.kv_links and (links is None or pool in links):
                return replica
        return prefill  # not reached: validation links every client to such a pool

    def _channel(self, req: RequestState, prefill: KvHolder, pool: str) -> Channel | None:
        """The channel carrying the request's KV from ``prefill`` to ``pool`` (``None``: none)."""
        link = self.kv_links.get((prefill.pool, pool))
        if link is None:
            return None
        if req.origin and pool not in self.clients[req.origin].links:
            return None  # its tokens could not reach its client from there
        up, down = self.network.channels(link, prefill.index)
        return up if link.src == prefill.pool else down

    def _arrived(self, req: RequestState, kind: str, decode: KvHolder) -> None:
        """The KV is on the decode replica: the first token leaves from there."""
        replica = self.replicas[decode.index]
        if self.resized:
            self.fleet.retire_drained()  # the prefill replica may have sent its last KV
        if req.origin:
            link = self.clients[req.origin].links[replica.pool]
            req.uplink, req.downlink = self.network.channels(link, req.device)
        if math.isnan(req.first_token_server_s):
            self.flow.first_token_out(req, replica, kind)
        else:
            # A what-if window's request moved off a decode replica the window
            # lacks: its context was recomputed and moved; it decodes on (its
            # device drafting the next round).
            if req.drafter is not None:
                req.drafter.resume(req)
            else:
                replica.enqueue_step(req, kind)
        if replica.decode_runs.run is not None:
            # A run of decode iterations keeps its batch: end it at its next
            # boundary so that the arrived request joins the next iteration.
            replica.decode_runs.cut()


def disaggregation_output(disaggregation: Disaggregation | None) -> DisaggregationOutput | None:
    """The run's KV hand-overs (``None``: the fleet is colocated)."""
    return disaggregation.output() if disaggregation is not None else None
