"""One figure per function. Each takes ``ax=None`` (a new figure) and returns the Axes.

Figures are drawn on :class:`matplotlib.figure.Figure` objects with the Agg
canvas, never through ``pyplot``, so nothing global is touched and nothing is
shown. Per-request figures use ``requests.csv``, time figures
``timeseries.csv``, breakdowns ``summary.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from simulator.metrics.summary import PERCENTILES, slo_met
from simulator.report.results import RunResults
from simulator.workload import SloTargets

LATENCY_COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "tvt": "tvt_ms", "e2e": "e2e_ms"}
LATENCY_TITLES = {
    "ttft": "Time to first token",
    "tpot": "Time per output token",
    "tvt": "Time to verify (worst round per request)",
    "e2e": "End-to-end latency",
}
QUEUE_COLUMNS = ("prefill_queue", "decode_queue", "verify_queue", "fused_queue")


def new_axes(width_in: float = 6.4, height_in: float = 4.0) -> Axes:
    """Return the Axes of a new Agg-backed figure."""
    figure = Figure(figsize=(width_in, height_in))
    figure.subplots_adjust(left=0.13, right=0.97, bottom=0.13, top=0.91)
    FigureCanvasAgg(figure)
    return figure.add_subplot()


def _axes(ax: Axes | None) -> Axes:
    return ax if ax is not None else new_axes()


LOG_MINOR_SUBS = (2.0, 3.0, 5.0)
"""Minor ticks of log axes inside each decade, at 2, 3 and 5 times the decade."""

MINOR_LABEL_DECADES = 3.0
"""Minor ticks are labelled while the axis spans at most this many decades (beyond, they crowd)."""


def _tick_text(value: float, _position: int | None = None) -> str:
    return f"{value:g}"


def log_axis(ax: Axes, axis: Literal["x", "y"]) -> None:
    """Put ``axis`` (``"x"`` or ``"y"``) of ``ax`` on a log scale with labelled 2-3-5 minor ticks.

    Major ticks sit on the decades; minor ticks at 2, 3 and 5 times each
    decade carry plain numbers too (smaller) while the axis spans at most
    :data:`MINOR_LABEL_DECADES` decades, so a reader can place a value
    between decades without counting unlabelled ticks.
    """
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(LogLocator(base=10.0))
    target.set_major_formatter(FuncFormatter(_tick_text))
    target.set_minor_locator(LogLocator(base=10.0, subs=LOG_MINOR_SUBS))

    def minor_text(value: float, position: int | None = None) -> str:
        low, high = sorted(target.get_view_interval())
        if low <= 0 or np.log10(high / low) > MINOR_LABEL_DECADES:
            return ""
        return _tick_text(value, position)

    target.set_minor_formatter(FuncFormatter(minor_text))
    ax.tick_params(axis=axis, which="minor", labelsize="x-small")


def _no_data(ax: Axes, what: str) -> Axes:
    ax.text(0.5, 0.5, f"no {what} in this run", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _labelled_barh(ax: Axes, labels: Sequence[str], values: Sequence[float]) -> None:
    """Horizontal bars with their labels written above them (long names stay readable)."""
    positions = np.arange(len(labels), dtype=float)
    ax.barh(positions, values, height=0.5)
    for y, label in zip(positions, labels, strict=True):
        ax.text(0.0, y + 0.3, label, va="bottom", ha="left", fontsize="small")
    ax.set_yticks([])
    ax.set_ylim(-0.5, len(labels) - 0.1)


def has_latency(run: RunResults, metric: str) -> bool:
    """Whether some completed request of ``run`` has a value of ``metric``."""
    done = run.requests[run.requests["outcome"] == "completed"]
    return bool(done[LATENCY_COLUMNS[metric]].notna().any())


def has_rounds(run: RunResults) -> bool:
    """Whether ``run`` ran speculation (verify or fused) rounds."""
    return bool((run.requests["verify_rounds"] > 0).any())


def has_timeseries(run: RunResults) -> bool:
    """Whether ``run`` sampled its replicas (``timeseries.csv`` has rows)."""
    return not run.timeseries.empty


def has_links(run: RunResults) -> bool:
    """Whether ``run`` carried bytes over a network link."""
    return any(value > 0 for value in run.summary["resources"]["network_bytes_by_link"].values())


def has_energy(run: RunResults) -> bool:
    """Whether the energy of some device class of ``run`` is measured."""
    return bool(run.summary["energy"].get("covers"))


def has_attainment(run: RunResults) -> bool:
    """Whether ``run`` has an SLO attainment figure per class or device."""
    fairness = run.summary["fairness"]
    return any(
        value is not None
        for key in ("slo_attainment_by_class", "slo_attainment_by_device")
        for value in fairness[key].values()
    )


def has_completed(run: RunResults) -> bool:
    """Whether some request of ``run`` completed."""
    return bool((run.requests["outcome"] == "completed").any())


def latency_cdf(runs: Sequence[RunResults], metric: str, ax: Axes | None = None) -> Axes:
    """CDF of one latency of completed requests, one line per run, with the SLO line."""
    ax = _axes(ax)
    column = LATENCY_COLUMNS[metric]
    drawn = False
    for run in runs:
        done = run.requests[run.requests["outcome"] == "completed"]
        values = np.sort(done[column].dropna().to_numpy(float))
        if values.size == 0:
            continue
        ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=run.name)
        drawn = True
    if not drawn:
        return _no_data(ax, f"{metric.upper()} values")
    limit = runs[0].slo_limit(metric) if metric != "e2e" else None
    if limit is not None:
        ax.axvline(limit, color="black", linestyle="--", linewidth=1, label=f"SLO {limit:g} ms")
    log_axis(ax, "x")
    ax.set_xlabel(f"{metric.upper()} (ms, log scale)")
    ax.set_ylabel("fraction of completed requests")
    ax.set_title(LATENCY_TITLES[metric])
    ax.legend(loc="lower right", fontsize="small")
    return ax


PERCENTILE_MARKERS = ("o", "s", "^", "D")
"""One marker per percentile of :data:`PERCENTILES` (points, not bars: the axis is log)."""


def latency_percentiles(run: RunResults, ax: Axes | None = None) -> Axes:
    """Points at the p50/p90/p95/p99 of each latency from ``summary.json`` (log axis)."""
    ax = _axes(ax)
    latency = run.summary["latency_ms"]
    metrics = [m for m in LATENCY_COLUMNS if latency[m]["p50"] is not None]
    if not metrics:
        return _no_data(ax, "latencies")
    offset = 0.6 / len(PERCENTILES)
    positions = np.arange(len(metrics), dtype=float)
    for i, (p, marker) in enumerate(zip(PERCENTILES, PERCENTILE_MARKERS, strict=True)):
        values = [latency[m][f"p{p}"] for m in metrics]
        shifted = positions + (i - (len(PERCENTILES) - 1) / 2) * offset
        ax.plot(shifted, values, marker=marker, linestyle="none", label=f"p{p}")
    ax.set_xticks(positions, [m.upper() for m in metrics])
    ax.set_xlim(-0.5, len(metrics) - 0.5)
    log_axis(ax, "y")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("Latency percentiles")
    ax.legend(fontsize="small")
    return ax


def _slo_targets(run: RunResults) -> dict[str, SloTargets]:
    return {
        name: SloTargets(
            float(limits.ttft_ms) if limits.ttft_ms is not None else float("inf"),
            float(limits.tpot_ms) if limits.tpot_ms is not None else float("inf"),
            limits.tvt_ms,
        )
        for name, limits in run.slos.items()
    }


def throughput_over_time(run: RunResults, bin_s: float = 10.0, ax: Axes | None = None) -> Axes:
    """Completed and SLO-meeting requests per second, by completion time."""
    ax = _axes(ax)
    frame = run.requests
    done = frame[frame["outcome"] == "completed"]
    if done.empty:
        return _no_data(ax, "completed requests")
    finish_s = done["arrival_s"] + done["e2e_ms"] / 1000.0
    met = done["slo_met"].astype(bool) if "slo_met" in done else slo_met(done, _slo_targets(run))
    edges = np.arange(0.0, float(finish_s.max()) + bin_s, bin_s)
    total, _ = np.histogram(finish_s, bins=edges)
    good, _ = np.histogram(finish_s[met.to_numpy()], bins=edges)
    ax.step(edges[:-1], total / bin_s, where="post", label="completed")
    ax.step(edges[:-1], good / bin_s, where="post", label="met every SLO (goodput)")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(f"requests per second ({bin_s:g} s bins)")
    ax.set_title("Throughput and goodput over time")
    ax.legend(fontsize="small")
    return ax


def slo_attainment(run: RunResults, ax: Axes | None = None) -> Axes:
    """SLO attainment per SLO class and per client device class (``summary.json``)."""
    ax = _axes(ax)
    fairness = run.summary["fairness"]
    labels: list[str] = []
    values: list[float] = []
    for group, key in (
        ("class", "slo_attainment_by_class"),
        ("device", "slo_attainment_by_device"),
    ):
        for name, value in sorted(fairness[key].items()):
            if value is not None:
                labels.append(f"{group}: {name}")
                values.append(100.0 * value)
    if not values:
        return _no_data(ax, "SLO attainment figures")
    _labelled_barh(ax, labels, values)
    ax.set_xlim(0, 100)
    ax.set_xlabel("requests meeting every SLO (%)")
    ax.set_title("SLO attainment by class and device")
    return ax


def _per_pool(run: RunResults, column: str, how: str) -> pd.DataFrame:
    series = run.timeseries
    table: pd.DataFrame = series.groupby(["time_s", "pool"])[column].agg(how).unstack("pool")
    return table


def queues_over_time(run: RunResults, ax: Axes | None = None) -> Axes:
    """Queue lengths per lane, summed over each pool's replicas."""
    ax = _axes(ax)
    series = run.timeseries
    if series.empty:
        return _no_data(ax, "time series")
    for column in QUEUE_COLUMNS:
        table = _per_pool(run, column, "sum")
        if not table.to_numpy().any():
            continue
        for pool in table.columns:
            lane = column.removesuffix("_queue")
            ax.plot(table.index, table[pool], label=f"{pool} {lane}")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("waiting items")
    ax.set_title("Queue lengths per lane")
    if ax.lines:
        ax.legend(fontsize="small")
    return ax


def k_over_time(run: RunResults, ax: Axes | None = None) -> Axes:
    """Mean draft length k of the rounds started in each sampling period."""
    ax = _axes(ax)
    series = run.timeseries
    if series.empty or series["mean_k"].dropna().empty:
        return _no_data(ax, "speculation rounds")
    if "k_rounds" in series.columns:  # each replica's mean k, weighted by its rounds
        weighted = series.assign(k_total=series["mean_k"].fillna(0.0) * series["k_rounds"])
        sums = weighted.groupby(["time_s", "pool"])[["k_total", "k_rounds"]].sum()
        table = (sums["k_total"] / sums["k_rounds"].where(sums["k_rounds"] > 0)).unstack("pool")
    else:  # results written before timeseries.csv had k_rounds
        table = _per_pool(run, "mean_k", "mean")
    for pool in table.columns:
        ax.plot(table.index, table[pool], marker=".", linestyle="-", label=pool)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("mean k")
    ax.set_title("Draft length over time")
    ax.legend(fontsize="small")
    return ax


def _tokens_per_verify(frame: pd.DataFrame) -> pd.DataFrame:
    rounds = frame[frame["verify_rounds"] > 0]
    out: pd.DataFrame = rounds.assign(
        tokens_per_verify=(rounds["accepted_tokens"] + rounds["verify_rounds"])
        / rounds["verify_rounds"],
        mean_k=rounds["drafted_tokens"] / rounds["verify_rounds"],
    )
    return out


def acceptance_vs_context(run: RunResults, bins: int = 8, ax: Axes | None = None) -> Axes:
    """Tokens per verify round (bonus included) by prompt length (quantile bins)."""
    ax = _axes(ax)
    frame = _tokens_per_verify(run.requests)
    if frame.empty:
        return _no_data(ax, "verify rounds")
    groups = pd.qcut(
        frame["prompt_tokens"], q=min(bins, frame["prompt_tokens"].nunique()), duplicates="drop"
    )
    stats = frame.groupby(groups, observed=True).agg(
        prompt=("prompt_tokens", "median"),
        tokens=("tokens_per_verify", "mean"),
        accepted=("accepted_tokens", "sum"),
        rounds=("verify_rounds", "sum"),
    )
    weighted = (stats["accepted"] + stats["rounds"]) / stats["rounds"]
    ax.plot(stats["prompt"], weighted, marker="o")
    ax.set_ylim(1.0, float(frame["mean_k"].max()) + 1.0)  # the possible range: 1 .. k + 1
    log_axis(ax, "x")
    ax.set_xlabel("prompt tokens (median of bin, log scale)")
    ax.set_ylabel("tokens per verify round")
    ax.set_title("Acceptance vs context length")
    return ax


def acceptance_vs_k(run: RunResults, ax: Axes | None = None) -> Axes:
    """Tokens per verify round by the request's mean draft length k."""
    ax = _axes(ax)
    frame = _tokens_per_verify(run.requests)
    if frame.empty:
        return _no_data(ax, "verify rounds")
    key = frame["mean_k"].round(0).astype(int)
    stats = frame.groupby(key).agg(
        accepted=("accepted_tokens", "sum"), rounds=("verify_rounds", "sum")
    )
    tokens = (stats["accepted"] + stats["rounds"]) / stats["rounds"]
    ax.bar(stats.index.astype(str), tokens)
    ax.set_ylim(1.0, float(stats.index.max()) + 1.0)
    ax.set_xlabel("mean k of the request (rounded)")
    ax.set_ylabel("tokens per verify round")
    ax.set_title("Acceptance vs draft length")
    return ax


def _percent_per_pool(run: RunResults, column: str, ylabel: str, title: str, ax: Axes) -> Axes:
    """A fraction column of the time series, in per cent, one line per pool."""
    if run.timeseries.empty:
        return _no_data(ax, "time series")
    table = _per_pool(run, column, "mean")
    for pool in table.columns:
        ax.plot(table.index, 100.0 * table[pool], label=pool)
    ax.set_ylim(0, 105)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    return ax


def utilisation_over_time(run: RunResults, ax: Axes | None = None) -> Axes:
    """GPU busy fraction per pool (mean over its replicas)."""
    return _percent_per_pool(run, "utilization", "busy (%)", "GPU utilisation per pool", _axes(ax))


def kv_over_time(run: RunResults, ax: Axes | None = None) -> Axes:
    """KV cache occupancy per pool (mean over its replicas)."""
    return _percent_per_pool(
        run, "kv_occupancy", "KV cache in use (%)", "KV occupancy per pool", _axes(ax)
    )


def has_planner(run: RunResults) -> bool:
    """Whether ``run`` had an online planner (it wrote ``planner_log.csv``)."""
    return not run.planner_log.empty and "replicas_active" in run.timeseries.columns


def planner_decisions(run: RunResults, ax: Axes | None = None) -> Axes:
    """Serving replicas per pool over time, the planner's choices and their realised goodput."""
    ax = _axes(ax)
    if not has_planner(run):
        return _no_data(ax, "planner decisions")
    serving = run.timeseries.pivot_table(
        index="time_s", columns="pool", values="replicas_active", aggfunc="max"
    )
    for pool in serving.columns:
        ax.step(serving.index, serving[pool], where="post", label=f"{pool} serving")
    chosen = run.planner_log[run.planner_log["chosen"]]
    for time_s, candidate in zip(chosen["time_s"], chosen["candidate"], strict=True):
        ax.axvline(time_s, color="0.8", linewidth=0.6, zorder=0)
        ax.annotate(
            str(candidate), (time_s, 0), rotation=90, fontsize="x-small", va="bottom", ha="right"
        )
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("serving replicas")
    ax.set_ylim(bottom=0)
    goodput = ax.twinx()
    goodput.plot(chosen["time_s"], chosen["realised_goodput"], "k.--", label="realised goodput")
    goodput.plot(chosen["time_s"], chosen["est_goodput"], "kx", label="estimated goodput")
    goodput.set_ylabel("goodput (requests per GPU-s)")
    goodput.set_ylim(bottom=0)
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = goodput.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize="small")
    ax.set_title("Planner decisions")
    figure = ax.get_figure(root=True)
    if isinstance(figure, Figure):
        figure.tight_layout()  # room for the right-hand axis
    return ax


def network_bytes(run: RunResults, ax: Axes | None = None) -> Axes:
    """Bytes carried per link (both directions) from ``summary.json``."""
    ax = _axes(ax)
    by_link = run.summary["resources"]["network_bytes_by_link"]
    if not by_link:
        return _no_data(ax, "network links")
    names = sorted(by_link)
    _labelled_barh(ax, names, [by_link[n] / 1e6 for n in names])
    ax.set_xlabel("MB carried")
    ax.set_title("Network bytes per link")
    return ax


NOT_MEASURED = "not measured"
"""Label of a device class whose energy the data do not give."""

NO_PRICE = "no price"
"""Label of a device class whose cost the data do not give."""


def energy_label(name: str, energy: dict[str, Any], cost: dict[str, Any]) -> str:
    """Bar label of one device class: its name, then "not measured" / "no price" where so."""
    label = name
    if not energy.get("measured", False):
        label += f" ({NOT_MEASURED})"
    elif not energy.get("idle_measured", False):
        label += " (idle not measured)"
    if not cost.get("priced", False):
        label += f" ({NO_PRICE})"
    return label


def energy_breakdown(run: RunResults, ax: Axes | None = None) -> Axes:
    """Energy per device class (busy, idle where known), from ``summary.json``.

    Every device class has a bar (zero length where not measured) labelled
    "not measured" or "no price" where the data do not give its energy or cost.
    """
    ax = _axes(ax)
    energy = run.summary["energy"]
    by_class = energy.get("by_device_class") or {}
    if not by_class:
        return _no_data(ax, "energy figures")
    costs = run.summary["cost"].get("by_device_class") or {}
    names = list(by_class)
    labels = [energy_label(n, by_class[n], costs.get(n, {})) for n in names]
    _labelled_barh(ax, labels, [(by_class[n]["total_j"] or 0.0) / 1000.0 for n in names])
    ax.set_xlabel("kJ (busy + idle where known)")
    per_token = energy["j_per_output_token"]
    cost = run.summary["cost"]["usd_per_1k_tokens"]
    subtitle = f"{per_token:.3g} J per output token" if per_token is not None else NOT_MEASURED
    subtitle += f", ${cost:.3g} per 1k tokens" if cost is not None else f", {NO_PRICE}"
    ax.set_title(f"Energy ({subtitle})")
    return ax
