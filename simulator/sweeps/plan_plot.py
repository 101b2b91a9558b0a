"""The plan's figure: per configuration, the highest sustainable rate and the goodput, per GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.report.figures import new_axes

ROW_HEIGHT_IN = 0.35
"""Figure height per configuration (layout only)."""


def plot_plan(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Horizontal bars per configuration, in rank order (best at the top).

    Two bars per configuration: the highest arrival rate per GPU meeting the
    SLO attainment target, and the goodput per GPU at the scenario's rate.

    Args:
        frame: The ranked table of :func:`~simulator.sweeps.plan.plan`.
        ax: Axes to draw on (default: a new figure).

    Returns:
        The Axes drawn on.
    """
    if ax is None:
        ax = new_axes(7.5, max(3.0, 1.2 + ROW_HEIGHT_IN * len(frame)))
    positions = np.arange(len(frame))[::-1]
    height = 0.38
    capacity = pd.to_numeric(frame["max_requests_per_gpu_s"], errors="coerce").fillna(0.0)
    goodput = pd.to_numeric(frame["goodput_requests_per_gpu_s"], errors="coerce").fillna(0.0)
    ax.barh(positions + height / 2, capacity, height, label="max rate meeting the SLO target")
    ax.barh(positions - height / 2, goodput, height, label="goodput at the scenario's rate")
    ax.set_yticks(positions)
    ax.set_yticklabels(
        [f"#{r} {label}" for r, label in zip(frame["rank"], frame["label"], strict=True)]
    )
    ax.set_xlabel("requests/s per GPU")
    ax.set_title("Configurations, best first")
    ax.legend(loc="lower right", fontsize="small")
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
