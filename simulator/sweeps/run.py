"""Running a sweep: resolve every point, skip finished ones, run the rest, write the table."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

import simulator.written_results as written_results
from simulator.content_hash import code_sha256, input_sha256
from simulator.errors import InputError, make_issue
from simulator.outputs import OUTPUT_FILES
from simulator.sweeps.execute import (
    Outcome,
    Task,
    check_executor,
    default_workers,
    execute,
    read_summary,
)
from simulator.sweeps.progress import SweepProgress
from simulator.sweeps.spec import Sweep, SweepPoint, load_sweep
from simulator.sweeps.table import summary_metrics, sweep_frame, target_gpus, write_table

RUNS_DIR = "runs"
WALL_FILE = "sweep_runs.csv"
"""Per point: whether it ran, was resumed or failed, and its wall seconds (kept out of sweep.csv)."""


def run_dir_name(point: SweepPoint) -> str:
    """The results directory of a point, relative to the sweep's directory."""
    return f"{RUNS_DIR}/{point.index:04d}"


def finished(point: SweepPoint, out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a complete results set of this very point, from this code.

    Complete: every file of a run is there (results directories are swapped
    in whole); this very point: ``run.json`` carries the content hashes of
    the point's resolved scenario, of every file it names and of the code
    that runs now (:mod:`simulator.content_hash`).
    """
    if not all((out_dir / name).is_file() for name in OUTPUT_FILES):
        return False
    try:
        info = json.loads((out_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply to parse
        return False
    return (
        isinstance(info, dict)
        and info.get("scenario_sha256") == point.sha256
        and info.get("code_sha256") == code_sha256()
        and info.get("input_sha256") == input_sha256(point.scenario)
    )


def resumed_row(point: SweepPoint, out_dir: Path) -> dict[str, Any] | None:
    """The table row of a finished point from its results, or None when they cannot be read."""
    if not finished(point, out_dir):
        return None
    try:
        return _row(point, read_summary(out_dir), None)
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None  # a damaged summary.json: the point runs again


def _check_sweep_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(
            [
                make_issue(
                    "command line", "-o/--output", str(out_dir), "a directory", "not a directory"
                )
            ]
        )


def _row(point: SweepPoint, summary: Mapping[str, Any] | None, error: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "point": point.index,
        "values": point.values,
        "status": "failed" if error else "ok",
        "error": error or "",
        "run_dir": run_dir_name(point),
        "scenario_sha256": point.sha256,
    }
    if summary is not None:
        row.update(summary_metrics(summary, target_gpus(point.scenario)))
    return row


def sweep(
    sweep_file: str | Path | Mapping[str, Any] | Sweep,
    output_dir: str | Path | None = None,
    *,
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
) -> pd.DataFrame:
    """Run every point of a sweep and return its table (also written to ``output_dir``).

    Every point is resolved before anything runs, so a bad axis key or value
    fails up front. A point whose results directory already holds the
    results of the same resolved scenario, computed from input files of the
    same content by the same code (see :func:`finished`), is not rerun
    (resumed); one whose ``summary.json`` cannot be read is. A point that
    fails, or whose worker process dies, is recorded (``status``
    ``failed`` and its ``error``) and the others go on.

    Args:
        sweep_file: A sweep file, a mapping in the sweep file format, or a loaded sweep.
        output_dir: Where ``sweep.csv``, ``sweep.parquet`` (with pyarrow),
            ``sweep_runs.csv`` and ``runs/NNNN/`` go (default
            ``results/sweeps/<sweep_id>``).
        executor: ``local`` (a process pool) or ``ray``.
        workers: Processes of the local pool, or CPUs of a local Ray (default:
            the CPUs this process may use); 1 runs the points in this process.
        ray_address: The address of a running Ray cluster (``ray`` only;
            default: start a local Ray).

    Returns:
        The table: one row per point, sorted by point. Its
        ``attrs["outcomes"]`` counts the points ``ran``, ``resumed`` and
        ``failed`` (as ``sweep_runs.csv`` lists them).

    Raises:
        InputError: A bad sweep, executor or worker count (nothing has run).
    """
    check_executor(executor, workers)
    loaded = load_sweep(sweep_file)
    out_dir = (
        Path(output_dir) if output_dir is not None else Path("results/sweeps") / loaded.sweep_id
    )
    _check_sweep_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: dict[int, dict[str, Any]] = {}
    outcomes: dict[int, str] = {}
    walls: dict[int, float] = {}
    tasks: list[Task] = []
    for point in loaded.points:
        point_dir = out_dir / run_dir_name(point)
        row = resumed_row(point, point_dir)
        if row is not None:
            rows[point.index] = row
            outcomes[point.index] = "resumed"
        else:
            tasks.append(Task(point.index, point.scenario, point_dir))
    by_index = {point.index: point for point in loaded.points}
    progress = SweepProgress(len(loaded.points), resumed=len(rows))
    try:
        for outcome in execute(tasks, executor, workers or default_workers(), ray_address):
            rows[outcome.index] = _outcome_row(by_index[outcome.index], outcome)
            outcomes[outcome.index] = "failed" if outcome.error else "ran"
            walls[outcome.index] = outcome.wall_s
            if outcome.error is None:
                written_results.note((out_dir / run_dir_name(by_index[outcome.index])).absolute())
            progress.update(failed=outcome.error is not None)
    finally:
        progress.close()
    frame = sweep_frame([rows[i] for i in sorted(rows)], loaded.axes)
    for path in write_table(frame, out_dir):
        written_results.note(path.absolute())
    _write_runs(out_dir, outcomes, walls)
    counts = Counter(outcomes.values())
    frame.attrs["outcomes"] = {name: counts[name] for name in ("ran", "resumed", "failed")}
    return frame


def _outcome_row(point: SweepPoint, outcome: Outcome) -> dict[str, Any]:
    summary = json.loads(outcome.summary_json) if outcome.summary_json is not None else None
    return _row(point, summary, outcome.error)


def _write_runs(out_dir: Path, outcomes: Mapping[int, str], walls: Mapping[int, float]) -> None:
    frame = pd.DataFrame(
        {
            "point": sorted(outcomes),
            "outcome": [outcomes[i] for i in sorted(outcomes)],
            "wall_s": [round(walls[i], 6) if i in walls else None for i in sorted(outcomes)],
        }
    )
    frame.to_csv(out_dir / WALL_FILE, index=False, lineterminator="\n")
