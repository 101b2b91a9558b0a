"""The headline table: figures read from ``summary.json`` and formatted one way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.report.results import RunResults

LOWER = "lower"
HIGHER = "higher"


@dataclass(frozen=True)
class Metric:
    """One row of the headline table.

    Attributes:
        name: What the row shows, with its unit.
        path: Where the value sits in the summary.
        scale: Factor applied to the stored value (fractions to per cent).
        better: ``"lower"`` or ``"higher"`` where one direction is better, else ``None``.
        missing: What a cell says where the summary has no value.
        optional: The row is left out where no run has a value (TVT: only runs
            with verify rounds over a network have samples).
    """

    name: str
    path: tuple[str, ...]
    scale: float = 1.0
    better: str | None = None
    missing: str = "-"
    optional: bool = False

    @property
    def label(self) -> str:
        """The row title: the name, then which direction is better."""
        if self.better is None:
            return self.name
        if self.name.endswith(")"):
            return f"{self.name[:-1]}, {self.better} is better)"
        return f"{self.name} ({self.better} is better)"


METRICS: tuple[Metric, ...] = (
    Metric("requests completed", ("requests", "completed"), better=HIGHER),
    Metric("requests rejected", ("requests", "rejected"), better=LOWER),
    Metric("TTFT p50 (ms)", ("latency_ms", "ttft", "p50"), better=LOWER),
    Metric("TTFT p99 (ms)", ("latency_ms", "ttft", "p99"), better=LOWER),
    Metric("TPOT p50 (ms)", ("latency_ms", "tpot", "p50"), better=LOWER),
    Metric("TPOT p99 (ms)", ("latency_ms", "tpot", "p99"), better=LOWER),
    Metric("TVT p50 (ms)", ("latency_ms", "tvt", "p50"), better=LOWER, optional=True),
    Metric("TVT p99 (ms)", ("latency_ms", "tvt", "p99"), better=LOWER, optional=True),
    Metric("E2E p50 (ms)", ("latency_ms", "e2e", "p50"), better=LOWER),
    Metric("output tokens per s", ("throughput", "output_tokens_per_s"), better=HIGHER),
    Metric("goodput (requests per s)", ("goodput", "requests_per_s"), better=HIGHER),
    Metric("goodput (requests per GPU-s)", ("goodput", "requests_per_gpu_s"), better=HIGHER),
    Metric("SLO attainment, all SLOs (%)", ("goodput", "slo_attainment"), 100.0, HIGHER),
    Metric("TTFT SLO pass rate (%)", ("goodput", "slo_pass_rate", "ttft"), 100.0, HIGHER),
    Metric("TPOT SLO pass rate (%)", ("goodput", "slo_pass_rate", "tpot"), 100.0, HIGHER),
    Metric("TVT SLO pass rate (%)", ("goodput", "slo_pass_rate", "tvt"), 100.0, HIGHER),
    Metric("acceptance rate (%)", ("speculation", "acceptance_rate"), 100.0, HIGHER),
    Metric("tokens per verify round", ("speculation", "mean_tokens_per_verify"), better=HIGHER),
    Metric("GPU utilisation (%)", ("resources", "gpu_utilization"), 100.0),
    Metric(
        "energy per output token (J)",
        ("energy", "j_per_output_token"),
        better=LOWER,
        missing="not measured",
    ),
    Metric(
        "cost per 1k tokens ($)", ("cost", "usd_per_1k_tokens"), better=LOWER, missing="no price"
    ),
)


def category_metrics(runs: Sequence[RunResults]) -> tuple[Metric, ...]:
    """Rows per task category any run reports (``summary.json`` ``by_category``).

    Against a baseline run of the same workload without speculation, the TPOT
    ratio of a category is the inverse of its speed-up.
    """
    names = sorted({name for run in runs for name in run.summary.get("by_category") or {}})
    rows: list[Metric] = []
    for name in names:
        where = ("by_category", name)
        rows += [
            Metric(f"{name}: SLO attainment (%)", (*where, "slo_attainment"), 100.0, HIGHER),
            Metric(f"{name}: TPOT mean (ms)", (*where, "tpot_ms_mean"), better=LOWER),
            Metric(
                f"{name}: tokens per verify round",
                (*where, "mean_tokens_per_verify"),
                better=HIGHER,
                optional=True,
            ),
        ]
    return tuple(rows)


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


def cell(summary: dict[str, Any], metric: Metric) -> str:
    """The metric's cell for one run: its value, or what the row says where there is none."""
    value = value_of(summary, metric)
    return metric.missing if value is None else format_value(value)


def ratio_cell(metric: Metric, value: float | None, base: float | None) -> str:
    """``value / base`` as ``0.54x``, followed by "(better)" or "(worse)" where the row has a direction."""
    if value is None or base is None or base == 0.0:
        return "-"
    ratio = value / base
    text = f"{ratio:.2f}x"
    if metric.better is None or f"{ratio:.2f}" == "1.00":
        return text
    improved = ratio < 1.0 if metric.better == LOWER else ratio > 1.0
    return f"{text} ({'better' if improved else 'worse'})"


def headline_rows(runs: Sequence[RunResults]) -> list[list[str]]:
    """Rows ``[label, value of run 1, ...]``; with several runs, ratios to the first follow.

    An optional row (TVT) is left out where no run has a value for it. Rows per
    task category (:func:`category_metrics`) follow where a run has categories.
    """
    rows = []
    for metric in (*METRICS, *category_metrics(runs)):
        values = [value_of(run.summary, metric) for run in runs]
        if metric.optional and all(value is None for value in values):
            continue
        row = [metric.label, *(cell(run.summary, metric) for run in runs)]
        row += [ratio_cell(metric, value, values[0]) for value in values[1:]]
        rows.append(row)
    return rows


def headline_header(runs: Sequence[RunResults]) -> list[str]:
    """Column titles matching :func:`headline_rows`."""
    header = ["metric", *(run.name for run in runs)]
    if len(runs) > 1:
        header += [f"{run.name} / {runs[0].name} (baseline)" for run in runs[1:]]
    return header


SLO_HEADER = [
    "run",
    "SLO targets",
    "TTFT pass (%)",
    "TPOT pass (%)",
    "TVT pass (%)",
    "all SLOs (%)",
    "measured requests",
]
"""Columns of the SLO table: each run's targets and its pass rate per SLO."""


def _targets_text(targets: dict[str, dict[str, float | None]]) -> str:
    parts = []
    for name, limits in targets.items():
        within = [
            f"{slo.upper()} <= {format_value(limits[f'{slo}_ms'])} ms"
            for slo in ("ttft", "tpot", "tvt")
            if limits.get(f"{slo}_ms") is not None
        ]
        parts.append(f"{name}: {', '.join(within) if within else 'no target'}")
    return "; ".join(parts) if parts else "-"


def _rate(value: float | None, applies: bool = True) -> str:
    if value is None:
        return "-" if applies else "does not apply"
    return format_value(100.0 * value)


def slo_rows(runs: Sequence[RunResults]) -> list[list[str]]:
    """One row per run: its SLO targets by class and the share of its measured set passing each.

    Every rate divides by the run's measured requests, as ``slo_attainment`` does;
    "does not apply" marks TVT where the run has no target or no network rounds.
    """
    rows = []
    for run in runs:
        good = run.summary["goodput"]
        rates = good.get("slo_pass_rate") or {}
        rows.append(
            [
                run.name,
                _targets_text(good.get("slo_targets_ms") or {}),
                _rate(rates.get("ttft")),
                _rate(rates.get("tpot")),
                _rate(rates.get("tvt"), applies="tvt" not in rates),
                _rate(good["slo_attainment"]),
                format_value(good["measured_requests"]),
            ]
        )
    return rows


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
