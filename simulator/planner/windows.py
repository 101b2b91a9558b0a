"""Running the planner's what-if windows: in the run's process or on an executor.

A window is a :class:`WindowTask`: the candidate's runtime, the requests it
replays, the run's unfinished requests, its seed and its span. Running one
needs nothing else, so windows of a round may run in any order and any
process: :class:`SerialWindows` runs them one after another in the run's
process; :class:`PooledWindows` hands them to an executor of
:mod:`simulator.executors` (a local process pool, whose forked workers
inherit the tasks rather than receive them pickled, or Ray). Scores come
back in task order, so decisions do not depend on where windows ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from simulator.engine.core import Engine
from simulator.engine.records import InFlight
from simulator.engine.runtime import Runtime
from simulator.executors import (
    check_executor,
    default_workers,
    execute_with,
    import_ray,
    start_ray,
)
from simulator.planner.objectives import WindowScore, score_window
from simulator.rng import RandomStreams
from simulator.workload import RequestTable


@dataclass(frozen=True)
class WindowTask:
    """One what-if window.

    Attributes:
        index: Its position in the round (scores are returned in this order).
        runtime: The candidate's runtime.
        requests: The arrivals it replays.
        in_flight: The run's unfinished requests, on the candidate's replicas.
        seed: Seed of its random streams.
        start_s: When it starts (the round's time).
        until_s: When it stops at the latest.
    """

    index: int
    runtime: Runtime
    requests: RequestTable
    in_flight: tuple[InFlight, ...]
    seed: int
    start_s: float
    until_s: float


def run_window(task: WindowTask) -> tuple[int, WindowScore]:
    """Run one window and score it; return its index with the score."""
    window = Engine(
        task.runtime,
        task.requests,
        RandomStreams(task.seed),
        in_flight=task.in_flight,
        start_s=task.start_s,
    )
    output = window.run(until_s=task.until_s)
    return task.index, score_window(output, task.requests, task.start_s)


class WindowRunner(Protocol):
    """Runs a round's windows (a hook of :class:`~simulator.planner.online.OnlinePlanner`)."""

    def run(self, tasks: Sequence[WindowTask]) -> list[WindowScore]:
        """Return the score of every task, in task order."""
        ...

    def close(self) -> None:
        """Release what the runner holds (the run is over)."""
        ...


class SerialWindows:
    """Windows one after another in the run's process (the default)."""

    def run(self, tasks: Sequence[WindowTask]) -> list[WindowScore]:
        """Run every task here."""
        return [run_window(task)[1] for task in tasks]

    def close(self) -> None:
        """Nothing to release."""


class PooledWindows:
    """Windows on an executor: ``local`` (a process pool of ``workers``) or ``ray``.

    Args:
        executor: ``local`` or ``ray``.
        workers: Worker processes (local), or CPUs of a Ray started here.
        ray_address: A Ray cluster to join (``None``: start one on this machine).
    """

    def __init__(self, executor: str, workers: int, ray_address: str | None = None) -> None:
        self.executor = executor
        self.workers = workers
        self.ray_address = ray_address
        self._ray: Any = None

    def run(self, tasks: Sequence[WindowTask]) -> list[WindowScore]:
        """Run the tasks on the executor; a round with one task runs it here."""
        if len(tasks) <= 1 or (self.executor == "local" and self.workers <= 1):
            return SerialWindows().run(tasks)
        if self.executor == "ray" and self._ray is None:
            ray = import_ray()  # started once for the run, not once per round
            self._ray = ray if start_ray(ray, self.workers, self.ray_address) else False
        results = dict(
            execute_with(run_window, tasks, self.executor, self.workers, self.ray_address)
        )
        return [results[task.index] for task in tasks]

    def close(self) -> None:
        """Shut down a Ray this runner started (one that already ran is left running)."""
        if self._ray:
            self._ray.shutdown()
        self._ray = None


def window_runner(executor: str, workers: int | None, ray_address: str | None) -> WindowRunner:
    """Where a run's windows go: the executor, on ``workers`` (default: this machine's CPUs).

    With one worker on the local executor the windows run in the run's process.

    Raises:
        InputError: An unknown executor or a worker count below 1.
    """
    check_executor(executor, workers)
    count = workers if workers is not None else default_workers()
    if executor == "local" and count <= 1:
        return SerialWindows()
    return PooledWindows(executor, count, ray_address)
