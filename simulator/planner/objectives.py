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
times ``energy_per_kj``, at least 0) per GPU-second. Both terms of the
difference are requests, so it is a goodput; held at 0 where the energy is
worth more than the good requests, so GPUs that only draw power (more
kJ, more GPU-seconds, no more good requests) never raise a score. With
``fairness_weight`` ``w`` the result is multiplied by ``1 - w (1 - J)``,
``J`` Jain's index, ``(sum x)^2 / (n sum x^2)``, of the SLO attainment ``x``
of the window's ``n`` groups (``fairness_over``: client device classes or
SLO classes; requests of the window that never arrived in it are left
out). The factor has no unit and idle GPUs do not move it.

Objectives with an SLO-attainment floor (``planner.slo_floor``): a window's
attainment is its good requests over all its requests (carried in and
replayed). ``goodput_at_slo_floor`` maximises goodput and
``gpus_at_slo_floor`` minimises the GPUs held, each among the candidates
whose attainment meets the floor; those below it rank after every one
meeting it, higher attainment first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.engine.records import EngineOutput, RequestRecord
from simulator.planner.objective_names import FLOOR_OBJECTIVES
from simulator.planner.objective_names import OBJECTIVES as OBJECTIVES
from simulator.scenario.model import Penalties
from simulator.workload import RequestTable


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
        requests: Requests of the window (carried in and replayed).
        gpus: GPUs its replicas hold.
        span_s: Its length (start to the last request's end, or its cap).
        jain: Jain's index of SLO attainment, by grouping (``origin``,
            ``slo_class``).
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
    requests: int = 0
    gpus: int = 0
    span_s: float = 0.0
    jain: tuple[tuple[str, float], ...] = ()

    @property
    def slo_attainment(self) -> float:
        """Share of the window's requests meeting every SLO (nan: no requests)."""
        return self.good / self.requests if self.requests else math.nan

    @property
    def goodput_at_slo_floor(self) -> float:
        """The goodput (what ``goodput_at_slo_floor`` maximises above the floor)."""
        return self.goodput

    @property
    def gpus_at_slo_floor(self) -> float:
        """The GPUs held (what ``gpus_at_slo_floor`` minimises above the floor)."""
        return float(self.gpus)

    def penalised_goodput(self, penalties: Penalties) -> float:
        """Net good requests (energy's worth off, at least 0) per GPU-second, times fairness."""
        if self.gpu_s <= 0:
            return 0.0
        net = max(self.good - self.energy / 1000.0 * penalties.energy_per_kj, 0.0)
        fair = dict(self.jain).get(penalties.fairness_over, 1.0)
        return net / self.gpu_s * (1.0 - penalties.fairness_weight * (1.0 - fair))

    def value(self, name: str, penalties: Penalties | None = None) -> float:
        """Objective ``name``'s value (goodput terms penalised with ``penalties``)."""
        if name in ("goodput", "goodput_at_slo_floor") and penalties:
            return self.penalised_goodput(penalties)
        return float(getattr(self, name))

    def meets_floor(self, slo_floor: float) -> bool:
        """Whether its SLO attainment is at least ``slo_floor`` (no requests: it is)."""
        return self.requests == 0 or self.slo_attainment >= slo_floor

    def rank(
        self,
        objectives: Sequence[str],
        penalties: Penalties | None = None,
        slo_floor: float = 0.0,
    ) -> tuple[float, ...]:
        """Sort key (smaller is better): goodput negated, the others as they are (nan last).

        With ``penalties`` the goodput terms are :meth:`penalised_goodput`. A
        floor objective first puts the windows meeting ``slo_floor`` ahead,
        then those below it by attainment (higher first).
        """
        key: list[float] = []
        for name in objectives:
            value = self.value(name, penalties)
            if name in FLOOR_OBJECTIVES:
                below = not self.meets_floor(slo_floor)
                key += [float(below), -self.slo_attainment if below else 0.0]
            if name in ("goodput", "goodput_at_slo_floor"):
                value = -value
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


def jain_index(attainment: Sequence[float]) -> float:
    """Jain's index ``(sum x)^2 / (n sum x^2)`` of the groups' attainment (1: none, or all 0)."""
    total = sum(x * x for x in attainment)
    if total <= 0:
        return 1.0
    return sum(attainment) ** 2 / (len(attainment) * total)


def _group_jain(records: Sequence[RequestRecord], table: RequestTable, by: str) -> float:
    """Jain's index of the SLO attainment of the records grouped by attribute ``by``."""
    good: dict[str, int] = {}
    total: dict[str, int] = {}
    for record in records:
        group = str(getattr(record, by))
        total[group] = total.get(group, 0) + 1
        good[group] = good.get(group, 0) + meets_slos(record, table)
    return jain_index([good[g] / total[g] for g in total])


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
        requests=len(output.records) + output.not_arrived,
        gpus=sum(output.replica_gpus),
        span_s=span_s,
        jain=tuple((by, _group_jain(output.records, table, by)) for by in ("origin", "slo_class")),
    )
