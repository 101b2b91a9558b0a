"""Read a results directory written by ``simulate`` into one frozen object."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import InputError, Issue, make_issue
from simulator.labels import distinct_labels
from simulator.loading import load_packaged_schema, read_document, schema_issues

REQUIRED_FILES = ("summary.json", "requests.csv", "timeseries.csv", "scenario.resolved.yaml")

SUMMARY_SCHEMA = "summary.schema.json"
"""What a results directory's ``summary.json`` is checked against before a figure is drawn."""


@dataclass(frozen=True)
class SloLimits:
    """SLO targets of one class (ms; ``None`` where the class sets none)."""

    ttft_ms: float | None
    tpot_ms: float | None
    tvt_ms: float | None


@dataclass(frozen=True)
class RunResults:
    """One run's outputs, as ``simulate`` wrote them.

    Attributes:
        path: The results directory.
        summary: ``summary.json``.
        requests: ``requests.csv``.
        timeseries: ``timeseries.csv``.
        scenario: ``scenario.resolved.yaml``.
        slos: SLO class name -> limits, from the resolved scenario.
        label: The run's name in legends and tables: ``summary.json``'s
            ``label`` (``metadata.label`` or the scenario id) unless
            :func:`load_run` was given another.
        planner_log: ``planner_log.csv`` (empty: the run had no planner).
    """

    path: Path
    summary: dict[str, Any]
    requests: pd.DataFrame
    timeseries: pd.DataFrame
    scenario: dict[str, Any]
    slos: dict[str, SloLimits]
    label: str
    planner_log: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def name(self) -> str:
        """Legend name: the run's label."""
        return self.label

    def slo_limit(self, metric: str) -> float | None:
        """The default class's limit for ``ttft``, ``tpot`` or ``tvt`` (ms), if any."""
        limits = self.slos.get("default")
        value = getattr(limits, f"{metric}_ms", None) if limits is not None else None
        return float(value) if value is not None and math.isfinite(value) else None


def _slos(scenario: dict[str, Any]) -> dict[str, SloLimits]:
    workload = scenario.get("workload", {})
    out: dict[str, SloLimits] = {}
    classes = {"default": workload.get("slo") or {}, **(workload.get("slo_classes") or {})}
    for name, targets in classes.items():
        out[name] = SloLimits(targets.get("ttft_ms"), targets.get("tpot_ms"), targets.get("tvt_ms"))
    return out


def _table_columns() -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    """File -> (the columns every run writes, those of them that hold text, not numbers)."""
    from simulator.engine.records import RequestRecord
    from simulator.engine.timeseries import COLUMNS

    records = fields(RequestRecord)
    return {
        "requests.csv": (
            tuple(f.name for f in records),
            frozenset(f.name for f in records if f.type in ("str", str)),
        ),
        "timeseries.csv": (COLUMNS, frozenset({"pool"})),
    }


def _column_issues(
    file: Path, frame: pd.DataFrame, required: Sequence[str], text: frozenset[str]
) -> list[Issue]:
    """Refuse a missing column, and a cell that is no number in a column of numbers."""
    issues = []
    for column in required:
        if column not in frame.columns:
            issues.append(
                make_issue(
                    file, f"column {column}", "(missing)", "the columns simulate writes", "missing"
                )
            )
            continue
        values = frame[column]
        if column in text or pd.api.types.is_numeric_dtype(values):
            continue
        numbers = pd.to_numeric(values, errors="coerce")
        bad = values[numbers.isna() & values.notna()]
        if bad.empty:
            continue
        row = int(bad.index[0])
        issues.append(
            make_issue(
                file,
                f"row {row + 1}, column {column}",
                bad.iloc[0],
                "a number (or an empty cell), as simulate writes",
                "not a number",
            )
        )
    return issues


def _flag_issues(file: Path, frame: pd.DataFrame) -> list[Issue]:
    """Refuse a cell of an SLO flag column (where the file has one) that is not True or False."""
    from simulator.metrics.summary import SLO_FLAG_COLUMNS

    issues = []
    for column in SLO_FLAG_COLUMNS:
        if column not in frame.columns or pd.api.types.is_bool_dtype(frame[column]):
            continue
        values = frame[column]
        bad = values[values.notna() & ~values.isin([True, False, "True", "False"])]
        if not bad.empty:
            issues.append(
                make_issue(
                    file,
                    f"row {int(bad.index[0]) + 1}, column {column}",
                    bad.iloc[0],
                    "True, False or an empty cell, as simulate writes",
                    "not a flag",
                )
            )
    return issues


def load_run(path: Path, label: str | None = None) -> RunResults:
    """Read the results directory ``path``; ``label`` replaces the run's own label.

    Raises:
        InputError: The directory or one of its files is missing or unreadable.
    """
    if not path.is_dir():
        raise InputError(
            [
                make_issue(
                    path, "", str(path), "a results directory written by simulate", "not found"
                )
            ]
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise InputError(
            [
                make_issue(path / name, "", "(missing)", "the file simulate writes", "file missing")
                for name in missing
            ]
        )
    summary = read_document(path / "summary.json", "summary")  # bounded: size and nesting
    issues = schema_issues(summary, load_packaged_schema(SUMMARY_SCHEMA), path / "summary.json")
    if issues:
        raise InputError(issues)
    frames = {}
    names = ["requests.csv", "timeseries.csv"]
    if (path / "planner_log.csv").is_file():
        names.append("planner_log.csv")
    for name in names:
        try:
            frames[name] = pd.read_csv(path / name)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InputError(
                [make_issue(path / name, "", str(exc)[:80], "a CSV file written by simulate")]
            ) from None
    for name, (required, text) in _table_columns().items():
        issues.extend(_column_issues(path / name, frames[name], required, text))
    issues.extend(_flag_issues(path / "requests.csv", frames["requests.csv"]))
    if issues:
        raise InputError(issues)
    resolved = path / "scenario.resolved.yaml"
    scenario = read_document(resolved, "resolved scenario")
    if not isinstance(scenario, dict):
        raise InputError([make_issue(resolved, "", scenario, "a mapping (the resolved scenario)")])
    from simulator.scenario.schema import shared_scenario_schema

    issues = schema_issues(scenario, shared_scenario_schema(), resolved)
    if issues:
        raise InputError(issues)
    return RunResults(
        path=path,
        summary=summary,
        requests=frames["requests.csv"],
        timeseries=frames["timeseries.csv"],
        scenario=scenario,
        slos=_slos(scenario),
        planner_log=frames.get("planner_log.csv", pd.DataFrame()),
        label=label
        if label
        else str(summary.get("label") or summary.get("scenario_id") or path.name),
    )


def with_distinct_labels(runs: Sequence[RunResults]) -> list[RunResults]:
    """The runs, relabelled where needed so that no two share a label (see :func:`distinct_labels`)."""
    names = distinct_labels(
        [run.label for run in runs],
        [str(run.summary.get("scenario_id", "")) for run in runs],
        [int(run.summary.get("seed", 0)) for run in runs],
    )
    return [replace(run, label=name) for run, name in zip(runs, names, strict=True)]
