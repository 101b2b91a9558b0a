"""What the goodput planner can change: one knob per ``planner.candidates`` key.

A knob knows three things about its key: the value the run has now (where
hill climbing starts), the runtime a what-if window of a value runs with,
and how to make the running engine take a value from now on. Knobs are
found by name in :data:`KNOBS`, in the order candidates enumerate them
(the first varies slowest).

``verify_replicas`` (the number of serving replicas of every target pool,
or of its verify replicas under a split), ``draft_replicas`` (hybrid
mode: the draft replicas of every target pool), ``prefill_replicas`` and
``decode_replicas`` (a disaggregated fleet: the replicas of every prefill
pool and of every decode pool) are the knobs that change the set of replicas. They act together, so their window runtime and their
application go through :func:`simulator.planner.candidates.candidate_runtime`
and :func:`simulator.planner.candidates.apply_replicas`
(:meth:`Engine.set_replica_count`, :meth:`Engine.set_replica_split`, which
also handle model loading and draining); their knobs only read the run's value.
``tensor_parallel`` (the replicas' tensor-parallel degree) acts with
``verify_replicas`` the same way (:meth:`Engine.set_replica_plan`: a
change of degree is a reload); its knob also gives a window's replicas the
plan of its degree.

The speculation and batching knobs (``k``, ``k_controller``, ``max_batch``,
``max_microbatch``, ``draft_model``) set what the scenario's
``speculation`` and ``scheduler`` keys set. A window of a value runs with it
from the window's start; the running engine takes it for what it decides
from then on (rounds whose k is chosen, iterations formed, requests
admitted), never for work already under way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Protocol

from policies import registry
from policies.batching import BatchLimits, NoParams
from policies.draft_selection import FixedParams
from policies.hybrid import FusedFractionParams
from simulator.engine.core import Engine
from simulator.engine.runtime import RunSettings, Runtime
from simulator.scenario.model import LaneSpec, PolicyChoice

Value = float | str
"""A candidate value: a number (replica counts, draft lengths and batch limits are whole
numbers) or a name (a k controller, a drafter model)."""


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


class PrefillReplicas:
    """``prefill_replicas``: replicas of every prefill pool (disaggregated fleets).

    With ``decode_replicas`` it sets a disaggregated fleet's split (DistServe's
    "xPyD": x prefill and y decode replicas of each pool); they act together
    through :func:`simulator.planner.candidates.apply_replicas`.
    """

    name: ClassVar[str] = "prefill_replicas"
    role: ClassVar[str] = "prefill"

    def current(self, engine: Engine) -> Value:
        """The first prefill pool's serving (or loading) replicas."""
        counts = engine.serving_counts()
        return float(next(counts[pool] for pool in counts if _role(engine, pool) == self.role))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """Unchanged here: the replica set is built by ``candidate_runtime``."""
        return runtime

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Nothing here: ``apply_replicas`` applies it."""


class DecodeReplicas(PrefillReplicas):
    """``decode_replicas``: replicas of every decode pool (disaggregated fleets; see ``prefill_replicas``)."""

    name: ClassVar[str] = "decode_replicas"
    role: ClassVar[str] = "decode"


def _role(engine: Engine, pool: str) -> str:
    """What ``pool``'s replicas serve: ``colocated``, ``prefill`` or ``decode``."""
    return next(plan.serves for plan in engine.runtime.replicas if plan.pool == pool)


class TensorParallel:
    """``tensor_parallel``: the tensor-parallel degree of every target pool's replicas.

    A degree is served by the pool's plan at it (``Runtime.tensor_parallel_plans``,
    built when the scenario loads). A change is a reload: the replicas of
    the old degree drain and retire, new ones of the new degree hold their
    GPUs from the decision and serve after ``model_load_s``; it acts with
    ``verify_replicas`` (how many), through
    :func:`simulator.planner.candidates.apply_replicas`.
    """

    name: ClassVar[str] = "tensor_parallel"

    def current(self, engine: Engine) -> Value:
        """The first pool's degree: that of the replicas it serves with (and starts) now."""
        return float(engine.tensor_parallel(next(iter(engine.serving_counts()))))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime whose replicas are their pool's plan at degree ``value``.

        Each keeps its role and availability (a replica that loads in the
        window: from when it is ready; see ``candidate_runtime``).
        """
        plans = runtime.tensor_parallel_plans
        degree = int(value)
        replicas = tuple(
            plan
            if plan.tensor_parallel == degree
            else replace(plans[(plan.pool, degree)], role=plan.role, availability=plan.availability)
            for plan in runtime.replicas
        )
        return replace(runtime, replicas=replicas)

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Nothing here: ``apply_replicas`` applies it with ``verify_replicas``."""


class FusedFraction:
    """``fused_fraction``: the share of new requests the hybrid policy serves fused."""

    name: ClassVar[str] = "fused_fraction"

    def current(self, engine: Engine) -> Value:
        """The ``fused_fraction`` policy's share now, as last applied (0 without one)."""
        hybrid = engine.hybrid_choice
        return float(getattr(hybrid.params, "fraction", 0.0)) if hybrid else 0.0

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with the policy's share set to ``value``."""
        return replace(
            runtime, settings=replace(runtime.settings, hybrid=fused_fraction_choice(value))
        )

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """The next requests are routed with share ``value``."""
        engine.set_hybrid(fused_fraction_choice(value))


def fused_fraction_choice(fraction: Value) -> PolicyChoice:
    """The ``fused_fraction`` hybrid policy with share ``fraction``."""
    return PolicyChoice("hybrid_mode", "fused_fraction", FusedFractionParams(float(fraction)))


class DraftLength:
    """``k``: a fixed draft length (the ``static`` controller with that k).

    It replaces the scenario's k controller, adaptive or not, for every round
    whose k is chosen from then on; a request's first round drafts it too.
    """

    name: ClassVar[str] = "k"

    def current(self, engine: Engine) -> Value:
        """The static controller's k (an adaptive controller: the scenario's first-round k)."""
        return float(getattr(engine.k_controller, "k", engine.runtime.settings.k))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with the static controller drafting ``value`` tokens every round."""
        settings = replace(runtime.settings, k=int(value), k_control=static_k_choice())
        return replace(runtime, settings=settings)

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Rounds chosen from now on draft ``value`` tokens (already so: nothing changes)."""
        controller = engine.k_controller
        if getattr(controller, "name", "") == "static" and getattr(controller, "k", 0) == value:
            return
        engine.set_k_control(static_k_choice(), int(value))


def static_k_choice() -> PolicyChoice:
    """The ``static`` k controller (its k is the run's or the window's ``k``)."""
    return PolicyChoice("k_control", "static", NoParams())


class KController:
    """``k_controller``: the draft-length controller, by registered name.

    The scenario's own controller keeps the scenario's parameters; any other
    runs with its defaults. Every controller starts from the scenario's ``k``.
    """

    name: ClassVar[str] = "k_controller"

    def current(self, engine: Engine) -> Value:
        """The controller's registered name."""
        return str(getattr(engine.k_controller, "name", engine.runtime.settings.k_control.name))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with controller ``value``."""
        settings = replace(runtime.settings, k_control=k_control_choice(runtime.settings, value))
        return replace(runtime, settings=settings)

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Rounds chosen from now on take their k from controller ``value``.

        The controller running already keeps running, with what it has learnt.
        """
        if self.current(engine) == value:
            return
        settings = engine.runtime.settings
        engine.set_k_control(k_control_choice(settings, value), settings.k)


def k_control_choice(settings: RunSettings, name: Value) -> PolicyChoice:
    """Controller ``name``: the scenario's choice when it is the scenario's, else its defaults."""
    if settings.k_control.name == name:
        return settings.k_control
    return PolicyChoice("k_control", str(name), registry("k_control").get(str(name)).Params())


class MaxBatch:
    """``max_batch``: the decode (verify) lane's batch limit on every replica."""

    name: ClassVar[str] = "max_batch"

    def current(self, engine: Engine) -> Value:
        """The lane's ``max_batch`` now."""
        return float(engine.decode_lane.limits.max_batch)

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with the lane's ``max_batch`` set to ``value``."""
        lane = runtime.settings.scheduler.verify
        return _with_decode_lane(runtime, replace(lane, limits=_limits(lane, value)))

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Iterations formed from now on take at most ``value`` requests."""
        lane = engine.decode_lane
        engine.set_decode_lane(replace(lane, limits=_limits(lane, value)))


def _limits(lane: LaneSpec, max_batch: Value) -> BatchLimits:
    return replace(lane.limits, max_batch=int(max_batch))


class MaxMicrobatch:
    """``max_microbatch``: most sequences per microbatch of a decode-lane iteration."""

    name: ClassVar[str] = "max_microbatch"

    def current(self, engine: Engine) -> Value:
        """The lane's ``max_microbatch`` now."""
        micro = engine.decode_lane.microbatch
        assert micro is not None  # the verify lane always has microbatch settings
        return float(micro.max_microbatch)

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime with ``max_microbatch`` set to ``value``."""
        return _with_decode_lane(runtime, _microbatched(runtime.settings.scheduler.verify, value))

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Iterations formed from now on are split into microbatches of at most ``value``."""
        engine.set_decode_lane(_microbatched(engine.decode_lane, value))


def _microbatched(lane: LaneSpec, max_microbatch: Value) -> LaneSpec:
    assert lane.microbatch is not None  # the verify lane always has microbatch settings
    return replace(lane, microbatch=replace(lane.microbatch, max_microbatch=int(max_microbatch)))


def _with_decode_lane(runtime: Runtime, lane: LaneSpec) -> Runtime:
    """``runtime`` with the decode (verify) lane ``lane``."""
    scheduler = replace(runtime.settings.scheduler, verify=lane)
    return replace(runtime, settings=replace(runtime.settings, scheduler=scheduler))


class DraftModel:
    """``draft_model``: the drafter model new requests draft with, by name.

    Sets the ``fixed`` draft-selection policy: a request whose draft class
    lists the model (and can run it for the request) drafts with it, any
    other with its class's first candidate.
    """

    name: ClassVar[str] = "draft_model"

    def current(self, engine: Engine) -> Value:
        """The ``fixed`` policy's model now ("" under another policy)."""
        params = getattr(engine.draft_selector, "params", None)
        return str(getattr(params, "model", ""))

    def window_runtime(self, runtime: Runtime, value: Value) -> Runtime:
        """The runtime drafting with ``value`` where a class has it."""
        settings = replace(runtime.settings, draft_selection=fixed_draft_choice(value))
        return replace(runtime, settings=settings)

    def apply(self, engine: Engine, value: Value, model_load_s: float) -> None:
        """Requests admitted from now on draft with ``value`` where their class has it."""
        engine.set_draft_selection(fixed_draft_choice(value))


def fixed_draft_choice(model: Value) -> PolicyChoice:
    """The ``fixed`` draft-selection policy naming ``model``."""
    return PolicyChoice("draft_selection", "fixed", FixedParams(str(model)))


KNOBS: dict[str, Knob] = {
    knob.name: knob
    for knob in (
        DraftReplicas(),
        VerifyReplicas(),
        PrefillReplicas(),
        DecodeReplicas(),
        TensorParallel(),
        FusedFraction(),
        DraftLength(),
        KController(),
        MaxBatch(),
        MaxMicrobatch(),
        DraftModel(),
    )
}
"""Every knob by candidate key, in enumeration order."""
