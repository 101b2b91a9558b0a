"""An engine step's time from the GPU time a LUT row prices (see :mod:`simulator.devices.engine_profile`).

:class:`StepPricer` is built once per LUT key a target replica uses. For a
step of ``n`` sequences with draft length ``k`` it says at which batch size to
read the LUT (the CUDA-graph size the step replays) and turns the row's GPU
latency and energy into the step's:

* the forward passes of the step: one for prefill, plain decode and verify; a
  fused round drafts ``k`` times and verifies once; a fused prefill runs the
  target then the draft; a token-tree round (:class:`TreeShape`) runs one head
  pass per level over ``width`` candidates per sequence and verifies ``nodes``
  tokens per sequence once;
* a step that replays a CUDA graph launches nothing; otherwise, if the profile
  models launches, the step takes ``max(GPU time, sum of its launches)``;
* host time is added once per step or once per forward pass;
* the time beyond the GPU time draws the replica's idle power (the GPU waits
  for the host), when the profile of the device knows it.

Draft devices (phones, laptops) have no engine profile: their LUT rows are
their steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.devices.engine_profile import EngineProfile, HostFit

GRAPH_PHASES = frozenset({"draft_decode", "verify", "fused_decode"})
"""LUT phases whose steps replay a CUDA graph (the decode-type steps); prefill launches eagerly."""

SPECULATIVE_PHASES = frozenset({"verify", "fused_decode"})
"""LUT phases priced with the profile's ``speculative`` host fit."""


@dataclass(frozen=True)
class TreeShape:
    """The token tree of a fused round (``speculation.tree``).

    Attributes:
        depth: Draft levels per round (the round's draft length ``k``).
        width: Candidates per level per sequence.
        nodes: Tokens the target verifies per sequence (the tree's nodes,
            root included).
    """

    depth: int
    width: int
    nodes: int


@dataclass(frozen=True)
class StepPricer:
    """How one LUT key's rows become engine steps on a replica.

    Attributes:
        profile: The replica's engine profile.
        phase: The key's LUT phase.
        models: The model ids of the step's forward passes
            (:func:`~simulator.devices.engine_profile.step_models`).
        idle_power_w: Power the replica draws while its GPUs wait (0 when unknown).
        tree: The token tree of a fused round (``None``: a chain of ``k`` drafts).
    """

    profile: EngineProfile
    phase: str
    models: tuple[str, ...]
    idle_power_w: float
    tree: TreeShape | None = None

    @property
    def fit(self) -> HostFit:
        """The host-time fit of the key's kind of step."""
        profile = self.profile
        return profile.speculative if self.phase in SPECULATIVE_PHASES else profile.plain

    def graph_size(self, microbatch: float) -> int | None:
        """The CUDA-graph batch size a step of ``microbatch`` sequences replays (``None``: eager)."""
        if self.phase not in GRAPH_PHASES:
            return None
        return self.profile.graph_size(max(1, math.ceil(microbatch)))

    def lut_microbatch(self, microbatch: float) -> float:
        """The batch size at which the LUT prices the step (the padded graph size, if any)."""
        size = self.graph_size(microbatch)
        return microbatch if size is None else float(size)

    def _forwards(self, microbatch: float, k: int) -> list[tuple[str, float]]:
        """``(model, sampled positions)`` of each forward pass of the step."""
        n = microbatch
        if self.phase == "fused_decode":
            target, draft = self.models[0], self.models[-1]
            tree = self.tree
            if tree is not None:
                return [(draft, n * tree.width)] * tree.depth + [(target, n * tree.nodes)]
            return [(draft, n)] * k + [(target, n * (k + 1))]
        if self.phase == "verify":
            return [(self.models[0], n * (k + 1))]
        return [(model, n) for model in self.models]

    def host_ms(self, microbatch: float, k: int, repeats: int = 1) -> float:
        """Host time the step adds (once, or once per forward pass).

        ``repeats``: the step runs its forward passes that many times (a lane's
        draft iteration: ``k`` decode steps of the draft model in one step).
        """
        forwards = self._forwards(microbatch, k) * repeats
        fit = self.fit
        if self.profile.charged == "per_forward":
            return sum(fit.time_ms(microbatch, sampled) for _, sampled in forwards)
        return fit.time_ms(microbatch, sum(sampled for _, sampled in forwards))

    def launch_ms(self, microbatch: float, k: int, repeats: int = 1) -> float:
        """CPU time of launching the step's forward passes eagerly (0 when it replays a graph)."""
        launch = self.profile.launch
        if launch is None or self.graph_size(microbatch) is not None:
            return 0.0
        return repeats * sum(launch.forward_ms(model) for model, _ in self._forwards(microbatch, k))

    def step(
        self, gpu_ms: float, gpu_mj: float, microbatch: float, k: int, repeats: int = 1
    ) -> tuple[float, float]:
        """``(latency_ms, energy_mj)`` of the step whose GPU work costs ``gpu_ms`` and ``gpu_mj``.

        ``repeats``: the step's forward passes run that many times (see :meth:`host_ms`).
        """
        latency_ms = max(gpu_ms, self.launch_ms(microbatch, k, repeats)) + self.host_ms(
            microbatch, k, repeats
        )
        return latency_ms, gpu_mj + (latency_ms - gpu_ms) * self.idle_power_w / 1000.0
