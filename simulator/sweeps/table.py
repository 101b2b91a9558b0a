"""The sweep table: one row per run, axis values and the headline metrics flattened."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.outputs import FLOAT_FORMAT
from simulator.scenario.model import Scenario

HEADLINE_METRICS: tuple[tuple[str, ...], ...] = (
    ("requests", "arrived"),
    ("requests", "measured"),
    ("requests", "completed"),
    ("requests", "rejected"),
    ("requests", "unfinished"),
    *(
        ("latency_ms", name, stat)
        for name in ("ttft", "tpot", "tvt", "e2e")
        for stat in ("mean", "p50", "p90", "p99")
    ),
    ("throughput", "requests_per_s"),
    ("throughput", "output_tokens_per_s"),
    ("goodput", "slo_attainment"),
    ("goodput", "requests_per_s"),
    ("goodput", "requests_per_gpu_s"),
    ("speculation", "verify_steps"),
    ("speculation", "acceptance_rate"),
    ("speculation", "mean_tokens_per_verify"),
    ("speculation", "mean_k"),
    ("energy", "j_per_output_token"),
    ("cost", "usd_per_1k_tokens"),
    ("resources", "gpu_utilization"),
)
"""The summary fields of the console's headline table (:mod:`simulator.console`), as columns."""

FIXED_COLUMNS = ("point", "status", "error", "run_dir", "scenario_sha256")


def target_gpus(scenario: Scenario) -> int:
    """GPUs of every target replica (``gpus_per_replica`` = TP x PP, times the pool's count).

    The same count the summary divides goodput by (``requests_per_gpu_s``).
    """
    return sum(d.profile.compute.gpus_per_replica * d.count for d in scenario.targets())


def _axis_value(value: Any) -> Any:
    """A scalar as it is; a list or mapping as its JSON text."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def metric_columns() -> list[str]:
    """Names of the metric columns, in table order."""
    return ["gpus", "offered_requests_per_s", "offered_requests_per_gpu_s"] + [
        ".".join(path) for path in HEADLINE_METRICS
    ]


def summary_metrics(summary: Mapping[str, Any], gpus: int) -> dict[str, Any]:
    """The headline metrics of a summary, flattened to dotted column names.

    ``offered_requests_per_s`` is the arrival rate over the measurement
    window: measured requests (see ``summary.json``) over ``measured_s``.
    """
    offered = summary["requests"]["measured"] / summary["measured_s"]
    row: dict[str, Any] = {
        "gpus": gpus,
        "offered_requests_per_s": offered,
        "offered_requests_per_gpu_s": offered / gpus if gpus else None,
    }
    for path in HEADLINE_METRICS:
        node: Any = summary
        for part in path:
            node = node[part]
        row[".".join(path)] = node
    return row


def sweep_frame(rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> pd.DataFrame:
    """The table: one row per point, sorted by point, columns in a fixed order."""
    columns = ["point", *axes, *FIXED_COLUMNS[1:], *metric_columns()]
    records = [
        {**row, **{axis: _axis_value(v) for axis, v in row["values"].items()}} for row in rows
    ]
    frame = pd.DataFrame.from_records(records, columns=columns)
    ordered: pd.DataFrame = frame.sort_values("point", kind="stable").reset_index(drop=True)
    return ordered


def write_table(frame: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write ``sweep.csv`` (always) and ``sweep.parquet`` (when pyarrow is installed)."""
    written = [out_dir / "sweep.csv"]
    text = frame.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    _replace(written[0], text.encode("utf-8"))
    if importlib.util.find_spec("pyarrow") is None:
        return written
    parquet = out_dir / "sweep.parquet"
    staging = parquet.with_name(".sweep.parquet.new")
    frame.to_parquet(staging, index=False)
    staging.replace(parquet)
    written.append(parquet)
    return written


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a new file beside it, then renamed over it."""
    staging = path.with_name(f".{path.name}.new")
    staging.write_bytes(data)
    staging.replace(path)
