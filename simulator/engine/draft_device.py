"""A client device that drafts for its own requests (distributed speculation).

A device serves at most ``max_concurrent_requests`` requests at a time
(others wait in arrival order), and, when its profile sets
``memory.kv_cache_limit_mb``, only as many as its KV budget holds: each
active request reserves the draft model's KV for its prompt, its whole
output and ``k_max`` draft tokens, as a target does with
``scheduler.kv.on_full: queue``; a request that could never fit is rejected
on arrival with reason ``device_kv_capacity``. For each active request it first prefills
the prompt with its draft model, then, round after round, drafts ``k``
tokens while the request waits for nothing else. Draft work of several
active requests is batched iteration by iteration (Orca style) by the
``scheduler.draft`` policy: a burst runs ``max k`` draft iterations and each
request leaves the burst after its own ``k``-th token. A round of ``k = 0``
(a controller turned speculation off for it) drafts nothing: its empty
bundle goes to the target at once, which decodes one token for it.

The device is driven by callbacks, not a SimPy process: when it starts a
burst it knows when each request's ``k``-th token is done, so it hands each
bundle to the network at that (future) instant right away and schedules no
event of its own unless more work is waiting. A round therefore costs one
event on the device side, the arrival of its verified result (the bundle's
arrival at the target is an event only if it finds the replica idle). The
device's busy time and energy are booked when a burst or prefill starts.

A device serving one request at a time starts its work as soon as the work
arrives; nothing else can be waiting for it. A device serving several decides
with the :data:`~simulator.engine.clock.DECISION` priority, after every
delivery of the instant, so requests whose results arrive together share a
burst.

A device whose class lists several drafter models runs, for each request,
the model chosen for it on admission (``scheduler.draft.model_selection``):
that model's LUTs price the request's prefill and draft steps and its KV per
token sizes the request's reservation. One draft iteration runs one model, so
a burst holds requests of one model only: the requests the draft policy takes
that draft with the model of the first one it takes form the burst, and the
others stay queued for the next burst (right after this one).

Thermal throttling follows :mod:`simulator.engine.heat`. Availability
windows delay work until the device is available.
"""

from __future__ import annotations

from functools import partial

import simpy

from policies.views import QueuedItem
from simulator.engine.clock import DECISION, call_at
from simulator.engine.costs import ContextCurve, PhaseCost
from simulator.engine.heat import Heat
from simulator.engine.lifecycle import ServerContext
from simulator.engine.request_state import RequestState, next_token_due_s
from simulator.engine.runtime import ClientPool
from simulator.engine.tracing import Span

INF = float("inf")


class _DeviceModel:
    """One drafter model as a device runs it: its costs, KV per token and window."""

    __slots__ = ("alone", "context_window", "draft", "kv_per_token_mb", "name", "prefill")

    def __init__(self, name: str, prefill: PhaseCost, draft: PhaseCost, kv_limited: bool) -> None:
        self.name = name
        self.prefill = prefill
        self.draft = draft
        self.alone: ContextCurve = draft.curve(1)
        self.kv_per_token_mb = prefill.kv_mb_per_token() if kv_limited else 0.0
        self.context_window = min(prefill.context_window, draft.context_window)


class DraftDevice:
    """One client device (see the module docstring)."""

    def __init__(self, context: ServerContext, pool: ClientPool, index: int) -> None:
        assert pool.models
        self.context = context
        self.lifecycle = context.lifecycle
        self.env: simpy.Environment = context.env
        self.pool = pool.id
        self.index = index
        limited = pool.kv_limit_mb is not None
        self.models = tuple(_DeviceModel(m.name, m.prefill, m.draft, limited) for m in pool.models)
        self._several = len(self.models) > 1
        self.max_concurrent = pool.max_concurrent
        self.heat = Heat(pool.thermal)
        self.kv_limit_mb = pool.kv_limit_mb
        self.kv_used_mb = 0.0
        self._k_reserve = context.k_max
        self.availability = availability = pool.availability
        self._always_available = availability.kind == "always" or not availability.windows
        self._lane = context.lanes["draft"]
        self._alone = (
            self.max_concurrent == 1 and self._always_available and bool(self._lane.takes_lone_item)
        )
        """A round finding the device idle starts its burst at once: one request at a
        time, always available, and a draft policy that takes a lone job."""
        self.active: list[RequestState] = []
        self.waiting: list[RequestState] = []
        self.prefill_jobs: list[RequestState] = []
        self.draft_jobs: list[RequestState] = []
        self.ready_prefilled: set[int] = set()
        self.ready_first_token: set[int] = set()
        self.busy_s = 0.0
        self.energy_j = 0.0
        self.gpus = 0
        """GPUs of a target pool it holds: none (a client device)."""
        self._busy_until = -INF
        self._wakes: set[float] = set()

    # -- request life on the device -----------------------------------------
    def kv_need_mb(self, req: RequestState, slot: int = -1) -> float:
        """KV the request reserves on this device while active (0 without a KV budget).

        ``slot`` is the index of the drafter model to size it for (default:
        the request's own).
        """
        model = self.models[req.draft_slot if slot < 0 else slot]
        return (req.prompt_tokens + req.output_tokens + self._k_reserve) * model.kv_per_token_mb

    def can_ever_fit(self, req: RequestState, slot: int = -1) -> bool:
        """Whether the request's KV (with model ``slot``, default its own) fits the budget at all."""
        return self.kv_limit_mb is None or self.kv_need_mb(req, slot) <= self.kv_limit_mb + 1e-9

    def context_window(self, req: RequestState, slot: int = -1) -> float:
        """Longest context the LUTs of the request's drafter model (or model ``slot``) cover."""
        return self.models[req.draft_slot if slot < 0 else slot].context_window

    def _has_room(self, req: RequestState) -> bool:
        if len(self.active) >= self.max_concurrent:
            return False
        limit = self.kv_limit_mb
        return limit is None or self.kv_used_mb + self.kv_need_mb(req) <= limit + 1e-9

    def admit(self, req: RequestState) -> None:
        """A request from this device's user arrives."""
        if not self.waiting and self._has_room(req):
            self._activate(req)
        else:
            self.waiting.append(req)

    def _activate(self, req: RequestState) -> None:
        if self.kv_limit_mb is not None:
            self.kv_used_mb += self.kv_need_mb(req)
        self.active.append(req)
        self.prefill_jobs.append(req)
        self._work_arrived()

    def on_first_token(self, req: RequestState) -> None:
        """The target's first token reached the device."""
        self.ready_first_token.add(req.request_id)
        self._maybe_round(req)

    def resume(self, req: RequestState) -> None:
        """Take a request already past both prefills (a what-if window's start): draft."""
        self.active.append(req)
        self.ready_prefilled.add(req.request_id)
        self.ready_first_token.add(req.request_id)
        self.next_round(req)

    def next_round(self, req: RequestState) -> None:
        """Draft the request's next round (its verified result, or first token, is here)."""
        now = req.ready_s = self.env._now
        self.context.speculation.choose_k(req)
        if req.k == 0:
            # Nothing to draft: the device sends an empty bundle at once and
            # the target decodes one token for the request.
            self.lifecycle.send_bundle(req, now)
            return
        if (
            self._alone
            and now >= self._busy_until
            and not self.prefill_jobs
            and not self.draft_jobs
        ):
            # What _try_start would do with this lone job: start its burst now.
            self._burst_one(req, now)
            if self.prefill_jobs or self.draft_jobs:
                self._wake_at(self._busy_until)
            return
        self.draft_jobs.append(req)
        self._work_arrived()

    def finish(self, req: RequestState) -> None:
        """The request ended: free its slot for the next waiting one.

        A request its replica rejects (``kv_capacity``) may end while it still
        waits for a slot here; it leaves the queue, or it would take a slot
        once one is free and hold it for ever (nothing drafts for a rejected
        request), stalling every request of the device after it.
        """
        if req in self.active:
            self.active.remove(req)
            if self.kv_limit_mb is not None:
                self.kv_used_mb -= self.kv_need_mb(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        self.ready_prefilled.discard(req.request_id)
        self.ready_first_token.discard(req.request_id)
        while self.waiting and self._has_room(self.waiting[0]):
            self._activate(self.waiting.pop(0))

    def serves(self, req: RequestState) -> bool:
        """Whether the request holds one of the device's slots."""
        return req in self.active

    def queued(self) -> list[RequestState]:
        """The requests waiting for a slot, in the order they will take one."""
        return self.waiting

    def _maybe_round(self, req: RequestState) -> None:
        rid = req.request_id
        if rid in self.ready_prefilled and rid in self.ready_first_token:
            if req.remaining <= 0:
                self.lifecycle.finish_distributed(req)
            else:
                self.next_round(req)

    # -- the device's work ----------------------------------------------------
    def _work_arrived(self) -> None:
        """New work was queued: decide now (one slot) or once the instant's deliveries are in."""
        if self.max_concurrent == 1:
            self._try_start()
        else:
            self._wake_at(max(self.env._now, self._busy_until))

    def _wake_at(self, time_s: float) -> None:
        """Decide what to run at ``time_s`` (one decision per distinct instant)."""
        if time_s in self._wakes:
            return
        self._wakes.add(time_s)
        call_at(self.env, time_s, partial(self._on_wake, time_s), DECISION)

    def _on_wake(self, time_s: float) -> None:
        self._wakes.discard(time_s)
        self._try_start()

    def _try_start(self) -> None:
        now = self.env._now
        if now < self._busy_until:
            self._wake_at(self._busy_until)
            return
        if not self.prefill_jobs and not self.draft_jobs:
            return
        if not self._always_available:
            start = self.availability.next_available_s(now)
            if start > now:
                self._wake_at(start)
                return
        if self.prefill_jobs:
            self._start_prefill(self.prefill_jobs.pop(0), now)
            return
        batch, wake_at = self._select_drafts(now)
        if batch:
            self._start_burst(batch, now)
        elif wake_at is not None:
            self._wake_at(wake_at)

    def _select_drafts(self, now_s: float) -> tuple[list[RequestState], float | None]:
        jobs = self.draft_jobs
        if len(jobs) == 1 and self._lane.takes_lone_item:
            # The policy would take it (every draft job is queued at or before now).
            self.draft_jobs = []
            return jobs, None
        lane = self._lane
        if lane.orders_by_arrival:
            tokens = [r.k for r in jobs] if lane.limits.max_tokens is not None else []
            choice = lane.select_by_arrival([r.ready_s for r in jobs], tokens, now_s)
        else:
            items = [
                QueuedItem(r.request_id, r.ready_s, next_token_due_s(r), r.context, r.k)
                for r in jobs
            ]
            choice = lane.select(items, now_s)
        if not choice.take:
            return [], choice.wake_at_s
        chosen = [jobs[i] for i in choice.take[: self.max_concurrent]]
        if self._several:
            # One iteration runs one model: the first taken request's.
            slot = chosen[0].draft_slot
            chosen = [r for r in chosen if r.draft_slot == slot]
        if len(chosen) == len(jobs):
            self.draft_jobs = []
        else:
            keep = {id(r) for r in chosen}
            self.draft_jobs = [r for r in self.draft_jobs if id(r) not in keep]
        return chosen, None

    def _start_prefill(self, req: RequestState, now: float) -> None:
        heat = self.heat
        factor = heat.fixed_factor if heat.constant else heat.factor(now)
        latency_s, energy_j = self.models[req.draft_slot].prefill.at(req.prompt_tokens, 1, 1)
        latency_s /= factor
        energy_j /= factor
        self._book(now, latency_s, energy_j)
        req.draft_energy_j += energy_j
        if self.context.tracing:
            self.context.tracer.span(
                Span(
                    "device",
                    f"{self.pool}/{self.index}",
                    "draft",
                    "draft_prefill",
                    now,
                    latency_s,
                    (req.request_id,),
                    req.prompt_tokens,
                )
            )
        call_at(self.env, now + latency_s, partial(self._prefill_done, req))

    def _prefill_done(self, req: RequestState) -> None:
        self.ready_prefilled.add(req.request_id)
        self._maybe_round(req)
        self._work_arrived()

    def _start_burst(self, batch: list[RequestState], start: float) -> None:
        """Draft ``k`` tokens for each request, iteration by iteration, from ``start``."""
        if len(batch) == 1:
            self._burst_one(batch[0], start)
        else:
            heat = self.heat
            factor = heat.fixed_factor if heat.constant else heat.factor(start)
            model = self.models[batch[0].draft_slot]
            curve_at = model.draft.at
            steps = max(req.k for req in batch)
            offset = 0.0
            total_energy = 0.0
            done: list[tuple[float, RequestState]] = []
            for step in range(1, steps + 1):
                members = [req for req in batch if req.k >= step]
                n = len(members)
                context = sum(req.context for req in members) / n + (step - 1)
                latency_s, energy_j = curve_at(context, n, 1)
                latency_s /= factor
                energy_j /= factor
                offset += latency_s
                total_energy += energy_j
                for req in members:
                    req.draft_energy_j += energy_j / n
                    if req.k == step:
                        done.append((offset, req))
            self._book(start, offset, total_energy)
            if self.context.tracing:
                self._trace_burst(batch, model, start, offset, steps)
            for done_after_s, req in done:
                self.lifecycle.send_bundle(req, start + done_after_s)
        if self.prefill_jobs or self.draft_jobs:
            self._wake_at(self._busy_until)

    def _burst_one(self, req: RequestState, start: float) -> None:
        """A burst of one request: its ``k`` draft steps priced in one sum, its bundle sent."""
        heat = self.heat
        factor = heat.fixed_factor if heat.constant else heat.factor(start)
        model = self.models[req.draft_slot]
        offset, total_energy = model.alone.sum_steps(req.prompt_tokens + req.generated, req.k)
        if factor != 1.0:
            offset /= factor
            total_energy /= factor
        req.draft_energy_j += total_energy
        self._book(start, offset, total_energy)
        if self.context.tracing:
            self._trace_burst([req], model, start, offset, req.k)
        self.lifecycle.send_bundle(req, start + offset)

    def _trace_burst(
        self,
        batch: list[RequestState],
        model: _DeviceModel,
        start: float,
        offset: float,
        steps: int,
    ) -> None:
        """Report a draft burst of ``steps`` iterations over ``offset`` seconds to the tracer."""
        self.context.tracer.event(
            start,
            "draft_burst",
            f"device {self.pool}/{self.index}",
            f"n={len(batch)} k={steps}" + (f" model={model.name}" if self._several else ""),
        )
        self.context.tracer.span(
            Span(
                "device",
                f"{self.pool}/{self.index}",
                "draft",
                "draft",
                start,
                offset,
                tuple(req.request_id for req in batch),
                sum(req.k for req in batch),
                steps,
                steps,
            )
        )

    def _book(self, start_s: float, latency_s: float, energy_j: float) -> None:
        """Book a job from ``start_s`` to ``start_s + latency_s``: busy time, heat, energy."""
        if not self.heat.constant:
            self.heat.book(start_s, latency_s)
        self._busy_until = start_s + latency_s
        self.busy_s += latency_s
        self.energy_j += energy_j
