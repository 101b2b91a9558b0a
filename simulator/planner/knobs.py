"""What the goodput planner can change: one knob per ``planner.candidates`` key.

A knob knows three things about its key: the value the run has now (where
hill climbing starts), the runtime a what-if window of a value runs with,
and how to make the running engine take a value from now on. Knobs are
found by name in :data:`KNOBS`, in the order candidates enumerate them
(the first varies slowest).

``verify_replicas`` (the number of serving replicas of every target pool)
is the one knob that changes the set of replicas: its window runtime and
its application go through :func:`simulator.planner.candidates.candidate_runtime`
and :meth:`Engine.set_replica_count`, which also handle model loading and
draining, so its knob only reads the run's value.
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


class VerifyReplicas:
    """``verify_replicas``: serving replicas of every target pool (counted by the planner)."""

    name: ClassVar[str] = "verify_replicas"

    def current(self, engine: Engine) -> Value:
        """The first pool's serving replicas."""
        return float(next(iter(engine.serving_counts().values())))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """Unchanged here: the replica set is built by ``candidate_runtime``."""
        return runtime

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Resize every pool (new replicas load for ``model_load_s``, removed ones drain)."""
        for pool in engine.serving_counts():
            engine.set_replica_count(pool, int(value), model_load_s)


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


KNOBS: dict[str, Knob] = {knob.name: knob for knob in (VerifyReplicas(), FusedFraction())}
"""Every knob by candidate key, in enumeration order."""
