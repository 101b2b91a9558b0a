"""Disaggregated serving: moving a prefilled request's KV from a prefill replica to a decode replica.

In a disaggregated fleet a request is prefilled on a replica of a prefill
pool and decodes on a replica of a decode pool. :class:`KvTransfers` does
the hand-over between the two:

1. **Choice.** The candidates are the decode replicas whose pool is linked
   to the prefill replica's pool (and to the request's client), whose free
   KV can hold the request now and which hold fewer than
   ``scheduler.max_running_requests`` requests. The run's decode router
   (``scheduler.routing.decode``, a routing-family policy) chooses among
   them from their loads (:class:`~policies.views.ReplicaLoad`, with the
   link carrying the KV and its nominal transfer time ``kv_transfer_s``);
   its default, ``kv_transfer_aware``, takes the fewest outstanding
   requests, then the earliest nominal arrival of the KV, then the lowest
   index.
2. **Reservation before the transfer.** The chosen replica reserves the
   request's KV (:meth:`KvHolder.take_over`) before a byte is sent, so an
   arriving request always has room. Under ``scheduler.kv.on_full: queue``
   that is what a prefill reserves: the prompt, the whole output and the
   drafts. Under ``preempt_recompute`` it is the request's context (the
   prompt and the first token: what the transfer carries), and a replica is
   chosen only where its context and the token of its first decode step fit
   (:meth:`KvHolder.kv_need_mb`), as a prompt is prefilled only where its
   KV and its first token fit; from then on its KV grows token by token.
   The free KV counted there leaves what the decode replica's iteration
   under way will add when it ends (``KvPool.promised_mb``): a reservation
   never takes the room of tokens being computed.
3. **Transfer.** The bytes are the prefill pool's KV per token times the
   prompt tokens plus the first token (the LUT's ``kv_delta_mb`` is in MiB:
   ``kv_mib_per_token`` in ``lut_population/work.py``, so one MB here is
   2**20 bytes). They cross the link between the two pools through the
   prefill replica's instance of that link (a
   :class:`~simulator.engine.network.Channel`), so a transfer takes
   ``bytes x 8 / bandwidth + rtt / 2`` after the transfers already queued on
   that replica's link, with the link's jitter and loss as for any other
   transfer.
4. **Release.** The prefill replica holds the request's KV until the last
   byte has arrived, then frees it; the request continues on its decode
   replica (``on_arrived``), which counts it as outstanding and is its
   ``req.replica`` from the start of the transfer.

**When no decode replica can reserve the KV** (or take another request) the request waits on its
prefill replica, still holding its KV there, in one first-in first-out
queue; :meth:`KvTransfers.retry` (called whenever a decode replica frees KV)
places waiting requests from the head of that queue until the head cannot
be placed (decode instances pull KV when they have room, as in DistServe).

**KV that grows** (``preempt_recompute``): a prefill replica reserves the
prompt and its first token (what its prefill writes) and never grows it.
When a decode replica's running batch cannot grow, it evicts as a colocated
replica does (:meth:`~simulator.engine.replica_kv.ReplicaKv.make_room`): the
most recently admitted request first, requests whose KV is still on its way
never. The victim stays on its decode replica, which serves its model: it
frees its KV and goes first in line in that replica's prefill lane to
recompute its context there (a prompt of its context's length, its KV
reserved as for any prefill), then decodes on. It is not handed back to a
prefill replica. This is the engine's stand-in for DistServe's decode
instance, which swaps the most recently added request of the batch out to
CPU memory and swaps swapped-out requests back in before any newly arrived
one (``DecodingStageFCFSScheduler.get_next_batch`` in
``distserve/decoding_stage_scheduler.py``): the same victim, the same
replica, first in line again; recomputing the context replaces the swap,
which the engine does not model. As in DistServe, a decode replica takes a
new hand-over whenever its free KV holds it, even while preempted requests
wait to resume there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from policies.views import ReplicaLoad, RoutingQuery
from simulator.engine.kv import KvPool
from simulator.engine.kv_records import TransferRecord
from simulator.engine.network import BITS_PER_BYTE, Channel
from simulator.engine.request_state import RequestState

BYTES_PER_MB = float(2**20)
"""The LUT's KV megabytes are MiB (``kv_mib_per_token`` in ``lut_population/work.py``)."""


class KvHolder(Protocol):
    """What the hand-over needs of a target replica (:class:`~simulator.engine.target.TargetReplica`)."""

    index: int
    pool: str
    kv: KvPool
    outstanding: int
    kv_mb_per_token: Mapping[str, float]
    holders: list[RequestState]
    max_running: int

    def kv_need_mb(self, req: RequestState, kind: str) -> float:
        """KV that must be free on it to take the request (under ``queue``: what it holds)."""

    def take_over(self, req: RequestState, kind: str) -> None:
        """Reserve the KV of a request handed over after its prefill."""

    def hold(self, req: RequestState, kind: str) -> None:
        """Reserve what its prefill reserved for a request already past it (a what-if window's start)."""

    def finish(self, req: RequestState) -> None:
        """Free the request's KV (``req.kv_mb``) and let the replica admit more work."""


def kv_bytes(prompt_tokens: int, mb_per_token: float) -> float:
    """Bytes of the KV of a prefilled request: its prompt and its first token."""
    return (prompt_tokens + 1) * mb_per_token * BYTES_PER_MB


def nominal_transfer_s(nbytes: float, bw_mbps: float, rtt_ms: float) -> float:
    """A transfer's duration on an idle link without jitter or loss: bytes / bandwidth + RTT / 2."""
    return nbytes * BITS_PER_BYTE / (bw_mbps * 1e6) + rtt_ms / 2000.0


Arrived = Callable[[RequestState, str, KvHolder], None]
"""Called when a request's KV has reached its decode replica (the request, its kind, the replica)."""


class KvTransfers:
    """Hands prefilled requests from prefill replicas to decode replicas (see the module docstring).

    Args:
        now: The simulated clock (seconds).
        at: Runs an action at a time (now or later).
        decode_replicas: Every decode replica, in index order.
        channel: The channel carrying a request's KV from a prefill replica to
            a decode pool (``None``: the request cannot go there: the pools, or
            the request's client and the decode pool, are not linked).
        on_arrived: Continues a request on its decode replica.
        router: The routing policy choosing among the candidate decode
            replicas (``scheduler.routing.decode``).
    """

    def __init__(
        self,
        now: Callable[[], float],
        at: Callable[[float, Callable[[], None]], None],
        decode_replicas: Sequence[KvHolder],
        channel: Callable[[RequestState, KvHolder, str], Channel | None],
        on_arrived: Arrived,
        router: Any,
    ) -> None:
        self._now = now
        self._at = at
        self.decode_replicas = list(decode_replicas)
        self._channel = channel
        self._on_arrived = on_arrived
        self._router = router
        self.waiting: deque[tuple[RequestState, str, KvHolder, float]] = deque()
        """Requests prefilled and waiting for a decode replica: (request, kind, prefill replica, since)."""
        self.records: list[TransferRecord] = []
        """Every transfer started so far."""
        self.bytes_moved = 0.0
        """Bytes of KV sent so far."""
        self.moving: dict[int, tuple[int, float, float]] = {}
        """Requests whose KV is on its way, by id: (prefill replica's index, arrival,
        hand-over start)."""

    def hand_over(self, req: RequestState, kind: str, prefill: KvHolder) -> None:
        """A request's prefill is done on ``prefill``: move its KV to a decode replica or wait."""
        now = self._now()
        if self.waiting or not self._place(req, kind, prefill, now):
            self.waiting.append((req, kind, prefill, now))

    def retry(self) -> None:
        """A decode replica freed KV: place waiting requests, first come first, while the head fits."""
        waiting = self.waiting
        while waiting:
            req, kind, prefill, since_s = waiting[0]
            if not self._place(req, kind, prefill, since_s):
                return
            waiting.popleft()

    def _choose(
        self, req: RequestState, kind: str, prefill: KvHolder
    ) -> tuple[KvHolder, Channel] | None:
        """The decode replica and channel for the request (``None``: none can reserve its KV now)."""
        nbytes = kv_bytes(req.prompt_tokens, prefill.kv_mb_per_token[kind])
        candidates: dict[int, tuple[KvHolder, Channel]] = {}
        loads: list[ReplicaLoad] = []
        for replica in self.decode_replicas:
            channel = self._channel(req, prefill, replica.pool)
            if channel is None or len(replica.holders) >= replica.max_running:
                continue
            need_mb = replica.kv_need_mb(req, kind)
            if not replica.kv.fits(need_mb):
                continue
            link = channel.link
            candidates[replica.index] = (replica, channel)
            loads.append(
                ReplicaLoad(
                    replica.index,
                    replica.outstanding,
                    replica.kv.free_mb,
                    replica.pool,
                    replica.kv.capacity_mb,
                    need_mb,
                    0.0,
                    link.rtt_ms,
                    link.bw_mbps,
                    kv_transfer_s=nominal_transfer_s(nbytes, link.bw_mbps, link.rtt_ms),
                )
            )
        if not loads:
            return None
        query = RoutingQuery(req.request_id, req.origin, req.prompt_tokens, prefill.index)
        chosen = int(self._router.route(query, loads))
        if chosen not in candidates:
            raise ValueError(
                f"scheduler.routing.decode policy {self._router.name!r} chose replica {chosen}, "
                f"not one of the candidates {sorted(candidates)}"
            )
        return candidates[chosen]

    def _place(self, req: RequestState, kind: str, prefill: KvHolder, since_s: float) -> bool:
        """Reserve the request's KV on a decode replica and start its transfer; ``False``: none fits."""
        choice = self._choose(req, kind, prefill)
        if choice is None:
            return False
        decode, channel = choice
        now = self._now()
        prefill_mb = req.kv_mb
        peak_mb = req.kv_peak_mb
        decode.take_over(req, kind)
        req.kv_peak_mb = max(peak_mb, req.kv_peak_mb)
        prefill.outstanding -= 1
        decode.outstanding += 1
        req.replica = decode.index
        nbytes = kv_bytes(req.prompt_tokens, prefill.kv_mb_per_token[kind])
        arrive_s = channel.send(nbytes, now)
        self.bytes_moved += nbytes
        self.moving[req.request_id] = (prefill.index, arrive_s, since_s)
        self.records.append(
            TransferRecord(
                req.request_id, prefill.index, decode.index, nbytes, now - since_s, arrive_s - now
            )
        )
        self._at(arrive_s, partial(self._arrive, req, kind, prefill, decode, prefill_mb))
        return True

    def _arrive(
        self, req: RequestState, kind: str, prefill: KvHolder, decode: KvHolder, prefill_mb: float
    ) -> None:
        """The last byte reached the decode replica: the prefill replica frees its copy."""
        del self.moving[req.request_id]
        decode_mb = req.kv_mb
        req.kv_mb = prefill_mb
        prefill.finish(req)
        req.kv_mb = decode_mb
        self._on_arrived(req, kind, decode)

    # -- a what-if window's start -------------------------------------------------
    def resume_moving(
        self,
        req: RequestState,
        kind: str,
        prefill: KvHolder | None,
        decode: KvHolder,
        arrive_s: float,
        since_s: float,
    ) -> None:
        """A transfer under way when the run stopped goes on: its KV arrives at ``arrive_s``.

        ``prefill`` (``None``: the window lacks it) holds its copy until then,
        ``decode`` holds the request's KV from now (its bytes were counted by the run).
        """
        peak_mb = req.kv_peak_mb
        prefill_mb = 0.0
        if prefill is not None:
            prefill.hold(req, kind)
            prefill_mb = req.kv_mb
        decode.take_over(req, kind)
        req.kv_peak_mb = max(peak_mb, req.kv_peak_mb)
        if prefill is None:
            self.moving[req.request_id] = (-1, arrive_s, since_s)
            self._at(arrive_s, partial(self._arrive_without_source, req, kind, decode))
            return
        self.moving[req.request_id] = (prefill.index, arrive_s, since_s)
        self._at(arrive_s, partial(self._arrive, req, kind, prefill, decode, prefill_mb))

    def _arrive_without_source(self, req: RequestState, kind: str, decode: KvHolder) -> None:
        del self.moving[req.request_id]
        self._on_arrived(req, kind, decode)

    def resume_waiting(
        self, req: RequestState, kind: str, prefill: KvHolder, since_s: float
    ) -> None:
        """A request waiting for a decode replica when the run stopped waits on (queue order kept).

        ``prefill`` holds its KV; call in the run's queue order.
        """
        peak_mb = req.kv_peak_mb
        prefill.hold(req, kind)
        req.kv_peak_mb = max(peak_mb, req.kv_peak_mb)
        self.waiting.append((req, kind, prefill, since_s))
