"""The headline table: figures read from ``summary.json`` and formatted one way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.report.results import RunResults


@dataclass(frozen=True)
class Metric:
    """One row of the headline table: a label and where the value sits in the summary."""

    label: str
    path: tuple[str, ...]
    scale: float = 1.0


METRICS: tuple[Metric, ...] = (
    Metric("requests completed", ("requests", "completed")),
    Metric("requests rejected", ("requests", "rejected")),
    Metric("TTFT p50 (ms)", ("latency_ms", "ttft", "p50")),
    Metric("TTFT p99 (ms)", ("latency_ms", "ttft", "p99")),
    Metric("TPOT p50 (ms)", ("latency_ms", "tpot", "p50")),
    Metric("TPOT p99 (ms)", ("latency_ms", "tpot", "p99")),
    Metric("TVT p50 (ms)", ("latency_ms", "tvt", "p50")),
    Metric("TVT p99 (ms)", ("latency_ms", "tvt", "p99")),
    Metric("E2E p50 (ms)", ("latency_ms", "e2e", "p50")),
    Metric("output tokens per s", ("throughput", "output_tokens_per_s")),
    Metric("goodput (requests per s)", ("goodput", "requests_per_s")),
    Metric("goodput (requests per GPU-s)", ("goodput", "requests_per_gpu_s")),
    Metric("SLO attainment (%)", ("goodput", "slo_attainment"), 100.0),
    Metric("acceptance rate (%)", ("speculation", "acceptance_rate"), 100.0),
    Metric("tokens per verify round", ("speculation", "mean_tokens_per_verify")),
    Metric("GPU utilisation (%)", ("resources", "gpu_utilization"), 100.0),
    Metric("energy per output token (J)", ("energy", "j_per_output_token")),
    Metric("cost per 1k tokens ($)", ("cost", "usd_per_1k_tokens")),
)


def value_of(summary: dict[str, Any], metric: Metric) -> float | None:
    """The metric's value in ``summary`` (scaled), or ``None`` where it does not apply."""
    node: Any = summary
    for key in metric.path:
        node = node.get(key) if isinstance(node, dict) else None
    return None if node is None else float(node) * metric.scale


def format_value(value: float | None) -> str:
    """The one way numbers are written in reports: 4 significant digits, '-' for none."""
    if value is None:
        return "-"
    if value == int(value) and abs(value) < 1e9:
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def headline_rows(runs: Sequence[RunResults]) -> list[list[str]]:
    """Rows ``[label, value of run 1, ...]``; with several runs, ratios to the first follow."""
    rows = []
    for metric in METRICS:
        values = [value_of(run.summary, metric) for run in runs]
        row = [metric.label, *(format_value(v) for v in values)]
        if len(runs) > 1:
            base = values[0]
            for value in values[1:]:
                ratio = value / base if value is not None and base not in (None, 0.0) else None
                row.append("-" if ratio is None else f"{ratio:.2f}x")
        rows.append(row)
    return rows


def headline_header(runs: Sequence[RunResults]) -> list[str]:
    """Column titles matching :func:`headline_rows`."""
    header = ["metric", *(run.name for run in runs)]
    if len(runs) > 1:
        header += [f"{run.name} / {runs[0].name}" for run in runs[1:]]
    return header


DEVICE_CLASS_HEADER = ["device class", "type", "energy (J)", "idle energy (J)", "cost ($)"]
"""Columns of the per-device-class energy and cost table."""


def device_class_rows(summary: dict[str, Any]) -> list[list[str]]:
    """One row per device class: energy, idle energy and cost, or "not measured" / "no price"."""
    energies = summary["energy"].get("by_device_class") or {}
    costs = summary["cost"].get("by_device_class") or {}
    rows = []
    for name in dict.fromkeys([*energies, *costs]):
        energy = energies.get(name, {})
        cost = costs.get(name, {})
        rows.append(
            [
                name,
                str(energy.get("type") or cost.get("type") or "-"),
                format_value(energy["total_j"]) if energy.get("measured") else "not measured",
                format_value(energy["idle_j"]) if energy.get("idle_measured") else "not measured",
                format_value(cost["usd"]) if cost.get("priced") else "no price",
            ]
        )
    return rows
