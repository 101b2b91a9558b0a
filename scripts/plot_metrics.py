"""Turn one or several ``simulate`` results directories into figures and a report.

Usage::

    python scripts/plot_metrics.py RESULTS_DIR [RESULTS_DIR ...] [-o OUT] [--label NAME ...]

The same as ``simulate plot`` (see :mod:`simulator.commands.plot`). Exit
status 0, or 2 on a missing or malformed results directory, an output folder
holding files no report writes, or a number of ``--label`` options other than
one per directory.
"""

from __future__ import annotations

import argparse
import sys

from simulator.commands import plot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    plot.add_arguments(parser)
    return plot.execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
