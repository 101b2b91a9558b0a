"""The plan's figure: per configuration, the highest sustainable rate and the goodput, per GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

from simulator.report.figures import new_axes

ROW_HEIGHT_IN = 0.35
"""Figure height per configuration (layout only)."""

PLOT_WIDTH_IN = 4.2
"""Width of the bars' area and margins; the labels' width is added to it."""

LABEL_CHAR_IN = 0.068
"""Width of one character of a configuration label (small font), to fit the figure to its labels."""

SHORT_NAMES = {"tensor_parallel": "tp"}
"""Axis names written shorter in the figure's labels."""

LEGEND_DROP_IN = 0.45
"""The legend's top sits this far below the axes (under the tick labels and the x axis label)."""

FIRST_RESULT_COLUMN = "gpus"
"""The plan table's first column after the axis columns (they follow ``label``)."""


def axis_columns(frame: pd.DataFrame) -> list[str]:
    """The plan table's axis columns (``pools.<id>.replicas``, ``speculation.k``, ...)."""
    columns = list(frame.columns)
    if "label" not in columns or FIRST_RESULT_COLUMN not in columns:
        return []
    return columns[columns.index("label") + 1 : columns.index(FIRST_RESULT_COLUMN)]


def _short_names(axes: list[str]) -> dict[str, str]:
    """Each axis by its last dotted part (``tensor_parallel`` as ``tp``), longer where two clash."""
    parts = {axis: axis.split(".") for axis in axes}
    for keep in range(1, max((len(p) for p in parts.values()), default=1) + 1):
        names = {
            axis: ".".join(SHORT_NAMES.get(part, part) for part in split[-keep:])
            for axis, split in parts.items()
        }
        if len(set(names.values())) == len(names):
            return names
    return {axis: axis for axis in axes}


def compact_labels(frame: pd.DataFrame) -> list[str]:
    """One short label per row: rank, then ``name=value`` of each axis with short names.

    Falls back on the table's ``label`` column where the axis columns are
    not there (a table from an older version).
    """
    axes = axis_columns(frame)
    names = _short_names(axes)
    labels = []
    for position in range(len(frame)):
        row = frame.iloc[position]
        values = (
            " ".join(f"{names[axis]}={row[axis]}" for axis in axes) if axes else str(row["label"])
        )
        labels.append(f"#{row['rank']} {values}")
    return labels


def _value_text(value: float) -> str:
    return "none" if pd.isna(value) else f"{value:.3g}"


def plot_plan(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Horizontal bars per configuration, in rank order (best at the top).

    Two bars per configuration, each with its value at its end: the highest
    arrival rate per GPU meeting the SLO attainment target ("none" where even
    the lowest rate misses it), and the goodput per GPU at the scenario's
    rate. Configurations are labelled compactly (:func:`compact_labels`) and
    a new figure is as wide as its labels need; the legend sits below the
    axes.

    Args:
        frame: The ranked table of :func:`~simulator.sweeps.plan.plan`.
        ax: Axes to draw on (default: a new figure).

    Returns:
        The Axes drawn on.
    """
    labels = compact_labels(frame)
    if ax is None:
        longest = max((len(label) for label in labels), default=0)
        ax = new_axes(
            PLOT_WIDTH_IN + LABEL_CHAR_IN * longest, max(3.0, 1.9 + ROW_HEIGHT_IN * len(frame))
        )
    positions = np.arange(len(frame))[::-1]
    height = 0.38
    capacity = pd.to_numeric(frame["max_requests_per_gpu_s"], errors="coerce")
    goodput = pd.to_numeric(frame["goodput_requests_per_gpu_s"], errors="coerce")
    bars = (
        (positions + height / 2, capacity, "max rate meeting the SLO target"),
        (positions - height / 2, goodput, "goodput at the scenario's rate"),
    )
    longest_bar = float(pd.concat([capacity, goodput]).max(skipna=True) or 0.0)
    longest_bar = longest_bar if np.isfinite(longest_bar) and longest_bar > 0 else 1.0
    for where, values, label in bars:
        ax.barh(where, values.fillna(0.0), height, label=label)
        for y, value in zip(where, values, strict=True):
            x = 0.0 if pd.isna(value) else float(value)
            ax.text(x + 0.01 * longest_bar, y, _value_text(value), va="center", fontsize="x-small")
    ax.set_xlim(0.0, 1.15 * longest_bar)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize="small")
    ax.set_ylim(-0.6, len(frame) - 0.4)
    ax.set_xlabel("requests/s per GPU")
    ax.set_title("Configurations, best first")
    figure = ax.get_figure(root=True)
    below = ax.transAxes
    if isinstance(figure, Figure):  # under the x axis label, however tall the figure
        below += ScaledTranslation(0.0, -LEGEND_DROP_IN, figure.dpi_scale_trans)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below,
        fontsize="small",
        frameon=False,
    )
    return ax


def write_plan_figure(frame: pd.DataFrame, out_dir: Path, stem: str, dpi: int) -> list[Path]:
    """Draw :func:`plot_plan` as ``<stem>.png`` (``dpi``) and ``<stem>.svg``, each written whole."""
    figure = plot_plan(frame).get_figure(root=True)
    assert isinstance(figure, Figure)
    figure.tight_layout()
    written = []
    for suffix in (".png", ".svg"):
        path = out_dir / f"{stem}{suffix}"
        staging = path.with_name(f".{path.name}.new{suffix}")
        if suffix == ".png":
            figure.savefig(staging, dpi=dpi)
        else:
            figure.savefig(staging)
        staging.replace(path)
        written.append(path)
    return written
