"""A client device that drafts for its own requests (distributed speculation).

A device serves at most ``max_concurrent_requests`` requests at a time
(others wait in arrival order). For each active request it first prefills
the prompt with its draft model, then, round after round, drafts ``k``
tokens while the request waits for nothing else. Draft work of several
active requests is batched iteration by iteration (Orca style) by the
``scheduler.draft`` policy: a burst runs ``max k`` draft iterations and each
request leaves the burst after its own ``k``-th token.

Thermal throttling: once a device has been busy for ``throttle_after_s``
(counting busy time since it last rested idle for at least that long), its
iterations take ``1 / throttle_factor`` times as long and use as much more
energy; a profile whose onset is unknown (``throttle_after_s: null``) runs at
its sustained, throttled rate throughout. Availability windows delay work
until the device is available.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import simpy

from policies.views import QueuedItem
from simulator.devices.model import Availability, ThermalSpec
from simulator.engine.costs import PhaseCost
from simulator.engine.request_state import RequestState

if TYPE_CHECKING:
    from simulator.engine.core import Engine

INF = float("inf")


class DraftDevice:
    """One client device (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        pool: str,
        index: int,
        prefill: PhaseCost,
        draft: PhaseCost,
        max_concurrent: int,
        thermal: ThermalSpec | None,
        availability: Availability,
    ) -> None:
        self.engine = engine
        self.env: simpy.Environment = engine.env
        self.pool = pool
        self.index = index
        self.prefill_cost = prefill
        self.draft_cost = draft
        self.max_concurrent = max_concurrent
        self.thermal = thermal
        self.availability = availability
        self.context_window = min(prefill.context_window, draft.context_window)
        self.active: list[RequestState] = []
        self.waiting: list[RequestState] = []
        self.prefill_jobs: list[RequestState] = []
        self.draft_jobs: list[RequestState] = []
        self.ready_prefilled: set[int] = set()
        self.ready_first_token: set[int] = set()
        self.busy_s = 0.0
        self.energy_j = 0.0
        self._heat_s = 0.0
        self._last_end_s = -INF
        self._wakeup: simpy.Event | None = None
        self.process = self.env.process(self._loop())

    # -- request life on the device -----------------------------------------
    def admit(self, req: RequestState) -> None:
        """A request from this device's user arrives."""
        if len(self.active) < self.max_concurrent:
            self._activate(req)
        else:
            self.waiting.append(req)

    def _activate(self, req: RequestState) -> None:
        self.active.append(req)
        self.prefill_jobs.append(req)
        self._poke()

    def on_first_token(self, req: RequestState) -> None:
        """The target's first token reached the device."""
        self.ready_first_token.add(req.request_id)
        self._maybe_round(req)

    def next_round(self, req: RequestState) -> None:
        """A verified result reached the device and output remains: draft again."""
        self._queue_draft(req)

    def finish(self, req: RequestState) -> None:
        """The request is complete: free its slot for the next waiting one."""
        if req in self.active:
            self.active.remove(req)
        self.ready_prefilled.discard(req.request_id)
        self.ready_first_token.discard(req.request_id)
        if self.waiting and len(self.active) < self.max_concurrent:
            self._activate(self.waiting.pop(0))

    def _maybe_round(self, req: RequestState) -> None:
        rid = req.request_id
        if rid in self.ready_prefilled and rid in self.ready_first_token:
            if req.remaining <= 0:
                self.engine.finish_distributed(req, self)
            else:
                self._queue_draft(req)

    def _queue_draft(self, req: RequestState) -> None:
        req.ready_s = self.env.now
        self.engine.choose_k(req, None)
        self.draft_jobs.append(req)
        self._poke()

    # -- the device's work loop ---------------------------------------------
    def _poke(self) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.succeed()

    def _speed_factor(self, now_s: float) -> float:
        """Throughput factor of the next job: ``throttle_factor`` when hot, else 1."""
        thermal = self.thermal
        if thermal is None:
            return 1.0
        if thermal.throttle_after_s is None:
            return thermal.throttle_factor
        if now_s - self._last_end_s >= thermal.throttle_after_s:
            self._heat_s = 0.0
        return thermal.throttle_factor if self._heat_s >= thermal.throttle_after_s else 1.0

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        while True:
            if not self.prefill_jobs and not self.draft_jobs:
                self._wakeup = env.event()
                yield self._wakeup
                self._wakeup = None
                continue
            start = self.availability.next_available_s(env.now)
            if start > env.now:
                yield env.timeout(start - env.now)
            if self.prefill_jobs:
                yield from self._run_prefill(self.prefill_jobs.pop(0))
            else:
                batch, wake_at = self._select_drafts()
                if not batch:
                    if wake_at is not None:
                        timer = env.timeout(max(0.0, wake_at - env.now))
                        timer.callbacks.append(lambda _event: self._poke())
                    self._wakeup = env.event()
                    yield self._wakeup
                    self._wakeup = None
                    continue
                yield from self._run_burst(batch)

    def _select_drafts(self) -> tuple[list[RequestState], float | None]:
        items = [QueuedItem(r.request_id, r.ready_s, INF, r.context, r.k) for r in self.draft_jobs]
        choice = self.engine.lanes["draft"].select(items, self.env.now)
        if not choice.take:
            return [], choice.wake_at_s
        chosen = [self.draft_jobs[i] for i in choice.take[: self.max_concurrent]]
        keep = {id(r) for r in chosen}
        self.draft_jobs = [r for r in self.draft_jobs if id(r) not in keep]
        return chosen, None

    def _run_prefill(self, req: RequestState) -> Generator[simpy.Event, Any, None]:
        env = self.env
        factor = self._speed_factor(env.now)
        latency_s, energy_j = self.prefill_cost.at(req.prompt_tokens, 1, 1)
        latency_s /= factor
        energy_j /= factor
        yield env.timeout(latency_s)
        self._account(latency_s, energy_j)
        req.draft_energy_j += energy_j
        self.ready_prefilled.add(req.request_id)
        self._maybe_round(req)

    def _run_burst(self, batch: list[RequestState]) -> Generator[simpy.Event, Any, None]:
        """Draft ``k`` tokens for each request, iteration by iteration."""
        env = self.env
        start = env.now
        factor = self._speed_factor(start)
        steps = max(req.k for req in batch)
        offset = 0.0
        total_energy = 0.0
        done_at: dict[int, float] = {}
        for step in range(1, steps + 1):
            members = [req for req in batch if req.k >= step]
            n = len(members)
            context = sum(req.context for req in members) / n + (step - 1)
            latency_s, energy_j = self.draft_cost.at(context, n, 1)
            latency_s /= factor
            energy_j /= factor
            offset += latency_s
            total_energy += energy_j
            for req in members:
                req.draft_energy_j += energy_j / n
                if req.k == step:
                    done_at[req.request_id] = offset
        for req in batch:
            delay = done_at[req.request_id]
            timer = env.timeout(delay)
            timer.callbacks.append(self._bundle_callback(req))
        self.engine.tracer.event(
            start, "draft_burst", f"device {self.pool}/{self.index}", f"n={len(batch)} k={steps}"
        )
        yield env.timeout(offset)
        self._account(offset, total_energy)

    def _bundle_callback(self, req: RequestState) -> Callable[[simpy.Event], None]:
        def send(_event: simpy.Event) -> None:
            self.engine.send_bundle(req, self)

        return send

    def _account(self, latency_s: float, energy_j: float) -> None:
        now = self.env.now
        cool_s = self.thermal.throttle_after_s if self.thermal is not None else None
        if cool_s is not None and now - latency_s - self._last_end_s >= cool_s:
            self._heat_s = 0.0
        self._heat_s += latency_s
        self._last_end_s = now
        self.busy_s += latency_s
        self.energy_j += energy_j
