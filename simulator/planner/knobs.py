"""What the goodput planner can change: one knob per ``planner.candidates`` key.

A knob knows three things about its key: the value the run has now (where
hill climbing starts), the runtime a what-if window of a value runs with,
and how to make the running engine take a value from now on. Knobs are
found by name in :data:`KNOBS`, in the order candidates enumerate them
(the first varies slowest).

``verify_replicas`` (the number of serving replicas of every target pool,
or of its verify replicas under a split) and ``draft_replicas`` (hybrid
mode: the draft replicas of every target pool) are the knobs that change
the set of replicas. They act together, so their window runtime and their
application go through :func:`simulator.planner.candidates.candidate_runtime`
and :func:`simulator.planner.candidates.apply_replicas`
(:meth:`Engine.set_replica_count`, :meth:`Engine.set_replica_split`, which
also handle model loading and draining); their knobs only read the run's value.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Protocol

from policies.hybrid import FusedFractionParams
from simulator.engine.core import Engine
from simulator.engine.runtime import Runtime
from simulator.scenario.model import PolicyChoice

Value = float
"""A candidate value (replica counts and draft lengths are whole numbers)."""


class Knob(Protocol):
    """One candidate key of the planner (see the module docstring)."""

    name: ClassVar[str]

    def current(self, engine: Engine) -> Value:
        """Return the value the run has now."""
        ...

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """Return ``runtime`` as a what-if window of ``value`` runs it."""
        ...

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Make the running engine take ``value`` from now on."""
        ...


class DraftReplicas:
    """``draft_replicas``: draft replicas of every target pool (hybrid mode; see the module docstring)."""

    name: ClassVar[str] = "draft_replicas"

    def current(self, engine: Engine) -> Value:
        """The first pool's draft replicas (0 before any split)."""
        return float(next(iter(engine.role_counts("draft").values())))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """Unchanged here: the replica set and roles are built by ``candidate_runtime``."""
        return runtime

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Nothing here: ``apply_replicas`` applies it with ``verify_replicas``."""


class VerifyReplicas:
    """``verify_replicas``: serving (under a split: verify) replicas of every target pool."""

    name: ClassVar[str] = "verify_replicas"

    def current(self, engine: Engine) -> Value:
        """The first pool's verify replicas (all its replicas before any split)."""
        return float(next(iter(engine.role_counts("verify").values())))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """Unchanged here: the replica set is built by ``candidate_runtime``."""
        return runtime

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Nothing here: ``apply_replicas`` applies it with ``draft_replicas``."""


class FusedFraction:
    """``fused_fraction``: the share of new requests the hybrid policy serves fused."""

    name: ClassVar[str] = "fused_fraction"

    def current(self, engine: Engine) -> Value:
        """The ``fused_fraction`` policy's share now (0 without one)."""
        hybrid = engine.runtime.settings.hybrid
        return float(getattr(hybrid.params, "fraction", 0.0)) if hybrid else 0.0

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with the policy's share set to ``value``."""
        return replace(
            runtime, settings=replace(runtime.settings, hybrid=fused_fraction_choice(value))
        )

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """The next requests are routed with share ``value``."""
        engine.set_hybrid(fused_fraction_choice(value))


def fused_fraction_choice(fraction: float) -> PolicyChoice:
    """The ``fused_fraction`` hybrid policy with share ``fraction``."""
    return PolicyChoice("hybrid_mode", "fused_fraction", FusedFractionParams(float(fraction)))


KNOBS: dict[str, Knob] = {
    knob.name: knob for knob in (DraftReplicas(), VerifyReplicas(), FusedFraction())
}
"""Every knob by candidate key, in enumeration order."""
