"""The Python entry point: run a loaded scenario and get its results."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import pandas as pd

from simulator.engine.core import Engine, EngineOutput, InFlight, ProgressHook
from simulator.engine.request_state import RequestRecord
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import Tracer
from simulator.metrics.summary import slo_flags, summarise
from simulator.rng import RandomStreams
from simulator.scenario.model import Scenario
from simulator.scenario.reach import build_requests
from simulator.workload import RequestTable

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
    """

    scenario: Scenario
    summary: dict[str, Any]
    requests: pd.DataFrame
    timeseries: pd.DataFrame
    output: EngineOutput
    wall_s: float


def run(
    scenario: Scenario,
    *,
    requests: RequestTable | None = None,
    tracer: Tracer | None = None,
    in_flight: Sequence[InFlight] = (),
    until_s: float | None = None,
    progress: ProgressHook | None = None,
) -> Result:
    """Simulate ``scenario`` and return its :class:`Result`.

    Args:
        scenario: A loaded scenario (see :func:`simulator.load_scenario`).
        requests: Replay these requests instead of the scenario's workload
            (e.g. a trace slice for a what-if window).
        tracer: Receives every engine event (default: none).
        in_flight: Requests already past prefill at time 0 (what-if windows).
        until_s: Stop time overriding ``simulation.until_s``.
        progress: Called as ``progress(arrived, completed, total, simulated_s)``
            every few hundred arrivals (e.g. to print progress).
    """
    started = time.perf_counter()
    table = requests if requests is not None else build_requests(scenario)
    engine = Engine(
        build_runtime(scenario),
        table,
        RandomStreams(scenario.seed),
        tracer=tracer,
        in_flight=in_flight,
        progress=progress,
    )
    logger.debug("engine built: %d requests, %d replicas", len(table), len(engine.replicas))
    output = engine.run(until_s=until_s)
    logger.info("simulated %.1f s in %.2f s wall", engine.env.now, time.perf_counter() - started)
    columns = [f.name for f in fields(RequestRecord)]
    row_of = attrgetter(*columns)
    frame = pd.DataFrame([row_of(r) for r in output.records], columns=columns)
    frame = frame.sort_values("request_id", kind="stable").reset_index(drop=True)
    slos = {name: table.slo_of(name) for name in sorted(set(frame["slo_class"]) | {"default"})}
    frame = pd.concat([frame, slo_flags(frame, slos)], axis=1)
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
    timeseries = pd.DataFrame(list(output.timeseries))
    return Result(scenario, summary, frame, timeseries, output, time.perf_counter() - started)
