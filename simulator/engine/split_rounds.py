"""Split fused rounds on one GPU: what a replica keeps and prices under a lane rule.

A lane rule (``scheduler.arbitration.policy`` of ``baseline``, ``pd``,
``pdv``, ``pdv_hybrid`` or ``pdv_unified``; see :mod:`policies.arbitration`)
runs a fused request's round as a **draft** iteration (the draft model's
``k`` decode steps) and a **verify** iteration (the target's pass over the
``k`` drafts), or as one **atomic round** (draft then verify of one request
as one iteration), priced from the LUTs the fused LUT is composed of
(:class:`~simulator.engine.costs.LaneCosts`); prompts are prefilled on both
models (the fused LUT's ``prefill`` rows).

GPU sharing (:mod:`simulator.engine.gpu_share`, ``scheduler.lanes``): with
``serialized`` one iteration runs at a time and the rule picks the next one
at every boundary; with ``overlap`` every idle lane (every request's worker
under ``baseline``) may start its own iteration and running iterations share
the GPU. Each iteration is one step of the replica's engine profile
(``hardware_profiles[].engine``, :mod:`simulator.engine.step_pricing`): a
prefill (target and draft passes), a draft iteration (``k`` decode steps of
the draft model) or a verify pass; the engine's host time runs as host time
before the GPU work, an eager step whose launches outlast its GPU work lasts its
launch time with its GPU work inside (a ``launch`` segment, on the replica's
one host thread), and ``host_overhead_ms`` adds a framework's own host time
before each model forward pass on top (a prefill's two, each draft step, each
verify).

The kinds of split iterations and the lane each runs on are named in
:mod:`policies.lanes`; the replica runs them in
:mod:`simulator.engine.split_iterations`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import simpy

from policies.lanes import (
    DECODE,
    DECODE_LANE,
    DRAFT_PASS,
    PREFILL_LANE,
    PREFILL_PASS,
    ROUND,
    VERIFY,
    VERIFY_LANE,
    VERIFY_PASS,
)
from simulator.engine.costs import LaneCosts, PhaseCost
from simulator.engine.gpu_share import SharedGpu
from simulator.engine.ragged import batch_context
from simulator.engine.sharing import (
    COMPUTE,
    HOST,
    LAUNCH,
    MEMORY,
    PREFILL_KIND,
    VERIFY_KIND,
    Segment,
    Sharing,
    SymmetricSharing,
    measured_sharing,
)
from simulator.scenario.model import LanesSpec


def sharing_of(spec: LanesSpec) -> Sharing:
    """The sharing model of ``scheduler.lanes``: the stated efficiency, else the H100 measurement.

    Serialized iterations never run together, so their model is never asked.
    """
    if spec.overlap_efficiency is not None:
        return SymmetricSharing(spec.overlap_efficiency)
    return measured_sharing()


class SplitRounds:
    """A replica's GPU shared by its lanes' split iterations (see the module docstring).

    Args:
        env: The simulation's clock.
        spec: ``scheduler.lanes``: GPU sharing, overlap efficiency, host overhead.
        costs: The draft model's decode steps and the target's verify pass.
        prefill: The fused model's prefill (both models' prompts).
        tail_weights: Weight of the longest context in a batch's priced
            context (:mod:`simulator.engine.ragged`) by kind of work: the
            draft steps are plain decode steps (``decode``), the verify pass
            a round's (``verify``); none: the mean context.

    Attributes:
        gpu: The shared GPU the iterations run on.
        overlap: Whether lanes' iterations overlap (else one at a time).
        active: Iterations under way per lane.
    """

    def __init__(
        self,
        env: simpy.Environment,
        spec: LanesSpec,
        costs: LaneCosts,
        prefill: PhaseCost,
        tail_weights: Mapping[str, float] | None = None,
    ) -> None:
        self.costs = costs
        weights = tail_weights or {}
        self.draft_weight = weights.get(DECODE, 0.0)
        self.verify_weight = weights.get(VERIFY, 0.0)
        self.prefill = prefill
        self.overlap = spec.gpu_sharing == "overlap"
        self.gpu = SharedGpu(env, sharing_of(spec))
        self.host_s = spec.host_overhead_ms / 1000.0
        self.active = {PREFILL_LANE: 0, DECODE_LANE: 0, VERIFY_LANE: 0}

    def can_start(self) -> bool:
        """Whether the GPU may take another iteration now."""
        return self.overlap or self.gpu.running == 0

    def price(self, kind: str, batch: Sequence[Any]) -> tuple[list[Segment], float]:
        """Segments and energy of an iteration of ``kind`` over ``batch``.

        ``batch`` holds ``(request, kind)`` pairs for a prefill, requests otherwise.
        """
        host = self.host_s
        segments: list[Segment] = []
        n = len(batch)
        if kind == PREFILL_PASS:
            prefill = self.prefill
            gpu_s, gpu_j = prefill.gpu_at(sum(req.context for req, _ in batch) / n, n, 1)
            step_s, energy_j = prefill.engine_step(gpu_s, gpu_j, n, 1)
            launch_s = prefill.launch_s(n, 1)
            segments = _step(2 * host, step_s, gpu_s, launch_s, COMPUTE, 0.0, PREFILL_KIND)
            return [s for s in segments if s[0] > 0], energy_j
        k = max(req.k for req in batch) if n > 1 else batch[0].k
        energy_j = 0.0
        if kind in (DRAFT_PASS, ROUND):
            context = batch_context(batch, self.draft_weight)
            draft = self.costs.draft
            gpu_s, gpu_j = draft.curve(n, 1, gpu_only=True).sum_steps(context, k)
            step_s, step_j = draft.engine_step(gpu_s, gpu_j, n, 1, repeats=k)
            launch_s = draft.launch_s(n, 1, repeats=k)
            segments += _step(k * host, step_s, gpu_s, launch_s, MEMORY, gpu_s / k, DECODE)
            energy_j += step_j
        if kind in (VERIFY_PASS, ROUND):
            context = batch_context(batch, self.verify_weight)
            verify = self.costs.verify
            gpu_s, gpu_j = verify.gpu_at(context, n, k)
            step_s, step_j = verify.engine_step(gpu_s, gpu_j, n, k)
            launch_s = verify.launch_s(n, k)
            segments += _step(host, step_s, gpu_s, launch_s, COMPUTE, 0.0, VERIFY_KIND)
            energy_j += step_j
        return [s for s in segments if s[0] > 0], energy_j


def _step(
    host_s: float,
    step_s: float,
    gpu_s: float,
    launch_s: float,
    klass: str,
    pass_s: float,
    kind: str,
) -> list[Segment]:
    """The segments of one engine step of ``step_s`` whose GPU work is ``gpu_s``.

    ``host_s`` (the framework's own host time) and the engine's host time run
    first; then the GPU work, inside the step's launches when they outlast it
    (an eager launch-bound step: one ``launch`` segment of ``launch_s``).
    """
    if launch_s >= gpu_s > 0:
        return [
            Segment(host_s + step_s - launch_s, HOST),
            Segment(launch_s, LAUNCH, pass_s, kind, gpu_s),
        ]
    return [Segment(host_s + step_s - gpu_s, HOST), Segment(gpu_s, klass, pass_s, kind)]
