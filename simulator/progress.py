"""Progress of a run on the terminal: requests arrived and completed, and the time left.

Shown only when stderr is a terminal (never in logs or pipes), once a run has
taken :data:`PROGRESS_AFTER_S`, redrawn at most every
:data:`REDRAW_EVERY_S`. The time left is estimated from the share of the
workload's requests that have arrived.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

PROGRESS_AFTER_S = 1.0
"""Wall seconds before the first progress line (short runs print none)."""
REDRAW_EVERY_S = 0.25
"""Least wall time between two redraws."""


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(
    arrived: int, completed: int, total: int, simulated_s: float, elapsed_s: float
) -> str:
    """Return one progress line (without a line ending)."""
    share = arrived / total if total else 1.0
    eta = _clock(elapsed_s * (1.0 - share) / share) if share > 0 else "?"
    return (
        f"{arrived}/{total} arrived ({100 * share:.0f}%), {completed} completed, "
        f"t = {simulated_s:,.1f} s simulated, {_clock(elapsed_s)} elapsed, ETA {eta}"
    )


class TerminalProgress:
    """A ``progress`` hook for :func:`simulator.run` that redraws one line on a terminal.

    Args:
        enabled: Whether to show anything (off for ``--quiet``).
        stream: Where to draw (default stderr); nothing is drawn unless it is a terminal.
    """

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.started = time.perf_counter()
        self.drawn_at = -REDRAW_EVERY_S
        self.width = 0

    def __call__(self, arrived: int, completed: int, total: int, simulated_s: float) -> None:
        """Redraw the line, if the terminal shows progress and it is time to."""
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        if elapsed < PROGRESS_AFTER_S or elapsed - self.drawn_at < REDRAW_EVERY_S:
            return
        line = progress_line(arrived, completed, total, simulated_s, elapsed)
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)
        self.drawn_at = elapsed

    def close(self) -> None:
        """Clear the progress line, if one was drawn."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
