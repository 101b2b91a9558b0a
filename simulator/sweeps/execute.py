"""Running a sweep's points: one task per point, in this process, a process pool or Ray.

A task runs one scenario and writes its results directory; it returns the
summary (or the error) to the caller, which alone writes the table. Tasks
share nothing, so the table does not depend on the executor or the number
of workers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.executors import (
    EXECUTORS,
    RAY_EXTRA,
    check_executor,
    default_workers,
    execute_with,
    one_line_text,
)
from simulator.outputs import write_results
from simulator.runner import run
from simulator.scenario.model import Scenario

__all__ = [
    "EXECUTORS",
    "RAY_EXTRA",
    "Outcome",
    "Task",
    "check_executor",
    "default_workers",
    "died",
    "execute",
    "execute_with",
    "one_line",
    "read_summary",
    "run_task",
]


@dataclass(frozen=True)
class Task:
    """One point to run.

    Attributes:
        index: The point's index.
        scenario: Its resolved scenario.
        out_dir: Its results directory.
    """

    index: int
    scenario: Scenario
    out_dir: Path


@dataclass(frozen=True)
class Outcome:
    """What a task returned.

    Attributes:
        index: The point's index.
        summary_json: The text of its ``summary.json`` (``None`` when it failed).
        error: ``ExceptionType: message`` on one line when it failed, else ``None``.
        wall_s: Wall-clock seconds the task took.
    """

    index: int
    summary_json: str | None
    error: str | None
    wall_s: float


def one_line(exc: BaseException) -> str:
    """``ExceptionType: message`` with the message's lines joined by `` | ``."""
    text = one_line_text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_task(task: Task) -> Outcome:
    """Run one point and write its results directory; a failure is returned, not raised."""
    started = time.perf_counter()
    try:
        result = run(task.scenario)
        write_results(result, task.out_dir, argv=[])
        text = (task.out_dir / "summary.json").read_text(encoding="utf-8")
    except Exception as exc:  # a failing run is recorded and the others go on
        return Outcome(task.index, None, one_line(exc), time.perf_counter() - started)
    return Outcome(task.index, text, None, time.perf_counter() - started)


def died(task: Task, reason: str) -> Outcome:
    """The outcome of a task whose worker process died (``reason`` says how)."""
    return Outcome(task.index, None, reason, 0.0)


def execute(
    tasks: Sequence[Task],
    executor: str,
    workers: int,
    ray_address: str | None,
) -> Iterator[Outcome]:
    """Run ``tasks`` and yield each outcome as it finishes (in any order).

    ``local`` with one worker runs the tasks one after another in this
    process; with more, in a process pool of that size. ``ray`` submits one
    Ray task per point, to the cluster at ``ray_address`` or to a local Ray
    started with ``workers`` CPUs. A point whose worker process dies is
    failed (:func:`died`); the others go on.
    """
    yield from execute_with(run_task, tasks, executor, workers, ray_address, on_death=died)


def read_summary(out_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` of a results directory."""
    loaded: dict[str, Any] = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    return loaded
