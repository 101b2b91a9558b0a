"""A fused replica as lanes on one GPU (``scheduler.lanes.architecture``).

The replica hosts the draft and the target model. A fused request's round is
split into a **draft** iteration (the draft model's ``k`` decode steps) and a
**verify** iteration (the target's pass over the ``k`` drafts), priced from
the LUTs the fused LUT is composed of (:class:`~simulator.engine.costs.LaneCosts`);
prompts are prefilled on both models by the **prefill** lane (the fused
LUT's ``prefill`` rows). Each lane is a queue with its own batch; the
architecture is the arbitration rule that says which lane's iteration runs
next, and which rounds run atomically (draft then verify of one request as
one iteration):

- ``baseline``: every request of the running set is its own worker running
  batch-1 iterations (its prefill, then atomic rounds to completion); the
  oldest waiting item goes first.
- ``pd``: a prefill lane (batches of ``scheduler.prefill``) and a decode lane
  running atomic batch-1 rounds, round-robin over the admitted requests
  (a request goes to the back of the lane after its round); the lane whose
  head has waited longest goes first (ties: decode).
- ``pdv``: prefill, decode (draft iterations) and verify lanes, each batching
  by ``scheduler.verify`` (decode and verify) or ``scheduler.prefill``,
  with preemptive priorities decode > verify > prefill at iteration
  boundaries; with ``verify_first_margin`` m, verify goes first while its
  queue is longer than the decode queue by more than m.
- ``pdv_hybrid``: as ``pdv``, but while at most ``hybrid_threshold``
  requests run the decode lane runs atomic batch-1 rounds instead of draft
  iterations.
- ``pdv_unified``: one worker making passes: a pass admits one prompt
  (batch-1 prefill) when the decode queue holds fewer than
  ``unified_admit_factor`` times the batch size, then takes up to a batch of
  ready requests and runs an atomic round for each, one after the other.

GPU sharing (:mod:`simulator.engine.gpu_share`): with ``serialized`` one
iteration runs at a time and the rule picks the next one at every boundary;
with ``overlap`` every lane (every request's worker under ``baseline``) runs
its own iteration when it has one and running iterations share the GPU.
``host_overhead_ms`` is host time before each model forward pass: a prefill
(target and draft: two passes), each draft step, each verify.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from policies.views import QueuedItem
from simulator.engine.costs import FUSED
from simulator.engine.gpu_share import COMPUTE, HOST, MEMORY, Segment, SharedGpu
from simulator.engine.lifecycle import ServerContext
from simulator.engine.microbatch import Microbatcher
from simulator.engine.request_state import RequestState, next_token_due_s
from simulator.engine.runtime import ReplicaPlan
from simulator.engine.target import TargetReplica
from simulator.scenario.model import LanesSpec

INF = float("inf")

PREFILL = "prefill"
DRAFT = "draft"
VERIFY_LANE = "verify"
ROUND = "round"
"""Kinds of lane iterations: a prefill batch, a draft batch, a verify batch, an atomic round."""
_LANE_OF = {PREFILL: "prefill", DRAFT: "decode", ROUND: "decode", VERIFY_LANE: "verify"}
"""The lane (worker) each kind of iteration runs on."""


class LaneReplica(TargetReplica):
    """A fused replica whose lanes follow a lane architecture (see the module docstring)."""

    def __init__(
        self, context: ServerContext, index: int, plan: ReplicaPlan, lanes: LanesSpec
    ) -> None:
        super().__init__(context, index, plan)
        assert plan.lane_costs is not None
        self.lane_costs = plan.lane_costs
        self.spec = lanes
        self.architecture = lanes.architecture
        self.overlap = lanes.gpu_sharing == "overlap"
        efficiency = lanes.overlap_efficiency
        self.gpu = SharedGpu(self.env, efficiency if efficiency is not None else 1.0)
        self.host_s = lanes.host_overhead_ms / 1000.0
        self.verify_q: list[RequestState] = []
        self.batch_limit = context.lanes["continuous"].limits.max_batch
        self._active = {"prefill": 0, "decode": 0, "verify": 0}
        self._pass: list[RequestState] = []
        """``pdv_unified``: requests of the current pass still to run their round."""
        self._admitted = False
        """``pdv_unified``: the current pass has admitted its prompt."""

    def set_decode_lane(self, verify: Any, continuous: Any, microbatcher: Microbatcher) -> None:
        """The lane policy and its ``max_batch`` of the iterations formed from now on."""
        self.batch_limit = continuous.limits.max_batch
        super().set_decode_lane(verify, continuous, microbatcher)

    # -- what the engine and the k controller read -------------------------
    def waiting(self, kind: str) -> int:
        """Requests waiting for their round's next iteration.

        With a verify lane (``pdv``, ``pdv_hybrid``) the verify lane's queue,
        the depth the Verify-PD controller watches; otherwise the decode lane's.
        """
        if kind != FUSED:
            return 0
        if self.architecture in ("pdv", "pdv_hybrid"):
            return len(self.verify_q)
        return len(self.decode_q[FUSED])

    def queue_lengths(self) -> tuple[int, int, int, int]:
        """Return (prefill, decode, verify, fused) queue lengths: decode is empty, fused the draft lane."""
        return (len(self.prefill_q), 0, len(self.verify_q), len(self.decode_q[FUSED]))

    # -- the arbitration rule ----------------------------------------------
    def _order(self) -> list[str]:
        """The kinds of iteration to try, first to last, under the architecture."""
        arch = self.architecture
        if arch in ("baseline", "pd"):
            queue = self.decode_q[FUSED]
            round_s = queue[0].ready_s if queue else INF
            prefill_s = self.prefill_q[0][2] if self.prefill_q else INF
            return [PREFILL, ROUND] if prefill_s < round_s else [ROUND, PREFILL]
        spec = self.spec
        decode = (
            ROUND if arch == "pdv_hybrid" and len(self.holders) <= spec.hybrid_threshold else DRAFT
        )
        margin = spec.verify_first_margin
        if margin is not None and len(self.verify_q) > len(self.decode_q[FUSED]) + margin:
            return [VERIFY_LANE, decode, PREFILL]
        return [decode, VERIFY_LANE, PREFILL]

    def _decide(self) -> None:
        """Start every iteration the architecture and the GPU sharing allow now."""
        now = self.env.now
        if not self.always_available and not self.available(now):
            assert self.availability is not None
            self._decide_at(self.availability.next_available_s(now))
            return
        if self.architecture == "pdv_unified":
            self._decide_unified()
            return
        per_request = self.architecture == "baseline"
        while self.overlap or self.gpu.running == 0:
            wake_s = INF
            for kind in self._order():
                lane = _LANE_OF[kind]
                if self.overlap and not per_request and self._active[lane]:
                    continue
                batch, wake_at = self._form(kind)
                wake_s = min(wake_s, wake_at)
                if batch:
                    self._launch(kind, batch)
                    break
            else:
                if wake_s < INF:
                    self._decide_at(wake_s)
                return

    def _decide_unified(self) -> None:
        """The unified worker's next iteration (one at a time)."""
        if self.gpu.running:
            return
        if not self._pass:
            queue = self.decode_q[FUSED]
            if (
                not self._admitted
                and self.prefill_q
                and len(queue) < self.spec.unified_admit_factor * self.batch_limit
            ):
                batch, wake_at = self._select_prefill(1)
                if batch:
                    self._admitted = True
                    self._launch(PREFILL, batch)
                    return
                if wake_at < INF:
                    self._decide_at(wake_at)
            self._admitted = False
            self._pass = queue[: self.batch_limit]
            self.decode_q[FUSED] = queue[self.batch_limit :]
            if not self._pass:
                return
        self._launch(ROUND, [self._pass.pop(0)])

    def _form(self, kind: str) -> tuple[list[Any], float]:
        """Take the batch an iteration of ``kind`` would run now out of its queue."""
        if kind == PREFILL:
            if not self.prefill_q:
                return [], INF
            limit = 1 if self.architecture == "baseline" else None
            return self._select_prefill(limit)
        if kind == ROUND:
            queue = self.decode_q[FUSED]
            if not queue:
                return [], INF
            return [queue.pop(0)], INF
        if kind == DRAFT:
            batch = self._select(self.decode_q[FUSED])
            self.decode_q[FUSED] = self._without(self.decode_q[FUSED], batch)
            return batch, INF
        batch = self._select(self.verify_q)
        self.verify_q = self._without(self.verify_q, batch)
        return batch, INF

    def _select(self, queue: list[RequestState]) -> list[RequestState]:
        """The lane policy's batch of ``queue`` (``scheduler.verify``: policy and max_batch)."""
        if not queue:
            return []
        items = [
            QueuedItem(r.request_id, r.ready_s, next_token_due_s(r), r.context, r.k + 1)
            for r in queue
        ]
        choice = self._continuous_lane.select(items, self.env.now)
        return [queue[i] for i in choice.take]

    @staticmethod
    def _without(queue: list[RequestState], batch: list[RequestState]) -> list[RequestState]:
        gone = {id(req) for req in batch}
        return [req for req in queue if id(req) not in gone]

    # -- running iterations -------------------------------------------------
    def _price(self, kind: str, batch: list[Any]) -> tuple[list[Segment], float]:
        """Segments and energy of an iteration of ``kind`` over ``batch``."""
        host = self.host_s
        segments: list[Segment] = []
        if kind == PREFILL:
            cost = self.costs.prefill[FUSED]
            assert cost is not None
            n = len(batch)
            latency_s, energy_j = cost.at(sum(req.context for req, _ in batch) / n, n, 1)
            segments = [(2 * host, HOST), (latency_s, COMPUTE)]
            return [s for s in segments if s[0] > 0], energy_j
        n = len(batch)
        k = max(req.k for req in batch) if n > 1 else batch[0].k
        context = sum(req.context for req in batch) / n
        energy_j = 0.0
        if kind in (DRAFT, ROUND):
            draft_s, draft_j = self.lane_costs.draft.curve(n, 1).sum_steps(context, k)
            segments += [(k * host, HOST), (draft_s, MEMORY)]
            energy_j += draft_j
        if kind in (VERIFY_LANE, ROUND):
            verify_s, verify_j = self.lane_costs.verify.at(context, n, k)
            segments += [(host, HOST), (verify_s, COMPUTE)]
            energy_j += verify_j
        return [s for s in segments if s[0] > 0], energy_j

    def _launch(self, kind: str, batch: list[Any]) -> None:
        """Start an iteration of ``kind`` over ``batch`` on the GPU."""
        now = self.env.now
        if kind == PREFILL:
            for req, work in batch:
                need = self.kv_need_mb(req, work)
                self.kv.allocate(need, now)
                req.kv_mb = need
                req.kv_peak_mb = max(req.kv_peak_mb, need)
                if req not in self.holders:
                    self.holders.append(req)
        segments, energy_j = self._price(kind, batch)
        if not self._cool:
            gpu_s = sum(s for s, klass in segments if klass != HOST)
            throttled_s, energy_j = self._throttled(now, gpu_s, energy_j)
            scale = throttled_s / gpu_s
            segments = [(s if klass == HOST else s * scale, klass) for s, klass in segments]
        lane = _LANE_OF[kind]
        self._active[lane] += 1
        if self.context.tracing:
            ids = [(item[0] if kind == PREFILL else item).request_id for item in batch]
            self.context.tracer.event(
                now,
                f"lane_{kind}_start",
                f"replica {self.index}",
                "requests=" + ",".join(str(i) for i in ids),
            )
        self.gpu.start(segments, partial(self._finish, kind, batch, now, energy_j))

    def _finish(self, kind: str, batch: list[Any], start_s: float, energy_j: float) -> None:
        """An iteration ended: account it, move its requests on, decide again."""
        now = self.env.now
        self._active[_LANE_OF[kind]] -= 1
        self.busy_s = self.gpu.busy_s
        self.energy_j += energy_j
        self.iterations += 1
        reqs = [item[0] for item in batch] if kind == PREFILL else batch
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share
        if self.context.tracing:
            self.context.tracer.event(
                now,
                f"lane_{kind}_end",
                f"replica {self.index}",
                "requests=" + ",".join(str(req.request_id) for req in reqs),
            )
        if kind == PREFILL:
            for req, work in batch:
                self.lifecycle.on_prefilled(req, work)
        elif kind == DRAFT:
            for req in batch:
                req.ready_s = now
            self.verify_q.extend(batch)
        else:
            if self.window is not None:
                self._remember(batch, FUSED, now - start_s)
            self._apply_speculative(batch, FUSED)
        self._decide()
