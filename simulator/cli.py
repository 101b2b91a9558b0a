"""``simulate``: run a scenario file and write its results.

Usage::

    simulate SCENARIO [-o DIR] [--seed N] [--set dotted.key=value ...] [--label NAME] [--quiet] [--report]
    simulate policies [--json]

Writes ``summary.json``, ``requests.csv``, ``timeseries.csv``,
``scenario.resolved.yaml`` and ``run.json`` into DIR (default:
``metrics.output_dir`` of the scenario, else ``results/<scenario_id>``) and
prints a table of the headline numbers; ``--label`` names the run in tables
and legends in place of ``metadata.label``; ``--report`` adds the figures,
``report.md`` and ``report.html`` of :mod:`simulator.report` in ``DIR/report``. Exit status 0 on success, 2 on bad
input (with one message naming the file, key, value and what is allowed).

``simulate policies`` lists every policy family, its policies (built-in or
the entry point and distribution of a plug-in) and their parameters. A first
argument ``policies`` is always this subcommand: run a scenario file of that
name as ``simulate ./policies``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from simulator.cli_support import run_guarded
from simulator.console import headline_table
from simulator.labels import label_override
from simulator.outputs import check_output_dir, write_results
from simulator.runner import run
from simulator.scenario import Scenario, load_scenario

PROGRESS_AFTER_S = 3.0

POLICIES_COMMAND = "policies"
"""The first argument that lists the policies instead of running a scenario."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simulate",
        description="Simulate LLM serving with speculative decoding from a scenario file "
        "('simulate policies' lists the policies).",
    )
    parser.add_argument("scenario", type=Path, help="scenario YAML or JSON file")
    parser.add_argument("-o", "--output", type=Path, default=None, help="results directory")
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set scheduler.verify.batching.max_batch=16",
    )
    parser.add_argument(
        "--label", default=None, help="name of the run in tables and legends (metadata.label)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no table or progress")
    parser.add_argument(
        "--report",
        action="store_true",
        help="also write figures, report.md and report.html into DIR/report",
    )
    return parser


class _Progress:
    """Prints progress to stderr once a run has taken a few seconds."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.perf_counter()
        self.printed = False

    def __call__(self, arrived: int, total: int, simulated_s: float) -> None:
        elapsed = time.perf_counter() - self.started
        if not self.enabled or elapsed < PROGRESS_AFTER_S:
            return
        print(
            f"\r{arrived}/{total} requests arrived, t = {simulated_s:,.1f} s simulated, {elapsed:.0f} s elapsed",
            end="",
            file=sys.stderr,
        )
        self.printed = True

    def close(self) -> None:
        if self.printed:
            print(file=sys.stderr)


def _output_dir(option: Path | None, scenario: Scenario) -> Path:
    """Return the results directory, refused before the run if it cannot be written."""
    if option is not None:
        check_output_dir(option, "command line", "-o/--output")
        return option
    configured = scenario.metrics.output_dir
    if configured:
        out_dir = Path(configured)
        check_output_dir(out_dir, str(scenario.source_file), "metrics.output_dir")
        return out_dir
    out_dir = Path("results") / scenario.scenario_id
    check_output_dir(out_dir, str(scenario.source_file), "scenario_id (results/<scenario_id>)")
    return out_dir


def _policies_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="simulate policies",
        description="List every policy family, policy and parameter (built-ins and plug-ins).",
    )
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    args = parser.parse_args(argv)

    def entry() -> int:
        from simulator.policy_list import policy_listing, render_listing

        listing = policy_listing()
        print(json.dumps(listing, indent=2) if args.json else render_listing(listing))
        return 0

    return run_guarded(entry)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``simulate`` command."""
    words = list(argv) if argv is not None else sys.argv[1:]
    if words[:1] == [POLICIES_COMMAND]:
        return _policies_command(words[1:])
    args = _parser().parse_args(argv)
    if args.seed is not None and args.seed < 0:
        print(f"error: --seed must be >= 0 (got {args.seed})", file=sys.stderr)
        return 2

    def entry() -> int:
        overrides = [*args.overrides, *([label_override(args.label)] if args.label else [])]
        scenario = load_scenario(args.scenario, overrides=overrides, seed=args.seed)
        out_dir = _output_dir(args.output, scenario)
        progress = _Progress(enabled=not args.quiet)
        result = run(scenario, progress=progress)
        progress.close()
        write_results(result, out_dir, argv=list(argv) if argv is not None else sys.argv[1:])
        if not args.quiet:
            print(headline_table(result.summary))
            print(f"results in {out_dir} ({result.wall_s:.2f} s wall)")
        if args.report:
            from simulator.report import load_run, write_report

            reports = write_report([load_run(out_dir)], out_dir / "report")
            if not args.quiet:
                print(f"report in {reports[0]}")
        return 0

    return run_guarded(entry)


if __name__ == "__main__":
    sys.exit(main())
