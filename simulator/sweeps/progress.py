"""A one-line progress report for sweeps: completed, failed and the time left.

Written to stderr only when stderr is a terminal (nothing in logs or pipes).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class SweepProgress:
    """Counts finished runs and redraws one line on a terminal.

    Args:
        total: Runs of the sweep.
        resumed: Runs skipped because their results already exist.
        stream: Where to write (default: stderr); nothing is written unless it is a terminal.
    """

    def __init__(self, total: int, resumed: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.total = total
        self.resumed = resumed
        self.completed = resumed
        self.failed = 0
        self.started = time.perf_counter()
        self._draw()

    def update(self, failed: bool) -> None:
        """Count one finished run (``failed``: it raised) and redraw."""
        self.completed += 1
        self.failed += int(failed)
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        ran = self.completed - self.resumed
        left = self.total - self.completed
        elapsed = time.perf_counter() - self.started
        eta = f"{elapsed / ran * left:.0f} s" if ran else "?"
        print(
            f"\r{self.completed}/{self.total} completed ({self.resumed} resumed), "
            f"{self.failed} failed, ETA {eta}   ",
            end="",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        """End the line."""
        if self.enabled:
            print(file=self.stream)
