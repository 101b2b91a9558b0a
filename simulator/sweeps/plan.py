"""Offline placement search: run every configuration of a plan space and rank them.

For each configuration (a point of the plan's sweep) one task runs the
scenario at its own rate, for the SLO attainment and goodput per GPU there,
and bisects ``workload.arrival_scale`` for the highest rate meeting the SLO
attainment target (:func:`~simulator.sweeps.search.capacity`), as
DistServe's placement search and Vidur-Search do. Tasks run on the sweep
executors and share nothing; the table is sorted by a total order, so it
does not depend on the executor or the number of workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import simulator.written_results as written_results
from simulator.capacity_bounds import (
    DEFAULT_HIGH,
    DEFAULT_LOW,
    DEFAULT_SLO_ATTAINMENT,
    DEFAULT_TOLERANCE,
)
from simulator.errors import InputError, make_issue
from simulator.outputs import FLOAT_FORMAT
from simulator.runner import run
from simulator.scenario.model import Scenario
from simulator.sweeps.execute import check_executor, default_workers, execute_with, one_line
from simulator.sweeps.plan_space import PlanSpace, load_plan_space
from simulator.sweeps.search import capacity, check_search
from simulator.sweeps.table import target_gpus

PLAN_FILE = "plan.csv"
FIGURE_STEM = "plan"
DPI = 300

RESULT_COLUMNS = (
    "gpus",
    "status",
    "error",
    "offered_requests_per_s",
    "slo_attainment",
    "meets_slo_at_rate",
    "feasible",
    "goodput_requests_per_s",
    "goodput_requests_per_gpu_s",
    "max_arrival_scale",
    "max_requests_per_s",
    "max_requests_per_gpu_s",
    "capacity_capped",
    "probes",
    "scenario_sha256",
)


@dataclass(frozen=True)
class PlanTask:
    """One configuration to evaluate.

    Attributes:
        index: The configuration's index (its point in the plan's sweep).
        scenario: Its resolved scenario (run at the scenario's own rate).
        scenario_file: The base scenario file (the capacity search reloads it).
        overrides: The configuration's dotted overrides.
        slo_attainment: The attainment target.
        low: Lowest ``arrival_scale`` of the search.
        high: Highest ``arrival_scale`` of the search.
        tolerance: Relative width at which bisection stops.
    """

    index: int
    scenario: Scenario
    scenario_file: Path
    overrides: tuple[str, ...]
    slo_attainment: float
    low: float
    high: float
    tolerance: float


@dataclass(frozen=True)
class PlanOutcome:
    """What a configuration's task returned: its result columns, or its error."""

    index: int
    columns: Mapping[str, Any]
    error: str | None


def evaluate(task: PlanTask) -> PlanOutcome:
    """Run a configuration at its rate and search its capacity; a failure is returned."""
    try:
        summary = run(task.scenario).summary
        found = capacity(
            task.scenario_file,
            task.slo_attainment,
            overrides=task.overrides,
            low=task.low,
            high=task.high,
            tolerance=task.tolerance,
        )
    except Exception as exc:  # a failing configuration is recorded and the others go on
        return PlanOutcome(task.index, {}, one_line(exc))
    goodput = summary["goodput"]
    attained = goodput["slo_attainment"]
    meets = attained is not None and attained >= task.slo_attainment
    return PlanOutcome(
        task.index,
        {
            "offered_requests_per_s": summary["requests"]["measured"] / summary["measured_s"],
            "slo_attainment": attained,
            "meets_slo_at_rate": meets,
            "feasible": meets or found.best is not None,
            "goodput_requests_per_s": goodput["requests_per_s"],
            "goodput_requests_per_gpu_s": goodput["requests_per_gpu_s"],
            "max_arrival_scale": found.best.arrival_scale if found.best else None,
            "max_requests_per_s": found.requests_per_s,
            "max_requests_per_gpu_s": found.requests_per_gpu_s,
            "capacity_capped": found.capped,
            "probes": len(found.probes),
        },
        None,
    )


def died(task: PlanTask, reason: str) -> PlanOutcome:
    """The outcome of a configuration whose worker process died (``reason`` says how)."""
    return PlanOutcome(task.index, {}, reason)


def configuration_label(values: Mapping[str, Any]) -> str:
    """A short name of a configuration: its axis values without the section prefixes."""
    parts = []
    for name, value in values.items():
        short = name.removeprefix("pools.").removeprefix("speculation.")
        short = short.replace(".tensor_parallel", ".tp")
        parts.append(f"{short}={value}")
    return " ".join(parts)


def _sort_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    def desc(value: Any) -> float:
        return -float(value) if value is not None and not pd.isna(value) else float("inf")

    return (
        row["status"] != "ok",
        not row["feasible"],
        not row["meets_slo_at_rate"],
        desc(row["goodput_requests_per_gpu_s"]),
        desc(row["max_requests_per_gpu_s"]),
        row["configuration"],
    )


def rank(rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> pd.DataFrame:
    """The ranked table.

    Order: configurations that ran before failed ones; feasible ones (meeting
    the SLO attainment at some rate tried) before infeasible ones; those
    meeting it at the scenario's rate first; then goodput per GPU at that
    rate, highest first; ties by the highest sustainable rate per GPU; then
    by configuration index.
    """
    ordered = sorted(rows, key=_sort_key)
    records = [{"rank": i + 1, **row} for i, row in enumerate(ordered)]
    columns = ["rank", "configuration", "label", *axes, *RESULT_COLUMNS]
    frame: pd.DataFrame = pd.DataFrame.from_records(records, columns=columns)
    return frame


def _row(
    space: PlanSpace, index: int, outcome: PlanOutcome | None, error: str | None
) -> dict[str, Any]:
    point = space.sweep.points[index]
    row: dict[str, Any] = dict.fromkeys(RESULT_COLUMNS)
    row.update(
        {
            "configuration": index,
            "label": configuration_label(point.values),
            **point.values,
            "gpus": target_gpus(point.scenario),
            "status": "failed" if error else "ok",
            "error": error or "",
            "meets_slo_at_rate": False,
            "feasible": False,
            "scenario_sha256": point.sha256,
        }
    )
    if outcome is not None and error is None:
        row.update(outcome.columns)
    return row


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(
            [
                make_issue(
                    "command line", "-o/--output", str(out_dir), "a directory", "not a directory"
                )
            ]
        )


def plan(
    space_file: str | Path | Mapping[str, Any] | PlanSpace,
    output_dir: str | Path | None = None,
    *,
    slo_attainment: float = DEFAULT_SLO_ATTAINMENT,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
    tolerance: float = DEFAULT_TOLERANCE,
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    figures: bool = True,
) -> pd.DataFrame:
    """Evaluate every configuration of a plan space; return the ranked table (also written).

    Args:
        space_file: A plan-space file, a mapping in its format, or a loaded plan space.
        output_dir: Where ``plan.csv`` and the figure (``plan.png``, ``plan.svg``)
            go (default ``results/plans/<plan_id>``).
        slo_attainment: Fraction of measured requests that must meet their SLO.
        low: Lowest ``arrival_scale`` of the capacity search.
        high: Highest ``arrival_scale`` of the capacity search.
        tolerance: Relative width at which the capacity bisection stops.
        executor: ``local`` (a process pool) or ``ray``.
        workers: Processes of the local pool, or CPUs of a local Ray (default:
            the CPUs this process may use); 1 runs in this process.
        ray_address: A running Ray cluster (``ray`` only).
        figures: Draw the figure.

    Raises:
        InputError: A bad plan space, search bound, executor or worker count
            (nothing has run).
    """
    check_executor(executor, workers)
    check_search(slo_attainment, low, high, tolerance)
    space = space_file if isinstance(space_file, PlanSpace) else load_plan_space(space_file)
    out_dir = Path(output_dir) if output_dir is not None else Path("results/plans") / space.plan_id
    _check_out_dir(out_dir)
    tasks = [
        PlanTask(
            point.index,
            point.scenario,
            space.sweep.scenario_file,
            space.overrides[point.index],
            slo_attainment,
            low,
            high,
            tolerance,
        )
        for point in space.sweep.points
    ]
    rows: list[dict[str, Any]] = []
    for outcome in execute_with(
        evaluate, tasks, executor, workers or default_workers(), ray_address, on_death=died
    ):
        rows.append(_row(space, outcome.index, outcome, outcome.error))
    frame = rank(rows, space.sweep.axes)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = frame.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    _replace(out_dir / PLAN_FILE, text.encode("utf-8"))
    written_results.note((out_dir / PLAN_FILE).absolute())
    if figures:
        from simulator.sweeps.plan_plot import write_plan_figure

        write_plan_figure(frame, out_dir, FIGURE_STEM, DPI)
    return frame


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a new file beside it, then renamed over it."""
    staging = path.with_name(f".{path.name}.new")
    staging.write_bytes(data)
    staging.replace(path)


CONSOLE_COLUMNS = (
    ("rank", "rank", "{}"),
    ("gpus", "GPUs", "{}"),
    ("slo_attainment", "attain@rate", "{:.1%}"),
    ("goodput_requests_per_gpu_s", "goodput/GPU", "{:.4g}"),
    ("max_requests_per_s", "max req/s", "{:.4g}"),
    ("max_requests_per_gpu_s", "max/GPU", "{:.4g}"),
)


def render_top(frame: pd.DataFrame, top: int) -> str:
    """The first ``top`` rows of the ranked table as aligned text, configuration last."""

    def cell(value: Any, form: str) -> str:
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return "-"
        return form.format(value)

    header = [title for _, title, _ in CONSOLE_COLUMNS] + ["configuration"]
    lines = []
    for record in frame.head(top).to_dict("records"):
        cells = [cell(record[name], form) for name, _, form in CONSOLE_COLUMNS]
        label = str(record["label"])
        if record["status"] != "ok":
            label += f"  (failed: {record['error']})"
        elif not record["feasible"]:
            label += "  (infeasible: no rate tried meets the attainment target)"
        elif record["capacity_capped"]:
            label += "  (max rate capped at --high)"
        lines.append([*cells, label])
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header) - 1)]

    def join(row: list[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1]

    return "\n".join(join(row) for row in [header, *lines])
