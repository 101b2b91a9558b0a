"""A target replica's KV policy: what a request must hold, making room, evicting, spilling.

``scheduler.kv.on_full`` decides how a replica's KV memory
(:class:`~simulator.engine.kv.KvPool`) is used. With ``queue`` a request is
prefilled only when the KV of its prompt, its whole output and one round of
drafts fits, reserved at once, so running requests never run out. With
``preempt_recompute`` KV grows token by token, a prompt waits for free KV
rather than evict anything, and when a batch's next iteration would not fit,
the most recently admitted requests are evicted and go to the head of the
prefill lane to recompute their context (vLLM's recompute preemption).

With a prefix cache (``scheduler.kv.prefix_cache``; see
:mod:`simulator.engine.prefix_cache`) the pool holds each request's own KV
plus the cached blocks running requests reference, once however many share
them: a prefill reserves what ``on_full`` asks (its prompt, output and
drafts, or its context and one token, a recomputation its context) less the
blocks it found cached, and
when it ends its new full prompt blocks move from its own KV to the cache.
Blocks nobody references are free KV that is still cached: a prompt waiting
for KV and a batch making room count them free, and an allocation (a
prefill's reserve, a running request's new tokens) that needs more than
the really free KV (free less those blocks) evicts them, least recently
used first. A preempted request's blocks stay cached, unreferenced, so its
recomputation finds its prompt's blocks unless they were evicted meanwhile.

:class:`ReplicaKv` owns the pool and the policy. It touches the replica
(:class:`~simulator.engine.replica_view.ReplicaView`) only to move requests
between its queues and its holders when it evicts or spills them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from policies.lanes import DECODE, FUSED, VERIFY
from policies.views import QueuedItem
from simulator.engine.kv import KvPool
from simulator.engine.prefix_cache import Block, PrefixCache
from simulator.engine.replica_view import ReplicaView
from simulator.engine.request_state import RequestState

INF = float("inf")
AWAY = "away"
"""The eviction kind of a request away on its device (not in any lane of the replica)."""
DECODE_ROLE = "decode"
"""``hardware_profiles[].role`` of a disaggregated fleet's decode replicas."""
PREFILL_ROLE = "prefill"
"""``hardware_profiles[].role`` of a disaggregated fleet's prefill replicas."""


class ReplicaKv:
    """The KV policy of one replica (see the module docstring).

    Args:
        replica: The replica whose KV this is.
        pool: Its KV memory (also the replica's ``kv``).

    Attributes:
        pool: The replica's KV memory.
        grows: Whether KV grows token by token (``preempt_recompute``).
    """

    def __init__(self, replica: ReplicaView, pool: KvPool) -> None:
        self.replica = replica
        self.pool = pool
        self.policy = replica.context.kv_policy
        self.grows = self.policy == "preempt_recompute"
        self.promises = self.grows and replica.serves == DECODE_ROLE
        """Whether its iterations' growth is promised while they run (a decode replica
        whose KV grows: KV hand-overs reserve on it while it iterates)."""
        self.mb_per_token = replica.kv_mb_per_token
        spec = replica.context.prefix_cache
        self.cache = PrefixCache(spec.block_tokens) if spec is not None else None
        """The replica's prefix cache (``None``: off; see :mod:`simulator.engine.prefix_cache`)."""
        self._held: dict[int, list[Block]] = {}
        """Request id -> the cached blocks referenced for it."""
        self._cached_tokens: dict[int, int] = {}
        """Request id -> prompt tokens its current prefill found cached."""
        self.evicts_away = False
        """Whether requests whose next round is being drafted on their device may be evicted
        (set by the replica: KV that grows, whole-round iterations)."""
        self._promised_left = 0
        """Members of the iteration under way still to grow (``promises`` only)."""
        self._promised_each_mb = 0.0
        """KV promised to each of them: the iteration's growth over its members."""
        self.parked: set[int] = set()
        """Ids of requests evicted while away on their device: their next round, when its
        bundle arrives, first recomputes their context (:meth:`recompute_parked`)."""

    def need_mb(self, req: RequestState, kind: str) -> float:
        """KV the request must hold to be prefilled (see ``scheduler.kv.on_full``).

        With ``preempt_recompute``: its prompt and the first token the
        prefill makes; a recomputation (past its first token) makes no token,
        so it takes its context only, what it held before its eviction.
        """
        if self.policy == "queue":
            return self.lifetime_mb(req, kind)
        if req.generated:
            return req.context * self.mb_per_token[kind]
        return (req.context + 1) * self.mb_per_token[kind]

    def lifetime_mb(self, req: RequestState, kind: str) -> float:
        """KV the request holds at its end: its prompt, its whole output and one round of drafts."""
        tokens = req.prompt_tokens + req.output_tokens + self.replica.context.k_reserve
        return tokens * self.mb_per_token[kind]

    def ever_fits(self, req: RequestState, kind: str) -> bool:
        """Whether the request could run to its end here with the replica to itself.

        With ``queue`` its prefill's reserve must fit the whole budget. With
        ``preempt_recompute`` the KV it holds at its end must (its prompt and
        one token on a prefill replica, which hands it over), as vLLM
        refuses a request longer than ``max_model_len``, which is at most what
        its KV cache holds: otherwise the request would evict itself and
        recompute for ever once it had the replica to itself.
        """
        if self.grows and self.replica.serves != PREFILL_ROLE:
            need = self.lifetime_mb(req, kind)
        else:
            need = self.need_mb(req, kind)
        return need <= self.pool.capacity_mb + 1e-9

    def round_room_mb(self, req: RequestState, kind: str) -> float:
        """KV a recomputed request's first round will add, free when its recomputation starts.

        With ``preempt_recompute`` a request evicted from speculative rounds
        (``kind`` verify or fused, past its first token) recomputes only when
        its round's ``k_max + 1`` tokens (a tree: its nodes) fit beside its context, so
        that its round can run when its context is rebuilt instead of
        evicting the request again at once (vLLM's lookahead slots). One
        evicted from plain decode recomputes only when its first step's token
        fits too: its recomputation reserves its context, and the step grows
        it by one token. (Before, a recomputed request whose
        step did not fit, chosen alone for its step by a deadline policy,
        evicted itself and recomputed for ever.) 0 for anything else.
        """
        if not self.grows or req.generated == 0:
            return 0.0
        if kind == DECODE:
            return self.mb_per_token[kind]
        if kind not in (VERIFY, FUSED):
            return 0.0
        return self.replica.context.k_reserve * self.mb_per_token[kind]

    def held_mb(self, req: RequestState, kind: str) -> float:
        """KV a request past its first token holds between its iterations.

        What a decode replica reserves for a request a prefill replica hands
        it, and what a what-if window's start gives a request decoding (or
        waiting for a decode replica) when the run stopped. With ``queue``:
        what its prefill reserved (prompt, whole output and drafts). With
        ``preempt_recompute``: its context, the prompt and the tokens so far
        (for a hand-over, the prompt and the first token: the KV the transfer
        carries); its iterations make room for their new tokens as for any
        running request.
        """
        if self.policy == "queue":
            return self.need_mb(req, kind)
        return req.context * self.mb_per_token[kind]

    # -- prefix cache (scheduler.kv.prefix_cache) ------------------------------------
    def _hits(self, req: RequestState, kind: str) -> list[Block]:
        """The cached blocks a prefill of ``req`` would use (none below the prefill LUT's grid)."""
        cache = self.cache
        assert cache is not None
        ids = self.replica.context.prefixes.get(req.request_id)
        if not ids:
            return []
        blocks = cache.match(FUSED if kind == FUSED else VERIFY, ids, req.prompt_tokens)
        cost = self.replica.costs.prefill[kind]
        assert cost is not None
        if len(blocks) * cache.block_tokens < cost.context_axis[0]:
            return []  # a remainder continuing so short a prefix is not priced by the LUT
        return blocks

    def _block_mb(self, kind: str) -> float:
        assert self.cache is not None
        return self.cache.block_tokens * self.mb_per_token[kind]

    def admit_mb(self, req: RequestState, kind: str, need_mb: float) -> float:
        """KV a prefill of ``req`` takes from the pool's free KV (``need_mb`` without a cache).

        Its blocks found cached that running requests already reference are
        not allocated again; free-but-cached ones it finds count as free KV it
        takes back.
        """
        if self.cache is None:
            return need_mb
        referenced = sum(1 for block in self._hits(req, kind) if block.refs > 0)
        return need_mb - referenced * self._block_mb(kind)

    def cached_tokens(self, req: RequestState, kind: str) -> int:
        """Prompt tokens a prefill of ``req`` would find cached now (0 without a cache)."""
        if self.cache is None:
            return 0
        return len(self._hits(req, kind)) * self.cache.block_tokens

    def cached_now(self, req: RequestState) -> int:
        """Prompt tokens the request's current prefill found cached (set when it was reserved)."""
        return self._cached_tokens.get(req.request_id, 0)

    def _make_free(self, amount_mb: float) -> None:
        """Evict free-but-cached blocks until ``amount_mb`` of KV is really free."""
        cache = self.cache
        assert cache is not None
        short = amount_mb - (self.pool.free_mb - cache.evictable_mb)
        if short > 1e-9:
            cache.evict(short)

    def _reserve_cached(self, batch: list[tuple[RequestState, str]], now_s: float) -> None:
        """:meth:`reserve` with a prefix cache: reference the hits, allocate the rest."""
        cache = self.cache
        assert cache is not None
        hits = [self._hits(req, kind) for req, kind in batch]
        for blocks in hits:  # every member's hits first, so no member evicts another's
            revived = cache.pin(blocks)
            if revived > 0:
                # Free-but-cached KV is part of the free KV (bar rounding in the sums).
                self.pool.allocate(min(revived, self.pool.free_mb), now_s)
        holders = self.replica.holders
        record = self.replica.context.prefix_cached
        prefixes = self.replica.context.prefixes
        for (req, kind), blocks in zip(batch, hits, strict=True):
            need = self.need_mb(req, kind)
            own = need - len(blocks) * self._block_mb(kind)
            self._make_free(own)
            self.pool.allocate(own, now_s)
            req.kv_mb = own
            req.kv_peak_mb = max(req.kv_peak_mb, need)
            tokens = len(blocks) * cache.block_tokens
            self._held[req.request_id] = blocks
            self._cached_tokens[req.request_id] = tokens
            record[req.request_id] = tokens
            cache.count(prefixes.get(req.request_id, ()), req.prompt_tokens, len(blocks))
            if req not in holders:
                holders.append(req)

    def cache_prompt(self, req: RequestState, kind: str) -> None:
        """A prefill ended: cache its prompt's full blocks beyond those it found.

        Its copy of a block becomes the cached one, or is dropped when another
        request cached that block meanwhile (it references that one instead).
        """
        cache = self.cache
        if cache is None:
            return
        ids = self.replica.context.prefixes.get(req.request_id)
        held = self._held.get(req.request_id)
        if not ids or held is None:
            return
        blocks = min(len(ids), req.prompt_tokens // cache.block_tokens)
        if blocks <= len(held):
            return
        now = self.replica.env._now
        block_mb = self._block_mb(kind)
        added, new, revived = cache.insert(
            FUSED if kind == FUSED else VERIFY, ids, held, blocks, block_mb, now
        )
        held.extend(added)
        moved = len(added) * block_mb
        req.kv_mb -= moved
        dropped = moved - new * block_mb - revived
        if dropped > 0:
            self.pool.free(dropped, now)

    def reserve(self, batch: list[tuple[RequestState, str]], now_s: float) -> None:
        """Allocate the KV of a prefill batch's requests; they hold it until they finish."""
        if self.cache is not None:
            self._reserve_cached(batch, now_s)
            return
        holders = self.replica.holders
        for req, kind in batch:
            need = self.need_mb(req, kind)
            self.pool.allocate(need, now_s)
            req.kv_mb = need
            req.kv_peak_mb = max(req.kv_peak_mb, need)
            if req not in holders:
                holders.append(req)

    def grow(self, req: RequestState, amount_mb: float, now_s: float) -> None:
        """Add ``amount_mb`` of new tokens' KV to a running request (``preempt_recompute``).

        The caller made room (:meth:`make_room`); with a prefix cache,
        free-but-cached blocks are evicted first when the really free KV is short.
        """
        if self.promises and self._promised_left > 0:
            # The iteration ended: this member's share of the promise becomes its
            # allocation; the promise keeps the shares of members still to grow,
            # so that a hand-over placed meanwhile (a member finishing frees KV)
            # leaves their room.
            self._promised_left -= 1
            self.pool.promised_mb = self._promised_each_mb * self._promised_left
        if self.cache is not None:
            self._make_free(amount_mb)
        self.pool.allocate(amount_mb, now_s)
        req.kv_mb += amount_mb
        req.kv_peak_mb = max(req.kv_peak_mb, req.kv_mb)

    def release(self, req: RequestState) -> None:
        """Free a request's KV (at completion or eviction)."""
        if req.kv_mb > 0:
            self.pool.free(req.kv_mb, self.replica.env._now)
            req.kv_mb = 0.0
        if self.cache is not None:
            blocks = self._held.pop(req.request_id, None)
            self._cached_tokens.pop(req.request_id, None)
            if blocks:
                now = self.replica.env._now
                self.pool.free(self.cache.unpin(blocks, now), now)
        holders = self.replica.holders
        if req in holders:
            holders.remove(req)

    def room_for_rounds(self, batch: list[RequestState], kind: str) -> list[RequestState]:
        """What is left of a verify or fused batch once its ``k + 1`` tokens each fit.

        A token-tree fused round writes its tree's nodes per sequence instead.
        """
        per_token = self.mb_per_token[kind]
        nodes = self.replica.context.tree_nodes if kind == FUSED else None
        return self.make_room(
            batch,
            kind,
            lambda members: (
                len(members)
                * (nodes if nodes is not None else max(r.k for r in members) + 1)
                * per_token
            ),
        )

    def make_room(
        self,
        batch: list[RequestState],
        kind: str,
        need_mb: Callable[[list[RequestState]], float],
    ) -> list[RequestState]:
        """Evict requests until the batch's next iteration fits in KV (``preempt_recompute``).

        As vLLM does when a running sequence cannot grow, the most recently
        admitted request goes first, whether it waits in the decode lane,
        belongs to the batch or (a distributed request, past its first token)
        is away while its device drafts its next round; the oldest requests
        keep running, so the replica always makes progress. A request evicted
        while away is parked: it recomputes its context when its next bundle
        arrives (:meth:`recompute_parked`). Each victim frees its KV and goes to
        the head of the prefill lane to recompute its context. Returns what
        is left of the batch (empty when not even its oldest member fits).
        On a decode replica of a disaggregated fleet the room made is
        promised to the iteration (``KvPool.promised_mb``) until it ends, so
        that KV hand-overs reserving meanwhile leave it; when it ends, each
        member's share stays promised until that member has grown (a member
        finishing first frees KV, and a hand-over may be placed at once).
        """
        batch = list(batch)
        while batch and not self.pool.fits(need_mb(batch)):
            victim, victim_kind = self._newest_evictable(batch, kind)
            if any(member is victim for member in batch):
                batch = [member for member in batch if member is not victim]
            self._evict(victim, victim_kind)
        if self.promises:
            self._promised_left = len(batch)
            self._promised_each_mb = need_mb(batch) / len(batch) if batch else 0.0
            self.pool.promised_mb = need_mb(batch) if batch else 0.0
        return batch

    def _newest_evictable(self, batch: list[RequestState], kind: str) -> tuple[RequestState, str]:
        """The most recently admitted request in the batch or waiting in a lane.

        Under a lane rule the verify lane and the current pass hold fused
        requests waiting too; requests of an iteration under way are never
        evicted.
        """
        replica = self.replica
        in_batch = {id(req) for req in batch}
        queued = {id(req): lane for lane, queue in replica.decode_q.items() for req in queue}
        for req in replica.verify_q:
            queued[id(req)] = FUSED
        for req in replica.pass_q:
            queued[id(req)] = FUSED
        away = self.evicts_away
        for req in reversed(replica.holders):
            if id(req) in in_batch:
                return req, kind
            if id(req) in queued:
                return req, queued[id(req)]
            if away and req.drafter is not None and not math.isnan(req.first_token_server_s):
                return req, AWAY
        raise AssertionError("a batch member holds no KV")

    def free_for_device_holder(self, head: RequestState, need_mb: float) -> bool:
        """Make room for a prompt whose request holds its device, from requests waiting for it.

        A request at the head of the prefill lane whose client device is
        drafting for it (a slot of the device taken) cannot progress without
        KV; a request holding KV here while it waits for a slot of that same
        device cannot progress until the head's request ends. Neither would
        ever move (a recomputation reordered them: the head's request took the
        device, the other the KV). Such waiting requests are evicted, the most
        recently admitted first, until ``need_mb`` is free, and parked as if
        away on their device: each recomputes when its first bundle arrives.
        Returns whether any was evicted. Only with ``preempt_recompute``
        (under ``queue`` the device and the KV are taken in admission order).
        """
        drafter = head.drafter
        if not self.grows or drafter is None or not drafter.serves(head):
            return False
        stuck = {id(req) for req in drafter.queued() if not drafter.serves(req)}
        evicted = False
        for req in reversed(list(self.replica.holders)):
            if self.pool.fits(need_mb):
                break
            if id(req) in stuck and req.request_id not in self.parked:
                self._evict(req, AWAY)
                evicted = True
        return evicted

    def _evict(self, victim: RequestState, kind: str) -> None:
        """Free the victim's KV and queue it, first in line, to recompute its prefill.

        A victim away on its device (``kind`` :data:`AWAY`) is parked instead:
        it recomputes when its next bundle arrives.
        """
        replica = self.replica
        if kind == AWAY:
            self.release(victim)
            victim.preemptions += 1
            self.parked.add(victim.request_id)
            self._trace("preempt", victim)
            return
        queue = replica.decode_q[kind]
        if victim in queue:
            queue.remove(victim)
        elif victim in replica.verify_q:
            replica.verify_q.remove(victim)  # its drafts are dropped with its KV
        elif victim in replica.pass_q:
            replica.pass_q.remove(victim)
        self.release(victim)
        victim.preemptions += 1
        replica.prefill_q.insert(0, (victim, kind, victim.arrival_s))
        self._trace("preempt", victim)

    def _trace(self, kind: str, req: RequestState) -> None:
        """Report ``kind`` (a preemption, a spill) of ``req`` on this replica, when tracing."""
        replica = self.replica
        if replica.context.tracing:
            replica.context.tracer.event(
                replica.env._now, kind, f"request {req.request_id}", f"replica {replica.index}"
            )

    def recompute_parked(self, req: RequestState, kind: str) -> None:
        """A parked request's bundle arrived: it recomputes its context first in line, then verifies."""
        self.parked.discard(req.request_id)
        replica = self.replica
        replica.prefill_q.insert(0, (req, kind, req.arrival_s))

    def with_kv(self, items: list[QueuedItem]) -> list[QueuedItem]:
        """Verify items with the KV their step would add and the free KV (``reads_kv`` policies).

        With ``queue`` a request's KV, drafts included, was reserved at
        prefill: a verify step adds none. With ``preempt_recompute`` it adds
        its ``k + 1`` tokens at the verifier's KV per token.
        """
        per_token = self.mb_per_token[VERIFY] if self.grows else 0.0
        free_mb = self.pool.free_mb
        return [
            item._replace(kv_need_mb=item.new_tokens * per_token, kv_free_mb=free_mb)
            for item in items
        ]

    def spill(
        self, queue: list[RequestState], take: tuple[int, ...], spill: tuple[int, ...]
    ) -> tuple[list[RequestState], float]:
        """Move the verify items in ``spill`` to fused mode; offer the ``take`` ones.

        A spilled request's bundle is dropped (its drafts are never verified),
        its device slot and its verifier KV are freed, and it goes first in
        line in the prefill lane to build its context on the fused model (as
        a preempted request recomputes its own), then continues with fused
        rounds. A request whose prompt, output and ``k_max`` drafts exceed the
        fused model's context window (the end of its LUT grid) is not spilled:
        it waits, as with ``delay``: when nothing is taken and nothing could
        spill, those requests run as ``edf`` would take them (the policy gives
        them in EDF order) and ``scheduler.kv.on_full`` makes room. When
        something spilled and nothing is taken, the replica decides again now.
        """
        replica = self.replica
        batch = [queue[i] for i in take]
        window = replica.costs.context_window(FUSED)
        k_max = replica.context.k_max
        moved = False
        stay: list[RequestState] = []
        for req in [queue[i] for i in spill]:
            if req.prompt_tokens + req.output_tokens + k_max > window:
                stay.append(req)
                continue
            moved = True
            queue.remove(req)
            self.release(req)
            replica.lifecycle.spill_to_fused(req)
            replica.prefill_q.insert(0, (req, FUSED, req.arrival_s))
            self._trace("spill_fused", req)
        if not batch and not moved:
            batch = stay[: replica.step_lane.limits.max_batch]
        return batch, replica.env._now if not batch else INF
