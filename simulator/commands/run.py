"""``simulate run SCENARIO``: run a scenario file and write its results.

Writes ``summary.json``, ``requests.csv``, ``timeseries.csv``,
``scenario.resolved.yaml`` and ``run.json`` into DIR (default:
``metrics.output_dir`` of the scenario, else ``results/<scenario_id>``) and
prints a table of the headline numbers; ``--report`` adds the figures,
``report.md`` and ``report.html`` of :mod:`simulator.report` in ``DIR/report``.
Exit status 0 on success, 2 on bad input (with one message naming the file,
key, value and what is allowed). ``SCENARIO`` may name a shipped example as
``builtin:scenarios/examples/NAME.yaml``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.scenario_options import (
    add_executor_options,
    add_plugin_option,
    add_scenario_options,
)

if TYPE_CHECKING:
    from simulator.scenario import Scenario

HELP = "run a scenario file and write its results"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate run``."""
    parser.add_argument(
        "scenario",
        help="scenario YAML or JSON file, or builtin:scenarios/examples/NAME.yaml",
    )
    parser.add_argument("-o", "--output", type=Path, default=None, help="results directory")
    add_scenario_options(parser)
    add_plugin_option(parser)
    add_executor_options(parser, "the online planner's what-if windows")
    parser.add_argument(
        "--label", default=None, help="name of the run in tables and legends (metadata.label)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no table or progress")
    parser.add_argument(
        "--report",
        action="store_true",
        help="also write figures, report.md and report.html into DIR/report",
    )
    from simulator.trace_events import add_trace_arguments

    add_trace_arguments(parser)


def output_dir(option: Path | None, scenario: Scenario) -> Path:
    """Return the results directory, refused before the run if it cannot be written."""
    from simulator.outputs import check_output_dir

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


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate run``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.builtin_data import scenario_path
        from simulator.console import headline_table
        from simulator.errors import InputError
        from simulator.executors import check_executor
        from simulator.labels import label_override
        from simulator.outputs import write_results
        from simulator.planner.windows import window_runner
        from simulator.progress import TerminalProgress
        from simulator.runner import run
        from simulator.scenario import load_scenario
        from simulator.scenario.overrides import blame_overrides
        from simulator.trace_events import timeline_tracer

        check_executor(args.executor, args.workers)  # refused even when no planner uses them
        overrides = [*args.overrides, *([label_override(args.label)] if args.label else [])]
        path = scenario_path(args.scenario)
        try:
            scenario = load_scenario(path, overrides=overrides, seed=args.seed)
        except InputError as exc:  # a --set option's problem is the command line's
            raise InputError(blame_overrides(exc.issues, path, args.overrides)) from None
        out_dir = output_dir(args.output, scenario)
        tracer = timeline_tracer(
            args.trace_events, args.trace_requests, args.trace_max_events, out_dir
        )
        progress = TerminalProgress(enabled=not args.quiet)
        logger.info("running scenario %s (seed %d)", scenario.scenario_id, scenario.seed)
        windows = (
            window_runner(args.executor, args.workers, args.ray_address)
            if scenario.planner.enabled
            else None
        )
        try:
            result = run(scenario, progress=progress, tracer=tracer, windows=windows)
        except InputError as exc:  # found once the workload is read: still the option's
            raise InputError(blame_overrides(exc.issues, path, args.overrides)) from None
        finally:
            progress.close()
            if windows is not None:
                windows.close()
        write_results(result, out_dir, argv=getattr(args, "argv", None))
        if tracer is not None:
            tracer.write(args.trace_events)
        if not args.quiet:
            print(headline_table(result.summary))
            print(f"results in {out_dir} ({result.wall_s:.2f} s wall)")
        if args.report:
            from simulator.report import load_run, write_report

            reports = write_report([load_run(out_dir)], out_dir / "report")
            if not args.quiet:
                print(f"report in {reports[0]}")
        return 0

    return run_guarded(entry, args.allow_plugins)
