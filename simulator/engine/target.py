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

The replica is an entity: its queues (prefill lane, decode lane by kind of
work, verify lane and pass of split rounds, announced arrivals), its
counters, its decision loop and the answers its arbitration rule asks for
(:class:`~policies.arbitration.ReplicaLanes`). Its mechanisms are objects of
their own, each seeing the replica through
:class:`~simulator.engine.replica_view.ReplicaView`:

- :mod:`~simulator.engine.replica_kv`: the KV policy (``scheduler.kv.on_full``):
  what a request holds, making room, evicting, spilling to fused mode.
- :mod:`~simulator.engine.prefill`: the prefill batch and whole-prompt prefill
  iterations.
- :mod:`~simulator.engine.decode_runs`: plain decode iterations, a run of them
  with an unchanged batch in one event (``simulation.fuse_iterations``).
- :mod:`~simulator.engine.verify_rounds`: verify and whole fused iterations.
- :mod:`~simulator.engine.mixed`: chunked prefill's mixed iterations.
- :mod:`~simulator.engine.split_iterations`: split rounds under lane rules.

Thermal throttling (:mod:`simulator.engine.heat`) slows a replica's
iterations as it does a draft device's. Availability windows: outside them a
replica starts no iteration (an iteration under way finishes), its requests
keep their KV and wait, and routing sends new requests to available
replicas when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from heapq import heappop, heappush
from typing import Any

import simpy

from policies.arbitration import Work
from policies.base import promised_by_method
from policies.lanes import DECODE, FUSED, PREFILL_LANE, PREFILL_PASS, VERIFY, VERIFY_LANE
from policies.views import QueuedItem
from simulator.devices.model import Availability
from simulator.engine.clock import DECISION, call_at
from simulator.engine.decode_runs import DecodeRuns
from simulator.engine.gpu_share import GpuTime
from simulator.engine.heat import Heat
from simulator.engine.kv import KvPool
from simulator.engine.lifecycle import ServerContext
from simulator.engine.microbatch import Microbatcher
from simulator.engine.mixed import MixedIterations, step_tokens
from simulator.engine.prefill import PrefillLane
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import PrefillEntry
from simulator.engine.request_state import RequestState, next_token_due_s
from simulator.engine.runtime import ReplicaPlan
from simulator.engine.signals import ReplicaWindow
from simulator.engine.split_iterations import SplitIterations
from simulator.engine.split_rounds import SplitRounds
from simulator.engine.step_noise import replica_noise
from simulator.engine.verify_rounds import VerifyRounds

INF = float("inf")


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
        self.speculation = context.speculation
        self.env: simpy.Environment = context.env
        self.kv_policy = context.kv_policy
        self.index = index
        self.pool = plan.pool
        self.gpus = plan.gpus
        self.state = SERVING
        """Its planner state: :data:`LOADING`, :data:`SERVING`, :data:`DRAINING` or :data:`RETIRED`."""
        self.plan = plan
        self.role = plan.role
        self.serves = plan.serves
        """``colocated``, or ``prefill``/``decode`` in a disaggregated fleet."""
        """The requests routing sends it: ``both``, ``draft`` (fused) or ``verify`` (bundles)."""
        self.ready_s = -INF
        """When a replica a planner added takes work (``-inf``: from the start)."""
        self.costs = plan.costs
        self.kv = KvPool(plan.kv_capacity_mb)
        self.kv_mb_per_token: Mapping[str, float] = plan.kv_mb_per_token
        self.fused_acceptance = plan.fused_acceptance
        thermal = plan.thermal
        availability: Availability | None = plan.availability
        self.prefill_q: list[PrefillEntry] = []
        self.decode_q: dict[str, list[RequestState]] = {DECODE: [], VERIFY: [], FUSED: []}
        self.holders: list[RequestState] = []
        self.outstanding = 0
        self.pending_prefill_s = 0.0
        """Predicted batch-1 prefill time of the requests admitted to it and not yet
        prefilled (kept by the engine only for admission policies that predict TTFT)."""
        self.busy_s = 0.0
        self.gpu_time: GpuTime | None = None
        """A lane replica's shared-GPU clocks (``None``: its iterations are not split;
        zeros until a lane replica's first iteration)."""
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
        self.busy = False
        """Whether a whole-round iteration runs now."""
        self._decision_at = INF
        self.step_lane: Any = context.lanes["verify"]
        """The verify lane's batching policy (verify bundles)."""
        self.continuous_lane: Any = context.lanes["continuous"]
        """The batching policy of plain decode, fused rounds and split iterations."""
        self.max_running = context.max_running
        self._guard_kv = bool(self.step_lane.reads_kv)
        """Whether verify items carry their KV need and the free KV (``kv_aware_edf``)."""
        self.arbiter = context.new_arbiter()
        self._idle_when_empty = promised_by_method(type(self.arbiter), "idle_when_empty", "choose")
        """With every lane empty the rule would choose nothing: :meth:`decide` skips it."""
        self._watch_verify = bool(self.arbiter.verify_lane)
        """The k controller's queue depth is the verify lane's (else the decode lane's)."""
        self.verify_q: list[RequestState] = []
        """The verify lane of split rounds: requests whose drafts wait for their verify."""
        self.pass_q: list[RequestState] = []
        """Requests of the current pass still to run their round (``pdv_unified``)."""
        self.chunking: list[tuple[RequestState, str]] = []
        """Prompts whose chunked prefill is under way, with their decode-lane kind."""
        self.microbatcher = context.microbatcher
        self.tail_weight: Mapping[str, float] = context.step_timing.tail_weights()
        """Weight of the longest context in a decode-lane batch's priced context, by kind."""
        self.noise = replica_noise(context.step_timing, context.streams, index)
        """Its step-time noise (``None``: off)."""
        self.heat = Heat(thermal)
        self.cool = thermal is None
        """Never throttled: iterations skip the thermal bookkeeping."""
        self.availability = availability
        self.always_available = (
            availability is None or availability.kind == "always" or not availability.windows
        )
        self._available_until_s = -INF
        """Available up to here (found by :meth:`available`; ``-inf``: not looked up yet)."""
        self.window = ReplicaWindow(context.signal_window) if context.signal_window > 0 else None
        """Recent iterations and rounds for the k controller (``None``: not kept)."""
        self.kv_rule = ReplicaKv(self, self.kv)
        self.kv_rule.evicts_away = self.kv_rule.grows and not self.arbiter.splits_rounds
        """Its KV policy (``scheduler.kv.on_full``)."""
        self.prefill = PrefillLane(self, self.kv_rule)
        self.decode_runs = DecodeRuns(self, self.kv_rule)
        self.rounds = VerifyRounds(self, self.kv_rule)
        self.mixed = MixedIterations(
            self, self.kv_rule, self.prefill, self.decode_runs, self.rounds
        )
        self.split: SplitRounds | None = None
        """The GPU shared by split iterations (``None``: the rule runs whole rounds)."""
        if self.arbiter.splits_rounds:
            assert plan.lane_costs is not None, "a lane rule needs the split costs of a round"
            prefill = plan.costs.prefill[FUSED]
            assert prefill is not None
            self.split = SplitRounds(
                self.env, context.split_lanes, plan.lane_costs, prefill, self.tail_weight
            )
            # A lane replica that never runs an iteration still counts, idle, in
            # gpu_kernel_active and gpu_work_rate.
            self.gpu_time = GpuTime(0.0, 0.0, 0.0)
        self.split_iterations = SplitIterations(self, self.kv_rule, self.rounds, self.split)

    # -- entry points ------------------------------------------------------
    def enqueue_prefill(self, req: RequestState, kind: str) -> None:
        """A prompt has arrived: queue it for prefill (``kind``: its decode-lane work)."""
        now = self.env._now
        self.prefill_q.append((req, kind, now))
        if self.context.tracing:
            self.context.tracer.event(
                now, "prefill_queued", f"request {req.request_id}", f"replica {self.index}"
            )
        if not self.busy:
            self._decide_at(now)
        elif self.decode_runs.run is not None and len(self.holders) < self.max_running:
            self.decode_runs.cut()

    @property
    def running(self) -> int:
        """Requests prefilled (or being prefilled) and not finished: they hold KV."""
        return len(self.holders)

    def available(self, now_s: float) -> bool:
        """Whether the replica is inside an availability window at ``now_s``.

        Once found available, it is so until the window's end (its next
        unavailable time, kept): a planner's replica that finished loading
        stays available for the rest of the run without a lookup per decision.
        """
        if self.always_available or now_s < self._available_until_s:
            return True
        availability = self.availability
        if availability is None:
            return True
        if availability.is_available(now_s):
            self._available_until_s = availability.next_unavailable_s(now_s)
            return True
        return False

    def enqueue_step(self, req: RequestState, kind: str, ready_s: float | None = None) -> None:
        """A request is ready for its next decode-lane iteration at ``ready_s`` (default now).

        A later ``ready_s`` announces work still on its way (a bundle crossing
        the network): it joins the lane at that time.
        """
        now = self.env._now
        if ready_s is not None and ready_s > now:
            req.ready_s = ready_s
            heappush(self._incoming, (ready_s, self._incoming_seq, kind, req))
            self._incoming_seq += 1
            if not self.busy:
                self._decide_at(ready_s)
            return
        if self._incoming:
            self._take_arrived(now)
        if kind == FUSED:
            self.speculation.choose_k(req)
        req.ready_s = now
        parked = self.kv_rule.parked
        if parked and req.request_id in parked:
            self.kv_rule.recompute_parked(req, kind)
        else:
            self.decode_q[kind].append(req)
        if not self.busy:
            self._decide_at(now)

    def hold(self, req: RequestState, kind: str) -> None:
        """Take a request that is already past prefill (a what-if window's start).

        It holds the KV a run's request holds between its iterations
        (:meth:`ReplicaKv.held_mb`: its context with ``preempt_recompute``,
        not the prefill's reserve of one token more).
        """
        need = self.kv_rule.held_mb(req, kind)
        self.kv.allocate(need, self.env._now)
        req.kv_mb = need
        req.kv_peak_mb = need
        self.holders.append(req)

    def can_hold(self, req: RequestState, kind: str) -> bool:
        """Whether the KV :meth:`hold` would take fits now."""
        return self.kv.fits(self.kv_rule.held_mb(req, kind))

    def take_over(self, req: RequestState, kind: str) -> None:
        """Reserve the KV of a request a prefill replica hands over (see ``kv_transfer``)."""
        need = self.kv_rule.held_mb(req, kind)
        self.kv.allocate(need, self.env._now)
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
            self._take_arrived(self.env._now)
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
            self._take_arrived(self.env._now)
        return (
            len(self.prefill_q),
            len(self.decode_q[DECODE]),
            len(self.decode_q[VERIFY]) + len(self.verify_q),
            len(self.decode_q[FUSED]),
        )

    # -- KV (the engine's questions; see simulator.engine.replica_kv) ----------
    def kv_need_mb(self, req: RequestState, kind: str) -> float:
        """KV the request must hold to be prefilled (see ``scheduler.kv.on_full``)."""
        return self.kv_rule.need_mb(req, kind)

    def kv_ever_fits(self, req: RequestState, kind: str) -> bool:
        """Whether the request could run to its end here alone (see :meth:`ReplicaKv.ever_fits`)."""
        return self.kv_rule.ever_fits(req, kind)

    def release(self, req: RequestState) -> None:
        """Free a request's KV (at completion or eviction)."""
        self.kv_rule.release(req)

    def finish(self, req: RequestState) -> None:
        """Release a request that ended outside an iteration; an idle replica may admit another."""
        self.kv_rule.release(req)
        if not self.busy and self.prefill_q:
            self._decide_at(self.env._now)

    def prefill_time_s(self, kind: str, mean_context: float, n: int) -> float:
        """LUT time of a prefill batch of ``n`` prompts of ``mean_context`` tokens (unthrottled)."""
        return self.prefill.time_s(kind, mean_context, n)

    # -- configuration changes (planner) -------------------------------------
    def set_decode_lane(self, verify: Any, continuous: Any, microbatcher: Microbatcher) -> None:
        """Form decode-lane iterations from now on with these batching policies and microbatcher.

        A fused decode run is cut at its next boundary and an idle replica
        decides again now, so the next iteration follows the new limits.
        """
        self.step_lane = verify
        self.continuous_lane = continuous
        self._guard_kv = bool(verify.reads_kv)
        self.microbatcher = microbatcher
        if self.decode_runs.run is not None:
            self.decode_runs.cut()
        if not self.busy:
            self._decide_at(self.env._now)

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
        parked = self.kv_rule.parked
        while incoming and incoming[0][0] <= now_s:
            _ready_s, _seq, kind, req = heappop(incoming)
            if parked and req.request_id in parked:
                self.kv_rule.recompute_parked(req, kind)
            else:
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
        if not self.busy:
            self.decide()
        elif (
            self.decode_runs.run is not None
            and self.prefill_q
            and len(self.holders) < self.max_running
        ):
            self.decode_runs.cut()  # a prefill batch fell due during a decode run

    def decide(self) -> None:
        """Start the next iteration(s), or arrange to decide again when work is due.

        Whole-round rules start one iteration at a time; under a lane rule the
        rule is asked again while the shared GPU may take another.
        """
        split = self.split
        while not self.busy and (split is None or split.can_start()):
            now = self.env._now
            if not self.always_available and not self.available(now):
                assert self.availability is not None
                self._decide_at(self.availability.next_available_s(now))
                return
            if self._incoming:
                self._take_arrived(now)
            queues = self.decode_q
            if (  # nothing to choose from: wait for the work announced (most idle replicas)
                self._idle_when_empty
                and not self.prefill_q
                and not self.chunking
                and not queues[DECODE]
                and not queues[VERIFY]
                and not queues[FUSED]
            ):
                if self._incoming:
                    self._decide_at(self._incoming[0][0])
                return
            work, wake_at = self.arbiter.choose(self)
            if work is None and self._incoming:
                wake_at = min(wake_at, self._incoming[0][0])
            if wake_at < INF:
                # Also while busy: a prefill batch falling due cuts a decode run.
                self._decide_at(wake_at)
            if work is None:
                return
            self._start(work)

    def end_iteration(self) -> None:
        """The running iteration's results are applied: decide what comes next."""
        self.busy = False
        self.decide()

    def _start(self, work: Work) -> None:
        """Start the iteration an arbitration rule chose (it may only evict, under KV pressure)."""
        prefill, step, chunks = work
        if self.split is not None:
            if prefill is not None:
                self.split_iterations.launch(PREFILL_PASS, prefill)
            else:
                self.split_iterations.launch(*step)
        elif chunks is not None:
            self.mixed.start(step, chunks)
        elif prefill is not None:
            self.prefill.start(prefill)
        else:
            kind, batch = step
            if kind == DECODE:
                self.decode_runs.start(batch)
            else:
                self.rounds.start(batch, kind)

    # -- accounting (what the mechanisms report) -----------------------------
    def account(self, latency_s: float, energy_j: float, reqs: list[RequestState]) -> None:
        """Count one iteration's time and energy, sharing the energy among ``reqs``."""
        self.busy_s += latency_s
        self.energy_j += energy_j
        self.iterations += 1
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share

    def account_run(
        self, elapsed_s: float, energy_j: float, iterations: int, reqs: list[RequestState]
    ) -> None:
        """Count a decode run of ``iterations`` iterations over ``reqs``."""
        self.busy_s += elapsed_s
        self.energy_j += energy_j
        self.iterations += iterations
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share

    def account_split(self, gpu: GpuTime, energy_j: float, reqs: list[RequestState]) -> None:
        """Count a split iteration: the shared GPU's busy clocks so far, its energy."""
        self.busy_s = gpu.busy_s
        self.gpu_time = gpu
        self.energy_j += energy_j
        self.iterations += 1
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share

    def throttled(self, start_s: float, latency_s: float, energy_j: float) -> tuple[float, float]:
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

    def remember(self, batch: list[RequestState], kind: str, latency_s: float) -> None:
        """Put a decode-lane iteration ending now into the controller's window."""
        window = self.window
        assert window is not None
        window.add_iteration(latency_s)
        if kind != DECODE:
            window.last_step_s = latency_s
            start_s = self.env._now - latency_s
            window.add_waits([start_s - req.ready_s for req in batch])

    # -- what the lanes offer (see policies.arbitration.ReplicaLanes) --------
    def offer_prefill(self, limit: int | None = None) -> tuple[Any, float]:
        """The prefill lane's batch now (at most ``limit`` prompts), else ``None`` and a wake time."""
        if not self.prefill_q:
            return None, INF
        batch, wake_at = self.prefill.select(limit)
        if batch:
            return batch, INF
        return None, wake_at

    def offer_step(self, token_budget: int | None = None) -> tuple[Any, float]:
        """The decode lane's batch now (``(kind, requests)``), else ``None`` and a wake time.

        One kind per iteration: the kind whose item has been ready longest.
        With a ``token_budget`` (chunked prefill) the batch is cut to the items
        that fit it (at least one, so nothing starves), and only work of a
        model that chunks can ride with is offered (see
        :meth:`~simulator.engine.mixed.MixedIterations.kinds_beside_chunks`).
        """
        queues = self.decode_q
        if queues[VERIFY] and not queues[DECODE] and not queues[FUSED]:
            kinds = [VERIFY]  # the one kind of distributed replicas, without the search
        else:
            kinds = [k for k in (DECODE, VERIFY, FUSED) if queues[k]]
        if token_budget is not None and len(kinds) > 0:
            kinds = self.mixed.kinds_beside_chunks(kinds)
        if not kinds:
            return None, INF
        if len(kinds) == 1:
            kind = kinds[0]
        else:
            kind = min(kinds, key=lambda k: min(r.ready_s for r in queues[k]))
        queue = queues[kind]
        lane = self.step_lane if kind == VERIFY else self.continuous_lane
        if len(queue) == 1 and lane.takes_lone_item and not (kind == VERIFY and self._guard_kv):
            # Its policy would take it (it is queued at or before now); one item
            # always fits a token budget.
            return (kind, [queue[0]]), INF
        now = self.env._now
        if lane.orders_by_arrival and not (kind == VERIFY and self._guard_kv):
            # The policy reads only when each item was queued and its new tokens.
            tokens: list[int] | tuple[()] = ()
            if lane.limits.max_tokens is not None:
                tokens = [1] * len(queue) if kind == DECODE else [r.k + 1 for r in queue]
            choice = lane.select_by_arrival([r.ready_s for r in queue], tokens, now)
        else:
            choice = lane.select(self._views(queue, kind), now)
        if choice.spill and kind == VERIFY:
            spilled_batch, wake_at = self.kv_rule.spill(queue, choice.take, choice.spill)
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
                used += 1 if kind == DECODE else queue[i].k + 1
                if used > token_budget and fits:
                    break
                fits += 1
            take = take[:fits]
        return (kind, [queue[i] for i in take]), INF

    def _views(self, queue: list[RequestState], kind: str) -> list[QueuedItem]:
        """The decode lane's policy view of ``queue`` (of ``kind``), with KV figures if it reads them.

        Deadlines (see policies/README.md): a verify bundle is due one TVT
        after it was sent when its class has a TVT target; otherwise, and for
        plain decode and fused rounds, the next token is due on the TPOT pace.
        """
        if kind == DECODE:
            return [
                QueuedItem(r.request_id, r.ready_s, next_token_due_s(r), r.context, 1)
                for r in queue
            ]
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
        if kind == VERIFY and self._guard_kv:
            items = self.kv_rule.with_kv(items)
        return items

    def step_tokens(self, step: Any) -> int:
        """Tokens a decode-lane batch processes: 1 per plain decode, k + 1 per round."""
        return step_tokens(step)

    def offer_chunks(self, step: Any, token_budget: int) -> Any:
        """Prefill chunks filling ``token_budget`` tokens beside ``step`` (chunked prefill).

        See :meth:`~simulator.engine.mixed.MixedIterations.offer_chunks`.
        """
        return self.mixed.offer_chunks(step, token_budget)

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
        split = self.split
        return not self.busy if split is None else split.active[lane] == 0

    def iterations_running(self) -> int:
        """Iterations under way on the replica's GPU."""
        split = self.split
        return int(self.busy) if split is None else split.gpu.running

    def batch_limit(self) -> int:
        """The decode and verify lanes' batch size (``scheduler.verify.batching.max_batch``)."""
        return int(self.continuous_lane.limits.max_batch)

    def offer_draft(self) -> Any:
        """Take the decode lane's batch for a draft iteration (``("draft", reqs)``), or ``None``."""
        return self.split_iterations.offer_draft()

    def offer_verify(self) -> Any:
        """Take the verify lane's batch for a verify iteration (``("verify", reqs)``), or ``None``."""
        return self.split_iterations.offer_verify()

    def offer_round(self) -> Any:
        """Take the next request for an atomic round (``("round", [request])``): the pass first."""
        return self.split_iterations.offer_round()

    def pass_left(self) -> int:
        """Requests of the current pass still to run their round."""
        return len(self.pass_q)

    def start_pass(self, limit: int) -> int:
        """Move up to ``limit`` requests from the head of the decode lane into a pass."""
        return self.split_iterations.start_pass(limit)
