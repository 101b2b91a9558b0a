"""A target replica's prefill lane: choosing the next prefill batch and running it whole.

The prefill batch is the FIFO prefix of the prefill lane whose KV fits (see
:mod:`simulator.engine.replica_kv`), at most as many prompts as the running
set has free slots, of one model (a hybrid replica holds the verifier and
the fused model), then the lane's batching policy
(``scheduler.prefill.batching``) chooses among them. A prompt whose KV could
never fit is rejected (``kv_capacity``). :class:`PrefillLane` also runs a
whole-prompt prefill iteration; chunked prefill is
:mod:`simulator.engine.mixed`'s.
"""

from __future__ import annotations

from functools import partial

from policies.lanes import FUSED, VERIFY
from policies.views import QueuedItem
from simulator.engine.clock import DECISION, call_at
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import PrefillEntry, ReplicaView
from simulator.engine.request_state import RequestState
from simulator.engine.tracing import Span

INF = float("inf")


class PrefillLane:
    """Selects and runs a replica's whole-prompt prefill batches (see the module docstring).

    Args:
        replica: The replica whose prefill lane this is.
        kv: Its KV policy.

    Attributes:
        policy: The lane's batching policy.
        predicts_ttft: Whether prefill items carry the predicted prefill
            batch time (``ttft_bounded``).
    """

    def __init__(self, replica: ReplicaView, kv: ReplicaKv) -> None:
        self.replica = replica
        self.kv = kv
        self.policy = replica.context.lanes["prefill"]
        self.predicts_ttft = bool(self.policy.predicts_ttft)

    def select(self, limit: int | None = None) -> tuple[list[tuple[RequestState, str]], float]:
        """Pick the prefill batch: FIFO prefix whose KV fits, then the lane policy.

        At most as many as the running set has free slots (and ``limit``); none
        while it is full (the next finish frees a slot and the replica decides
        again then).
        """
        replica = self.replica
        slots = replica.max_running - len(replica.holders)
        if limit is not None:
            slots = min(slots, limit)
        if slots <= 0:
            return [], INF
        queue = replica.prefill_q
        first_kind = queue[0][1]
        first_model = FUSED if first_kind == FUSED else VERIFY
        pool = self.kv.pool
        budget = pool.free_mb
        eligible: list[int] = []
        for i, (req, kind, _) in enumerate(queue):
            if (FUSED if kind == FUSED else VERIFY) != first_model:
                continue
            need = self.kv.need_mb(req, kind)
            take = need if self.kv.cache is None else self.kv.admit_mb(req, kind, need)
            if take + self.kv.round_room_mb(req, kind) > budget + 1e-9:
                if not eligible and need > pool.capacity_mb:
                    self.reject_too_large(i)
                    return self.select(limit) if replica.prefill_q else ([], INF)
                if not eligible and self.kv.free_for_device_holder(
                    req, take + self.kv.round_room_mb(req, kind)
                ):
                    return self.select(limit)
                break
            budget -= take
            eligible.append(i)
            if len(eligible) == slots:
                break
        if not eligible:
            return [], INF  # the head waits for running requests to free KV
        now = replica.env._now
        if self.policy.orders_by_arrival:
            tokens = (
                [queue[i][0].context for i in eligible]
                if self.policy.limits.max_tokens is not None
                else []
            )
            choice = self.policy.select_by_arrival([queue[i][2] for i in eligible], tokens, now)
        else:
            choice = self.policy.select(self._views(queue, eligible, first_kind), now)
        if not choice.take:
            return [], choice.wake_at_s if choice.wake_at_s is not None else INF
        taken = [eligible[j] for j in choice.take]
        batch = [(queue[i][0], queue[i][1]) for i in taken]
        keep = set(taken)
        replica.prefill_q = [entry for i, entry in enumerate(queue) if i not in keep]
        return batch, INF

    def _views(self, queue: list[PrefillEntry], eligible: list[int], kind: str) -> list[QueuedItem]:
        """The prefill policy's view of the eligible prompts (predicted times if it reads them)."""
        items = [
            QueuedItem(
                queue[i][0].request_id,
                queue[i][2],
                queue[i][0].arrival_s + queue[i][0].ttft_slo_s,
                0,
                queue[i][0].context,
            )
            for i in eligible
        ]
        if self.predicts_ttft:
            items = self._with_prefill_s(items, kind, [queue[i][0] for i in eligible])
        return items

    def _with_prefill_s(
        self, items: list[QueuedItem], kind: str, reqs: list[RequestState]
    ) -> list[QueuedItem]:
        """Prefill items with the predicted time of the batch up to each (``predicts_ttft``).

        With a prefix cache the batch is priced as :meth:`start` will price
        it, with what each prompt would find cached now.
        """
        out: list[QueuedItem] = []
        if self.kv.cache is not None:
            cached = [self.kv.cached_tokens(req, kind) for req in reqs]
            if any(cached):
                batch = [(req, kind) for req in reqs]
                for n, item in enumerate(items, start=1):
                    if any(cached[:n]):
                        prefill_s = self._cached_cost(kind, batch[:n], cached[:n])[0]
                    else:
                        prefill_s = self.time_s(kind, sum(r.context for r in reqs[:n]) / n, n)
                    out.append(item._replace(prefill_s=prefill_s))
                return out
        context = 0
        for n, item in enumerate(items, start=1):
            context += item.new_tokens
            out.append(item._replace(prefill_s=self.time_s(kind, context / n, n)))
        return out

    def predicted_s(self, req: RequestState, kind: str) -> float:
        """Batch-1 prefill time of ``req`` here now (the TTFT predictors' figure).

        ``F(L)`` from the prefill LUT, or with a prefix cache ``F(L) - F(p)``
        with ``p`` the prompt tokens it would find cached now (a lookup that
        changes nothing in the cache), priced as :meth:`start` prices it.
        """
        cached = self.kv.cached_tokens(req, kind) if self.kv.cache is not None else 0
        if not cached:
            return self.time_s(kind, req.context, 1)
        return self._cached_cost(kind, [(req, kind)], [cached])[0]

    def time_s(self, kind: str, mean_context: float, n: int) -> float:
        """LUT time of a prefill batch of ``n`` prompts of ``mean_context`` tokens (unthrottled)."""
        cost = self.replica.costs.prefill[kind]
        assert cost is not None
        return cost.at(mean_context, n, 1)[0]

    def reject_too_large(self, position: int) -> None:
        """Reject the prompt at ``position`` of the lane: its KV could never fit."""
        req, _kind, _ = self.replica.prefill_q.pop(position)
        self.replica.lifecycle.reject_on_replica(req, "kv_capacity")

    def start(self, batch: list[tuple[RequestState, str]]) -> None:
        """One whole-prompt prefill iteration over ``batch``."""
        replica = self.replica
        now = replica.env._now
        kind = batch[0][1]
        cost = replica.costs.prefill[kind]
        assert cost is not None
        n = len(batch)
        mean_context = sum(req.context for req, _ in batch) / n
        self.kv.reserve(batch, now)
        cached = [self.kv.cached_now(req) for req, _ in batch] if self.kv.cache else []
        if any(cached):
            latency_s, energy_j = self._cached_cost(kind, batch, cached)
        else:
            latency_s, energy_j = cost.at(mean_context, n, 1)
        if replica.noise is not None:
            latency_s *= replica.noise.take("prefill")
        latency_s, energy_j = replica.throttled(now, latency_s, energy_j)
        context = replica.context
        if context.tracing:
            context.tracer.event(
                now,
                "prefill_start",
                f"replica {replica.index}",
                f"n={n} context={mean_context:.1f}",
            )
            context.tracer.span(
                Span(
                    "replica",
                    f"{replica.pool}/{replica.index}",
                    "prefill",
                    "prefill",
                    now,
                    latency_s,
                    tuple(req.request_id for req, _ in batch),
                    sum(req.context for req, _ in batch),
                )
            )
        replica.busy = True
        call_at(
            replica.env,
            now + latency_s,
            partial(self._end, batch, latency_s, energy_j),
            DECISION,
        )

    def _cached_cost(
        self, kind: str, batch: list[tuple[RequestState, str]], cached: list[int]
    ) -> tuple[float, float]:
        """A prefill pass in which some prompts found their first tokens cached.

        A prompt of ``L`` tokens whose first ``p`` are cached costs what
        chunked prefill charges a chunk continuing ``p`` computed tokens:
        ``F(L) - F(p)``, ``F`` the LUT's batch-1 prefill GPU work; the other
        prompts are priced together as a prefill batch of their mean context,
        as without a cache; the engine's step terms apply once to the pass.
        """
        cost = self.replica.costs.prefill[kind]
        assert cost is not None
        whole = [req.context for (req, _), p in zip(batch, cached, strict=True) if p == 0]
        gpu_s = gpu_j = 0.0
        if whole:
            gpu_s, gpu_j = cost.gpu_at(sum(whole) / len(whole), len(whole), 1)
        for (req, _), p in zip(batch, cached, strict=True):
            if p:
                end_s, end_j = cost.gpu_at(req.context, 1, 1)
                done_s, done_j = cost.gpu_at(p, 1, 1)
                gpu_s += end_s - done_s
                gpu_j += end_j - done_j
        return cost.engine_step(gpu_s, gpu_j, len(batch), 1)

    def _end(
        self, batch: list[tuple[RequestState, str]], latency_s: float, energy_j: float
    ) -> None:
        replica = self.replica
        replica.account(latency_s, energy_j, [req for req, _ in batch])
        for req, kind in batch:
            self.kv.cache_prompt(req, kind)
            replica.lifecycle.on_prefilled(req, kind)
        replica.end_iteration()
