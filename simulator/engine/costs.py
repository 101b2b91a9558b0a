"""Per-iteration cost of a phase on a device, from the LUT manager.

:class:`PhaseCost` answers "how long and how much energy does one iteration
of this phase take for ``n`` sequences of mean context ``c`` with draft
length ``k``". Along the context axis a LUT is piecewise linear between its
grid points, so for a fixed ``(n, k)`` the cost is a piecewise-linear curve
of ``c``; :class:`ContextCurve` caches that curve, which makes the many
lookups of a long decode run cheap and lets the engine advance a run of
iterations with an unchanged batch in one event with exactly the same result
as stepping each one.

On a target replica a :class:`~simulator.engine.step_pricing.StepPricer`
turns the LUT's GPU time into the engine step's (CUDA-graph padding, launch
and host time); the curve holds the priced steps at the grid points and is
interpolated between them like the LUT itself.

A replica's costs are keyed by kind of work (:data:`DECODE`, :data:`VERIFY`,
:data:`FUSED`), names declared once in :mod:`policies.lanes`.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from policies.lanes import DECODE, FUSED, VERIFY
from simulator.engine.step_pricing import StepPricer
from simulator.lut import LutKey, LutManager, OutOfRange

VECTOR_MIN_STEPS = 16
"""Runs of at least this many iterations are priced with numpy."""


@dataclass(frozen=True)
class IterationCost:
    """Latency and energy of one iteration."""

    latency_s: float
    energy_j: float


class ContextCurve:
    """Latency and energy of one iteration as a piecewise-linear function of context.

    Built from LUT lookups at the context grid points for a fixed
    ``(microbatch, fanout_k)``; between grid points it is exactly the LUT
    manager's linear interpolation, outside them it follows the out-of-range
    rule (a lookup there goes to the manager, which raises, clamps or
    extrapolates).
    """

    __slots__ = (
        "_arrays",
        "_energy",
        "_gridded",
        "_hi",
        "_k",
        "_latency",
        "_lo",
        "_lookup",
        "_n",
        "_top",
        "_xs",
    )

    def __init__(
        self, cost: PhaseCost, microbatch: float, fanout_k: int, gpu_only: bool = False
    ) -> None:
        self._lookup = cost.gpu_lookup if gpu_only else cost.lookup
        self._n = microbatch
        self._k = fanout_k
        xs = list(cost.context_axis)
        self._xs = xs
        # The grid's bounds and shape, read on every lookup (len() and xs[-1] cost as much).
        self._lo = xs[0]
        self._hi = xs[-1]
        self._top = len(xs) - 1
        """Index of the last grid point."""
        self._gridded = len(xs) > 1
        points = [self._lookup(x, microbatch, fanout_k) for x in xs]
        self._latency = [p.latency_s for p in points]
        self._energy = [p.energy_j for p in points]
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        """The grid and its values as arrays, made at the first vectorised run (np.interp
        would convert the lists on every call)."""

    def at(self, context: float) -> tuple[float, float]:
        """Return ``(latency_s, energy_j)`` of one iteration at mean context ``context``."""
        if context < self._lo or context > self._hi or not self._gridded:
            point = self._lookup(context, self._n, self._k)
            return point.latency_s, point.energy_j
        xs = self._xs
        i = bisect_right(xs, context) - 1
        if i >= self._top:
            return self._latency[-1], self._energy[-1]
        # Linear inside grid segment i (xs[i] <= context <= xs[i + 1]).
        x0 = xs[i]
        w = (context - x0) / (xs[i + 1] - x0)
        lats = self._latency
        energies = self._energy
        return lats[i] + w * (lats[i + 1] - lats[i]), energies[i] + w * (
            energies[i + 1] - energies[i]
        )

    def cumulative_steps(self, context: float, steps: int) -> tuple[list[float], list[float]]:
        """Return running totals of latency and energy over ``steps`` iterations.

        Iteration ``s`` (from 0) runs at context ``context + s``; element ``s``
        of each list is the total up to and including it. Long runs inside the
        grid are interpolated in one vectorised pass (the same linear
        interpolation as :meth:`at`).
        """
        last = context + steps - 1
        if steps >= VECTOR_MIN_STEPS and self._gridded and self._lo <= context and last <= self._hi:
            xs = self._xs
            arrays = self._arrays
            if arrays is None:
                arrays = self._arrays = (
                    np.asarray(xs, dtype=float),
                    np.asarray(self._latency, dtype=float),
                    np.asarray(self._energy, dtype=float),
                )
            grid, latency, energies = arrays
            contexts = context + np.arange(steps, dtype=float)
            # The arrays' own cumsum (np.cumsum's dispatch costs as much as the sum here).
            lat = np.interp(contexts, grid, latency).cumsum()
            energy = np.interp(contexts, grid, energies).cumsum()
            return lat.tolist(), energy.tolist()
        lat_total: list[float] = []
        energy_total: list[float] = []
        t = 0.0
        e = 0.0
        for step in range(steps):
            lat_s, energy_j = self.at(context + step)
            t += lat_s
            e += energy_j
            lat_total.append(t)
            energy_total.append(e)
        return lat_total, energy_total

    def sum_steps(self, context: float, steps: int) -> tuple[float, float]:
        """Return the summed ``(latency_s, energy_j)`` of ``steps`` iterations.

        Iteration ``s`` (from 0) runs at context ``context + s``. Inside one
        linear segment of the grid the sum is ``steps`` times the value at the
        middle context, exactly; otherwise the running totals of
        :meth:`cumulative_steps` give it.
        """
        last = context + steps - 1
        if self._gridded and self._lo <= context and last <= self._hi:
            xs = self._xs
            i = bisect_right(xs, context) - 1
            if i < self._top and last <= xs[i + 1]:
                # Linear inside segment i, at the middle context (as at() interpolates).
                x0 = xs[i]
                w = (context + (steps - 1) / 2.0 - x0) / (xs[i + 1] - x0)
                lats = self._latency
                energies = self._energy
                lat = lats[i] + w * (lats[i + 1] - lats[i])
                energy = energies[i] + w * (energies[i + 1] - energies[i])
                return lat * steps, energy * steps
        lat_totals, energy_totals = self.cumulative_steps(context, steps)
        return lat_totals[-1], energy_totals[-1]


class PhaseCost:
    """Iteration costs of one LUT key (phase, model, hardware, parallelism, dtype).

    Args:
        manager: The LUT manager.
        key: The LUT key.
        out_of_range: The out-of-range rule of lookups.
        pricer: How the replica's engine turns the key's GPU time into steps
            (``None``: the LUT rows are the steps, as on client devices).
    """

    def __init__(
        self,
        manager: LutManager,
        key: LutKey,
        out_of_range: OutOfRange,
        pricer: StepPricer | None = None,
    ) -> None:
        self.manager = manager
        self.key = key
        self.out_of_range = out_of_range
        self.pricer = pricer
        self.context_axis: tuple[float, ...] = tuple(float(x) for x in manager.grid(key)[0])
        self._curves: dict[tuple[float, int, bool], ContextCurve] = {}

    def gpu_lookup(self, context: float, microbatch: float, fanout_k: int) -> IterationCost:
        """Return the GPU work of one iteration (the LUT row, at the padded batch size)."""
        pricer = self.pricer
        rows = microbatch if pricer is None else pricer.lut_microbatch(microbatch)
        result = self.manager.lookup(
            self.key, context, rows, fanout_k, out_of_range=self.out_of_range
        )
        return IterationCost(result.latency_ms / 1000.0, result.energy_mj / 1000.0)

    def lookup(self, context: float, microbatch: float, fanout_k: int) -> IterationCost:
        """Return the cost of one iteration: the LUT row as the replica's engine runs it."""
        gpu = self.gpu_lookup(context, microbatch, fanout_k)
        if self.pricer is None:
            return gpu
        latency_ms, energy_mj = self.pricer.step(
            gpu.latency_s * 1000.0, gpu.energy_j * 1000.0, microbatch, fanout_k
        )
        return IterationCost(latency_ms / 1000.0, energy_mj / 1000.0)

    def engine_step(
        self, gpu_s: float, gpu_j: float, microbatch: float, fanout_k: int, repeats: int = 1
    ) -> tuple[float, float]:
        """Return ``(latency_s, energy_j)`` of a step whose GPU work is ``gpu_s`` and ``gpu_j``.

        For iterations assembled from several LUT lookups (a chunked-prefill
        pass, a lane's ``repeats`` draft steps): the engine's host, launch and
        idle-power terms are applied once to the whole step.
        """
        if self.pricer is None:
            return gpu_s, gpu_j
        latency_ms, energy_mj = self.pricer.step(
            gpu_s * 1000.0, gpu_j * 1000.0, microbatch, fanout_k, repeats
        )
        return latency_ms / 1000.0, energy_mj / 1000.0

    def launch_s(self, microbatch: float, fanout_k: int, repeats: int = 1) -> float:
        """CPU time of launching a step's forward passes eagerly (0: a graph, or not modelled)."""
        if self.pricer is None:
            return 0.0
        return self.pricer.launch_ms(microbatch, fanout_k, repeats) / 1000.0

    def gpu_at(self, context: float, microbatch: float, fanout_k: int = 1) -> tuple[float, float]:
        """Return ``(latency_s, energy_j)`` of the GPU work alone (no engine terms)."""
        if self.pricer is None:
            return self.at(context, microbatch, fanout_k)
        return self.curve(microbatch, fanout_k, gpu_only=True).at(context)

    def curve(self, microbatch: float, fanout_k: int = 1, gpu_only: bool = False) -> ContextCurve:
        """Return the (cached) context curve for ``(microbatch, fanout_k)``.

        ``gpu_only``: the curve of the GPU work alone, without the engine's terms.
        """
        key = (microbatch, fanout_k, gpu_only)
        curve = self._curves.get(key)
        if curve is None:
            curve = ContextCurve(self, microbatch, fanout_k, gpu_only)
            self._curves[key] = curve
        return curve

    def at(self, context: float, microbatch: float, fanout_k: int = 1) -> tuple[float, float]:
        """Return ``(latency_s, energy_j)`` of one iteration."""
        curve = self._curves.get((microbatch, fanout_k, False))
        if curve is None:
            curve = self.curve(microbatch, fanout_k)
        return curve.at(context)

    @property
    def context_window(self) -> float:
        """Largest context the LUT covers for this key (its model's window)."""
        return self.context_axis[-1]

    def kv_mb_per_token(self) -> float:
        """KV cache one token of context occupies, from the LUT's ``kv_delta_mb``."""
        context = self.context_axis[0]
        result = self.manager.lookup(self.key, context, 1, 1, out_of_range="clamp")
        tokens = context if self.key.phase == "prefill" else 1.0
        return result.kv_delta_mb / tokens

    def static_mem_mb(self) -> float:
        """Memory the phase needs besides KV at the smallest grid point (weights + activations)."""
        context = self.context_axis[0]
        result = self.manager.lookup(self.key, context, 1, 1, out_of_range="clamp")
        return max(0.0, result.peak_mem_mb - result.kv_delta_mb)


class ReplicaCosts:
    """The phase costs a replica needs, by work kind (absent kinds are ``None``)."""

    def __init__(
        self,
        prefill_verifier: PhaseCost | None,
        prefill_fused: PhaseCost | None,
        decode: PhaseCost | None,
        verify: PhaseCost | None,
        fused: PhaseCost | None,
    ) -> None:
        self.prefill = {VERIFY: prefill_verifier, DECODE: prefill_verifier, FUSED: prefill_fused}
        self.step = {DECODE: decode, VERIFY: verify, FUSED: fused}

    def context_window(self, kind: str) -> float:
        """Longest context the LUTs of work ``kind`` cover (prefill and step)."""
        costs = (self.prefill[kind], self.step[kind])
        return min(cost.context_window for cost in costs if cost is not None)


@dataclass(frozen=True)
class LaneCosts:
    """A fused round split into its passes on one GPU (``scheduler.lanes``).

    A fused LUT composes a round as the draft model's ``k`` decode steps then
    the target's verify of ``k`` drafts (``lut_population/PLAN.md`` 4.7); a
    lane rule of ``scheduler.arbitration`` runs the two as separate iterations, priced from the
    LUTs they are composed of.

    Attributes:
        draft: The draft model's ``draft_decode`` cost on one GPU of the replica.
        verify: The target model's ``verify`` cost on the replica.
    """

    draft: PhaseCost
    verify: PhaseCost


class LutStepPredictor:
    """A replica's predicted decode-lane iteration time (see :class:`policies.views.StepPredictor`).

    Answers from the same LUT curves the replica prices its iterations with:
    ``step`` (its verify or fused phase) for ``k >= 1``, ``plain`` (the plain
    decode phase of the target) for ``k = 0``. Built once per replica and
    kind of work, only for k controllers that predict iterations.

    Args:
        step: The phase cost of a speculative step of this kind of work.
        plain: The phase cost of a plain decode step (``None``: the replica
            cannot run one, and ``k = 0`` predicts ``inf``).
    """

    __slots__ = ("_plain", "_step")

    def __init__(self, step: PhaseCost, plain: PhaseCost | None) -> None:
        self._step = step
        self._plain = plain

    def step_s(self, batch: int, k: int, context_len: float) -> float:
        """Latency of one iteration of ``batch`` requests verifying ``k`` drafts each."""
        if k == 0:
            if self._plain is None:
                return float("inf")
            return self._plain.at(context_len, batch, 1)[0]
        return self._step.at(context_len, batch, k)[0]
