"""Scoring a what-if window by the planner's objectives.

A window's requests are the ones it carried in (unfinished at its start)
and the ones it replayed; it runs until all of them have ended (or its
cap). Its goodput is those that completed meeting every SLO of their
class, per GPU-second its replicas held until the last one ended (every
replica of the candidate, loading ones included), so a configuration that
leaves a backlog pays for it in its own window rather than in the next
one. Tie-breakers: the 95th percentiles of TPOT, TTFT and TVT (ms)
of the requests completed in it, its energy (J: what the targets' and the
devices' work used) and its cost (USD of its replicas' hourly prices).
With ``planner.penalties`` the goodput is charged for energy at the given
exchange rate before candidates are compared: (good requests less kJ
times ``energy_per_kj``) per GPU-second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.engine.records import EngineOutput, RequestRecord
from simulator.scenario.model import Penalties
from simulator.workload import RequestTable

OBJECTIVES = ("goodput", "p95_tpot", "p95_ttft", "p95_tvt", "energy", "cost")
"""Every objective; goodput is higher-better, the others lower-better."""


@dataclass(frozen=True)
class WindowScore:
    """What a window achieved, by objective.

    Attributes:
        goodput: Requests completed meeting every SLO, per GPU-second.
        p95_tpot: 95th percentile TPOT of the completed requests (ms; nan: none).
        p95_ttft: Same for TTFT.
        p95_tvt: Same for TVT.
        energy: Energy of the targets' and devices' work (J).
        cost: Price of the replicas for the window (USD; 0 when unpriced).
        good: Requests completed meeting every SLO.
        completed: Requests completed.
        gpu_s: GPU-seconds its replicas held (the goodput's denominator).
    """

    goodput: float
    p95_tpot: float
    p95_ttft: float
    p95_tvt: float
    energy: float
    cost: float
    good: int
    completed: int
    gpu_s: float = 0.0

    def penalised_goodput(self, penalties: Penalties) -> float:
        """Goodput less the penalty's worth of the window's energy, per GPU-second."""
        if self.gpu_s <= 0:
            return 0.0
        return (self.good - self.energy / 1000.0 * penalties.energy_per_kj) / self.gpu_s

    def rank(
        self, objectives: Sequence[str], penalties: Penalties | None = None
    ) -> tuple[float, ...]:
        """Sort key (smaller is better): goodput negated, the others as they are (nan last).

        With ``penalties`` the goodput term is :meth:`penalised_goodput`.
        """
        key: list[float] = []
        for name in objectives:
            value = float(getattr(self, name))
            if name == "goodput":
                value = -(self.penalised_goodput(penalties) if penalties else value)
            key.append(math.inf if math.isnan(value) else value)
        return tuple(key)


def meets_slos(record: RequestRecord, table: RequestTable) -> bool:
    """Whether a request completed within every SLO of its class (as ``slo_met`` in the summary)."""
    if record.outcome != "completed":
        return False
    slo = table.slo_of(record.slo_class)
    tvt_ms = slo.tvt_ms if slo.tvt_ms is not None else math.inf
    return (
        record.ttft_ms <= slo.ttft_ms
        and (math.isnan(record.tpot_ms) or record.tpot_ms <= slo.tpot_ms)
        and (math.isnan(record.tvt_ms) or record.tvt_ms <= tvt_ms)
    )


def _p95(values: list[float]) -> float:
    """95th percentile of the finite values (nan: none)."""
    kept = [v for v in values if not math.isnan(v)]
    return float(np.percentile(kept, 95)) if kept else math.nan


def score_window(output: EngineOutput, table: RequestTable, start_s: float) -> WindowScore:
    """Score a window's engine output (``table``: its SLO targets; ``start_s``: its start).

    The window lasts until its last request ended (``output.simulated_s``
    when some never did).
    """
    completed = [r for r in output.records if r.outcome == "completed"]
    good = sum(1 for r in completed if meets_slos(r, table))
    end_s = output.simulated_s
    if all(r.outcome != "unfinished" for r in output.records):
        end_s = max(
            (r.arrival_s + r.e2e_ms / 1000.0 for r in completed if not math.isnan(r.e2e_ms)),
            default=start_s,
        )
    span_s = max(end_s - start_s, 1e-9)
    gpu_s = sum(output.replica_gpus) * span_s
    usd = sum(p for p in output.replica_usd_per_hour if p is not None) * span_s / 3600.0
    return WindowScore(
        goodput=good / gpu_s if gpu_s > 0 else 0.0,
        p95_tpot=_p95([r.tpot_ms for r in completed]),
        p95_ttft=_p95([r.ttft_ms for r in completed]),
        p95_tvt=_p95([r.tvt_ms for r in completed]),
        energy=sum(output.replica_energy_j) + output.device_energy_j,
        cost=usd,
        good=good,
        completed=len(completed),
        gpu_s=gpu_s,
    )
