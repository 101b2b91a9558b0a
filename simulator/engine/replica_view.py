"""What a target replica's mechanisms may read and touch of the replica.

A :class:`~simulator.engine.target.TargetReplica` is an entity: its queues,
its counters and the answers its arbitration rule asks for. The mechanisms
that run its iterations (:mod:`~simulator.engine.replica_kv`,
:mod:`~simulator.engine.prefill`, :mod:`~simulator.engine.decode_runs`,
:mod:`~simulator.engine.verify_rounds`, :mod:`~simulator.engine.mixed`,
:mod:`~simulator.engine.split_iterations`) see it only through
:class:`ReplicaView`, declared here so that they never import the replica's
module (no import circle, type-only imports included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import simpy

from simulator.devices.model import Availability
from simulator.engine.costs import ReplicaCosts
from simulator.engine.gpu_share import GpuTime
from simulator.engine.heat import Heat
from simulator.engine.kv import KvPool
from simulator.engine.lifecycle import RequestLifecycle, ServerContext, Speculator
from simulator.engine.microbatch import Microbatcher
from simulator.engine.request_state import RequestState
from simulator.engine.signals import ReplicaWindow
from simulator.engine.step_noise import StepNoise

PrefillEntry = tuple[RequestState, str, float]
"""A prompt waiting in the prefill lane: the request, its decode-lane kind, since when."""


class ReplicaView(Protocol):
    """The replica's state and services its mechanisms use (see the module docstring).

    Attributes:
        env: The simulation's clock.
        context: The run's shared services.
        lifecycle: Where requests' progress is reported.
        speculation: Chooses draft lengths and settles verified rounds.
        index: The replica's index in its pool.
        pool: The name of its pool.
        serves: ``colocated``, or ``prefill``/``decode`` in a disaggregated fleet.
        costs: Its per-kind iteration costs.
        kv: Its KV memory.
        kv_mb_per_token: KV per token of each kind of work.
        prefill_q: The prefill lane.
        decode_q: The decode lane, by kind of work.
        verify_q: The verify lane of split rounds.
        pass_q: Requests of the current pass still to run their round (``pdv_unified``).
        holders: Requests holding KV, in admission order.
        chunking: Prompts whose chunked prefill is under way, with their kind.
        busy: Whether a whole-round iteration runs now.
        tokens_out: Output tokens committed on it.
        heat: Its thermal state.
        cool: Whether it is never throttled (iterations skip the thermal bookkeeping).
        window: Its recent iterations for the k controller (``None``: not kept).
        microbatcher: Splits and prices decode-lane batches.
        tail_weight: Weight of the longest context in a decode-lane batch's
            priced context (:mod:`simulator.engine.ragged`), by kind of work.
        noise: Its step-time noise (``None``: off).
        step_lane: The verify lane's batching policy.
        continuous_lane: The batching policy of plain decode and fused rounds.
        max_running: Most requests it runs at once.
        availability: Its availability windows (``None``: always available).
        always_available: Whether it is never unavailable.
    """

    env: simpy.Environment
    context: ServerContext
    lifecycle: RequestLifecycle
    speculation: Speculator
    index: int
    pool: str
    serves: str
    costs: ReplicaCosts
    kv: KvPool
    kv_mb_per_token: Mapping[str, float]
    prefill_q: list[PrefillEntry]
    decode_q: dict[str, list[RequestState]]
    verify_q: list[RequestState]
    pass_q: list[RequestState]
    holders: list[RequestState]
    chunking: list[tuple[RequestState, str]]
    busy: bool
    tokens_out: int
    heat: Heat
    cool: bool
    window: ReplicaWindow | None
    microbatcher: Microbatcher
    tail_weight: Mapping[str, float]
    noise: StepNoise | None
    step_lane: Any
    continuous_lane: Any
    max_running: int
    availability: Availability | None
    always_available: bool

    def enqueue_step(self, req: RequestState, kind: str, ready_s: float | None = None) -> None:
        """Queue a request for its next decode-lane iteration."""
        ...

    def decide(self) -> None:
        """Start the next iteration(s), or arrange to decide again."""
        ...

    def end_iteration(self) -> None:
        """The running whole-round iteration's results are applied: decide what comes next."""
        ...

    def account(self, latency_s: float, energy_j: float, reqs: list[RequestState]) -> None:
        """Count an iteration's time and energy, sharing the energy among ``reqs``."""
        ...

    def account_run(
        self, elapsed_s: float, energy_j: float, iterations: int, reqs: list[RequestState]
    ) -> None:
        """Count a decode run of ``iterations`` iterations over ``reqs``."""
        ...

    def account_split(self, gpu: GpuTime, energy_j: float, reqs: list[RequestState]) -> None:
        """Count a split iteration: the shared GPU's busy clocks so far, its energy."""
        ...

    def throttled(self, start_s: float, latency_s: float, energy_j: float) -> tuple[float, float]:
        """Apply the thermal factor to an iteration starting at ``start_s``."""
        ...

    def remember(self, batch: list[RequestState], kind: str, latency_s: float) -> None:
        """Put a decode-lane iteration ending now into the controller's window."""
        ...
