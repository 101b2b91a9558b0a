"""One figure per function. Each takes ``ax=None`` (a new figure) and returns the Axes.

Figures are drawn on :class:`matplotlib.figure.Figure` objects with the Agg
canvas, never through ``pyplot``, so nothing global is touched and nothing is
shown. Per-request figures use ``requests.csv``, time figures
``timeseries.csv``, breakdowns ``summary.json``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

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


TITLE_LINE_CHARS = 56
"""A per-run title longer than this puts the run's name on a second line."""


def run_title(ax: Axes, title: str, run: RunResults, pad_pt: float | None = None) -> None:
    """Title ``ax`` with ``title`` followed by the run's name, in parentheses.

    The name tells per-run figures of a comparison apart when they are read
    outside the report; a long title puts it on a line of its own.
    """
    one_line = f"{title} ({run.name})"
    text = one_line if len(one_line) <= TITLE_LINE_CHARS else f"{title}\n({run.name})"
    ax.set_title(text, pad=pad_pt)


def _no_data(ax: Axes, what: str) -> Axes:
    ax.text(0.5, 0.5, f"no {what} in this run", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


VALUE_INSIDE_FRACTION = 0.8
"""A bar longer than this fraction of the axis carries its value inside its end, not beyond it."""


def _labelled_barh(
    ax: Axes,
    labels: Sequence[str],
    values: Sequence[float],
    value_texts: Sequence[str] | None = None,
    x_max: float | None = None,
) -> None:
    """Horizontal bars with their labels written above them (long names stay readable).

    With ``value_texts``, each bar also carries its value as text at its end:
    beyond the end, or inside it (white) where the bar nearly fills the axis.
    The x axis runs from 0 to ``x_max`` (default: a little beyond the longest
    bar, leaving room for the values).
    """
    positions = np.arange(len(labels), dtype=float)
    ax.barh(positions, values, height=0.5)
    for y, label in zip(positions, labels, strict=True):
        ax.text(0.0, y + 0.3, label, va="bottom", ha="left", fontsize="small")
    ax.set_yticks([])
    ax.set_ylim(-0.5, len(labels) - 0.1)
    if value_texts is None:
        return
    top = x_max if x_max is not None else 1.2 * max(values, default=0.0)
    top = top if top > 0 else 1.0
    ax.set_xlim(0.0, top)
    pad = 0.01 * top
    for y, value, text in zip(positions, values, value_texts, strict=True):
        inside = value > VALUE_INSIDE_FRACTION * top
        ax.text(
            value - pad if inside else value + pad,
            y,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize="small",
            color="white" if inside else "black",
        )


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


RUN_LINESTYLES = ("-", "--", ":", "-.")
"""Line styles of the runs of an overlay, in turn (with markers, they stay apart in greyscale)."""

RUN_MARKERS = ("o", "s", "^", "D", "v", "P")
"""Markers of the runs of an overlay, in turn."""

RUN_MARKS_PER_LINE = 8
"""About this many markers along each run's line (a marker per point would hide the line)."""


def run_style(index: int) -> dict[str, Any]:
    """Line style, marker and marker spacing of the ``index``-th run of an overlay.

    Colour follows matplotlib's cycle; style and marker change with every run
    too, so the runs stay apart printed in greyscale. Markers sit at even
    distances along the drawn line, each run's shifted so that two runs'
    markers do not coincide.
    """
    spacing = 1.0 / RUN_MARKS_PER_LINE
    return {
        "linestyle": RUN_LINESTYLES[index % len(RUN_LINESTYLES)],
        "marker": RUN_MARKERS[index % len(RUN_MARKERS)],
        "markevery": ((index * spacing / len(RUN_MARKERS)) % spacing, spacing),
        "markersize": 4,
        "markerfacecolor": "none" if index % 2 else None,
    }


def latency_cdf(runs: Sequence[RunResults], metric: str, ax: Axes | None = None) -> Axes:
    """CDF of one latency of completed requests, one line per run, with the SLO line."""
    ax = _axes(ax)
    column = LATENCY_COLUMNS[metric]
    drawn = False
    for index, run in enumerate(runs):
        done = run.requests[run.requests["outcome"] == "completed"]
        values = np.sort(done[column].dropna().to_numpy(float))
        if values.size == 0:
            continue
        ax.step(
            values,
            np.arange(1, values.size + 1) / values.size,
            where="post",
            label=run.name,
            **run_style(index),
        )
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
    run_title(ax, "Latency percentiles", run)
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
    run_title(ax, "Throughput and goodput over time", run)
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
    _labelled_barh(ax, labels, values, [f"{v:.1f} %" for v in values], x_max=100.0)
    ax.set_xlabel("requests meeting every SLO (%)")
    run_title(ax, "SLO attainment by class and device", run)
    return ax


def _per_pool(run: RunResults, column: str, how: str) -> pd.DataFrame:
    series = run.timeseries
    table: pd.DataFrame = series.groupby(["time_s", "pool"])[column].agg(how).unstack("pool")
    return table


QUEUE_MAX_BINS = 100
"""The queue figure draws at most this many time bins (each a whole number of samples)."""


def queue_bin_s(times_s: Sequence[float] | np.ndarray) -> float:
    """Width of the queue figure's time bins for samples taken at ``times_s``.

    The sampling period times the smallest whole number that leaves at most
    :data:`QUEUE_MAX_BINS` bins: one sample per bin for a short run, and 50 to
    100 bins for any run with more samples than that.
    """
    unique = np.unique(np.asarray(times_s, dtype=float))
    if unique.size < 2:
        return 1.0
    period_s = float(np.median(np.diff(unique)))
    samples = round((unique[-1] - unique[0]) / period_s) + 1
    return float(period_s * max(1, -(-samples // QUEUE_MAX_BINS)))


def queues_over_time(run: RunResults, ax: Axes | None = None) -> Axes:
    """Queue lengths per lane, summed over each pool's replicas, in time bins.

    The samples (one per sampling period) fall into bins of
    :func:`queue_bin_s`; a line is the mean of each bin and the shaded band
    above it reaches the bin's maximum, so a burst shows without hiding the
    trend.
    """
    ax = _axes(ax)
    series = run.timeseries
    if series.empty:
        return _no_data(ax, "time series")
    bin_s = queue_bin_s(series["time_s"].to_numpy(float))
    start_s = float(series["time_s"].min())
    for column in QUEUE_COLUMNS:
        table = _per_pool(run, column, "sum")
        if not table.to_numpy().any():
            continue
        bins = np.floor((table.index.to_numpy(float) - start_s) / bin_s + 1e-9)
        grouped = table.groupby(bins)
        means, peaks = grouped.mean(), grouped.max()
        centres_s = start_s + (means.index.to_numpy(float) + 0.5) * bin_s
        lane = column.removesuffix("_queue")
        for pool in table.columns:
            style = RUN_LINESTYLES[len(ax.lines) % len(RUN_LINESTYLES)]
            (line,) = ax.plot(centres_s, means[pool], linestyle=style, label=f"{pool} {lane}")
            ax.fill_between(
                centres_s, means[pool], peaks[pool], color=line.get_color(), alpha=0.25, lw=0
            )
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("waiting items")
    ax.set_ylim(bottom=0)
    run_title(ax, "Queue lengths per lane", run)
    if ax.lines:
        ax.legend(
            fontsize="small",
            title=f"line: mean of each {bin_s:g} s bin; band: its maximum",
            title_fontsize="small",
        )
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
    run_title(ax, "Draft length over time", run)
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
    run_title(ax, "Acceptance vs context length", run)
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
    run_title(ax, "Acceptance vs draft length", run)
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
    run_title(ax, title, run)
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


def _decision_key(chosen: pd.DataFrame) -> tuple[list[str], list[tuple[float, int]]]:
    """The distinct chosen candidates in order of first choice, and the decisions to mark.

    A decision is marked (time, candidate number from 1) where it changed the
    candidate, and at the first decision.
    """
    names: list[str] = []
    marks: list[tuple[float, int]] = []
    previous: str | None = None
    for time_s, candidate in zip(chosen["time_s"], chosen["candidate"].astype(str), strict=True):
        if candidate not in names:
            names.append(candidate)
        if candidate != previous:
            marks.append((float(time_s), names.index(candidate) + 1))
        previous = candidate
    return names, marks


PLANNER_KEY_LINE_IN = 0.19
"""Figure height added per line of the planner figure's legend and candidate key."""

PLANNER_KEY_LINE_CHARS = 100
"""Longer lines of the planner figure's candidate key wrap (indented under their number)."""


def planner_decisions(run: RunResults, ax: Axes | None = None) -> Axes:
    """Serving replicas per pool over time, the planner's choices and their realised goodput.

    Each pool has its own line style and marker (two pools with the same
    counts show as a dashed line on a solid one). A grey vertical line marks
    every decision; a number in the strip above the axes marks each decision
    that changed the candidate, and the key below the legend says which
    candidate each number stands for.
    """
    if not has_planner(run):
        return _no_data(_axes(ax), "planner decisions")
    chosen = run.planner_log[run.planner_log["chosen"]]
    names, marks = _decision_key(chosen)
    key = [
        line
        for number, name in enumerate(names, start=1)
        for line in textwrap.wrap(
            f"{number}  {name}", PLANNER_KEY_LINE_CHARS, subsequent_indent="     "
        )
    ]
    pools = run.timeseries["pool"].nunique()
    if ax is None:
        key_lines = len(key) + 1 + (pools + 3) // 2
        ax = new_axes(6.4, 3.4 + PLANNER_KEY_LINE_IN * key_lines)
    serving = run.timeseries.pivot_table(
        index="time_s", columns="pool", values="replicas_active", aggfunc="max"
    )
    for index, pool in enumerate(serving.columns):
        ax.step(
            serving.index,
            serving[pool],
            where="post",
            label=f"{pool} serving",
            linewidth=max(1.0, 2.5 - 0.75 * index),
            **run_style(index),
        )
    strip = ax.get_xaxis_transform()  # x in data, y in axes fraction
    for time_s in chosen["time_s"]:
        ax.axvline(time_s, color="0.8", linewidth=0.6, zorder=0)
    for time_s, number in marks:
        ax.text(time_s, 1.01, str(number), transform=strip, ha="center", va="bottom", fontsize=7)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("serving replicas")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    goodput = ax.twinx()
    goodput.plot(chosen["time_s"], chosen["realised_goodput"], "k.--", label="realised goodput")
    goodput.plot(chosen["time_s"], chosen["est_goodput"], "kx", label="estimated goodput")
    goodput.set_ylabel("goodput (requests per GPU-s)")
    goodput.set_ylim(bottom=0)
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = goodput.get_legend_handles_labels()
    legend = ax.legend(
        lines + more,
        labels + more_labels,
        fontsize="small",
        ncol=2,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
    )
    ax.annotate(
        "chosen candidates (numbers above the plot):\n" + "\n".join(key),
        xy=(0.0, 0.0),
        xycoords=("axes fraction", legend),
        xytext=(0, -4),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize="x-small",
    )
    run_title(ax, "Planner decisions", run, pad_pt=14.0)  # above the decision numbers
    figure = ax.get_figure(root=True)
    if isinstance(figure, Figure):
        figure.tight_layout()  # room for the right-hand axis, the legend and the key
    return ax


def network_bytes(run: RunResults, ax: Axes | None = None) -> Axes:
    """Bytes carried per link (both directions) from ``summary.json``."""
    ax = _axes(ax)
    by_link = run.summary["resources"]["network_bytes_by_link"]
    if not by_link:
        return _no_data(ax, "network links")
    names = sorted(by_link)
    megabytes = [by_link[n] / 1e6 for n in names]
    _labelled_barh(ax, names, megabytes, [f"{mb:.3g} MB" for mb in megabytes])
    ax.set_xlabel("MB carried")
    run_title(ax, "Network bytes per link", run)
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
    totals = [by_class[n]["total_j"] for n in names]
    _labelled_barh(
        ax,
        labels,
        [(total or 0.0) / 1000.0 for total in totals],
        [f"{total / 1000.0:.3g} kJ" if total is not None else "" for total in totals],
    )
    ax.set_xlabel("kJ (busy + idle where known)")
    per_token = energy["j_per_output_token"]
    cost = run.summary["cost"]["usd_per_1k_tokens"]
    subtitle = f"{per_token:.3g} J per output token" if per_token is not None else NOT_MEASURED
    subtitle += f", ${cost:.3g} per 1k tokens" if cost is not None else f", {NO_PRICE}"
    ax.set_title(f"Energy ({run.name})\n{subtitle}")
    return ax
