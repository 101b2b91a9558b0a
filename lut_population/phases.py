"""The four LUT phases as work, and the cost of one LUT key on its grid.

Row meaning (shared naming contract): one iteration for a batch of
``microbatch`` sequences each with ``context_len`` tokens of context.

* ``prefill``: each sequence processes ``context_len`` prompt tokens from an
  empty cache; the LM head runs on the last position only.
* ``draft_decode``: each sequence adds one token to ``context_len`` cached tokens.
* ``verify``: each sequence adds ``k + 1`` tokens (k drafted + 1) to
  ``context_len`` cached tokens; the LM head runs on all ``k + 1`` positions.
* ``fused_decode`` (model ``<target>+<draft>``): one speculation round on the
  target replica: ``k`` draft decode steps at contexts ``context_len``,
  ``context_len + 1``, ..., ``context_len + k - 1`` followed by one target
  verify of ``k`` tokens. The draft runs on one GPU of the replica (TP 1).
  A fused file's ``prefill`` rows are the target's and the draft's prefill of
  the same prompt, one after the other.

Energy is latency x power (W x ms = mJ); peak memory is weights + live
activations + the batch's KV cache after the iteration; ``kv_delta_mb`` is
the KV cache the iteration appends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.work import IterationModel, Work, kv_delta_mb, kv_total_mb

PHASES = ("prefill", "draft_decode", "verify", "fused_decode")
"""LUT phase ids."""

K_PHASES = frozenset({"verify", "fused_decode"})
"""Phases with a ``fanout_k`` axis; the others have fanout_k = 1."""


def phase_work(phase: str, context: FloatArray, batch: FloatArray, k: FloatArray) -> Work:
    """The iteration a single-model ``phase`` row describes."""
    ones = np.ones_like(context * batch * k)
    if phase == "prefill":
        return Work(batch * ones, context * ones, 0.0 * ones, ones)
    if phase == "draft_decode":
        return Work(batch * ones, ones, context * ones, ones)
    if phase == "verify":
        return Work(batch * ones, (k + 1.0) * ones, context * ones, (k + 1.0) * ones)
    raise ValueError(f"phase {phase!r} is not a single-model phase")


@dataclass(frozen=True)
class Metrics:
    """Costs of one LUT key at an array of grid points.

    Attributes:
        latency_ms: Iteration latency.
        energy_mj: Iteration energy (0 where ``energy_known`` is false).
        peak_mem_mb: Peak memory of the replica.
        kv_delta_mb: KV cache appended by the iteration.
        energy_known: Whether power data exist for every model involved.
    """

    latency_ms: FloatArray
    energy_mj: FloatArray
    peak_mem_mb: FloatArray
    kv_delta_mb: FloatArray
    energy_known: bool


class KeyCost(Protocol):
    """The cost function behind one LUT key."""

    @property
    def phase(self) -> str:
        """LUT phase."""
        ...

    @property
    def source(self) -> str:
        """The ``source`` tag of the rows."""
        ...

    @property
    def capacity_mb(self) -> float | None:
        """Memory of the replica, or None when unknown."""
        ...

    def evaluate(self, context: FloatArray, batch: FloatArray, k: FloatArray) -> Metrics:
        """Costs at the grid points ``(context, batch, k)`` (arrays broadcast together)."""
        ...


def _energy(model: IterationModel, work: Work, latency: FloatArray) -> FloatArray | None:
    power = model.power_w(work)
    return None if power is None else np.asarray(power * latency)


@dataclass
class SinglePhaseCost:
    """A prefill, draft_decode or verify key of one model."""

    model: IterationModel
    phase: str

    @property
    def source(self) -> str:
        """The model's source tag."""
        return self.model.source

    @property
    def capacity_mb(self) -> float | None:
        """Replica memory."""
        return self.model.capacity_mb

    def evaluate(self, context: FloatArray, batch: FloatArray, k: FloatArray) -> Metrics:
        """Costs of the phase (see the module docstring)."""
        work = phase_work(self.phase, context, batch, k)
        latency = self.model.latency_ms(work)
        energy = _energy(self.model, work, latency)
        peak = (
            self.model.weights_mb()
            + self.model.activations_mb(work)
            + kv_total_mb(self.model.shape, work)
        )
        return Metrics(
            latency_ms=latency,
            energy_mj=np.zeros_like(latency) if energy is None else energy,
            peak_mem_mb=np.asarray(peak),
            kv_delta_mb=kv_delta_mb(self.model.shape, work),
            energy_known=energy is not None,
        )


def _sum(parts: list[Metrics]) -> Metrics:
    return Metrics(
        latency_ms=np.asarray(sum(p.latency_ms for p in parts)),
        energy_mj=np.asarray(sum(p.energy_mj for p in parts)),
        peak_mem_mb=np.asarray(sum(p.peak_mem_mb for p in parts)),
        kv_delta_mb=np.asarray(sum(p.kv_delta_mb for p in parts)),
        energy_known=all(p.energy_known for p in parts),
    )


@dataclass
class FusedPrefillCost:
    """Prefill rows of a fused file: target prefill then draft prefill of the same prompt."""

    target: IterationModel
    draft: IterationModel
    source: str
    phase: str = "prefill"

    @property
    def capacity_mb(self) -> float | None:
        """The target replica's memory (the draft lives on it too)."""
        return self.target.capacity_mb

    def evaluate(self, context: FloatArray, batch: FloatArray, k: FloatArray) -> Metrics:
        """Sum of both prefills (latency, energy, memory, KV)."""
        return _sum(
            [
                SinglePhaseCost(self.target, "prefill").evaluate(context, batch, k),
                SinglePhaseCost(self.draft, "prefill").evaluate(context, batch, k),
            ]
        )


@dataclass
class FusedRoundCost:
    """fused_decode rows: k draft decode steps and one target verify on the same replica."""

    target: IterationModel
    draft: IterationModel
    source: str
    phase: str = "fused_decode"
    one_draft_step: bool = False
    later_draft: IterationModel | None = None

    @property
    def capacity_mb(self) -> float | None:
        """The target replica's memory."""
        return self.target.capacity_mb

    def evaluate(self, context: FloatArray, batch: FloatArray, k: FloatArray) -> Metrics:
        """Round cost: sum over i < k of draft decode at context + i, plus verify(k).

        With ``one_draft_step`` (Medusa, whose heads propose all k tokens in one
        step) the draft runs once per round, at ``context``; with ``later_draft``
        (EAGLE-3, whose fc runs in the first step only) steps after the first are
        priced by that model. Latency and energy
        add up; peak memory is the verify's (target weights, activations, KV)
        plus the draft's weights and KV after its last step; the KV delta is
        ``k + 1`` target tokens and ``k`` draft tokens per sequence.
        """
        k = np.asarray(k, dtype=np.float64)
        verify = SinglePhaseCost(self.target, "verify").evaluate(context, batch, k)
        first = SinglePhaseCost(self.draft, "draft_decode")
        later = SinglePhaseCost(self.later_draft or self.draft, "draft_decode")
        latency = np.asarray(verify.latency_ms, dtype=np.float64).copy()
        energy = np.asarray(verify.energy_mj, dtype=np.float64).copy()
        known = verify.energy_known
        steps = int(np.max(k)) if np.size(k) else 0
        if self.one_draft_step:
            steps = min(steps, 1)
        for i in range(steps):
            step = (first if i == 0 else later).evaluate(context + float(i), batch, np.ones_like(k))
            active = (k > i).astype(np.float64)
            latency = latency + active * step.latency_ms
            energy = energy + active * step.energy_mj
            known = known and step.energy_known
        last = Work(
            np.asarray(batch * np.ones_like(k)),
            np.ones_like(k * context),
            np.asarray(context + k - 1.0),
            np.ones_like(k * context),
        )
        peak = (
            verify.peak_mem_mb
            + self.draft.weights_mb()
            + self.draft.activations_mb(last)
            + kv_total_mb(self.draft.shape, last)
        )
        draft_kv = batch * k * self.draft.shape.kv_mib_per_token
        return Metrics(
            latency_ms=latency,
            energy_mj=energy,
            peak_mem_mb=np.asarray(peak),
            kv_delta_mb=np.asarray(verify.kv_delta_mb + draft_kv),
            energy_known=known,
        )
