"""Binding a run's policy choices to policy objects: one place for the start and the planner.

A run builds its policies when it starts and a planner swaps some of them
mid-run (k controller, hybrid policy, drafter selection, decode lane). Both
go through one :class:`PolicyBinder`, so a policy built mid-run gets its
random stream as one built at the start does, and the flags derived from
what a policy reads (windowed signals, predictions) are derived the same
way every time. What a policy reads is a capability its family's Protocol
declares with a default (``signal_window``, ``predicts_iteration``,
``predicts_latency``, ``predicts_ttft``, ``reads_replica_detail``, ``fixed_k``: see
policies/README.md), so the binder reads the attribute, never probes for it.
The binder only builds: the collaborators that use a policy keep it (see
:mod:`simulator.engine`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from policies.arbitration import ArbitrationRule
from policies.base import promised_by_method
from simulator.engine.microbatch import Microbatcher
from simulator.engine.policy_build import instantiate
from simulator.rng import RandomStreams
from simulator.scenario.model import LaneSpec, PolicyChoice, SchedulerSpec


@dataclass(frozen=True)
class KControl:
    """A k controller and what it reads.

    Attributes:
        controller: The controller (``next_k`` and ``observe``).
        k: Draft length of a request's first round (and the controller's starting k).
        signal_window: Iterations and rounds each replica remembers for it (0: none).
        windowed: Whether it reads the extended (windowed) signals.
        predicts: Whether it reads ``KSignals.predictor`` (built only then).
        fixed: Whether its k reads nothing of its signals but the bounds
            (``fixed_k``): it is asked once, not every round.
    """

    controller: Any
    k: int
    signal_window: int
    windowed: bool
    predicts: bool
    fixed: bool = False


@dataclass(frozen=True)
class HybridMode:
    """The hybrid policy choosing each request's mode, and what it reads.

    Attributes:
        policy: The policy (``None``: not hybrid mode).
        choice: Its scenario choice and parameters (what a planner reads back).
        predicts_latency: Whether it reads the predicted per-round times (computed only then).
    """

    policy: Any
    choice: PolicyChoice | None
    predicts_latency: bool


@dataclass(frozen=True)
class Routing:
    """The routing and admission policies and what they read.

    Attributes:
        router: Chooses each admitted request's replica.
        admission: Admits, defers or rejects each arrived request.
        admission_predicts: Whether admission reads the TTFT prediction.
        routing_detail: Whether the router reads the detailed replica loads
            (pool, KV, queue, link).
        routing_prefix: Whether the router reads each replica's cached prefix
            of the request (``reads_prefix``).
        decode_router: A disaggregated fleet's router choosing each prefilled
            request's decode replica (``scheduler.routing.decode``; ``None``:
            the fleet is colocated). It draws from the ``decode_routing``
            stream.
    """

    router: Any
    admission: Any
    admission_predicts: bool
    routing_detail: bool
    routing_prefix: bool = False
    decode_router: Any = None

    @property
    def predicts_ttft(self) -> bool:
        """Whether the predicted prefill queues are kept (only when a policy reads them)."""
        return self.admission_predicts or self.routing_detail


@dataclass(frozen=True)
class DecodeLane:
    """The decode (verify) lane's batching policies and microbatcher.

    Attributes:
        spec: The lane's policy, limits and microbatching.
        verify: Its batching policy.
        continuous: The same policy for work ready again at the end of its own
            iteration (it never waits for a batch).
        microbatcher: Splits and prices its batches.
    """

    spec: LaneSpec
    verify: Any
    continuous: Any
    microbatcher: Microbatcher


class PolicyBinder:
    """Builds every policy of a run from its choice, with the run's random streams.

    Args:
        streams: The run's random streams (a policy naming a ``random_stream`` draws from it).
    """

    def __init__(self, streams: RandomStreams) -> None:
        self.streams = streams

    def build(self, choice: PolicyChoice, *args: Any) -> Any:
        """Build the chosen policy (see :func:`simulator.engine.policy_build.instantiate`)."""
        return instantiate(choice, *args, streams=self.streams)

    def k_control(self, choice: PolicyChoice, k: int) -> KControl:
        """The k controller ``choice`` starting at ``k``, with the signals it reads."""
        controller = self.build(choice, k)
        window = int(controller.signal_window)
        windowed = window > 0
        predicts = windowed and bool(controller.predicts_iteration)
        fixed = promised_by_method(type(controller), "fixed_k", "next_k")
        return KControl(controller, k, window, windowed, predicts, fixed)

    def hybrid(self, choice: PolicyChoice | None) -> HybridMode:
        """The hybrid policy ``choice`` (``None``: no hybrid policy)."""
        policy = self.build(choice) if choice is not None else None
        return HybridMode(policy, choice, policy is not None and bool(policy.predicts_latency))

    def draft_selection(self, choice: PolicyChoice | None) -> Any:
        """The drafter-model selection policy (``None``: one model per class)."""
        return self.build(choice) if choice is not None else None

    def routing(self, scheduler: SchedulerSpec) -> Routing:
        """The scheduler's routing and admission policies."""
        router = self.build(scheduler.routing)
        admission = self.build(scheduler.admission)
        decode = scheduler.decode_routing
        return Routing(
            router,
            admission,
            bool(admission.predicts_ttft),
            bool(router.reads_replica_detail),
            bool(router.reads_prefix),
            None
            if decode is None
            else instantiate(decode, streams=self.streams, stream="decode_routing"),
        )

    def decode_lane(self, lane: LaneSpec) -> DecodeLane:
        """The decode lane's ``verify`` and ``continuous`` batching policies and microbatcher."""
        assert lane.microbatch is not None  # the verify lane always has microbatch settings
        return DecodeLane(
            lane,
            self.build(lane.policy, lane.limits),
            self.build(lane.policy, replace(lane.limits, max_wait_ms=0.0)),
            Microbatcher(lane.microbatch, lane.limits.max_batch),
        )

    def lanes(self, scheduler: SchedulerSpec, decode: DecodeLane) -> dict[str, Any]:
        """The batching policies by lane: ``prefill``, ``draft``, ``verify`` and ``continuous``."""
        return {
            "prefill": self.build(scheduler.prefill.policy, scheduler.prefill.limits),
            "draft": self.build(scheduler.draft.policy, scheduler.draft.limits),
            "verify": decode.verify,
            "continuous": decode.continuous,
        }

    def arbiter_factory(self, scheduler: SchedulerSpec) -> Callable[[], ArbitrationRule]:
        """Builds a replica's lane arbitration rule (one per replica: a rule may keep state)."""
        return partial(self.build, scheduler.arbitration)
