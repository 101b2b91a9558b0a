"""Chunked prefill on a target replica: mixed iterations of decode-lane work and prefill chunks.

Under ``chunked_prefill`` (:mod:`policies.arbitration`) every iteration has a
token budget: decode-lane work takes its tokens first (1 per plain decode,
``k + 1`` per verify or fused round) and prefill chunks fill the rest, a
prompt's prefill spreading over several iterations. One iteration runs one
model (a hybrid replica holds the verifier and the fused model), so chunks
ride only beside work of their model. :class:`MixedIterations` chooses the
chunks, prices the pass and commits it; the prompts under way are the
replica's ``chunking`` list.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from policies.lanes import DECODE, FUSED, VERIFY
from simulator.engine.clock import DECISION, call_at
from simulator.engine.decode_runs import DecodeRuns
from simulator.engine.prefill import PrefillLane
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import ReplicaView
from simulator.engine.request_state import RequestState
from simulator.engine.tracing import Span
from simulator.engine.verify_rounds import VerifyRounds

Step = tuple[str, list[RequestState]]
"""A decode-lane batch: its work kind and requests."""
Chunk = tuple[RequestState, str, int]
"""A prefill chunk: the request, its decode-lane kind and the chunk's tokens."""
MODEL_OF = {DECODE: VERIFY, VERIFY: VERIFY, FUSED: FUSED}
"""The model a kind of work runs: the verifier (plain decode, verify) or the fused model."""


def step_tokens(step: Any) -> int:
    """Tokens a decode-lane batch processes: 1 per plain decode, k + 1 per round."""
    kind, batch = step
    if kind == DECODE:
        return len(batch)
    return sum(req.k + 1 for req in batch)


class MixedIterations:
    """Chooses, runs and commits a replica's mixed iterations (see the module docstring).

    Args:
        replica: The replica whose iterations these are.
        kv: Its KV policy.
        prefill: Its prefill lane (rejects prompts whose KV never fits).
        decode: Commits plain decode tokens.
        rounds: Takes and commits verify and fused rounds.
    """

    def __init__(
        self,
        replica: ReplicaView,
        kv: ReplicaKv,
        prefill: PrefillLane,
        decode: DecodeRuns,
        rounds: VerifyRounds,
    ) -> None:
        self.replica = replica
        self.kv = kv
        self.prefill = prefill
        self.decode = decode
        self.rounds = rounds
        self.chunk_starts = replica.context.prefill_max_batch
        """Most prompts one iteration starts prefilling."""

    def kinds_beside_chunks(self, kinds: list[str]) -> list[str]:
        """Decode-lane kinds an iteration with prefill chunks may run (one model per pass).

        While a prompt's prefill is under way, only work of its model: its
        chunks ride on every iteration until it is done. Otherwise, when the
        prompt at the head of the prefill lane needs the other model (hybrid
        replicas hold the verifier and the fused model) and has waited longer
        than every item of that model's work, only work of its model, so that
        it can start; without this a stream of fused rounds would keep a
        verifier prompt waiting for as long as it lasts. Nothing is held back
        while that prompt's KV does not fit (it could not start, and the work
        held back may be what frees the KV: before, a replica holding only
        the other model's work then stopped for good).
        """
        replica = self.replica
        if replica.chunking:
            model = MODEL_OF[replica.chunking[0][1]]
            return [k for k in kinds if MODEL_OF[k] == model]
        if not replica.prefill_q or len(replica.holders) >= replica.max_running:
            return kinds
        head, head_kind, queued_s = replica.prefill_q[0]
        kv = self.kv
        need = kv.need_mb(head, head_kind)
        if kv.cache is not None:
            need = kv.admit_mb(head, head_kind, need)
        if need + kv.round_room_mb(head, head_kind) > kv.pool.free_mb + 1e-9:
            return kinds
        model = MODEL_OF[head_kind]
        others = [k for k in kinds if MODEL_OF[k] != model]
        queues = replica.decode_q
        if others and all(min(r.ready_s for r in queues[k]) > queued_s for k in others):
            return [k for k in kinds if MODEL_OF[k] == model]
        return kinds

    def offer_chunks(self, step: Any, token_budget: int) -> Any:
        """Prefill chunks filling ``token_budget`` tokens beside ``step`` (chunked prefill).

        Prompts already being prefilled continue first, then new ones join in
        arrival order while the running set has room and their KV fits (as in
        :meth:`~simulator.engine.prefill.PrefillLane.select`: a recomputation
        also needs its first step's or round's room,
        :meth:`~simulator.engine.replica_kv.ReplicaKv.round_room_mb`), at most the
        prefill lane's ``max_batch`` new ones per iteration. Chunks run the
        model of ``step`` (a replica runs one model per iteration). A
        prompt's first chunk holds at least the smallest context of its
        prefill LUT (or the whole prompt), so a chunk is never priced below
        the grid.
        """
        replica = self.replica
        kv = self.kv
        while replica.prefill_q and (
            kv.need_mb(replica.prefill_q[0][0], replica.prefill_q[0][1])
            > kv.pool.capacity_mb + 1e-9
        ):
            self.prefill.reject_too_large(0)
        model = None if step is None else MODEL_OF[step[0]]
        chunks: list[Chunk] = []
        left = token_budget
        for req, kind in replica.chunking:
            if left <= 0:
                break
            if model is not None and MODEL_OF[kind] != model:
                continue
            model = MODEL_OF[kind]
            tokens = min(left, req.context - req.prefilled)
            chunks.append((req, kind, tokens))
            left -= tokens
        slots = replica.max_running - len(replica.holders)
        free_mb = kv.pool.free_mb
        if step is not None and kv.grows:
            # Running requests grow first; new prompts take only what is left.
            kind, batch = step
            tokens = step_tokens(step) if kind != DECODE else len(batch)
            free_mb -= tokens * replica.kv_mb_per_token[kind]
        for started, (req, kind, _queued_s) in enumerate(replica.prefill_q):
            if left <= 0 or slots <= 0 or started >= self.chunk_starts:
                break
            if model is not None and MODEL_OF[kind] != model:
                break
            need = kv.need_mb(req, kind)
            cached = 0
            if kv.cache is not None:
                need = kv.admit_mb(req, kind, need)
                cached = kv.cached_tokens(req, kind)
            room = kv.round_room_mb(req, kind)
            if need + room > free_mb + 1e-9:
                # The first prompt may free KV held by requests waiting for its request's
                # device (ReplicaKv.free_for_device_holder); running requests still grow first.
                growth_mb = kv.pool.free_mb - free_mb
                if started or not kv.free_for_device_holder(req, need + room + growth_mb):
                    break
                free_mb = kv.pool.free_mb - growth_mb
                if need + room > free_mb + 1e-9:
                    break
            cost = replica.costs.prefill[kind]
            assert cost is not None
            # A remainder continuing a cached prefix (at least the grid's first
            # context) is priced within the grid whatever its length.
            first = 1 if cached else min(req.context, int(cost.context_axis[0]))
            if left < first:
                break
            model = MODEL_OF[kind]
            tokens = min(left, req.context - cached)
            chunks.append((req, kind, tokens))
            left -= tokens
            free_mb -= need
            slots -= 1
        return chunks or None

    def start(self, step: Step | None, chunks: list[Chunk]) -> None:
        """One iteration of decode-lane work (if any) with prefill chunks riding on it."""
        replica = self.replica
        kv = self.kv
        now = replica.env._now
        starting = [(req, kind) for req, kind, _tokens in chunks if req.prefilled == 0]
        if starting:
            new = {id(req) for req, _kind in starting}
            replica.prefill_q = [entry for entry in replica.prefill_q if id(entry[0]) not in new]
            if kv.cache is not None:
                kv.reserve(starting, now)
                for req, kind in starting:
                    # A cached prefix counts as already prefilled (its chunk continues it).
                    req.prefilled = kv.cached_now(req)
                    replica.chunking.append((req, kind))
            else:
                for req, kind in starting:
                    need = kv.need_mb(req, kind)
                    kv.pool.allocate(need, now)
                    req.kv_mb = need
                    req.kv_peak_mb = max(req.kv_peak_mb, need)
                    replica.holders.append(req)
                    replica.chunking.append((req, kind))
        kind = ""
        batch: list[RequestState] = []
        latency_s, energy_j = self._chunk_cost(chunks)
        if chunks:
            # A pass of chunks alone is one engine step of the prefill model.
            prefill = replica.costs.prefill[chunks[0][1]]
            assert prefill is not None
            chunk_step = prefill.engine_step(latency_s, energy_j, len(chunks), 1)
        else:
            chunk_step = (latency_s, energy_j)
        if step is not None:
            kind, batch = step
            if kind != DECODE:
                batch = self.rounds.take(batch, kind)
            elif kv.grows:
                per_token = replica.kv_mb_per_token[DECODE]
                batch = kv.make_room(batch, DECODE, lambda members: len(members) * per_token)
        if batch:
            cost = replica.costs.step[kind]
            assert cost is not None
            step_s, step_j, _groups = replica.microbatcher.price(
                cost, batch, kind != DECODE, replica.costs.step[DECODE], replica.tail_weight[kind]
            )
            # The chunks' pass already reads the weights: decode-lane work adds what it
            # costs beyond a batch-1 pass at the grid's shortest context (GPU work; the
            # decode-lane step brings the engine's host time, once).
            base_s, base_j = cost.gpu_at(cost.context_axis[0], 1, 1)
            latency_s = max(latency_s + step_s - base_s, chunk_step[0], step_s)
            energy_j = max(energy_j + step_j - base_j, chunk_step[1], step_j)
        else:
            latency_s, energy_j = chunk_step
        if replica.noise is not None:
            # A pass carrying prefill chunks varies as prefill does.
            noise_kind = "prefill" if chunks else "decode" if kind == DECODE else "round"
            latency_s *= replica.noise.take(noise_kind)
        latency_s, energy_j = replica.throttled(now, latency_s, energy_j)
        context = replica.context
        if context.tracing:
            tokens = sum(c for _r, _k, c in chunks)
            context.tracer.event(
                now,
                "mixed_start",
                f"replica {replica.index}",
                f"{kind or 'prefill'} n={len(batch)} chunks={len(chunks)} chunk_tokens={tokens}",
            )
            batch_tokens = step_tokens((kind, batch)) if batch else 0
            context.tracer.span(
                Span(
                    "replica",
                    f"{replica.pool}/{replica.index}",
                    "decode",
                    "mixed",
                    now,
                    latency_s,
                    tuple(req.request_id for req in batch)
                    + tuple(req.request_id for req, _k, _c in chunks),
                    tokens + batch_tokens,
                    max((req.k for req in batch), default=0) if kind != DECODE else 0,
                )
            )
        replica.busy = True
        call_at(
            replica.env,
            now + latency_s,
            partial(self._end, kind, batch, chunks, latency_s, energy_j),
            DECISION,
        )

    def _chunk_cost(self, chunks: list[Chunk]) -> tuple[float, float]:
        """GPU latency and energy of prefill chunks in one pass.

        Prompts prefilled whole in this chunk are priced together as a prefill
        batch (as without chunking); a chunk of ``c`` tokens continuing ``p``
        already computed costs ``F(p + c) - F(p)``, with ``F(L)`` the LUT's
        batch-1 prefill of ``L`` tokens: the extra attention over the prefix
        is included, fixed per-pass costs cancel. All of it is GPU work; the
        caller adds the engine's terms for the pass once.
        """
        prefill = self.replica.costs.prefill
        whole = [
            (req, kind)
            for req, kind, tokens in chunks
            if req.prefilled == 0 and tokens == req.context
        ]
        latency_s = 0.0
        energy_j = 0.0
        if whole:
            cost = prefill[whole[0][1]]
            assert cost is not None
            latency_s, energy_j = cost.gpu_at(
                sum(req.context for req, _ in whole) / len(whole), len(whole), 1
            )
        for req, kind, tokens in chunks:
            if req.prefilled == 0 and tokens == req.context:
                continue
            cost = prefill[kind]
            assert cost is not None
            end_s, end_j = cost.gpu_at(req.prefilled + tokens, 1, 1)
            if req.prefilled > 0:
                done_s, done_j = cost.gpu_at(req.prefilled, 1, 1)
                end_s -= done_s
                end_j -= done_j
            latency_s += end_s
            energy_j += end_j
        return latency_s, energy_j

    def _end(
        self,
        kind: str,
        batch: list[RequestState],
        chunks: list[Chunk],
        latency_s: float,
        energy_j: float,
    ) -> None:
        replica = self.replica
        replica.account(latency_s, energy_j, batch + [req for req, _kind, _tokens in chunks])
        if batch and replica.window is not None:
            replica.remember(batch, kind, latency_s)
        if batch:
            if kind == DECODE:
                self.decode.apply(batch, 1)
            else:
                self.rounds.apply(batch, kind)
        for req, chunk_kind, tokens in chunks:
            req.prefilled += tokens
            if req.prefilled >= req.context:
                req.prefilled = 0
                replica.chunking.remove((req, chunk_kind))
                self.kv.cache_prompt(req, chunk_kind)
                replica.lifecycle.on_prefilled(req, chunk_kind)
        replica.end_iteration()
