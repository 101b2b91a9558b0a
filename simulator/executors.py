"""Executors: apply a function to tasks in this process, a local process pool or Ray.

Sweep points and the planner's what-if windows run on them. A task's
result does not depend on where it ran, so tables and decisions do not
depend on the executor or the number of workers. A worker process that
dies loses only its own task (see :func:`execute_with`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as cf_wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection, wait
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
    on_death: Callable[[TaskT, str], ResultT] | None = None,
) -> Iterator[ResultT]:
    """Apply ``function`` to every task on an executor, yielding results as they finish.

    As :func:`execute`, for any module-level ``function`` (it is pickled to
    the workers) that returns its failures rather than raising them.

    A worker process that dies while running a task (``os._exit``, killed by
    the kernel for memory) takes only that task with it: ``on_death(task,
    reason)`` stands in for its result and the other tasks go on. Without
    ``on_death`` the death raises :class:`WorkerDied` (after the tasks still
    running are stopped).
    """
    if not tasks:
        return
    if executor == "ray":
        yield from _ray(function, tasks, workers, ray_address, on_death)
    elif workers == 1:
        for task in tasks:
            yield function(task)
    else:
        yield from _pool(function, tasks, workers, on_death)


class WorkerDied(RuntimeError):
    """A worker process ended without returning its task's result."""


def _death(task: TaskT, reason: str, on_death: Callable[[TaskT, str], ResultT] | None) -> ResultT:
    if on_death is None:
        raise WorkerDied(reason)
    return on_death(task, reason)


def exit_reason(exitcode: int | None) -> str:
    """Why a worker process ended, from its exit code (negative: the signal that killed it)."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"worker process killed by {name}{hint} before returning a result"
    return f"worker process exited with status {exitcode} before returning a result"


_INHERITED: tuple[Callable[[Any], Any], Sequence[Any], Any] | None = None
"""A pool worker's copy of the function, the tasks and the shared "started" flags
it was forked with, set once when the worker starts (see :func:`_pool`); the
parent process never sets it."""


def _inherit(function: Callable[[Any], Any], tasks: Sequence[Any], started: Any) -> None:
    """Pool initializer: keep the function, tasks and flags the worker was forked with."""
    global _INHERITED
    _INHERITED = (function, tasks, started)


def _run_inherited(position: int) -> Any:
    """Flag the inherited task at ``position`` as started, then apply the function to it."""
    assert _INHERITED is not None
    function, tasks, started = _INHERITED
    started[position] = 1
    return function(tasks[position])


def _pool(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    workers: int,
    on_death: Callable[[TaskT, str], ResultT] | None,
) -> Iterator[ResultT]:
    """Apply ``function`` to ``tasks`` in a process pool.

    Where processes are forked, each worker inherits the tasks (resolved
    scenarios, LUTs included) with its memory and receives only a task's
    position: pickling a scenario costs about as much as running a small one,
    and the parent would do it serially. Elsewhere each task is pickled.

    A worker that dies breaks the pool, and every task the pool still held
    fails with it. Those that had not started go to a new pool; those that
    had (one of them killed the worker) run again each in a process of its
    own (:func:`_isolated`), so that only the task that kills its process is
    lost. Without fork, every task the pool still held counts as started.
    """
    forked = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if forked else None)
    remaining = list(range(len(tasks)))
    while remaining:
        started = context.RawArray("b", len(tasks)) if forked else None
        size = min(workers, len(remaining))
        if forked:
            pool = ProcessPoolExecutor(
                size, context, initializer=_inherit, initargs=(function, tasks, started)
            )
        else:
            pool = ProcessPoolExecutor(max_workers=size)
        broken: list[int] = []
        with pool:
            if forked:
                futures = {pool.submit(_run_inherited, i): i for i in remaining}
            else:
                futures = {pool.submit(function, tasks[i]): i for i in remaining}
            for future in _as_completed(futures):
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken.append(futures[future])
                    continue
                yield result
        suspects = [i for i in broken if started is None or started[i]] or broken
        remaining = sorted(set(broken) - set(suspects))
        yield from _isolated(function, [tasks[i] for i in sorted(suspects)], workers, on_death)


def _as_completed(futures: Iterable[Future[Any]]) -> Iterator[Future[Any]]:
    """Yield each future as it finishes; cancel the rest if the caller stops."""
    pending = set(futures)
    try:
        while pending:
            done, pending = cf_wait(pending, return_when=FIRST_COMPLETED)
            yield from done
    finally:
        for future in pending:
            future.cancel()


def _child(function: Callable[[Any], Any], task: Any, sender: Connection) -> None:
    """Run one task in a process of its own; send back ``(True, result)`` or ``(False, error)``."""
    try:
        message: tuple[bool, Any] = (True, function(task))
    except BaseException as exc:  # raised again in the parent, as a pool would
        message = (False, exc)
    try:
        sender.send(message)
    except Exception as exc:  # the result or the error does not pickle
        sender.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        sender.close()


def _isolated(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    workers: int,
    on_death: Callable[[TaskT, str], ResultT] | None,
) -> Iterator[ResultT]:
    """Apply ``function`` to ``tasks``, each in a process of its own, ``workers`` at a time.

    A process that dies costs its own task only, and its exit code says
    how it died (see :func:`execute_with`). Slower than a pool (a process
    per task): used for the tasks a broken pool held.
    """
    if not tasks:
        return
    forked = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if forked else None)
    size = min(workers, len(tasks))
    waiting = deque(range(len(tasks)))
    running: dict[Connection, tuple[int, Any]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < size:
                position = waiting.popleft()
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_child, args=(function, tasks[position], sender), daemon=True
                )
                process.start()
                sender.close()
                running[receiver] = (position, process)
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                position, process = running.pop(ready)
                try:
                    succeeded, value = ready.recv()
                except (EOFError, OSError):
                    process.join()
                    reason = exit_reason(process.exitcode)
                    succeeded, value = True, _death(tasks[position], reason, on_death)
                finally:
                    ready.close()
                process.join()
                if not succeeded:
                    raise value
                yield value
    finally:
        for receiver, (_, process) in running.items():
            process.terminate()
            process.join()
            receiver.close()


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
    """Options of a Ray task: one CPU, no retry of a task whose worker died, the plug-in consent.

    Workers of a cluster do not share this process's environment, so the
    modules ``SPECDEC_ALLOW_PLUGINS`` allows are handed to them explicitly.
    """
    from policies.plugins import ALLOW_PLUGINS_ENV

    options: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
    consent = os.environ.get(ALLOW_PLUGINS_ENV)
    if consent:
        options["runtime_env"] = {"env_vars": {ALLOW_PLUGINS_ENV: consent}}
    return options


RAY_DEATHS = ("WorkerCrashedError", "OutOfMemoryError", "NodeDiedError")
"""Ray's errors for a task whose worker process (or node) died."""


def one_line_text(exc: BaseException) -> str:
    """An exception's message with its lines joined by `` | ``."""
    return " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _ray(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    workers: int,
    address: str | None,
    on_death: Callable[[TaskT, str], ResultT] | None = None,
) -> Iterator[ResultT]:
    ray = import_ray()
    started_here = start_ray(ray, workers, address)
    remote: Callable[..., Any] = ray.remote(**ray_task_options())(function).remote
    deaths = tuple(
        getattr(ray.exceptions, name)
        for name in RAY_DEATHS
        if isinstance(getattr(ray.exceptions, name, None), type)
    )
    try:
        refs = {remote(task): task for task in tasks}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    result = ray.get(ref)
                except deaths as exc:
                    reason = f"Ray worker died: {type(exc).__name__}: {one_line_text(exc)}"
                    result = _death(refs[ref], reason, on_death)
                yield result
    finally:
        if started_here:
            ray.shutdown()
