"""Turn one or several ``simulate`` results directories into figures and a report.

Usage::

    python scripts/plot_metrics.py RESULTS_DIR [RESULTS_DIR ...] [-o OUT]

One directory: figures (PNG and SVG), ``report.md`` and a self-contained
``report.html`` go to ``OUT`` (default ``RESULTS_DIR/report``). Several: the
first run is the baseline; latency CDFs are overlaid and the headline table
gains the ratio of every other run to it (default ``OUT``: ``comparison/``
beside the first directory). Exit status 0, or 2 on a missing or malformed
results directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.cli_support import run_guarded
from simulator.report import load_run, write_report


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="results directories (first: baseline)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output directory")
    args = parser.parse_args(argv)

    def entry() -> int:
        runs = [load_run(path) for path in args.runs]
        if args.output is not None:
            out = args.output
        elif len(runs) == 1:
            out = args.runs[0] / "report"
        else:
            out = args.runs[0].parent / "comparison"
        for path in write_report(runs, out):
            print(path)
        return 0

    return run_guarded(entry)


if __name__ == "__main__":
    sys.exit(main())
