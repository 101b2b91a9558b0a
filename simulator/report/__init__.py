"""Figures and reports from results directories (``scripts/plot_metrics.py``).

:func:`load_run` reads what ``simulate`` wrote; the ``figures`` module draws
one figure per function (each takes ``ax=None`` and returns the Axes);
:func:`write_report` renders every figure plus the headline table into a
self-contained ``report.html`` and a ``report.md``.
"""

from __future__ import annotations

from simulator.report.document import write_report
from simulator.report.results import RunResults, load_run

__all__ = ["RunResults", "load_run", "write_report"]
