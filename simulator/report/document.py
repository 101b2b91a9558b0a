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
    device_class_rows,
    headline_header,
    headline_rows,
)
from simulator.report.results import RunResults

DPI = 110

CLASS_TITLE = "Energy and cost by device class"
"""Section of the per-device-class table (of the first run)."""


@dataclass(frozen=True)
class FigureSpec:
    """A figure of the report: file stem, caption and how to draw it."""

    stem: str
    caption: str
    draw: Callable[[], Axes]


def figure_specs(runs: Sequence[RunResults]) -> list[FigureSpec]:
    """The report's figures: overlaid CDFs for every run, per-run figures for the first."""
    specs = [
        FigureSpec(
            f"cdf_{metric}",
            f"CDF of {figures.LATENCY_TITLES[metric].lower()}",
            partial(figures.latency_cdf, runs, metric),
        )
        for metric in figures.LATENCY_COLUMNS
    ]
    run = runs[0]
    per_run: list[tuple[str, str, Callable[[RunResults], Axes]]] = [
        ("percentiles", "Latency percentiles", figures.latency_percentiles),
        ("throughput", "Throughput and goodput over time", figures.throughput_over_time),
        ("slo_attainment", "SLO attainment by class and device", figures.slo_attainment),
        ("queues", "Queue lengths per lane", figures.queues_over_time),
        ("k", "Draft length over time", figures.k_over_time),
        ("acceptance_context", "Acceptance vs context length", figures.acceptance_vs_context),
        ("acceptance_k", "Acceptance vs draft length", figures.acceptance_vs_k),
        ("utilisation", "GPU utilisation per pool", figures.utilisation_over_time),
        ("kv", "KV occupancy per pool", figures.kv_over_time),
        ("network", "Network bytes per link", figures.network_bytes),
        ("energy", "Energy and cost breakdown", figures.energy_breakdown),
    ]
    prefix = f" ({run.name})" if len(runs) > 1 else ""
    specs += [
        FigureSpec(stem, caption + prefix, partial(draw, run)) for stem, caption, draw in per_run
    ]
    return specs


def render_figures(runs: Sequence[RunResults], out_dir: Path) -> list[tuple[FigureSpec, Path]]:
    """Draw every figure as PNG and SVG into ``out_dir``; return the specs and PNG paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for spec in figure_specs(runs):
        figure = spec.draw().get_figure(root=True)
        assert isinstance(figure, Figure)
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
    for run in runs:
        summary = run.summary
        metadata = run.scenario.get("metadata") or {}
        description = metadata.get("description") or ""
        references = metadata.get("references") or []
        cites = f" References: {'; '.join(references)}." if references else ""
        lines.append(
            f"{run.name}: mode {summary['mode']}, seed {summary['seed']}, "
            f"{summary['simulated_s']:g} s simulated, {summary['requests']['arrived']} requests. "
            f"{description}{cites}".strip()
        )
    return lines


def write_report(runs: Sequence[RunResults], out_dir: Path) -> list[Path]:
    """Write the figures, ``report.md`` and ``report.html`` into ``out_dir``; return the reports."""
    if not runs:
        raise ValueError("write_report needs at least one run")
    rendered = render_figures(runs, out_dir)
    header, rows = headline_header(runs), headline_rows(runs)
    title = "specdec-sim report: " + " vs ".join(run.name for run in runs)
    notes = [
        "Numbers in the table are read from each run's summary.json.",
        "The goodput planner is not part of this version, so no planner decisions are drawn.",
    ]
    md = [f"# {title}", "", *(f"- {line}" for line in _scenario_lines(runs)), ""]
    classes = device_class_rows(runs[0].summary)
    md += ["## Headline", "", _markdown_table(header, rows), "", *notes, ""]
    md += [f"## {CLASS_TITLE}", "", _markdown_table(DEVICE_CLASS_HEADER, classes), ""]
    md += ["## Figures", ""]
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
        "</ul><h2>Headline</h2>",
        _html_table(header, rows),
        *(f"<p>{html.escape(note)}</p>" for note in notes),
        f"<h2>{html.escape(CLASS_TITLE)}</h2>",
        _html_table(DEVICE_CLASS_HEADER, classes),
        "<h2>Figures</h2>",
    ]
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
