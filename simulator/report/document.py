"""Render figures and the headline table into ``report.md`` and a self-contained ``report.html``."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.report import figures
from simulator.report.headline import (
    DEVICE_CLASS_HEADER,
    SLO_HEADER,
    device_class_rows,
    headline_header,
    headline_rows,
    slo_rows,
)
from simulator.report.results import RunResults, with_distinct_labels
from simulator.report.scenario_diff import IGNORED_KEYS, scenario_differences

DPI = 300
"""Resolution of the PNG figures (print quality); the SVG beside each is resolution-free."""

CLASS_TITLE = "Energy and cost by device class"
"""Section of the per-device-class tables (one per run)."""

SLO_TITLE = "SLO targets and pass rates"
"""Section of the per-run SLO table."""

DIFF_TITLE = "What differs between the runs"
"""Section of a comparison listing the resolved-scenario keys whose values differ."""


@dataclass(frozen=True)
class FigureSpec:
    """A figure of the report: file stem, caption and how to draw it."""

    stem: str
    caption: str
    draw: Callable[[], Axes]


@dataclass(frozen=True)
class PerRunFigure:
    """A diagnostic figure drawn for each run that has what it shows.

    Attributes:
        stem: File stem (suffixed with the run's position in a comparison).
        caption: Caption (followed by the run's label in a comparison).
        draw: The plot function.
        available: Whether a run has what the figure shows.
        lacking: What a run without it lacks, for the list of skipped figures.
    """

    stem: str
    caption: str
    draw: Callable[[RunResults], Axes]
    available: Callable[[RunResults], bool]
    lacking: str


PER_RUN: tuple[PerRunFigure, ...] = (
    PerRunFigure(
        "percentiles",
        "Latency percentiles",
        figures.latency_percentiles,
        figures.has_completed,
        "no completed requests",
    ),
    PerRunFigure(
        "throughput",
        "Throughput and goodput over time",
        figures.throughput_over_time,
        figures.has_completed,
        "no completed requests",
    ),
    PerRunFigure(
        "slo_attainment",
        "SLO attainment by class and device",
        figures.slo_attainment,
        figures.has_attainment,
        "no measured requests",
    ),
    PerRunFigure(
        "queues",
        "Queue lengths per lane",
        figures.queues_over_time,
        figures.has_timeseries,
        "no time series",
    ),
    PerRunFigure(
        "k", "Draft length over time", figures.k_over_time, figures.has_rounds, "no speculation"
    ),
    PerRunFigure(
        "acceptance_context",
        "Acceptance vs context length",
        figures.acceptance_vs_context,
        figures.has_rounds,
        "no speculation",
    ),
    PerRunFigure(
        "acceptance_k",
        "Acceptance vs draft length",
        figures.acceptance_vs_k,
        figures.has_rounds,
        "no speculation",
    ),
    PerRunFigure(
        "utilisation",
        "GPU utilisation per pool",
        figures.utilisation_over_time,
        figures.has_timeseries,
        "no time series",
    ),
    PerRunFigure(
        "planner",
        "Planner decisions: serving replicas, choices and goodput",
        figures.planner_decisions,
        figures.has_planner,
        "no planner",
    ),
    PerRunFigure(
        "kv",
        "KV occupancy per pool",
        figures.kv_over_time,
        figures.has_timeseries,
        "no time series",
    ),
    PerRunFigure(
        "network",
        "Network bytes per link",
        figures.network_bytes,
        figures.has_links,
        "no bytes over a network link",
    ),
    PerRunFigure(
        "energy",
        "Energy and cost breakdown",
        figures.energy_breakdown,
        figures.has_energy,
        "energy not measured for any device class",
    ),
)
"""The per-run diagnostics, in report order."""


def _plan(runs: Sequence[RunResults]) -> tuple[list[FigureSpec], list[str]]:
    """The figures to draw and, in words, those left out because the runs lack their data."""
    specs: list[FigureSpec] = []
    skipped: list[str] = []
    for metric in figures.LATENCY_COLUMNS:
        title = figures.LATENCY_TITLES[metric].lower()
        if any(figures.has_latency(run, metric) for run in runs):
            specs.append(
                FigureSpec(
                    f"cdf_{metric}", f"CDF of {title}", partial(figures.latency_cdf, runs, metric)
                )
            )
        else:
            skipped.append(f"CDF of {title}: no run has {metric.upper()} values")
    several = len(runs) > 1
    for index, run in enumerate(runs, start=1):
        for figure in PER_RUN:
            caption = f"{figure.caption} ({run.name})" if several else figure.caption
            if not figure.available(run):
                skipped.append(f"{caption}: {figure.lacking}")
                continue
            stem = f"{figure.stem}_run{index}" if several else figure.stem
            specs.append(FigureSpec(stem, caption, partial(figure.draw, run)))
    return specs, skipped


def figure_specs(runs: Sequence[RunResults]) -> list[FigureSpec]:
    """The report's figures: overlaid CDFs, then every run's diagnostics, each where it has data."""
    return _plan(runs)[0]


def skipped_figures(runs: Sequence[RunResults]) -> list[str]:
    """The figures the report leaves out, each with what its run lacks."""
    return _plan(runs)[1]


def render_figures(runs: Sequence[RunResults], out_dir: Path) -> list[tuple[FigureSpec, Path]]:
    """Draw every figure as a 300 dpi PNG and an SVG into ``out_dir``; return the specs and PNG paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for spec in figure_specs(runs):
        figure = spec.draw().get_figure(root=True)
        assert isinstance(figure, Figure)
        figure.tight_layout()  # room for two-line titles and legends outside the axes
        png = out_dir / f"{spec.stem}.png"
        figure.savefig(png, dpi=DPI)
        figure.savefig(out_dir / f"{spec.stem}.svg")
        done.append((spec, png))
    return done


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _scenario_lines(runs: Sequence[RunResults]) -> list[str]:
    lines = []
    for index, run in enumerate(runs):
        summary = run.summary
        metadata = run.scenario.get("metadata") or {}
        description = metadata.get("description") or ""
        references = metadata.get("references") or []
        cites = f" References: {'; '.join(references)}." if references else ""
        role = " (baseline)" if index == 0 and len(runs) > 1 else ""
        lines.append(
            f"{run.name}{role}: scenario {summary['scenario_id']}, mode {summary['mode']}, "
            f"seed {summary['seed']}, {summary['simulated_s']:g} s simulated, "
            f"{summary['requests']['arrived']} requests. {description}{cites}".strip()
        )
    return lines


def _notes(runs: Sequence[RunResults]) -> list[str]:
    notes = ["Numbers in the tables are read from each run's summary.json."]
    if len(runs) > 1:
        notes.append(
            f"Ratio columns divide each run's figure by the baseline's ({runs[0].name}); each row "
            "says whether lower or higher is better, and each ratio whether the run is better or "
            "worse than the baseline."
        )
    notes += [
        "Pass rates divide the requests that completed within a target by all measured requests "
        "(completed + rejected + unfinished), the denominator of the SLO attainment; a request "
        "passes TPOT or TVT where that target does not apply to it.",
        "Energy or cost a run does not measure reads 'not measured' or 'no price', never 0.",
    ]
    return notes


def _difference_text(rows: list[list[str]]) -> str:
    ignored = " and ".join(IGNORED_KEYS)
    if not rows:
        return (
            "The runs' resolved scenarios (scenario.resolved.yaml) are the same, apart from "
            f"{ignored}, which are not compared."
        )
    keys = "1 key" if len(rows) == 1 else f"{len(rows)} keys"
    return (
        f"{keys} of the resolved scenarios (scenario.resolved.yaml) differ between the runs; "
        f"{ignored} are not compared (they do not change what is simulated). A run without a "
        "key reads '(not set)'."
    )


def write_report(runs: Sequence[RunResults], out_dir: Path) -> list[Path]:
    """Write the figures, ``report.md`` and ``report.html`` into ``out_dir``; return the reports.

    Runs that share a label are relabelled first (see
    :func:`~simulator.report.results.with_distinct_labels`), so no legend or
    column repeats a name.
    """
    if not runs:
        raise ValueError("write_report needs at least one run")
    runs = with_distinct_labels(runs)
    rendered = render_figures(runs, out_dir)
    skipped = skipped_figures(runs)
    header, rows = headline_header(runs), headline_rows(runs)
    slo = slo_rows(runs)
    classes = [(run.name, device_class_rows(run.summary)) for run in runs]
    title = "specdec-sim report: " + " vs ".join(run.name for run in runs)
    notes = _notes(runs)
    skipped_text = "Figures left out because a run lacks their data: " + "; ".join(skipped) + "."

    md = [f"# {title}", "", *(f"- {line}" for line in _scenario_lines(runs)), ""]
    differences = scenario_differences([run.scenario for run in runs])
    diff_header = ["key", *(run.name for run in runs)]
    if len(runs) > 1:
        md += [f"## {DIFF_TITLE}", "", _difference_text(differences), ""]
        if differences:
            escaped = [[cell.replace("|", "\\|") for cell in row] for row in differences]
            md += [_markdown_table(diff_header, escaped), ""]
    md += ["## Headline", "", _markdown_table(header, rows), "", *notes, ""]
    md += [f"## {SLO_TITLE}", "", _markdown_table(SLO_HEADER, slo), ""]
    for name, table in classes:
        md += [f"## {CLASS_TITLE}: {name}", "", _markdown_table(DEVICE_CLASS_HEADER, table), ""]
    md += ["## Figures", ""]
    if skipped:
        md += [skipped_text, ""]
    for spec, png in rendered:
        md += [f"### {spec.caption}", "", f"![{spec.caption}]({png.name})", ""]
    markdown = out_dir / "report.md"
    markdown.write_text("\n".join(md), encoding="utf-8")

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 8px;"
        "text-align:right}td:first-child,th:first-child{text-align:left}"
        "img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(title)}</h1><ul>",
        *(f"<li>{html.escape(line)}</li>" for line in _scenario_lines(runs)),
        "</ul>",
    ]
    if len(runs) > 1:
        parts += [
            f"<h2>{html.escape(DIFF_TITLE)}</h2>",
            f"<p>{html.escape(_difference_text(differences))}</p>",
        ]
        if differences:
            parts.append(_html_table(diff_header, differences))
    parts += [
        "<h2>Headline</h2>",
        _html_table(header, rows),
        *(f"<p>{html.escape(note)}</p>" for note in notes),
        f"<h2>{html.escape(SLO_TITLE)}</h2>",
        _html_table(SLO_HEADER, slo),
    ]
    for name, table in classes:
        parts += [
            f"<h2>{html.escape(f'{CLASS_TITLE}: {name}')}</h2>",
            _html_table(DEVICE_CLASS_HEADER, table),
        ]
    parts.append("<h2>Figures</h2>")
    if skipped:
        parts.append(f"<p>{html.escape(skipped_text)}</p>")
    for spec, png in rendered:
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        caption = html.escape(spec.caption)
        parts.append(
            f"<figure><img alt='{caption}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{caption}</figcaption></figure>"
        )
    parts.append("</body></html>")
    page = out_dir / "report.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return [page, markdown]
