"""A target replica: one GPU group running iteration-level batches.

A replica is a set of lanes sharing its GPU(s), each a queue with its batch
limit: the **prefill** lane, the **decode** lane (plain decode iterations in
``none`` mode, verify iterations of clients' speculative bundles in
``distributed`` mode, fused draft+verify iterations in ``fused`` mode; hybrid
replicas hold verify and fused work and run one kind per iteration) and, when
fused rounds are split, the **verify** lane. Its arbitration rule
(``scheduler.arbitration``, :mod:`policies.arbitration`) chooses what runs
next whenever the GPU may take an iteration; each lane's batching policy
decides which waiting items form it. Rules that run whole rounds run one
iteration at a time (``prefill_first``: when both lanes have work the prefill
lane goes first, as vLLM's default scheduler does). Lane rules split fused
rounds into draft and verify iterations on a GPU shared as
``scheduler.lanes`` says (:mod:`simulator.engine.split_rounds`).

Running set: a replica runs at most ``scheduler.max_running_requests``
requests at once (prefilled, holding KV, not finished), like vLLM's
``max_num_seqs``; a waiting prompt is prefilled only while fewer run. The
decode lane batches continuously over the running set: every iteration takes
the ready requests, up to the lane's ``max_batch``, those ready longest first
(ties in queue order), so when more are ready than ``max_batch`` they take
turns. Requests that are ready again at the end of their own iteration (plain
decode, fused rounds) never wait for a batch to fill; ``max_wait_ms`` holds
back only verify bundles arriving from the network. One iteration's batch is
priced in microbatches (:mod:`simulator.engine.microbatch`).

The replica is driven by callbacks on the simulation clock, not by a SimPy
process. It decides what to run when an iteration ends and, while idle, when
work arrives or a policy asked to be woken; decisions have the
:data:`~simulator.engine.clock.DECISION` priority, so everything delivered at
the same instant is waiting by then. Work announced ahead of time (a
speculative bundle still crossing the network) is kept in an arrival heap and
joins the decode lane at its arrival time: a busy replica takes in every
bundle that has arrived when its iteration ends, so arrivals cost an event
only when they find the replica idle.

KV memory (``scheduler.kv.on_full``): with ``queue`` a request is prefilled
only when the KV of its prompt, its whole output and one round of drafts
fits, reserved at once, so running requests never run out; with
``preempt_recompute`` KV grows token by token, a prompt waits for free KV
rather than evict anything, and when a batch's next iteration would not fit,
the most recently admitted requests are evicted and go to the head of the
prefill lane to recompute their context (vLLM's recompute preemption).

Runs of plain decode iterations whose batch does not change are advanced in
one event (see ``simulation.fuse_iterations``): only when the batch is the
whole decode queue and forms one microbatch, ending at the first finish, at
the iteration that would start throttled or after the replica becomes
unavailable, or where KV runs out; the iteration boundaries are computed
exactly as stepping would, and a prompt that arrives (or a prefill batch
that becomes due) while a slot is free cuts the run at the next boundary.

Thermal throttling (:mod:`simulator.engine.heat`) slows a replica's
iterations as it does a draft device's. Availability windows: outside them a
replica starts no iteration (an iteration under way finishes), its requests
keep their KV and wait, and routing sends new requests to available
replicas when there are any.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from functools import partial
from heapq import heappop, heappush
from typing import Any

import simpy

from policies.arbitration import Work
from policies.lanes import DRAFT_PASS as DRAFT
from policies.lanes import LANE_OF_PASS as LANE_OF
from policies.lanes import PREFILL_LANE, ROUND, VERIFY_LANE, VERIFY_PASS
from policies.lanes import PREFILL_PASS as PREFILL
from policies.views import QueuedItem
from simulator.devices.model import Availability
from simulator.engine.clock import DECISION, call_at
from simulator.engine.costs import DECODE, FUSED, VERIFY, PhaseCost
from simulator.engine.gpu_share import HOST
from simulator.engine.heat import Heat
from simulator.engine.kv import KvPool
from simulator.engine.lifecycle import ServerContext
from simulator.engine.microbatch import Microbatcher
from simulator.engine.request_state import RequestState, next_token_due_s
from simulator.engine.runtime import ReplicaPlan
from simulator.engine.signals import ReplicaWindow
from simulator.engine.split_rounds import SplitRounds
from simulator.engine.tracing import Span

INF = float("inf")

_Step = tuple[str, list[RequestState]]
"""A decode-lane batch: its work kind and requests."""
_Chunk = tuple[RequestState, str, int]
"""A prefill chunk: the request, its decode-lane kind and the chunk's tokens."""
_MODEL_OF = {DECODE: VERIFY, VERIFY: VERIFY, FUSED: FUSED}
"""The model a kind of work runs: the verifier (plain decode, verify) or the fused model."""


class _DecodeRun:
    """A run of plain decode iterations over an unchanged batch.

    Attributes:
        batch: The requests decoded.
        start_s: When the run started.
        boundaries_s: End time of each iteration of the run.
        energies_j: Energy used up to the end of each iteration.
        planned: Iterations the run will complete (fewer once it is cut).
    """

    __slots__ = ("batch", "boundaries_s", "energies_j", "planned", "start_s")

    def __init__(
        self,
        batch: list[RequestState],
        start_s: float,
        boundaries_s: list[float],
        energies_j: list[float],
    ) -> None:
        self.batch = batch
        self.start_s = start_s
        self.boundaries_s = boundaries_s
        self.energies_j = energies_j
        self.planned = len(boundaries_s)


def _within_budget(batch: list[RequestState], token_budget: int) -> list[RequestState]:
    """The head of a verify batch whose k + 1 tokens each fit ``token_budget`` (at least one)."""
    used = 0
    for fits, req in enumerate(batch):
        used += req.k + 1
        if used > token_budget and fits:
            return batch[:fits]
    return batch


LOADING = "loading"
"""A replica a planner added, loading its model: it takes no work yet."""
SERVING = "serving"
"""A replica routing may send new requests to."""
DRAINING = "draining"
"""A replica a planner removed: it takes no new request and finishes its own."""
RETIRED = "retired"
"""A removed replica that has finished its requests: it no longer counts."""


class TargetReplica:
    """One replica of a target pool (see the module docstring)."""

    def __init__(self, context: ServerContext, index: int, plan: ReplicaPlan) -> None:
        self.context = context
        self.lifecycle = context.lifecycle
        self.env: simpy.Environment = context.env
        self.kv_policy = context.kv_policy
        self.index = index
        self.pool = plan.pool
        self.gpus = plan.gpus
        self.state = SERVING
        """Its planner state: :data:`LOADING`, :data:`SERVING`, :data:`DRAINING` or :data:`RETIRED`."""
        self.plan = plan
        self.role = plan.role
        """The requests routing sends it: ``both``, ``draft`` (fused) or ``verify`` (bundles)."""
        self.ready_s = -INF
        """When a replica a planner added takes work (``-inf``: from the start)."""
        self.costs = plan.costs
        self.kv = KvPool(plan.kv_capacity_mb)
        self.kv_mb_per_token = plan.kv_mb_per_token
        self.fused_acceptance = plan.fused_acceptance
        thermal = plan.thermal
        availability: Availability | None = plan.availability
        self.prefill_q: list[tuple[RequestState, str, float]] = []
        self.decode_q: dict[str, list[RequestState]] = {DECODE: [], VERIFY: [], FUSED: []}
        self.holders: list[RequestState] = []
        self.outstanding = 0
        self.pending_prefill_s = 0.0
        """Predicted batch-1 prefill time of the requests admitted to it and not yet
        prefilled (kept by the engine only for admission policies that predict TTFT)."""
        self.busy_s = 0.0
        self.energy_j = 0.0
        self.iterations = 0
        self.tokens_out = 0
        """Output tokens committed on it (first tokens and verify-round gains)."""
        self.k_sum = 0
        """Sum of the draft lengths k of the speculation rounds started on it."""
        self.k_rounds = 0
        """Speculation rounds started on it."""
        self._incoming: list[tuple[float, int, str, RequestState]] = []
        self._incoming_seq = 0
        self._busy = False
        self._decision_at = INF
        self._run: _DecodeRun | None = None
        self._prefill_lane = context.lanes["prefill"]
        self._step_lane = context.lanes["verify"]
        self._continuous_lane = context.lanes["continuous"]
        self.max_running = context.max_running
        self._guard_kv = bool(getattr(self._step_lane, "reads_kv", False))
        """Whether verify items carry their KV need and the free KV (``kv_aware_edf``)."""
        self._predict_prefill = bool(getattr(self._prefill_lane, "predicts_ttft", False))
        """Whether prefill items carry the predicted prefill batch time (``ttft_bounded``)."""
        self.arbiter = context.new_arbiter()
        self._split: SplitRounds | None = None
        """The GPU shared by split iterations (``None``: the rule runs whole rounds)."""
        if getattr(self.arbiter, "splits_rounds", False):
            assert plan.lane_costs is not None, "a lane rule needs the split costs of a round"
            prefill = plan.costs.prefill[FUSED]
            assert prefill is not None
            self._split = SplitRounds(self.env, context.split_lanes, plan.lane_costs, prefill)
        self._watch_verify = bool(getattr(self.arbiter, "verify_lane", False))
        """The k controller's queue depth is the verify lane's (else the decode lane's)."""
        self.verify_q: list[RequestState] = []
        """The verify lane of split rounds: requests whose drafts wait for their verify."""
        self._pass_q: list[RequestState] = []
        """Requests of the current pass still to run their round (``pdv_unified``)."""
        self._chunk_starts = context.prefill_max_batch
        self._chunking: list[tuple[RequestState, str]] = []
        self.microbatcher = context.microbatcher
        self.heat = Heat(thermal)
        self._cool = thermal is None
        """Never throttled: iterations skip the thermal bookkeeping."""
        self.availability = availability
        self.always_available = (
            availability is None or availability.kind == "always" or not availability.windows
        )
        self.window = ReplicaWindow(context.signal_window) if context.signal_window > 0 else None
        """Recent iterations and rounds for the k controller (``None``: not kept)."""

    # -- entry points ------------------------------------------------------
    def enqueue_prefill(self, req: RequestState, kind: str) -> None:
        """A prompt has arrived: queue it for prefill (``kind``: its decode-lane work)."""
        now = self.env.now
        self.prefill_q.append((req, kind, now))
        self.context.tracer.event(
            now, "prefill_queued", f"request {req.request_id}", f"replica {self.index}"
        )
        if not self._busy:
            self._decide_at(now)
        elif self._run is not None and len(self.holders) < self.max_running:
            self._cut_run()

    @property
    def running(self) -> int:
        """Requests prefilled (or being prefilled) and not finished: they hold KV."""
        return len(self.holders)

    def available(self, now_s: float) -> bool:
        """Whether the replica is inside an availability window at ``now_s``."""
        return (
            self.always_available
            or self.availability is None
            or self.availability.is_available(now_s)
        )

    def enqueue_step(self, req: RequestState, kind: str, ready_s: float | None = None) -> None:
        """A request is ready for its next decode-lane iteration at ``ready_s`` (default now).

        A later ``ready_s`` announces work still on its way (a bundle crossing
        the network): it joins the lane at that time.
        """
        now = self.env.now
        if ready_s is not None and ready_s > now:
            req.ready_s = ready_s
            heappush(self._incoming, (ready_s, self._incoming_seq, kind, req))
            self._incoming_seq += 1
            if not self._busy:
                self._decide_at(ready_s)
            return
        if self._incoming:
            self._take_arrived(now)
        if kind == FUSED:
            self.lifecycle.choose_k(req)
        req.ready_s = now
        self.decode_q[kind].append(req)
        if not self._busy:
            self._decide_at(now)

    def hold(self, req: RequestState, kind: str) -> None:
        """Take a request that is already past prefill (a what-if window's start)."""
        need = self.kv_need_mb(req, kind)
        self.kv.allocate(need, self.env.now)
        req.kv_mb = need
        req.kv_peak_mb = need
        self.holders.append(req)

    def waiting(self, kind: str) -> int:
        """Requests in the decode lane waiting for an iteration of ``kind`` now.

        Under a rule with a verify lane (``pdv``, ``pdv_hybrid``), fused work
        waiting means the verify lane's queue, the depth the Verify-PD
        controller watches.
        """
        if self._incoming:
            self._take_arrived(self.env.now)
        if self._watch_verify and kind == FUSED:
            return len(self.verify_q)
        return len(self.decode_q[kind])

    def queue_lengths(self) -> tuple[int, int, int, int]:
        """Return (prefill, decode, verify, fused) queue lengths now.

        Verify counts the verify bundles of the decode lane and the verify
        lane of split rounds; fused, the fused rounds (or draft iterations)
        waiting in the decode lane.
        """
        if self._incoming:
            self._take_arrived(self.env.now)
        return (
            len(self.prefill_q),
            len(self.decode_q[DECODE]),
            len(self.decode_q[VERIFY]) + len(self.verify_q),
            len(self.decode_q[FUSED]),
        )

    # -- configuration changes (planner) -------------------------------------
    def set_decode_lane(self, verify: Any, continuous: Any, microbatcher: Microbatcher) -> None:
        """Form decode-lane iterations from now on with these batching policies and microbatcher.

        A fused decode run is cut at its next boundary and an idle replica
        decides again now, so the next iteration follows the new limits.
        """
        self._step_lane = verify
        self._continuous_lane = continuous
        self._guard_kv = bool(getattr(verify, "reads_kv", False))
        self.microbatcher = microbatcher
        if self._run is not None:
            self._cut_run()
        if not self._busy:
            self._decide_at(self.env.now)

    def set_signal_window(self, size: int) -> None:
        """Keep the last ``size`` iterations and rounds for the k controller (0: none)."""
        if size <= 0:
            self.window = None
        elif self.window is None or self.window.size != size:
            self.window = ReplicaWindow(size)

    # -- scheduling ----------------------------------------------------------
    def _take_arrived(self, now_s: float) -> None:
        """Move the announced work that has arrived by ``now_s`` into its lane."""
        incoming = self._incoming
        while incoming and incoming[0][0] <= now_s:
            _ready_s, _seq, kind, req = heappop(incoming)
            self.decode_q[kind].append(req)

    def _decide_at(self, at_s: float) -> None:
        """Make sure the replica decides again (or cuts its decode run) by ``at_s``."""
        if at_s < self._decision_at:
            self._decision_at = at_s
            call_at(self.env, at_s, partial(self._on_decision_time, at_s), DECISION)

    def _on_decision_time(self, at_s: float) -> None:
        if at_s != self._decision_at:
            return  # superseded by an earlier decision
        self._decision_at = INF
        if not self._busy:
            self._decide()
        elif self._run is not None and self.prefill_q and len(self.holders) < self.max_running:
            self._cut_run()  # a prefill batch fell due during a decode run

    def _decide(self) -> None:
        """Start the next iteration(s), or arrange to decide again when work is due.

        Whole-round rules start one iteration at a time; under a lane rule the
        rule is asked again while the shared GPU may take another.
        """
        split = self._split
        while not self._busy and (split is None or split.can_start()):
            now = self.env.now
            if not self.always_available and not self.available(now):
                assert self.availability is not None
                self._decide_at(self.availability.next_available_s(now))
                return
            if self._incoming:
                self._take_arrived(now)
            work, wake_at = self.arbiter.choose(self)
            if work is None and self._incoming:
                wake_at = min(wake_at, self._incoming[0][0])
            if wake_at < INF:
                # Also while busy: a prefill batch falling due cuts a decode run.
                self._decide_at(wake_at)
            if work is None:
                return
            self._start(work)

    def _end_iteration(self) -> None:
        """The running iteration's results are applied: decide what comes next."""
        self._busy = False
        self._decide()

    def _start(self, work: Work) -> None:
        """Start the iteration an arbitration rule chose (it may only evict, under KV pressure)."""
        prefill, step, chunks = work
        if self._split is not None:
            if prefill is not None:
                self._launch(PREFILL, prefill)
            else:
                self._launch(*step)
        elif chunks is not None:
            self._start_mixed(step, chunks)
        elif prefill is not None:
            self._start_prefill(prefill)
        else:
            kind, batch = step
            if kind == DECODE:
                self._start_decode(batch)
            else:
                self._start_speculative(batch, kind)

    # -- what the lanes offer (see policies.arbitration.ReplicaLanes) --------
    def offer_prefill(self, limit: int | None = None) -> tuple[Any, float]:
        """The prefill lane's batch now (at most ``limit`` prompts), else ``None`` and a wake time."""
        if not self.prefill_q:
            return None, INF
        batch, wake_at = self._select_prefill(limit)
        if batch:
            return batch, INF
        return None, wake_at

    def offer_step(self, token_budget: int | None = None) -> tuple[Any, float]:
        """The decode lane's batch now (``(kind, requests)``), else ``None`` and a wake time.

        One kind per iteration: the kind whose item has been ready longest.
        With a ``token_budget`` (chunked prefill) the batch is cut to the items
        that fit it (at least one, so nothing starves), and only work of a
        model that chunks can ride with is offered (see
        :meth:`_kinds_beside_chunks`).
        """
        queues = self.decode_q
        kinds = [k for k in (DECODE, VERIFY, FUSED) if queues[k]]
        if token_budget is not None and len(kinds) > 0:
            kinds = self._kinds_beside_chunks(kinds)
        if not kinds:
            return None, INF
        if len(kinds) == 1:
            kind = kinds[0]
        else:
            kind = min(kinds, key=lambda k: min(r.ready_s for r in queues[k]))
        queue = queues[kind]
        # Deadlines (see policies/README.md): a verify bundle is due one TVT
        # after it was sent when its class has a TVT target; otherwise, and for
        # plain decode and fused rounds, the next token is due on the TPOT pace.
        if kind == DECODE:
            items = [
                QueuedItem(r.request_id, r.ready_s, next_token_due_s(r), r.context, 1)
                for r in queue
            ]
        else:
            by_tvt = kind == VERIFY
            items = [
                QueuedItem(
                    r.request_id,
                    r.ready_s,
                    r.round_sent_s + r.tvt_slo_s
                    if by_tvt and r.tvt_slo_s < INF
                    else next_token_due_s(r),
                    r.context,
                    r.k + 1,
                )
                for r in queue
            ]
        lane = self._step_lane if kind == VERIFY else self._continuous_lane
        if kind == VERIFY and self._guard_kv:
            items = self._with_kv(items)
        choice = lane.select(items, self.env.now)
        if choice.spill and kind == VERIFY:
            spilled_batch, wake_at = self._spill(queue, choice.take, choice.spill)
            if spilled_batch and token_budget is not None:
                spilled_batch = _within_budget(spilled_batch, token_budget)
            return ((VERIFY, spilled_batch), INF) if spilled_batch else (None, wake_at)
        if not choice.take:
            return None, INF if choice.wake_at_s is None else choice.wake_at_s
        take = choice.take
        if token_budget is not None:
            used = 0
            fits = 0
            for i in take:
                used += items[i].new_tokens
                if used > token_budget and fits:
                    break
                fits += 1
            take = take[:fits]
        return (kind, [queue[i] for i in take]), INF

    def _with_kv(self, items: list[QueuedItem]) -> list[QueuedItem]:
        """Verify items with the KV their step would add and the free KV (``reads_kv`` policies).

        With ``queue`` a request's KV, drafts included, was reserved at
        prefill: a verify step adds none. With ``preempt_recompute`` it adds
        its ``k + 1`` tokens at the verifier's KV per token.
        """
        per_token = self.kv_mb_per_token[VERIFY] if self.kv_policy == "preempt_recompute" else 0.0
        free_mb = self.kv.free_mb
        return [
            item._replace(kv_need_mb=item.new_tokens * per_token, kv_free_mb=free_mb)
            for item in items
        ]

    def _spill(
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
        batch = [queue[i] for i in take]
        window = self.costs.context_window(FUSED)
        k_max = self.context.k_max
        moved = False
        stay: list[RequestState] = []
        for req in [queue[i] for i in spill]:
            if req.prompt_tokens + req.output_tokens + k_max > window:
                stay.append(req)
                continue
            moved = True
            queue.remove(req)
            self.release(req)
            self.lifecycle.spill_to_fused(req)
            self.prefill_q.insert(0, (req, FUSED, req.arrival_s))
            self.context.tracer.event(
                self.env.now, "spill_fused", f"request {req.request_id}", f"replica {self.index}"
            )
        if not batch and not moved:
            batch = stay[: self._step_lane.limits.max_batch]
        return batch, self.env.now if not batch else INF

    def _kinds_beside_chunks(self, kinds: list[str]) -> list[str]:
        """Decode-lane kinds an iteration with prefill chunks may run (one model per pass).

        While a prompt's prefill is under way, only work of its model: its
        chunks ride on every iteration until it is done. Otherwise, when the
        prompt at the head of the prefill lane needs the other model (hybrid
        replicas hold the verifier and the fused model) and has waited longer
        than every item of that model's work, only work of its model, so that
        it can start; without this a stream of fused rounds would keep a
        verifier prompt waiting for as long as it lasts.
        """
        if self._chunking:
            model = _MODEL_OF[self._chunking[0][1]]
            return [k for k in kinds if _MODEL_OF[k] == model]
        if not self.prefill_q or len(self.holders) >= self.max_running:
            return kinds
        _req, head_kind, queued_s = self.prefill_q[0]
        model = _MODEL_OF[head_kind]
        others = [k for k in kinds if _MODEL_OF[k] != model]
        queues = self.decode_q
        if others and all(min(r.ready_s for r in queues[k]) > queued_s for k in others):
            return [k for k in kinds if _MODEL_OF[k] == model]
        return kinds

    def step_tokens(self, step: Any) -> int:
        """Tokens a decode-lane batch processes: 1 per plain decode, k + 1 per round."""
        kind, batch = step
        if kind == DECODE:
            return len(batch)
        return sum(req.k + 1 for req in batch)

    def offer_chunks(self, step: Any, token_budget: int) -> Any:
        """Prefill chunks filling ``token_budget`` tokens beside ``step`` (chunked prefill).

        Prompts already being prefilled continue first, then new ones join in
        arrival order while the running set has room and their KV fits (as in
        :meth:`_select_prefill`), at most the prefill lane's ``max_batch`` new
        ones per iteration. Chunks run the model of ``step`` (a replica runs
        one model per iteration). A prompt's first chunk holds at least the
        smallest context of its prefill LUT (or the whole prompt), so a chunk
        is never priced below the grid.
        """
        while self.prefill_q and (
            self.kv_need_mb(self.prefill_q[0][0], self.prefill_q[0][1]) > self.kv.capacity_mb + 1e-9
        ):
            self._reject_too_large(0)
        model = None if step is None else _MODEL_OF[step[0]]
        chunks: list[_Chunk] = []
        left = token_budget
        for req, kind in self._chunking:
            if left <= 0:
                break
            if model is not None and _MODEL_OF[kind] != model:
                continue
            model = _MODEL_OF[kind]
            tokens = min(left, req.context - req.prefilled)
            chunks.append((req, kind, tokens))
            left -= tokens
        slots = self.max_running - len(self.holders)
        free_mb = self.kv.free_mb
        if step is not None and self.kv_policy == "preempt_recompute":
            # Running requests grow first; new prompts take only what is left.
            kind, batch = step
            tokens = self.step_tokens(step) if kind != DECODE else len(batch)
            free_mb -= tokens * self.kv_mb_per_token[kind]
        for started, (req, kind, _queued_s) in enumerate(self.prefill_q):
            if left <= 0 or slots <= 0 or started >= self._chunk_starts:
                break
            if model is not None and _MODEL_OF[kind] != model:
                break
            need = self.kv_need_mb(req, kind)
            if need > free_mb + 1e-9:
                break
            cost = self.costs.prefill[kind]
            assert cost is not None
            first = min(req.context, int(cost.context_axis[0]))
            if left < first:
                break
            model = _MODEL_OF[kind]
            tokens = min(left, req.context)
            chunks.append((req, kind, tokens))
            left -= tokens
            free_mb -= need
            slots -= 1
        return chunks or None

    # -- what lane rules also ask (split rounds) ------------------------------
    def queue_length(self, lane: str) -> int:
        """Items waiting in ``lane``: ``prefill``, ``decode`` (every kind) or ``verify`` (split)."""
        if lane == PREFILL_LANE:
            return len(self.prefill_q)
        if lane == VERIFY_LANE:
            return len(self.verify_q)
        queues = self.decode_q
        return len(queues[DECODE]) + len(queues[VERIFY]) + len(queues[FUSED])

    def head_since_s(self, lane: str) -> float:
        """Since when the head of ``lane`` has waited (inf: the lane is empty)."""
        if lane == PREFILL_LANE:
            return self.prefill_q[0][2] if self.prefill_q else INF
        if lane == VERIFY_LANE:
            return self.verify_q[0].ready_s if self.verify_q else INF
        return min((q[0].ready_s for q in self.decode_q.values() if q), default=INF)

    def lane_idle(self, lane: str) -> bool:
        """Whether ``lane`` runs no iteration now."""
        split = self._split
        return not self._busy if split is None else split.active[lane] == 0

    def iterations_running(self) -> int:
        """Iterations under way on the replica's GPU."""
        split = self._split
        return int(self._busy) if split is None else split.gpu.running

    def batch_limit(self) -> int:
        """The decode and verify lanes' batch size (``scheduler.verify.batching.max_batch``)."""
        return int(self._continuous_lane.limits.max_batch)

    def offer_draft(self) -> Any:
        """Take the decode lane's batch for a draft iteration (``("draft", reqs)``), or ``None``."""
        queue = self.decode_q[FUSED]
        batch = self._select_split(queue)
        self.decode_q[FUSED] = self._without(queue, batch)
        return (DRAFT, batch) if batch else None

    def offer_verify(self) -> Any:
        """Take the verify lane's batch for a verify iteration (``("verify", reqs)``), or ``None``."""
        batch = self._select_split(self.verify_q)
        self.verify_q = self._without(self.verify_q, batch)
        return (VERIFY_PASS, batch) if batch else None

    def offer_round(self) -> Any:
        """Take the next request for an atomic round (``("round", [request])``): the pass first."""
        if self._pass_q:
            return ROUND, [self._pass_q.pop(0)]
        queue = self.decode_q[FUSED]
        return (ROUND, [queue.pop(0)]) if queue else None

    def pass_left(self) -> int:
        """Requests of the current pass still to run their round."""
        return len(self._pass_q)

    def start_pass(self, limit: int) -> int:
        """Move up to ``limit`` requests from the head of the decode lane into a pass."""
        queue = self.decode_q[FUSED]
        self._pass_q = queue[:limit]
        self.decode_q[FUSED] = queue[limit:]
        return len(self._pass_q)

    def _select_split(self, queue: list[RequestState]) -> list[RequestState]:
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

    def _launch(self, kind: str, batch: list[Any]) -> None:
        """Start a split iteration of ``kind`` over ``batch`` on the shared GPU.

        With ``preempt_recompute``, an iteration that ends a round (a verify
        or an atomic round) first makes KV room for the tokens it may commit,
        as a whole fused round does (see :meth:`_make_room`).
        """
        split = self._split
        assert split is not None
        now = self.env.now
        if kind in (ROUND, VERIFY_PASS) and self.kv_policy == "preempt_recompute":
            per_token = self.kv_mb_per_token[FUSED]
            batch = self._make_room(
                batch,
                FUSED,
                lambda members: len(members) * (max(r.k for r in members) + 1) * per_token,
            )
            if not batch:
                return  # its requests were evicted: the rule is asked again
        if kind == PREFILL:
            self._reserve_prefill_kv(batch, now)
        segments, energy_j = split.price(kind, batch)
        if not self._cool:
            gpu_s = sum(s for s, klass in segments if klass != HOST)
            throttled_s, energy_j = self._throttled(now, gpu_s, energy_j)
            scale = throttled_s / gpu_s
            segments = [(s if klass == HOST else s * scale, klass) for s, klass in segments]
        split.active[LANE_OF[kind]] += 1
        if self.context.tracing:
            ids = [(item[0] if kind == PREFILL else item).request_id for item in batch]
            self.context.tracer.event(
                now,
                f"lane_{kind}_start",
                f"replica {self.index}",
                "requests=" + ",".join(str(i) for i in ids),
            )
        split.gpu.start(segments, partial(self._finish_split, kind, batch, now, energy_j))

    def _finish_split(self, kind: str, batch: list[Any], start_s: float, energy_j: float) -> None:
        """A split iteration ended: account it, move its requests on, decide again."""
        split = self._split
        assert split is not None
        now = self.env.now
        split.active[LANE_OF[kind]] -= 1
        self.busy_s = split.gpu.busy_s
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

    # -- prefill -------------------------------------------------------------
    def kv_need_mb(self, req: RequestState, kind: str) -> float:
        """KV the request must hold to be prefilled (see ``scheduler.kv.on_full``)."""
        per_token = self.kv_mb_per_token[kind]
        if self.kv_policy == "queue":
            return (req.prompt_tokens + req.output_tokens + self.context.k_reserve) * per_token
        return (req.context + 1) * per_token

    def _select_prefill(
        self, limit: int | None = None
    ) -> tuple[list[tuple[RequestState, str]], float]:
        """Pick the prefill batch: FIFO prefix whose KV fits, then the lane policy.

        At most as many as the running set has free slots (and ``limit``); none
        while it is full (the next finish frees a slot and the replica decides
        again then).
        """
        slots = self.max_running - len(self.holders)
        if limit is not None:
            slots = min(slots, limit)
        if slots <= 0:
            return [], INF
        first_kind = self.prefill_q[0][1]
        first_model = FUSED if first_kind == FUSED else VERIFY
        budget = self.kv.free_mb
        eligible: list[int] = []
        for i, (req, kind, _) in enumerate(self.prefill_q):
            if (FUSED if kind == FUSED else VERIFY) != first_model:
                continue
            need = self.kv_need_mb(req, kind)
            if need > budget + 1e-9:
                if not eligible and need > self.kv.capacity_mb:
                    self._reject_too_large(i)
                    return self._select_prefill(limit) if self.prefill_q else ([], INF)
                break
            budget -= need
            eligible.append(i)
            if len(eligible) == slots:
                break
        if not eligible:
            return [], INF  # the head waits for running requests to free KV
        items = [
            QueuedItem(
                self.prefill_q[i][0].request_id,
                self.prefill_q[i][2],
                self.prefill_q[i][0].arrival_s + self.prefill_q[i][0].ttft_slo_s,
                0,
                self.prefill_q[i][0].context,
            )
            for i in eligible
        ]
        if self._predict_prefill:
            items = self._with_prefill_s(items, first_kind)
        choice = self._prefill_lane.select(items, self.env.now)
        if not choice.take:
            return [], choice.wake_at_s if choice.wake_at_s is not None else INF
        taken = [eligible[j] for j in choice.take]
        batch = [(self.prefill_q[i][0], self.prefill_q[i][1]) for i in taken]
        keep = set(taken)
        self.prefill_q = [entry for i, entry in enumerate(self.prefill_q) if i not in keep]
        return batch, INF

    def _with_prefill_s(self, items: list[QueuedItem], kind: str) -> list[QueuedItem]:
        """Prefill items with the predicted time of the batch up to each (``predicts_ttft``)."""
        out: list[QueuedItem] = []
        context = 0
        for n, item in enumerate(items, start=1):
            context += item.new_tokens
            out.append(item._replace(prefill_s=self.prefill_time_s(kind, context / n, n)))
        return out

    def prefill_time_s(self, kind: str, mean_context: float, n: int) -> float:
        """LUT time of a prefill batch of ``n`` prompts of ``mean_context`` tokens (unthrottled)."""
        cost = self.costs.prefill[kind]
        assert cost is not None
        return cost.at(mean_context, n, 1)[0]

    def _reject_too_large(self, position: int) -> None:
        req, _kind, _ = self.prefill_q.pop(position)
        self.lifecycle.reject_on_replica(req, "kv_capacity")

    def _reserve_prefill_kv(self, batch: list[tuple[RequestState, str]], now_s: float) -> None:
        """Allocate the KV of a prefill batch's requests; they hold it until they finish."""
        for req, kind in batch:
            need = self.kv_need_mb(req, kind)
            self.kv.allocate(need, now_s)
            req.kv_mb = need
            req.kv_peak_mb = max(req.kv_peak_mb, need)
            if req not in self.holders:
                self.holders.append(req)

    def _start_prefill(self, batch: list[tuple[RequestState, str]]) -> None:
        now = self.env.now
        kind = batch[0][1]
        cost = self.costs.prefill[kind]
        assert cost is not None
        n = len(batch)
        mean_context = sum(req.context for req, _ in batch) / n
        self._reserve_prefill_kv(batch, now)
        latency_s, energy_j = self._throttled(now, *cost.at(mean_context, n, 1))
        if self.context.tracing:
            self.context.tracer.event(
                now, "prefill_start", f"replica {self.index}", f"n={n} context={mean_context:.1f}"
            )
            self.context.tracer.span(
                Span(
                    "replica",
                    f"{self.pool}/{self.index}",
                    "prefill",
                    "prefill",
                    now,
                    latency_s,
                    tuple(req.request_id for req, _ in batch),
                    sum(req.context for req, _ in batch),
                )
            )
        self._busy = True
        call_at(
            self.env,
            now + latency_s,
            partial(self._end_prefill, batch, latency_s, energy_j),
            DECISION,
        )

    def _end_prefill(
        self, batch: list[tuple[RequestState, str]], latency_s: float, energy_j: float
    ) -> None:
        self._account(latency_s, energy_j, [req for req, _ in batch])
        for req, kind in batch:
            self.lifecycle.on_prefilled(req, kind)
        self._end_iteration()

    # -- decode lane ---------------------------------------------------------
    def _account(self, latency_s: float, energy_j: float, reqs: list[RequestState]) -> None:
        self.busy_s += latency_s
        self.energy_j += energy_j
        self.iterations += 1
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share

    def _start_decode(self, batch: list[RequestState]) -> None:
        """Plain decode iterations; a run of them with an unchanged batch in one event."""
        start = self.env.now
        cost = self.costs.step[DECODE]
        assert cost is not None
        per_token = self.kv_mb_per_token[DECODE]
        if self.kv_policy == "preempt_recompute":
            batch = self._make_room(batch, DECODE, lambda members: len(members) * per_token)
            if not batch:
                return
        n = len(batch)
        run = self._plan_decode(batch, start, cost)
        if self.kv_policy == "preempt_recompute" and per_token > 0:
            fits = int(self.kv.free_mb // (n * per_token))
            if fits < run.planned:
                run.planned = fits
        self._run = run
        self._busy = True
        self._schedule_run_end(run)

    def _plan_decode(self, batch: list[RequestState], start: float, cost: PhaseCost) -> _DecodeRun:
        """Price the decode run starting now: one iteration, or a fused run of them.

        A run is fused only when stepping would run the same batch again at
        every boundary: the batch is the whole decode queue and one
        microbatch. It ends at the first finish, before an iteration that
        would start throttled or after the replica becomes unavailable.
        """
        n = len(batch)
        fuse = (
            self.context.fuse_iterations
            and not self._chunking
            and n == len(self.decode_q[DECODE])
            and (self.microbatcher.whole_batches or self.microbatcher.groups_once(batch))
        )
        heat = self.heat
        factor = heat.fixed_factor if heat.constant else heat.factor(start)
        if not fuse:
            latency_s, energy_j, _groups = self.microbatcher.price(cost, batch, False)
            return _DecodeRun(batch, start, [start + latency_s / factor], [energy_j / factor])
        iterations = min(req.remaining for req in batch)
        context = sum(req.context for req in batch) / n
        elapsed_s, energies = cost.curve(n, 1).cumulative_steps(context, iterations)
        if factor != 1.0:
            elapsed_s = [e / factor for e in elapsed_s]
            energies = [e / factor for e in energies]
        elif not self.heat.constant:
            iterations = self.heat.cool_steps(start, elapsed_s)
        if not self.always_available and self.availability is not None:
            closes_in_s = self.availability.next_unavailable_s(start) - start
            # Iterations starting before the window closes still run.
            iterations = min(iterations, 1 + bisect_left(elapsed_s, closes_in_s))
        if iterations < len(elapsed_s):
            elapsed_s = elapsed_s[:iterations]
            energies = energies[:iterations]
        return _DecodeRun(batch, start, [start + e for e in elapsed_s], energies)

    def _schedule_run_end(self, run: _DecodeRun) -> None:
        planned = run.planned
        call_at(
            self.env,
            run.boundaries_s[planned - 1],
            partial(self._end_decode, run, planned),
            DECISION,
        )

    def _cut_run(self) -> None:
        """End the decode run at its next iteration boundary (work is waiting)."""
        run = self._run
        assert run is not None
        done = min(run.planned, bisect_left(run.boundaries_s, self.env.now) + 1)
        if done < run.planned:
            run.planned = done
            self._schedule_run_end(run)

    def _end_decode(self, run: _DecodeRun, done: int) -> None:
        if run is not self._run or done != run.planned:
            return  # the run was cut: an earlier end replaced this one
        self._run = None
        batch = run.batch
        n = len(batch)
        energy_j = run.energies_j[done - 1]
        elapsed_s = run.boundaries_s[done - 1] - run.start_s
        if not self.heat.constant:
            self.heat.book(run.start_s, elapsed_s)
        self.busy_s += elapsed_s
        self.energy_j += energy_j
        self.iterations += done
        share = energy_j / n
        for req in batch:
            req.target_energy_j += share
        window = self.window
        if window is not None:
            boundaries = run.boundaries_s
            for i in range(max(0, done - window.size), done):
                window.add_iteration(boundaries[i] - (boundaries[i - 1] if i else run.start_s))
        if self.context.tracing:
            self.context.tracer.event(
                self.env.now, "decode", f"replica {self.index}", f"n={n} iterations={done}"
            )
            self.context.tracer.span(
                Span(
                    "replica",
                    f"{self.pool}/{self.index}",
                    "decode",
                    DECODE,
                    run.start_s,
                    elapsed_s,
                    tuple(req.request_id for req in batch),
                    n * done,
                    0,
                    done,
                )
            )
        self._apply_decode(batch, done)
        self._end_iteration()

    def _apply_decode(self, batch: list[RequestState], done: int) -> None:
        """Commit ``done`` plain decode tokens to each request; finish the ones that are done."""
        per_token = self.kv_mb_per_token[DECODE]
        grow = self.kv_policy == "preempt_recompute"
        now = self.env.now
        self.tokens_out += done * len(batch)
        for req in batch:
            req.generated += done
            req.ready_s = now
            if grow:
                self.kv.allocate(done * per_token, now)
                req.kv_mb += done * per_token
                req.kv_peak_mb = max(req.kv_peak_mb, req.kv_mb)
        finished = [req for req in batch if req.remaining <= 0]
        if finished:
            queue = self.decode_q[DECODE]
            gone = {id(req) for req in finished}
            self.decode_q[DECODE] = [req for req in queue if id(req) not in gone]
            for req in finished:
                self.release(req)
                self.lifecycle.on_finished_server(req, now)

    def _take_speculative(self, batch: list[RequestState], kind: str) -> list[RequestState]:
        """Take a verify or fused batch out of its queue, making KV room for it if needed."""
        queue = self.decode_q[kind]
        if len(batch) == len(queue):
            self.decode_q[kind] = []
        else:
            gone = {id(req) for req in batch}
            self.decode_q[kind] = [req for req in queue if id(req) not in gone]
        if self.kv_policy == "preempt_recompute":
            per_token = self.kv_mb_per_token[kind]
            batch = self._make_room(
                batch,
                kind,
                lambda members: len(members) * (max(r.k for r in members) + 1) * per_token,
            )
        return batch

    def _start_speculative(self, batch: list[RequestState], kind: str) -> None:
        """One verify (distributed) or fused draft+verify iteration."""
        now = self.env.now
        cost = self.costs.step[kind]
        assert cost is not None
        batch = self._take_speculative(batch, kind)
        if not batch:
            return
        n = len(batch)
        if self.microbatcher.whole_batches:
            k = max(req.k for req in batch) if n > 1 else batch[0].k
            if k == 0:  # nothing drafted: a plain decode step of the target
                plain = self.costs.step[DECODE]
                assert plain is not None
                cost, k = plain, 1
            latency_s, energy_j = cost.at(sum(req.context for req in batch) / n, n, k)
            groups = 1
        else:
            latency_s, energy_j, groups = self.microbatcher.price(
                cost, batch, True, self.costs.step[DECODE]
            )
        if not self._cool:
            latency_s, energy_j = self._throttled(now, latency_s, energy_j)
        if self.context.tracing:
            fanout = max(req.k for req in batch)
            self.context.tracer.event(
                now,
                f"{kind}_start",
                f"replica {self.index}",
                f"n={n} k={fanout}" + (f" microbatches={groups}" if groups > 1 else ""),
            )
            self.context.tracer.span(
                Span(
                    "replica",
                    f"{self.pool}/{self.index}",
                    "decode",
                    kind,
                    now,
                    latency_s,
                    tuple(req.request_id for req in batch),
                    sum(req.k + 1 for req in batch),
                    fanout,
                )
            )
        self._busy = True
        call_at(
            self.env,
            now + latency_s,
            partial(self._end_speculative, batch, kind, latency_s, energy_j),
            DECISION,
        )

    def _end_speculative(
        self, batch: list[RequestState], kind: str, latency_s: float, energy_j: float
    ) -> None:
        self._account(latency_s, energy_j, batch)
        if self.window is not None:
            self._remember(batch, kind, latency_s)
        self._apply_speculative(batch, kind)
        self._end_iteration()

    def _remember(self, batch: list[RequestState], kind: str, latency_s: float) -> None:
        """Put a decode-lane iteration ending now into the controller's window."""
        window = self.window
        assert window is not None
        window.add_iteration(latency_s)
        if kind != DECODE:
            window.last_step_s = latency_s
            start_s = self.env.now - latency_s
            window.add_waits([start_s - req.ready_s for req in batch])

    def _apply_speculative(self, batch: list[RequestState], kind: str) -> None:
        """Commit each request's verified round; send, finish or requeue it."""
        lifecycle = self.lifecycle
        now = self.env.now
        per_token = self.kv_mb_per_token[kind]
        grow = self.kv_policy == "preempt_recompute"
        for req in batch:
            gained = lifecycle.verify_round(req)
            if grow:
                self.kv.allocate(gained * per_token, now)
                req.kv_mb += gained * per_token
                req.kv_peak_mb = max(req.kv_peak_mb, req.kv_mb)
            if kind == VERIFY:
                if req.remaining <= 0:
                    self.release(req)
                lifecycle.on_verified(req, gained, now)
            elif req.remaining <= 0:
                self.release(req)
                lifecycle.on_finished_server(req, now)
            else:
                self.enqueue_step(req, FUSED)

    # -- chunked prefill: mixed iterations -------------------------------------
    def _start_mixed(self, step: _Step | None, chunks: list[_Chunk]) -> None:
        """One iteration of decode-lane work (if any) with prefill chunks riding on it."""
        now = self.env.now
        starting = [(req, kind) for req, kind, _tokens in chunks if req.prefilled == 0]
        if starting:
            new = {id(req) for req, _kind in starting}
            self.prefill_q = [entry for entry in self.prefill_q if id(entry[0]) not in new]
            for req, kind in starting:
                need = self.kv_need_mb(req, kind)
                self.kv.allocate(need, now)
                req.kv_mb = need
                req.kv_peak_mb = max(req.kv_peak_mb, need)
                self.holders.append(req)
                self._chunking.append((req, kind))
        kind = ""
        batch: list[RequestState] = []
        latency_s, energy_j = self._chunk_cost(chunks)
        if step is not None:
            kind, batch = step
            if kind != DECODE:
                batch = self._take_speculative(batch, kind)
            elif self.kv_policy == "preempt_recompute":
                per_token = self.kv_mb_per_token[DECODE]
                batch = self._make_room(batch, DECODE, lambda members: len(members) * per_token)
        if batch:
            cost = self.costs.step[kind]
            assert cost is not None
            step_s, step_j, _groups = self.microbatcher.price(
                cost, batch, kind != DECODE, self.costs.step[DECODE]
            )
            # The chunks' pass already reads the weights: decode-lane work adds what it
            # costs beyond a batch-1 pass at the grid's shortest context.
            base_s, base_j = cost.at(cost.context_axis[0], 1, 1)
            latency_s = max(latency_s + step_s - base_s, latency_s, step_s)
            energy_j = max(energy_j + step_j - base_j, energy_j, step_j)
        latency_s, energy_j = self._throttled(now, latency_s, energy_j)
        if self.context.tracing:
            tokens = sum(c for _r, _k, c in chunks)
            self.context.tracer.event(
                now,
                "mixed_start",
                f"replica {self.index}",
                f"{kind or 'prefill'} n={len(batch)} chunks={len(chunks)} chunk_tokens={tokens}",
            )
            step_tokens = self.step_tokens((kind, batch)) if batch else 0
            self.context.tracer.span(
                Span(
                    "replica",
                    f"{self.pool}/{self.index}",
                    "decode",
                    "mixed",
                    now,
                    latency_s,
                    tuple(req.request_id for req in batch)
                    + tuple(req.request_id for req, _k, _c in chunks),
                    tokens + step_tokens,
                    max((req.k for req in batch), default=0) if kind != DECODE else 0,
                )
            )
        self._busy = True
        call_at(
            self.env,
            now + latency_s,
            partial(self._end_mixed, kind, batch, chunks, latency_s, energy_j),
            DECISION,
        )

    def _chunk_cost(self, chunks: list[_Chunk]) -> tuple[float, float]:
        """Latency and energy of prefill chunks in one pass.

        Prompts prefilled whole in this chunk are priced together as a prefill
        batch (as without chunking); a chunk of ``c`` tokens continuing ``p``
        already computed costs ``F(p + c) - F(p)``, with ``F(L)`` the LUT's
        batch-1 prefill of ``L`` tokens: the extra attention over the prefix
        is included, fixed per-pass costs cancel.
        """
        whole = [
            (req, kind)
            for req, kind, tokens in chunks
            if req.prefilled == 0 and tokens == req.context
        ]
        latency_s = 0.0
        energy_j = 0.0
        if whole:
            cost = self.costs.prefill[whole[0][1]]
            assert cost is not None
            latency_s, energy_j = cost.at(
                sum(req.context for req, _ in whole) / len(whole), len(whole), 1
            )
        for req, kind, tokens in chunks:
            if req.prefilled == 0 and tokens == req.context:
                continue
            cost = self.costs.prefill[kind]
            assert cost is not None
            end_s, end_j = cost.at(req.prefilled + tokens, 1, 1)
            if req.prefilled > 0:
                done_s, done_j = cost.at(req.prefilled, 1, 1)
                end_s -= done_s
                end_j -= done_j
            latency_s += end_s
            energy_j += end_j
        return latency_s, energy_j

    def _end_mixed(
        self,
        kind: str,
        batch: list[RequestState],
        chunks: list[_Chunk],
        latency_s: float,
        energy_j: float,
    ) -> None:
        self._account(latency_s, energy_j, batch + [req for req, _kind, _tokens in chunks])
        if batch and self.window is not None:
            self._remember(batch, kind, latency_s)
        if batch:
            if kind == DECODE:
                self._apply_decode(batch, 1)
            else:
                self._apply_speculative(batch, kind)
        for req, chunk_kind, tokens in chunks:
            req.prefilled += tokens
            if req.prefilled >= req.context:
                req.prefilled = 0
                self._chunking.remove((req, chunk_kind))
                self.lifecycle.on_prefilled(req, chunk_kind)
        self._end_iteration()

    def _throttled(self, start_s: float, latency_s: float, energy_j: float) -> tuple[float, float]:
        """Apply the thermal factor to an iteration starting now and count it toward the onset."""
        heat = self.heat
        if heat.constant:
            factor = heat.fixed_factor
            if factor != 1.0:
                latency_s /= factor
                energy_j /= factor
            return latency_s, energy_j
        factor = heat.factor(start_s)
        if factor != 1.0:
            latency_s /= factor
            energy_j /= factor
        self.heat.book(start_s, latency_s)
        return latency_s, energy_j

    # -- KV ------------------------------------------------------------------
    def finish(self, req: RequestState) -> None:
        """Release a request that ended outside an iteration; an idle replica may admit another."""
        self.release(req)
        if not self._busy and self.prefill_q:
            self._decide_at(self.env.now)

    def release(self, req: RequestState) -> None:
        """Free a request's KV (at completion or eviction)."""
        if req.kv_mb > 0:
            self.kv.free(req.kv_mb, self.env.now)
            req.kv_mb = 0.0
        if req in self.holders:
            self.holders.remove(req)

    def _make_room(
        self,
        batch: list[RequestState],
        kind: str,
        need_mb: Callable[[list[RequestState]], float],
    ) -> list[RequestState]:
        """Evict requests until the batch's next iteration fits in KV (``preempt_recompute``).

        As vLLM does when a running sequence cannot grow, the most recently
        admitted request goes first, whether it waits in the decode lane or
        belongs to the batch; the oldest requests keep running, so the
        replica always makes progress. Each victim frees its KV and goes to
        the head of the prefill lane to recompute its context. Returns what
        is left of the batch (empty when not even its oldest member fits).
        """
        batch = list(batch)
        while batch and not self.kv.fits(need_mb(batch)):
            victim, victim_kind = self._newest_evictable(batch, kind)
            if any(member is victim for member in batch):
                batch = [member for member in batch if member is not victim]
            self._evict(victim, victim_kind)
        return batch

    def _newest_evictable(self, batch: list[RequestState], kind: str) -> tuple[RequestState, str]:
        """The most recently admitted request in the batch or waiting in a lane.

        Under a lane rule the verify lane and the current pass hold fused
        requests waiting too; requests of an iteration under way are never
        evicted.
        """
        in_batch = {id(req) for req in batch}
        queued = {id(req): lane for lane, queue in self.decode_q.items() for req in queue}
        for req in self.verify_q:
            queued[id(req)] = FUSED
        for req in self._pass_q:
            queued[id(req)] = FUSED
        for req in reversed(self.holders):
            if id(req) in in_batch:
                return req, kind
            if id(req) in queued:
                return req, queued[id(req)]
        raise AssertionError("a batch member holds no KV")

    def _evict(self, victim: RequestState, kind: str) -> None:
        """Free the victim's KV and queue it, first in line, to recompute its prefill."""
        queue = self.decode_q[kind]
        if victim in queue:
            queue.remove(victim)
        elif victim in self.verify_q:
            self.verify_q.remove(victim)  # its drafts are dropped with its KV
        elif victim in self._pass_q:
            self._pass_q.remove(victim)
        self.release(victim)
        victim.preemptions += 1
        self.prefill_q.insert(0, (victim, kind, victim.arrival_s))
        self.context.tracer.event(
            self.env.now, "preempt", f"request {victim.request_id}", f"replica {self.index}"
        )
