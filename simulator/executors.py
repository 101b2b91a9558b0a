"""Executors: apply a function to tasks in this process, a local process pool or Ray.

Sweep points and the planner's what-if windows run on them. A task's
result does not depend on where it ran, so tables and decisions do not
depend on the executor or the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from simulator.errors import InputError, make_issue

EXECUTORS = ("local", "ray")
"""Names accepted by ``--executor``."""

RAY_EXTRA = "pip install 'specdec-sim[ray]'"

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


def default_workers() -> int:
    """The CPUs this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_executor(executor: str, workers: int | None) -> None:
    """Refuse an unknown executor or a worker count below 1.

    Raises:
        InputError: Naming the option, the value and what is allowed.
    """
    issues = []
    if executor not in EXECUTORS:
        issues.append(
            make_issue(
                "command line", "--executor", executor, " or ".join(EXECUTORS), "unknown executor"
            )
        )
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        issues.append(make_issue("command line", "--workers", workers, "an integer >= 1"))
    if issues:
        raise InputError(issues)


def execute_with(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    executor: str,
    workers: int,
    ray_address: str | None,
) -> Iterator[ResultT]:
    """Apply ``function`` to every task on an executor, yielding results as they finish.

    As :func:`execute`, for any module-level ``function`` (it is pickled to
    the workers) that returns its failures rather than raising them.
    """
    if not tasks:
        return
    if executor == "ray":
        yield from _ray(function, tasks, workers, ray_address)
    elif workers == 1:
        for task in tasks:
            yield function(task)
    else:
        yield from _pool(function, tasks, workers)


_INHERITED: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
"""A pool worker's copy of the function and tasks it was forked with, set once
when the worker starts (see :func:`_pool`); the parent process never sets it."""


def _inherit(function: Callable[[Any], Any], tasks: Sequence[Any]) -> None:
    """Pool initializer: keep the function and tasks the worker was forked with."""
    global _INHERITED
    _INHERITED = (function, tasks)


def _run_inherited(position: int) -> Any:
    """Apply the inherited function to the inherited task at ``position``."""
    assert _INHERITED is not None
    function, tasks = _INHERITED
    return function(tasks[position])


def _pool(
    function: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], workers: int
) -> Iterator[ResultT]:
    """Apply ``function`` to ``tasks`` in a process pool.

    Where processes are forked, each worker inherits the tasks (resolved
    scenarios, LUTs included) with its memory and receives only a task's
    position: pickling a scenario costs about as much as running a small one,
    and the parent would do it serially. Elsewhere each task is pickled.
    """
    size = min(workers, len(tasks))
    if "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(
            size, context, initializer=_inherit, initargs=(function, tasks)
        ) as pool:
            yield from _collect([pool.submit(_run_inherited, i) for i in range(len(tasks))])
        return
    with ProcessPoolExecutor(max_workers=size) as pool:
        yield from _collect([pool.submit(function, task) for task in tasks])


def _collect(futures: list[Future[Any]]) -> Iterator[Any]:
    """Yield each future's result as it finishes; cancel the rest if the caller stops."""
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:
        for future in pending:
            future.cancel()


def import_ray() -> Any:
    """The ``ray`` module, or an input error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(
            [
                make_issue(
                    "command line",
                    "--executor",
                    "ray",
                    f"local, or ray once Ray is installed ({RAY_EXTRA})",
                    "Ray is not installed",
                )
            ]
        ) from None
    return ray


def start_ray(ray: Any, workers: int, address: str | None) -> bool:
    """Start Ray (join the cluster at ``address``, else locally with ``workers`` CPUs).

    Returns whether it was started here (``False``: it already ran, and
    whoever started it shuts it down).
    """
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(
            num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False
        )
    return True


def ray_task_options() -> dict[str, Any]:
    """Options of a Ray task: one CPU, and the user's plug-in consent.

    Workers of a cluster do not share this process's environment, so the
    modules ``SPECDEC_ALLOW_PLUGINS`` allows are handed to them explicitly.
    """
    from policies.plugins import ALLOW_PLUGINS_ENV

    options: dict[str, Any] = {"num_cpus": 1}
    consent = os.environ.get(ALLOW_PLUGINS_ENV)
    if consent:
        options["runtime_env"] = {"env_vars": {ALLOW_PLUGINS_ENV: consent}}
    return options


def _ray(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    workers: int,
    address: str | None,
) -> Iterator[ResultT]:
    ray = import_ray()
    started_here = start_ray(ray, workers, address)
    remote: Callable[..., Any] = ray.remote(**ray_task_options())(function).remote
    try:
        pending = [remote(task) for task in tasks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield ray.get(ref)
    finally:
        if started_here:
            ray.shutdown()
