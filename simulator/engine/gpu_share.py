"""Iterations of several lanes sharing one GPU (``scheduler.lanes.gpu_sharing``).

An iteration is a sequence of segments (:class:`~simulator.engine.sharing.Segment`),
each a standalone duration (what the LUT gives for it alone on the GPU, or
host time) and a class:

- ``host``: framework time on the CPU before a forward pass (scheduling,
  Python loops, launches beyond a step's GPU time).
- ``launch``: an eager step whose launches outlast its GPU work: its kernels
  run on the GPU as they are launched, so it lasts its launch time and its
  GPU work runs inside it.

Host and launch segments slow no GPU segment down and no GPU segment slows
them. A replica's host work runs on one thread (a serving process, or the
Python interpreter lock of lanes launched from Python threads): host and
launch segments of several lanes time-slice it like segments of one GPU
class. Measured on an H100 (``lut_population/inputs/microbench_h100/
lane_threads.csv``): two eager lanes in Python threads, each waiting for its
steps, slowed each other's steps 1.9-2.1x (medians over three runs; draft
beside draft, draft beside verify, round beside round, batch 1 and 8), as
one thread shared by two launch-bound lanes gives (2x).
- ``memory``: decode steps (a draft model's, or a target's plain decode).
- ``compute``: a verify or a prefill pass.

With ``serialized`` sharing the replica runs one iteration at a time, so
each segment runs at its standalone speed. With ``overlap`` sharing the
lanes run on their own streams and iterations overlap; while they do, each
GPU segment progresses at the rate

    rate = (1 / n_same) * (r if a segment of the other class runs else 1)

where ``n_same`` is the number of running segments of its class
(segments of one class compete for the same unit and time-slice it) and
``r`` the rate the sharing model (:mod:`simulator.engine.sharing`) gives the
class beside the other: measured on an H100 by default, where a decode pass
beside a verify or prefill is starved and the large pass slows a little, or
a symmetric ``overlap_efficiency`` the user states. With several segments of
a class running, the first started stands for its class in the model.
Energy is the LUT's energy of each pass whatever the overlap.

Three clocks say how busy the GPU was (:class:`GpuTime`): ``busy_s``, time
during which an iteration ran (host segments included); ``active_s``, time
during which a GPU segment ran (what ``nvidia-smi`` reports as utilisation:
some kernel executing; a launch segment counts the share of it its GPU work
fills); and ``work_s``, the GPU work's progress counted at its standalone
speed (a segment slowed to half its speed for a second adds half a second),
so ``work_s / active_s`` is how much faster than one pass alone the
overlapping passes got through their work together.

Event-driven: one clock event per segment end; whenever the set of running
segments changes (a start or an end) the remaining work of every running
segment is brought up to date and the next end is rescheduled (an earlier
scheduled event that no longer applies is ignored).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import simpy

from simulator.engine.clock import DECISION, call_at
from simulator.engine.sharing import COMPUTE, HOST, LAUNCH, MEMORY, Segment, Sharing

__all__ = ["COMPUTE", "HOST", "LAUNCH", "MEMORY", "GpuTime", "Segment", "SharedGpu"]

_THREAD = {HOST: HOST, LAUNCH: HOST, MEMORY: MEMORY, COMPUTE: COMPUTE}
"""The unit each class of segment keeps busy (host and launch segments: the host thread)."""

_EPS_S = 1e-12
"""Remaining work below this counts as done (floating-point rounding)."""


class GpuTime(NamedTuple):
    """How busy a shared GPU was so far (see the module docstring).

    Attributes:
        busy_s: Time during which an iteration ran, host segments included.
        active_s: Time during which at least one GPU segment ran.
        work_s: GPU segments' progress at their standalone speed.
    """

    busy_s: float
    active_s: float
    work_s: float


class _Running:
    __slots__ = ("done", "index", "left_s", "rate", "segments")

    def __init__(self, segments: Sequence[Segment], done: Callable[[], None]) -> None:
        self.segments = [Segment(*segment) for segment in segments]
        self.index = 0
        self.left_s = segments[0][0]
        self.rate = 1.0
        self.done = done


class SharedGpu:
    """Runs iterations made of segments on one GPU (see the module docstring).

    Args:
        env: The simulation's clock.
        sharing: The rates of a memory and a compute segment running together.

    Attributes:
        busy_s: Time during which at least one iteration ran.
        active_s: Time during which at least one GPU segment ran.
        work_s: GPU segments' progress at their standalone speed.
    """

    def __init__(self, env: simpy.Environment, sharing: Sharing) -> None:
        self.env = env
        self.sharing = sharing
        self.busy_s = 0.0
        self.active_s = 0.0
        self.work_s = 0.0
        self._running: list[_Running] = []
        self._ending: list[_Running] = []
        self._last_s = 0.0
        self._generation = 0

    @property
    def time(self) -> GpuTime:
        """The three busy clocks so far."""
        return GpuTime(self.busy_s, self.active_s, self.work_s)

    @property
    def running(self) -> int:
        """Iterations under way."""
        return len(self._running)

    def start(self, segments: Sequence[Segment], done: Callable[[], None]) -> None:
        """Start an iteration now; ``done`` is called when its last segment ends."""
        if not segments:
            raise ValueError("an iteration has at least one segment")
        self._advance()
        self._running.append(_Running(segments, done))
        self._reschedule()

    def _advance(self) -> None:
        """Bring every running segment's remaining work up to now."""
        now = self.env._now
        elapsed = now - self._last_s
        if elapsed > 0 and self._running:
            self.busy_s += elapsed
            gpu_rate = 0.0
            nested = 0.0
            active = False
            for run in self._running:
                run.left_s -= elapsed * run.rate
                segment = run.segments[run.index]
                klass = segment.klass
                if klass == LAUNCH:
                    nested += run.rate * segment.gpu_s / segment.duration_s
                elif klass != HOST:
                    active = True
                    gpu_rate += run.rate
            self.active_s += elapsed if active else elapsed * min(1.0, nested)
            self.work_s += elapsed * (gpu_rate + nested)
        self._last_s = now

    def _rates(self) -> None:
        counts = {HOST: 0, MEMORY: 0, COMPUTE: 0}
        first: dict[str, Segment] = {}
        for run in self._running:
            segment = run.segments[run.index]
            unit = _THREAD[segment.klass]
            counts[unit] += 1
            first.setdefault(unit, segment)
        cross = {HOST: 1.0, MEMORY: 1.0, COMPUTE: 1.0}
        if counts[MEMORY] and counts[COMPUTE]:
            cross[MEMORY], cross[COMPUTE] = self.sharing.cross(first[MEMORY], first[COMPUTE])
        for run in self._running:
            unit = _THREAD[run.segments[run.index].klass]
            run.rate = cross[unit] / counts[unit]

    def _reschedule(self) -> None:
        """Step finished segments, then schedule the next segment end."""
        finished: list[_Running] = []
        while True:
            stepped = False
            for run in self._running:
                while run.left_s <= _EPS_S and run not in finished:
                    run.index += 1
                    if run.index == len(run.segments):
                        finished.append(run)
                        break
                    run.left_s = run.segments[run.index][0]
                    stepped = True
            if not stepped:
                break
        if finished:
            self._running = [run for run in self._running if run not in finished]
        self._generation += 1
        if self._running:
            self._rates()
            ends = [run.left_s / run.rate for run in self._running]
            end_s = min(ends)
            self._ending = [
                run
                for run, at in zip(self._running, ends, strict=True)
                if at <= end_s * (1 + 1e-12)
            ]
            generation = self._generation
            call_at(self.env, self.env._now + end_s, partial(self._on_end, generation), DECISION)
        for run in finished:
            run.done()

    def _on_end(self, generation: int) -> None:
        if generation != self._generation:
            return  # the running set changed since: a later event applies
        self._advance()
        for run in self._ending:
            run.left_s = 0.0  # due now: no rounding left over
        self._reschedule()
