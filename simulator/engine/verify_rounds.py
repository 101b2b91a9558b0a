"""Speculative iterations of a target replica: verify bundles and whole fused rounds.

A verify iteration (``distributed``) checks a batch of clients' draft
bundles; a fused iteration (``fused``) drafts and verifies on the target
itself. :class:`VerifyRounds` takes such a batch out of the decode lane
(making KV room for its ``k + 1`` tokens each under ``preempt_recompute``),
prices it (one LUT lookup at the batch's largest ``k``, or by microbatches,
:mod:`simulator.engine.microbatch`) and, when it ends, commits each
request's verified round: a verified request goes back to its client, a
fused one queues for its next round, a finished one frees its KV. Mixed
iterations (:mod:`simulator.engine.mixed`) and split rounds
(:mod:`simulator.engine.split_iterations`) commit their rounds here too.
"""

from __future__ import annotations

from functools import partial

from policies.lanes import DECODE, FUSED, VERIFY
from simulator.engine.clock import DECISION, call_at
from simulator.engine.ragged import batch_context
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import ReplicaView
from simulator.engine.request_state import RequestState
from simulator.engine.tracing import Span


class VerifyRounds:
    """Runs a replica's whole verify and fused iterations (see the module docstring).

    Args:
        replica: The replica whose decode lane runs them.
        kv: Its KV policy.
    """

    def __init__(self, replica: ReplicaView, kv: ReplicaKv) -> None:
        self.replica = replica
        self.kv = kv

    def take(self, batch: list[RequestState], kind: str) -> list[RequestState]:
        """Take a verify or fused batch out of its queue, making KV room for it if needed."""
        decode_q = self.replica.decode_q
        queue = decode_q[kind]
        if len(batch) == len(queue):
            decode_q[kind] = []
        else:
            gone = {id(req) for req in batch}
            decode_q[kind] = [req for req in queue if id(req) not in gone]
        if self.kv.grows:
            batch = self.kv.room_for_rounds(batch, kind)
        return batch

    def start(self, batch: list[RequestState], kind: str) -> None:
        """One verify (distributed) or fused draft+verify iteration."""
        replica = self.replica
        now = replica.env._now
        costs = replica.costs
        cost = costs.step[kind]
        assert cost is not None
        batch = self.take(batch, kind)
        if not batch:
            return
        n = len(batch)
        microbatcher = replica.microbatcher
        if microbatcher.whole_batches:
            k = max(req.k for req in batch) if n > 1 else batch[0].k
            if k == 0:  # nothing drafted: a plain decode step of the target
                plain = costs.step[DECODE]
                assert plain is not None
                cost, k = plain, 1
            latency_s, energy_j = cost.at(batch_context(batch, replica.tail_weight[kind]), n, k)
            groups = 1
        else:
            latency_s, energy_j, groups = microbatcher.price(
                cost, batch, True, costs.step[DECODE], replica.tail_weight[kind]
            )
        if replica.noise is not None:
            latency_s *= replica.noise.take("round")
        if not replica.cool:
            latency_s, energy_j = replica.throttled(now, latency_s, energy_j)
        context = replica.context
        if context.tracing:
            fanout = max(req.k for req in batch)
            context.tracer.event(
                now,
                f"{kind}_start",
                f"replica {replica.index}",
                f"n={n} k={fanout}" + (f" microbatches={groups}" if groups > 1 else ""),
            )
            context.tracer.span(
                Span(
                    "replica",
                    f"{replica.pool}/{replica.index}",
                    "decode",
                    kind,
                    now,
                    latency_s,
                    tuple(req.request_id for req in batch),
                    sum(req.k + 1 for req in batch),
                    fanout,
                )
            )
        replica.busy = True
        call_at(
            replica.env,
            now + latency_s,
            partial(self._end, batch, kind, latency_s, energy_j),
            DECISION,
        )

    def _end(self, batch: list[RequestState], kind: str, latency_s: float, energy_j: float) -> None:
        replica = self.replica
        replica.account(latency_s, energy_j, batch)
        if replica.window is not None:
            replica.remember(batch, kind, latency_s)
        self.apply(batch, kind)
        replica.end_iteration()

    def apply(self, batch: list[RequestState], kind: str) -> None:
        """Commit each request's verified round; send, finish or requeue it."""
        replica = self.replica
        lifecycle = replica.lifecycle
        speculation = replica.speculation
        now = replica.env._now
        per_token = replica.kv_mb_per_token[kind]
        grow = self.kv.grows
        release = self.kv.release
        verify_round = speculation.verify_round
        for req in batch:
            gained = verify_round(req)
            if grow:
                self.kv.grow(req, gained * per_token, now)
            if kind == VERIFY:
                if req.output_tokens <= req.generated:
                    release(req)
                lifecycle.on_verified(req, gained, now)
            elif req.remaining <= 0:
                release(req)
                lifecycle.on_finished_server(req, now)
            else:
                replica.enqueue_step(req, FUSED)
