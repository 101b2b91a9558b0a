"""How two passes of different kinds share one GPU: the rates they run at together.

:class:`~simulator.engine.gpu_share.SharedGpu` runs iterations made of
:class:`Segment`s; while a ``memory`` segment (a draft model's or a target's
decode steps) and a ``compute`` segment (a verify or a prefill pass) run
together, each progresses at a fraction of its speed alone, given by a
:class:`Sharing` model:

- :class:`MeasuredSharing` (the default for ``scheduler.lanes.gpu_sharing:
  overlap``): the slowdowns two CUDA streams showed on an H100
  (``simulator/data/stream_sharing.json``, derived by ``python -m
  lut_population.stream_sharing`` from the stream-overlap measurements). The
  small-kernel pass is starved (2.5-7.2x slower) while the large one keeps
  0.6-0.9 of its speed; each is read at ``rho``, the compute pass's time alone
  over one memory pass's (a draft step), linearly in ``log rho`` between the
  measured pairs of that kind of compute pass (``verify``: three pairs, rho
  4.2-11.4; ``prefill``: two, rho 1.9-14.6), and held at the nearest pair
  beyond them, an assumption: no pair outside that range was measured.
- :class:`SymmetricSharing` (``overlap_efficiency: e``): both run at ``e``,
  from 0.5 (no overlap) to 1 (each as if alone); an assumption the user states.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, NamedTuple, Protocol

HOST = "host"
LAUNCH = "launch"
MEMORY = "memory"
COMPUTE = "compute"
PREFILL_KIND = "prefill"
VERIFY_KIND = "verify"
DATA_PACKAGE = "simulator.data"
DATA_FILE = "stream_sharing.json"


class Segment(NamedTuple):
    """A piece of an iteration: its duration alone and the GPU unit it keeps busy.

    Attributes:
        duration_s: Its duration alone on the GPU (host and launch time: on the CPU).
        klass: ``host``, ``launch``, ``memory`` or ``compute``. A ``launch``
            segment is an eager step whose launches outlast its GPU work: the
            CPU launches its kernels one by one and the GPU runs each as it
            comes, so the step takes its launch time and its GPU work
            (``gpu_s``) runs inside it.
        pass_s: The time alone of one forward pass in it (a segment of k draft
            steps: one step's); 0: the whole segment is one pass.
        kind: What the pass is: ``decode``, ``verify`` or ``prefill`` ("" unknown).
        gpu_s: A ``launch`` segment's GPU work (0 for the other classes).
    """

    duration_s: float
    klass: str
    pass_s: float = 0.0
    kind: str = ""
    gpu_s: float = 0.0

    @property
    def one_pass_s(self) -> float:
        """The time alone of one of its forward passes."""
        return self.pass_s if self.pass_s > 0 else self.duration_s


class Sharing(Protocol):
    """The rates of a memory and a compute segment running together."""

    def cross(self, memory: Segment, compute: Segment) -> tuple[float, float]:
        """Return ``(memory rate, compute rate)``, fractions of their speeds alone."""
        ...


@dataclass(frozen=True)
class SymmetricSharing:
    """Both passes run at ``efficiency`` of their speed alone (``overlap_efficiency``)."""

    efficiency: float

    def cross(self, memory: Segment, compute: Segment) -> tuple[float, float]:
        """Return ``(efficiency, efficiency)``."""
        return self.efficiency, self.efficiency


def interpolate_log(rhos: Sequence[float], values: Sequence[float], rho: float) -> float:
    """Linear in ``log rho`` between the points, constant beyond them."""
    if rho <= rhos[0]:
        return values[0]
    if rho >= rhos[-1]:
        return values[-1]
    for index in range(1, len(rhos)):
        if rho <= rhos[index]:
            low, high = rhos[index - 1], rhos[index]
            weight = math.log(rho / low) / math.log(high / low)
            return values[index - 1] + weight * (values[index] - values[index - 1])
    return values[-1]  # not reached


@dataclass(frozen=True)
class SharingPoints:
    """The measured pairs of one kind of compute pass, sorted by ``rho``."""

    rho: tuple[float, ...]
    small_slowdown: tuple[float, ...]
    large_slowdown: tuple[float, ...]

    def slowdowns(self, rho: float) -> tuple[float, float]:
        """Return ``(memory pass slowdown, compute pass slowdown)`` at ``rho``."""
        return (
            interpolate_log(self.rho, self.small_slowdown, rho),
            interpolate_log(self.rho, self.large_slowdown, rho),
        )


@dataclass(frozen=True)
class MeasuredSharing:
    """The slowdowns measured on an H100 (see the module docstring).

    Attributes:
        verify: The pairs of a decode pass beside a verify pass.
        prefill: The pairs of a decode pass beside a prefill pass.
    """

    verify: SharingPoints
    prefill: SharingPoints

    def slowdowns(
        self, memory_pass_s: float, compute_pass_s: float, kind: str
    ) -> tuple[float, float]:
        """Return the two passes' slowdowns; ``kind`` ``prefill``, else a verify's pairs."""
        points = self.prefill if kind == PREFILL_KIND else self.verify
        return points.slowdowns(compute_pass_s / memory_pass_s)

    def cross(self, memory: Segment, compute: Segment) -> tuple[float, float]:
        """Return the inverse slowdowns of the two passes."""
        small, large = self.slowdowns(memory.one_pass_s, compute.one_pass_s, compute.kind)
        return 1.0 / small, 1.0 / large


def _points(raw: dict[str, Any]) -> SharingPoints:
    return SharingPoints(
        tuple(float(v) for v in raw["rho"]),
        tuple(float(v) for v in raw["small_slowdown"]),
        tuple(float(v) for v in raw["large_slowdown"]),
    )


@lru_cache(maxsize=1)
def measured_sharing() -> MeasuredSharing:
    """The shipped H100 sharing (``simulator/data/stream_sharing.json``)."""
    text = resources.files(DATA_PACKAGE).joinpath(DATA_FILE).read_text(encoding="utf-8")
    kinds = json.loads(text)["kinds"]
    return MeasuredSharing(_points(kinds[VERIFY_KIND]), _points(kinds[PREFILL_KIND]))
