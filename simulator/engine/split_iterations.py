"""Split fused rounds on a target replica: the lanes' draft, verify and atomic-round iterations.

Under a lane rule (:mod:`policies.arbitration`) a fused round runs as a draft
iteration on the decode lane and a verify iteration on the verify lane, or
as one atomic round; prompts are prefilled on both models. The iterations
share the replica's GPU as ``scheduler.lanes`` says and are priced by
:class:`~simulator.engine.split_rounds.SplitRounds`. :class:`SplitIterations`
answers what a lane rule takes (a draft batch, a verify batch, the next
round, a pass of ``pdv_unified``), starts each iteration on the shared GPU
and, when it ends, moves its requests on: drafted requests to the verify
lane, verified rounds committed as whole fused rounds are
(:mod:`simulator.engine.verify_rounds`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from policies.lanes import (
    DRAFT_PASS,
    FUSED,
    LANE_OF_PASS,
    PREFILL_PASS,
    ROUND,
    VERIFY_PASS,
)
from policies.views import QueuedItem
from simulator.engine.gpu_share import HOST
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import ReplicaView
from simulator.engine.request_state import RequestState, next_token_due_s
from simulator.engine.split_rounds import SplitRounds
from simulator.engine.verify_rounds import VerifyRounds


def _without(queue: list[RequestState], batch: list[RequestState]) -> list[RequestState]:
    gone = {id(req) for req in batch}
    return [req for req in queue if id(req) not in gone]


class SplitIterations:
    """A replica's split iterations on its shared GPU (see the module docstring).

    Args:
        replica: The replica whose lanes run them.
        kv: Its KV policy.
        rounds: Commits verified rounds.
        split: The shared GPU and the split costs of a round (``None``: the
            replica's rule runs whole rounds; it may still take from the lanes).
    """

    def __init__(
        self,
        replica: ReplicaView,
        kv: ReplicaKv,
        rounds: VerifyRounds,
        split: SplitRounds | None,
    ) -> None:
        self.replica = replica
        self.kv = kv
        self.rounds = rounds
        self.split = split

    # -- what lane rules take ------------------------------------------------
    def offer_draft(self) -> Any:
        """Take the decode lane's batch for a draft iteration (``("draft", reqs)``), or ``None``."""
        decode_q = self.replica.decode_q
        queue = decode_q[FUSED]
        batch = self._select(queue)
        decode_q[FUSED] = _without(queue, batch)
        return (DRAFT_PASS, batch) if batch else None

    def offer_verify(self) -> Any:
        """Take the verify lane's batch for a verify iteration (``("verify", reqs)``), or ``None``."""
        replica = self.replica
        batch = self._select(replica.verify_q)
        replica.verify_q = _without(replica.verify_q, batch)
        return (VERIFY_PASS, batch) if batch else None

    def offer_round(self) -> Any:
        """Take the next request for an atomic round (``("round", [request])``): the pass first."""
        replica = self.replica
        if replica.pass_q:
            return ROUND, [replica.pass_q.pop(0)]
        queue = replica.decode_q[FUSED]
        return (ROUND, [queue.pop(0)]) if queue else None

    def start_pass(self, limit: int) -> int:
        """Move up to ``limit`` requests from the head of the decode lane into a pass."""
        replica = self.replica
        queue = replica.decode_q[FUSED]
        replica.pass_q = queue[:limit]
        replica.decode_q[FUSED] = queue[limit:]
        return len(replica.pass_q)

    def _select(self, queue: list[RequestState]) -> list[RequestState]:
        """The lane policy's batch of ``queue`` (``scheduler.verify``: policy and max_batch)."""
        if not queue:
            return []
        items = [
            QueuedItem(r.request_id, r.ready_s, next_token_due_s(r), r.context, r.k + 1)
            for r in queue
        ]
        choice = self.replica.continuous_lane.select(items, self.replica.env._now)
        return [queue[i] for i in choice.take]

    # -- running them -----------------------------------------------------------
    def launch(self, kind: str, batch: list[Any]) -> None:
        """Start a split iteration of ``kind`` over ``batch`` on the shared GPU.

        With ``preempt_recompute``, an iteration that ends a round (a verify
        or an atomic round) first makes KV room for the tokens it may commit,
        as a whole fused round does (see
        :meth:`~simulator.engine.replica_kv.ReplicaKv.make_room`).
        """
        replica = self.replica
        split = self.split
        assert split is not None
        now = replica.env._now
        if kind in (ROUND, VERIFY_PASS) and self.kv.grows:
            batch = self.kv.room_for_rounds(batch, FUSED)
            if not batch:
                return  # its requests were evicted: the rule is asked again
        if kind == PREFILL_PASS:
            self.kv.reserve(batch, now)
        segments, energy_j = split.price(kind, batch)
        if not replica.cool:
            gpu_s = sum(segment.duration_s for segment in segments if segment.klass != HOST)
            throttled_s, energy_j = replica.throttled(now, gpu_s, energy_j)
            scale = throttled_s / gpu_s
            segments = [
                segment
                if segment.klass == HOST
                else segment._replace(
                    duration_s=segment.duration_s * scale, pass_s=segment.pass_s * scale
                )
                for segment in segments
            ]
        split.active[LANE_OF_PASS[kind]] += 1
        context = replica.context
        if context.tracing:
            ids = [(item[0] if kind == PREFILL_PASS else item).request_id for item in batch]
            context.tracer.event(
                now,
                f"lane_{kind}_start",
                f"replica {replica.index}",
                "requests=" + ",".join(str(i) for i in ids),
            )
        split.gpu.start(segments, partial(self._finish, kind, batch, now, energy_j))

    def _finish(self, kind: str, batch: list[Any], start_s: float, energy_j: float) -> None:
        """A split iteration ended: account it, move its requests on, decide again."""
        replica = self.replica
        split = self.split
        assert split is not None
        now = replica.env._now
        split.active[LANE_OF_PASS[kind]] -= 1
        reqs = [item[0] for item in batch] if kind == PREFILL_PASS else batch
        replica.account_split(split.gpu.time, energy_j, reqs)
        context = replica.context
        if context.tracing:
            context.tracer.event(
                now,
                f"lane_{kind}_end",
                f"replica {replica.index}",
                "requests=" + ",".join(str(req.request_id) for req in reqs),
            )
        if kind == PREFILL_PASS:
            for req, work in batch:
                replica.lifecycle.on_prefilled(req, work)
        elif kind == DRAFT_PASS:
            for req in batch:
                req.ready_s = now
            replica.verify_q.extend(batch)
        else:
            if replica.window is not None:
                replica.remember(batch, FUSED, now - start_s)
            self.rounds.apply(batch, FUSED)
        replica.decide()
