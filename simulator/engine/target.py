"""A target replica: one GPU group running iteration-level batches.

A replica has two lanes sharing its GPU(s): the **prefill** lane and the
**decode** lane (plain decode iterations in ``none`` mode, verify iterations
of clients' speculative bundles in ``distributed`` mode, fused draft+verify
iterations in ``fused`` mode; hybrid replicas hold verify and fused work and
run one kind per iteration). It runs one iteration at a time; when both lanes
have work the prefill lane goes first, as vLLM's default scheduler does. Each
lane's batching policy decides which waiting items form the next iteration.

KV memory (``scheduler.kv.on_full``): with ``queue`` a request is prefilled
only when the KV of its prompt, its whole output and one round of drafts
fits, reserved at once, so running requests never run out; with
``preempt_recompute`` KV grows token by token and, when the next iteration
would not fit, the most recently admitted requests are evicted and go back
to the prefill lane to recompute their context.

Runs of plain decode iterations whose batch does not change are advanced in
one event (see ``simulation.fuse_iterations``): the iteration boundaries are
computed exactly as stepping would, and an arriving prompt interrupts the
run at the next boundary.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import simpy

from policies.views import QueuedItem
from simulator.engine.costs import PhaseCost
from simulator.engine.kv import KvPool
from simulator.engine.request_state import RequestState

if TYPE_CHECKING:
    from simulator.engine.core import Engine

DECODE = "decode"
VERIFY = "verify"
FUSED = "fused"
INF = float("inf")


class ReplicaCosts:
    """The phase costs a replica needs, by work kind (absent kinds are ``None``)."""

    def __init__(
        self,
        prefill_verifier: PhaseCost | None,
        prefill_fused: PhaseCost | None,
        decode: PhaseCost | None,
        verify: PhaseCost | None,
        fused: PhaseCost | None,
    ) -> None:
        self.prefill = {VERIFY: prefill_verifier, DECODE: prefill_verifier, FUSED: prefill_fused}
        self.step = {DECODE: decode, VERIFY: verify, FUSED: fused}

    def context_window(self, kind: str) -> float:
        """Longest context the LUTs of work ``kind`` cover (prefill and step)."""
        costs = (self.prefill[kind], self.step[kind])
        return min(cost.context_window for cost in costs if cost is not None)


class TargetReplica:
    """One replica of a target pool (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        index: int,
        pool: str,
        costs: ReplicaCosts,
        kv: KvPool,
        kv_mb_per_token: dict[str, float],
    ) -> None:
        self.engine = engine
        self.env: simpy.Environment = engine.env
        self.index = index
        self.pool = pool
        self.costs = costs
        self.kv = kv
        self.kv_mb_per_token = kv_mb_per_token
        self.prefill_q: list[tuple[RequestState, str, float]] = []
        self.decode_q: dict[str, list[RequestState]] = {DECODE: [], VERIFY: [], FUSED: []}
        self.holders: list[RequestState] = []
        self.outstanding = 0
        self.busy_s = 0.0
        self.energy_j = 0.0
        self.iterations = 0
        self._wakeup: simpy.Event | None = None
        self._in_run = False
        self._timer_at = INF
        self.process = self.env.process(self._loop())

    # -- entry points ------------------------------------------------------
    def enqueue_prefill(self, req: RequestState, kind: str) -> None:
        """A prompt has arrived: queue it for prefill (``kind``: its decode-lane work)."""
        self.prefill_q.append((req, kind, self.env.now))
        self.engine.tracer.event(
            self.env.now, "prefill_queued", f"request {req.request_id}", f"replica {self.index}"
        )
        self._poke(interrupt=True)

    def enqueue_step(self, req: RequestState, kind: str) -> None:
        """A request is ready for its next decode-lane iteration."""
        req.ready_s = self.env.now
        self.decode_q[kind].append(req)
        self._poke(interrupt=False)

    def queue_lengths(self) -> tuple[int, int, int, int]:
        """Return (prefill, decode, verify, fused) queue lengths."""
        return (
            len(self.prefill_q),
            len(self.decode_q[DECODE]),
            len(self.decode_q[VERIFY]),
            len(self.decode_q[FUSED]),
        )

    # -- scheduling loop -----------------------------------------------------
    def _poke(self, interrupt: bool) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()
        elif interrupt and self._in_run:
            self._in_run = False
            self.process.interrupt("prefill")

    def _arm_timer(self, at_s: float) -> None:
        if at_s >= self._timer_at and self._timer_at > self.env.now:
            return
        self._timer_at = at_s
        timer = self.env.timeout(max(0.0, at_s - self.env.now))
        timer.callbacks.append(lambda _event: self._poke(interrupt=True))

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        while True:
            work, wake_at = self._next_work()
            if work is None:
                if wake_at < INF:
                    self._arm_timer(wake_at)
                self._wakeup = self.env.event()
                yield self._wakeup
                self._wakeup = None
                continue
            yield from work()

    def _next_work(self) -> tuple[Callable[[], Generator[simpy.Event, Any, None]] | None, float]:
        wake_at = INF
        if self.prefill_q:
            batch, wake = self._select_prefill()
            if batch:
                return (lambda: self._run_prefill(batch)), INF
            wake_at = min(wake_at, wake)
        kinds = [k for k in (DECODE, VERIFY, FUSED) if self.decode_q[k]]
        if kinds:
            kind = min(kinds, key=lambda k: min(r.ready_s for r in self.decode_q[k]))
            queue = self.decode_q[kind]
            lane = self.engine.lanes["verify"]
            items = [
                QueuedItem(
                    r.request_id, r.ready_s, INF, r.context, 1 if kind == DECODE else r.k + 1
                )
                for r in queue
            ]
            choice = lane.select(items, self.env.now)
            if choice.take:
                chosen = [queue[i] for i in choice.take]
                if kind == DECODE:
                    return (lambda: self._run_decode(chosen)), INF
                return (lambda: self._run_speculative(chosen, kind)), INF
            if choice.wake_at_s is not None:
                wake_at = min(wake_at, choice.wake_at_s)
        return None, wake_at

    # -- prefill -------------------------------------------------------------
    def _kv_need_mb(self, req: RequestState, kind: str) -> float:
        per_token = self.kv_mb_per_token[kind]
        if self.engine.kv_policy == "queue":
            return (req.prompt_tokens + req.output_tokens + self.engine.k_reserve) * per_token
        return (req.context + 1) * per_token

    def _select_prefill(self) -> tuple[list[tuple[RequestState, str]], float]:
        """Pick the prefill batch: FIFO prefix whose KV fits, then the lane policy."""
        first_kind = self.prefill_q[0][1]
        first_model = FUSED if first_kind == FUSED else VERIFY
        budget = self.kv.free_mb
        eligible: list[int] = []
        for i, (req, kind, _) in enumerate(self.prefill_q):
            if (FUSED if kind == FUSED else VERIFY) != first_model:
                continue
            need = self._kv_need_mb(req, kind)
            if need > budget + 1e-9:
                if not eligible and need > self.kv.capacity_mb:
                    self._reject_too_large(i)
                    return self._select_prefill() if self.prefill_q else ([], INF)
                break
            budget -= need
            eligible.append(i)
        if not eligible:
            if self.engine.kv_policy == "preempt_recompute":
                self._preempt_for(self._kv_need_mb(*self.prefill_q[0][:2]))
            return [], INF
        items = [
            QueuedItem(
                self.prefill_q[i][0].request_id,
                self.prefill_q[i][2],
                INF,
                0,
                self.prefill_q[i][0].context,
            )
            for i in eligible
        ]
        choice = self.engine.lanes["prefill"].select(items, self.env.now)
        if not choice.take:
            return [], choice.wake_at_s if choice.wake_at_s is not None else INF
        taken = [eligible[j] for j in choice.take]
        batch = [(self.prefill_q[i][0], self.prefill_q[i][1]) for i in taken]
        keep = set(taken)
        self.prefill_q = [entry for i, entry in enumerate(self.prefill_q) if i not in keep]
        return batch, INF

    def _reject_too_large(self, position: int) -> None:
        req, _kind, _ = self.prefill_q.pop(position)
        self.engine.reject_on_replica(req, "kv_capacity")

    def _run_prefill(
        self, batch: list[tuple[RequestState, str]]
    ) -> Generator[simpy.Event, Any, None]:
        now = self.env.now
        kind = batch[0][1]
        cost = self.costs.prefill[kind]
        assert cost is not None
        n = len(batch)
        mean_context = sum(req.context for req, _ in batch) / n
        for req, k in batch:
            need = self._kv_need_mb(req, k)
            self.kv.allocate(need, now)
            req.kv_mb = need
            req.kv_peak_mb = max(req.kv_peak_mb, need)
            if req not in self.holders:
                self.holders.append(req)
        latency_s, energy_j = cost.at(mean_context, n, 1)
        if self.engine.tracing:
            self.engine.tracer.event(
                now, "prefill_start", f"replica {self.index}", f"n={n} context={mean_context:.1f}"
            )
        yield self.env.timeout(latency_s)
        self._account(latency_s, energy_j, [req for req, _ in batch])
        for req, k in batch:
            self.engine.on_prefilled(self, req, k)

    # -- decode lane ---------------------------------------------------------
    def _account(self, latency_s: float, energy_j: float, reqs: list[RequestState]) -> None:
        self.busy_s += latency_s
        self.energy_j += energy_j
        self.iterations += 1
        share = energy_j / len(reqs)
        for req in reqs:
            req.target_energy_j += share

    def _run_decode(self, batch: list[RequestState]) -> Generator[simpy.Event, Any, None]:
        """Plain decode iterations; a run of them with an unchanged batch in one event."""
        env = self.env
        start = env.now
        cost = self.costs.step[DECODE]
        assert cost is not None
        n = len(batch)
        iterations = min(req.remaining for req in batch)
        if not self.engine.fuse_iterations:
            iterations = 1
        if self.engine.kv_policy == "preempt_recompute":
            per_step = n * self.kv_mb_per_token[DECODE]
            room = int(self.kv.free_mb // per_step) if per_step > 0 else iterations
            if room < 1:
                self._preempt_for(per_step, keep=batch)
                return
            iterations = min(iterations, room)
        curve = cost.curve(n, 1)
        context = sum(req.context for req in batch) / n
        elapsed_s, energies = curve.cumulative_steps(context, iterations)
        boundaries = [start + t for t in elapsed_s]
        done = len(boundaries)
        self._in_run = done > 1
        try:
            yield env.timeout(boundaries[-1] - start)
        except simpy.Interrupt:
            now = env.now
            done = min(len(boundaries), bisect_left(boundaries, now) + 1)
            self._in_run = False
            remaining_s = boundaries[done - 1] - now
            if remaining_s > 0:
                yield env.timeout(remaining_s)
        self._in_run = False
        elapsed = boundaries[done - 1] - start
        self.busy_s += elapsed
        self.energy_j += energies[done - 1]
        self.iterations += done
        share = energies[done - 1] / n
        per_token = self.kv_mb_per_token[DECODE]
        grow = self.engine.kv_policy == "preempt_recompute"
        now = env.now
        for req in batch:
            req.target_energy_j += share
            req.generated += done
            req.ready_s = now
            if grow:
                self.kv.allocate(done * per_token, now)
                req.kv_mb += done * per_token
                req.kv_peak_mb = max(req.kv_peak_mb, req.kv_mb)
        if self.engine.tracing:
            self.engine.tracer.event(
                now, "decode", f"replica {self.index}", f"n={n} iterations={done}"
            )
        finished = [req for req in batch if req.remaining <= 0]
        if finished:
            queue = self.decode_q[DECODE]
            gone = {id(req) for req in finished}
            self.decode_q[DECODE] = [req for req in queue if id(req) not in gone]
            for req in finished:
                self.release(req)
                self.engine.on_finished_server(self, req, now)

    def _run_speculative(
        self, batch: list[RequestState], kind: str
    ) -> Generator[simpy.Event, Any, None]:
        """One verify (distributed) or fused draft+verify iteration."""
        env = self.env
        cost = self.costs.step[kind]
        assert cost is not None
        n = len(batch)
        queue = self.decode_q[kind]
        gone = {id(req) for req in batch}
        self.decode_q[kind] = [req for req in queue if id(req) not in gone]
        if kind == FUSED:
            for req in batch:
                self.engine.choose_k(req, self)
        fanout = max(req.k for req in batch)
        context = sum(req.context for req in batch) / n
        if self.engine.kv_policy == "preempt_recompute":
            need = n * (fanout + 1) * self.kv_mb_per_token[kind]
            if not self.kv.fits(need):
                for req in batch:
                    self.decode_q[kind].append(req)
                self._preempt_for(need, keep=batch)
                return
        latency_s, energy_j = cost.at(context, n, fanout)
        if self.engine.tracing:
            self.engine.tracer.event(
                env.now, f"{kind}_start", f"replica {self.index}", f"n={n} k={fanout}"
            )
        yield env.timeout(latency_s)
        self._account(latency_s, energy_j, batch)
        now = env.now
        per_token = self.kv_mb_per_token[kind]
        grow = self.engine.kv_policy == "preempt_recompute"
        for req in batch:
            gained = self.engine.verify_round(req, kind)
            if grow:
                self.kv.allocate(gained * per_token, now)
                req.kv_mb += gained * per_token
                req.kv_peak_mb = max(req.kv_peak_mb, req.kv_mb)
            if req.remaining <= 0:
                self.release(req)
                if kind == FUSED:
                    self.engine.on_finished_server(self, req, now)
            elif kind == FUSED:
                req.ready_s = now
                self.decode_q[FUSED].append(req)
            if kind == VERIFY:
                self.engine.on_verified(self, req, gained, now)

    # -- KV ------------------------------------------------------------------
    def release(self, req: RequestState) -> None:
        """Free a request's KV (at completion or eviction)."""
        if req.kv_mb > 0:
            self.kv.free(req.kv_mb, self.env.now)
            req.kv_mb = 0.0
        if req in self.holders:
            self.holders.remove(req)

    def _preempt_for(self, need_mb: float, keep: list[RequestState] | None = None) -> None:
        """Evict the most recently admitted requests until ``need_mb`` fits."""
        protected = {id(r) for r in keep} if keep else set()
        for victim in reversed(list(self.holders)):
            if self.kv.fits(need_mb):
                break
            if id(victim) in protected:
                continue
            for kind, queue in self.decode_q.items():
                if victim in queue:
                    queue.remove(victim)
                    self.release(victim)
                    victim.preemptions += 1
                    self.prefill_q.append((victim, kind, self.env.now))
                    self.engine.tracer.event(
                        self.env.now,
                        "preempt",
                        f"request {victim.request_id}",
                        f"replica {self.index}",
                    )
                    break
        if not self.kv.fits(need_mb) and keep:
            # Nothing else can be evicted: shrink the batch to its oldest member.
            for req in keep[1:]:
                for queue in self.decode_q.values():
                    if req in queue:
                        queue.remove(req)
                        self.release(req)
                        req.preemptions += 1
                        self.prefill_q.append(
                            (req, DECODE if req.mode == "none" else FUSED, self.env.now)
                        )
                        break
