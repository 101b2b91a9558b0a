"""The planner's decisions as a table: the content of ``planner_log.csv``.

One row per candidate per round: the round's time, the candidate
(``key=value``), what the round saw (``waiting``, ``outstanding``,
``serving``, ``recent_*``), the arrival rate its windows replay
(``forecast_arrival_rate_per_s``), why it ran windows or not (``replan``;
see :mod:`simulator.planner.trigger`; empty for a round with too few
requests), the window's estimate of each objective (``est_<objective>``,
``est_good``: requests meeting every SLO in the window,
``est_slo_attainment``: their share of the window's requests), the
requests its window migrates off replicas it removes (``migrated``),
whether it is the run's configuration at the round (``current``) and
whether it is the one the round leaves in place (``chosen``: the applied
candidate, or the current one when kept), the round's ``decision``
(``kept`` or ``changed``) and ``reason`` (the same on every row of a
round; see :mod:`simulator.planner.decision`), and the realised goodput over the next interval
(``realised_goodput``: requests of the run that completed in
``[time_s, time_s + interval_s)`` meeting every SLO, per GPU-second the
run's replicas held in that interval; the same on every row of a round).
"""

from __future__ import annotations

import pandas as pd

from simulator.engine.records import EngineOutput
from simulator.metrics.summary import held_gpu_s


def planner_log(output: EngineOutput, requests: pd.DataFrame, interval_s: float) -> pd.DataFrame:
    """Tabulate a run's planner decisions with their realised goodput.

    Args:
        output: The run's engine output (with ``planner_rounds``).
        requests: Its request rows with their ``slo_met`` flags (``requests.csv``).
        interval_s: The planner's interval.
    """
    frame: pd.DataFrame = pd.DataFrame(list(output.planner_rounds))
    if frame.empty:
        return frame
    done = requests[requests["slo_met"]]
    finish_s = done["arrival_s"] + done["e2e_ms"] / 1000.0
    realised: dict[float, float] = {}
    for time_s in sorted(set(frame["time_s"])):
        end_s = min(time_s + interval_s, output.simulated_s)
        good = int(((finish_s >= time_s) & (finish_s < end_s)).sum())
        gpu_s = held_gpu_s(output, time_s, end_s)
        realised[time_s] = good / gpu_s if gpu_s > 0 else float("nan")
    frame["realised_goodput"] = frame["time_s"].map(realised)
    return frame
