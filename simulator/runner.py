"""The Python entry point: run a loaded scenario and get its results."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from simulator.engine.core import Engine, ProgressHook
from simulator.engine.records import REQUEST_COLUMNS, EngineOutput, InFlight, RequestColumns
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import Tracer
from simulator.metrics.disaggregation import add_transfer_columns
from simulator.metrics.summary import slo_flags, summarise
from simulator.planner.log import planner_log
from simulator.rng import RandomStreams
from simulator.scenario.model import Scenario
from simulator.scenario.requests import run_requests
from simulator.workload import RequestTable
from simulator.workload.run_requests import build_requests as build_requests

if TYPE_CHECKING:  # the planner is imported only by runs that have one
    from simulator.planner.online import OnlinePlanner
    from simulator.planner.windows import WindowRunner

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    """What a run produced.

    Attributes:
        scenario: The scenario that was run.
        summary: The aggregate metrics (the content of ``summary.json``).
        requests: One row per request (the content of ``requests.csv``).
        timeseries: Periodic samples (the content of ``timeseries.csv``).
        output: The engine's raw output.
        wall_s: Wall-clock seconds the run took.
        planner_log: The planner's decisions (the content of ``planner_log.csv``;
            empty without a planner).
    """

    scenario: Scenario
    summary: dict[str, Any]
    requests: pd.DataFrame
    timeseries: pd.DataFrame
    output: EngineOutput
    wall_s: float
    planner_log: pd.DataFrame


def run(
    scenario: Scenario,
    *,
    requests: RequestTable | None = None,
    tracer: Tracer | None = None,
    in_flight: Sequence[InFlight] = (),
    until_s: float | None = None,
    progress: ProgressHook | None = None,
    start_s: float = 0.0,
    windows: WindowRunner | None = None,
) -> Result:
    """Simulate ``scenario`` and return its :class:`Result`.

    Args:
        scenario: A loaded scenario (see :func:`simulator.load_scenario`).
        requests: Replay these requests instead of the scenario's workload
            (e.g. a trace slice for a what-if window, on the same clock as
            ``start_s``).
        tracer: Receives every engine event (default: none).
        in_flight: Requests unfinished at ``start_s`` (a what-if window of a
            candidate configuration; see :func:`run_candidate`).
        until_s: Stop time overriding ``simulation.until_s``.
        progress: Called as ``progress(arrived, completed, total, simulated_s)``
            every few hundred arrivals (e.g. to print progress).
        start_s: The clock's start time (a what-if window's start; default 0).
        windows: Where the online planner's what-if windows run (default:
            one after another in this process; see :mod:`simulator.planner.windows`).
    """
    started = time.perf_counter()
    table = requests if requests is not None else run_requests(scenario)
    engine = Engine(
        build_runtime(scenario),
        table,
        RandomStreams(scenario.seed),
        tracer=tracer,
        in_flight=in_flight,
        progress=progress,
        start_s=start_s,
        planner=planner_of(scenario, windows),
    )
    logger.debug("engine built: %d requests, %d replicas", len(table), len(engine.replicas))
    output = engine.run(until_s=until_s)
    logger.info("simulated %.1f s in %.2f s wall", engine.env.now, time.perf_counter() - started)
    return _result(scenario, table, output, started)


def planner_of(scenario: Scenario, windows: WindowRunner | None = None) -> OnlinePlanner | None:
    """The scenario's online planner (``None`` when ``planner.enabled`` is false)."""
    if not scenario.planner.enabled:
        return None
    from simulator.planner.online import OnlinePlanner

    return OnlinePlanner(scenario.planner, scenario.seed, windows)


@dataclass(frozen=True)
class Snapshot:
    """A run stopped at ``time_s``: the full state what-if windows start from.

    Attributes:
        scenario: The scenario that was run.
        requests: Its request table (absolute clock).
        time_s: When the run stopped.
        engine: The stopped engine (never advanced: windows run copies of it).
    """

    scenario: Scenario
    requests: RequestTable
    time_s: float
    engine: Engine

    @property
    def in_flight(self) -> tuple[InFlight, ...]:
        """The arrived, unfinished requests as records (for candidate windows)."""
        return self.engine.snapshot()


def snapshot(scenario: Scenario, at_s: float, *, requests: RequestTable | None = None) -> Snapshot:
    """Run ``scenario`` up to ``at_s`` and keep its full state.

    Every event before ``at_s`` is processed; those at ``at_s`` and later
    are still pending (a run stopped by ``until_s`` stops the same way).

    Args:
        scenario: A loaded scenario.
        at_s: The stop time (greater than 0).
        requests: Replay these requests instead of the scenario's workload.
    """
    table = requests if requests is not None else run_requests(scenario)
    engine = Engine(
        build_runtime(scenario),
        table,
        RandomStreams(scenario.seed),
        planner=planner_of(scenario),
    )
    engine.start()
    engine.advance(at_s)
    return Snapshot(scenario, table, engine.env.now, engine)


def run_window(state: Snapshot, until_s: float) -> Result:
    """Continue a copy of the snapshot's run, same configuration, to ``until_s``.

    The continuation is exact: every event, draw and tie-break is the one
    the uninterrupted run makes, so a request that ends before ``until_s``
    has the same record as in the full run. Records cover every request
    that arrived before ``until_s`` (those of the whole run so far).
    """
    started = time.perf_counter()
    engine = state.engine.fork()
    engine.advance(until_s)
    engine.fleet.settle_at_cut()  # as a run cut by until_s reports (the copy is discarded)
    return _result(state.scenario, state.requests, engine.output(), started)


def run_candidate(
    candidate: Scenario, state: Snapshot, until_s: float, *, tracer: Tracer | None = None
) -> Result:
    """Run a what-if window of a candidate configuration from the snapshot to ``until_s``.

    The window starts at the snapshot's time on the same clock, with the
    snapshot's unfinished requests (:attr:`Snapshot.in_flight`: timings and
    counters kept, so their TTFT counts from their real arrival and their
    TPOT from their real first token) and the requests of the snapshot's
    table arriving before ``until_s``. Work under way at the start (an
    iteration, a draft burst, a transfer) starts again from there; the
    requests of a replica the candidate lacks migrate (see
    ``Engine._place_in_flight``). Its random streams start afresh from the
    candidate's seed. Records cover the carried and the new requests.

    Args:
        candidate: The configuration to evaluate (e.g. fewer replicas).
        state: Where the window starts.
        until_s: When it ends (after ``state.time_s``).
        tracer: Receives the window's events (default: none).
    """
    table = state.requests.window(state.time_s, until_s, rebase=False)
    return run(
        candidate,
        requests=table,
        tracer=tracer,
        in_flight=state.in_flight,
        until_s=until_s,
        start_s=state.time_s,
    )


def request_frame(requests: RequestColumns) -> pd.DataFrame:
    """The requests table of ``requests.csv`` (without the SLO flags), sorted by request id.

    Built once from the columns (the numeric ones are not copied); the
    stable sort by ``request_id`` is skipped when the rows are in id order
    already, as they are when requests arrive in id order.
    """
    if not len(requests):
        empty: pd.DataFrame = pd.DataFrame([], columns=list(REQUEST_COLUMNS))
        return empty
    frame: pd.DataFrame = pd.DataFrame(
        {name: requests.columns[name] for name in REQUEST_COLUMNS}, copy=False
    )
    if not frame["request_id"].is_monotonic_increasing:
        sorted_frame: pd.DataFrame = frame.sort_values("request_id", kind="stable")
        frame = sorted_frame.reset_index(drop=True)
    return frame


def _result(
    scenario: Scenario, table: RequestTable, output: EngineOutput, started: float
) -> Result:
    """Tabulate and summarise an engine output."""
    frame = request_frame(output.requests)
    if output.prefix_cache is not None:
        cached = output.prefix_cache.cached_tokens
        frame["cached_tokens"] = [cached.get(int(i), 0) for i in frame["request_id"]]
    if output.disaggregation is not None:
        add_transfer_columns(frame, output.disaggregation)
    classes = set(frame["slo_class"].unique())  # unique(): not one Python step per row
    slos = {name: table.slo_of(name) for name in sorted(classes | {"default"})}
    for name, flags in slo_flags(frame, slos).items():
        frame[name] = flags
    summary = summarise(
        output,
        frame,
        slos,
        scenario_id=scenario.scenario_id,
        label=scenario.metadata.label,
        mode=scenario.speculation.mode,
        seed=scenario.seed,
        warmup_s=scenario.metrics.warmup_s,
        record_energy=scenario.metrics.record_energy,
        record_cost=scenario.metrics.record_cost,
        electricity_usd_per_kwh=scenario.metrics.electricity_usd_per_kwh,
    )
    timeseries = pd.DataFrame(dict(output.timeseries)) if output.timeseries else pd.DataFrame([])
    decisions = planner_log(output, frame, scenario.planner.interval_s)
    return Result(
        scenario, summary, frame, timeseries, output, time.perf_counter() - started, decisions
    )
