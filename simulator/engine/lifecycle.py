"""The narrow interface between servers (replicas, draft devices) and the request lifecycle.

Target replicas and draft devices do not know the engine. They report what
happened to a request through :class:`RequestLifecycle` (implemented by
:class:`~simulator.engine.flow.RequestFlow`), ask each round's draft length
and settle verified rounds through :class:`Speculator` (implemented by
:class:`~simulator.engine.speculation.Speculation`), and read the run's
shared services (clock, tracer, batching policies, arbitration rule, KV
rule) from one :class:`ServerContext`. Data flows one way: the fleet builds
servers from the runtime objects and hands them this context; servers call
back through the two protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import simpy

from policies.arbitration import ArbitrationRule
from simulator.engine.microbatch import Microbatcher
from simulator.engine.request_state import RequestState
from simulator.engine.step_timing import StepTiming
from simulator.engine.tracing import Tracer
from simulator.rng import RandomStreams
from simulator.scenario.model import LanesSpec, PrefixCacheSpec


class RequestLifecycle(Protocol):
    """What servers tell the request lifecycle."""

    def on_prefilled(self, req: RequestState, kind: str) -> None:
        """The request's target prefill is done (first token, or a recomputed context)."""
        ...

    def on_finished_server(self, req: RequestState, now_s: float) -> None:
        """The target committed the last token of a plain or fused request."""
        ...

    def on_verified(self, req: RequestState, gained: int, now_s: float) -> None:
        """A verify iteration committed ``gained`` tokens of a distributed request."""
        ...

    def reject_on_replica(self, req: RequestState, reason: str) -> None:
        """The request's replica can never serve it."""
        ...

    def send_bundle(self, req: RequestState, sent_s: float) -> None:
        """The request's device finished drafting at ``sent_s``: upload the bundle."""
        ...

    def finish_distributed(self, req: RequestState) -> None:
        """A distributed request's last verified tokens reached its device."""
        ...

    def spill_to_fused(self, req: RequestState) -> None:
        """A distributed request leaves its device and continues in fused mode on its replica."""
        ...


class Speculator(Protocol):
    """The per-round decisions servers ask of the draft-length loop."""

    def choose_k(self, req: RequestState) -> None:
        """Set the draft length of the request's next round."""
        ...

    def verify_round(self, req: RequestState) -> int:
        """Sample and commit a round's accepted tokens; return the tokens gained."""
        ...


@dataclass(frozen=True)
class ServerContext:
    """What every server of one run shares.

    Attributes:
        env: The simulation's clock.
        lifecycle: Where servers report requests' progress.
        speculation: Chooses each round's draft length and settles verified rounds.
        tracer: Receives engine events.
        tracing: Whether events are traced (hot paths skip formatting otherwise).
        lanes: The batching policies by lane: ``prefill``, ``draft``,
            ``verify`` and ``continuous`` (the decode lane's policy for work
            that never waits for a batch).
        new_arbiter: Builds a replica's lane arbitration rule (one per replica:
            a rule may keep per-replica state).
        split_lanes: ``scheduler.lanes``: how split iterations share a
            replica's GPU (read under lane rules only).
        microbatcher: Splits and prices decode-lane batches.
        kv_policy: ``scheduler.kv.on_full``.
        k_reserve: Draft tokens a request's KV reserves beyond its output.
        k_max: Largest draft length.
        tree_nodes: Tokens a token-tree fused round writes per sequence
            (``speculation.tree.nodes``; ``None``: ``k + 1`` of a chain).
        fuse_iterations: Advance unchanged decode runs in one event.
        max_running: Most requests a replica runs at once.
        prefill_max_batch: Most prompts one prefill iteration starts.
        signal_window: Decode-lane iterations and verified rounds each replica
            remembers for the k controller's windowed signals (0: none kept).
        step_timing: The ragged-batch rule and step-time noise
            (``simulation.ragged_batches``, ``simulation.step_noise``).
        streams: The run's random streams (each replica's step-time noise
            draws from its own sub-stream of ``step_noise``).
        prefix_cache: ``scheduler.kv.prefix_cache`` when enabled (``None``: off).
        prefixes: Request id -> its prompt's block ids (requests without
            any are absent).
        prefix_cached: Request id -> prompt tokens its last prefill found
            cached, filled as the replicas prefill (with a prefix cache only).
    """

    env: simpy.Environment
    lifecycle: RequestLifecycle
    speculation: Speculator
    tracer: Tracer
    tracing: bool
    lanes: Mapping[str, Any]
    new_arbiter: Callable[[], ArbitrationRule]
    microbatcher: Microbatcher
    kv_policy: str
    k_reserve: int
    k_max: int
    fuse_iterations: bool
    max_running: int
    prefill_max_batch: int
    split_lanes: LanesSpec
    signal_window: int = 0
    step_timing: StepTiming = field(default_factory=StepTiming)
    streams: RandomStreams | None = None
    tree_nodes: int | None = None
    prefix_cache: PrefixCacheSpec | None = None
    prefixes: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    prefix_cached: dict[int, int] = field(default_factory=dict)
