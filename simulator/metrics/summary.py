"""Aggregate a run's flat records into the summary (``summary.json``).

Definitions (all documented in ``summary.schema.json`` too):

- The *measured set* is the requests that arrived at or after
  ``metrics.warmup_s`` (and before the end of the run: requests due after a
  ``simulation.until_s`` cut never arrive). Every per-request aggregate uses
  it; only ``requests.arrived`` also counts the warm-up requests. The
  ``measurement`` section names the set each section uses.
- Latency percentiles use the completed requests of the set; TVT only those
  with speculation rounds, TPOT only those with more than one output token.
- The censored view (``latency_ms_censored``) adds the set's unfinished
  requests to TTFT and E2E at their age at the end of the run, a lower bound
  of their latency (an unfinished request that has its first token
  contributes its exact TTFT). Rejected requests have no latency.
- A request counts toward goodput when it completed and met every SLO of its
  class (TVT only where it applies: requests with verify rounds over a
  network, i.e. distributed ones); SLO attainment divides by the whole set
  (completed + rejected + unfinished). The per-SLO pass rates
  (``goodput.slo_pass_rate``) divide the requests that completed within one
  target (TTFT, TPOT or TVT) by the same set; TVT's is ``None`` where no
  class sets a TVT target or no measured request had network rounds.
- ``measured_s`` is the span from the warm-up end to the end of the run;
  rates divide by it. GPU-seconds are GPUs of all replicas × ``measured_s``.
- Jain's index is over the per-request decode speeds (1 / TPOT) of the
  completed requests.
- Energy and cost are per device class, with totals naming the classes they
  cover (:mod:`simulator.metrics.energy_cost`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simulator.engine.gpu_share import GpuTime
from simulator.engine.records import EngineOutput
from simulator.errors import NonFiniteResult
from simulator.metrics.disaggregation import disaggregation_summary
from simulator.metrics.energy_cost import cost_section, energy_section
from simulator.metrics.prefix_cache import prefix_cache_summary
from simulator.workload import SloTargets

PERCENTILES = (50, 90, 95, 99)
LATENCY_COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "tvt": "tvt_ms", "e2e": "e2e_ms"}
COMPLETED_COLUMNS = (*LATENCY_COLUMNS.values(), "ttft_server_ms", "generated_tokens")
"""The columns the summary reads of the completed requests (only these are copied)."""
ROUND_COLUMNS = ("verify_rounds", "drafted_tokens", "accepted_tokens", "generated_tokens")
"""The columns the summary reads of the requests that ran verify rounds."""


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _stats(values: Iterable[float]) -> dict[str, float | None]:
    array = np.asarray(
        values if isinstance(values, (pd.Series, np.ndarray)) else list(values), dtype=float
    )
    array = array[np.isfinite(array)]
    if array.size == 0:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    out: dict[str, float | None] = {"mean": float(array.mean())}
    # All four in one call (one partition of the array; the same interpolation as one by one).
    for p, value in zip(PERCENTILES, np.percentile(array, PERCENTILES).tolist(), strict=True):
        out[f"p{p}"] = value
    return out


SLO_FLAG_COLUMNS = ("ttft_ok", "tpot_ok", "tvt_ok", "slo_met")
"""Per-request SLO columns of ``requests.csv`` (see :func:`slo_flags`)."""


def held_gpu_s(output: EngineOutput, start_s: float, end_s: float) -> float:
    """GPU-seconds the replicas held in ``[start_s, end_s)`` (from ``replica_spans_s``)."""
    return sum(
        gpus * max(0.0, min(off, end_s) - max(on, start_s))
        for gpus, (on, off) in zip(output.replica_gpus, output.replica_spans_s, strict=True)
    )


def slo_flags(frame: pd.DataFrame, slos: Mapping[str, SloTargets]) -> pd.DataFrame:
    """Return, per request row, which SLOs of its class it met.

    ``ttft_ok``/``tpot_ok``/``tvt_ok`` hold for a completed request within the
    limit (TPOT and TVT also hold where they do not apply: one-token outputs,
    requests without network rounds, classes without a TVT target);
    ``slo_met`` is all three. Requests that did not complete meet none.
    """
    # Each class's limits mapped through a table, not a call per row.
    classes = frame["slo_class"]
    ttft_limit = classes.map({c: t.ttft_ms for c, t in slos.items()})
    if ttft_limit.isna().any():  # targets are finite: a class without targets
        raise KeyError(f"no SLO targets for class {classes[ttft_limit.isna()].iloc[0]!r}")
    tpot_limit = classes.map({c: t.tpot_ms for c, t in slos.items()})
    tvt_limit = classes.map(
        {c: t.tvt_ms if t.tvt_ms is not None else math.inf for c, t in slos.items()}
    )
    completed = frame["outcome"] == "completed"
    ttft_ok = completed & (frame["ttft_ms"] <= ttft_limit)
    tpot_ok = completed & (frame["tpot_ms"].isna() | (frame["tpot_ms"] <= tpot_limit))
    tvt_ok = completed & (frame["tvt_ms"].isna() | (frame["tvt_ms"] <= tvt_limit))
    flags: pd.DataFrame = pd.DataFrame(
        {
            "ttft_ok": ttft_ok,
            "tpot_ok": tpot_ok,
            "tvt_ok": tvt_ok,
            "slo_met": ttft_ok & tpot_ok & tvt_ok,
        },
        index=frame.index,
    )
    return flags


def slo_met(frame: pd.DataFrame, slos: Mapping[str, SloTargets]) -> pd.Series:
    """Return, per request row, whether it completed within every SLO of its class."""
    met: pd.Series = slo_flags(frame, slos)["slo_met"]
    return met


SLO_NAMES = ("ttft", "tpot", "tvt")
"""The SLOs a class can set, in the order tables show them."""


def slo_pass_rates(measured: pd.DataFrame, slos: Mapping[str, SloTargets]) -> dict[str, Any]:
    """Per SLO, the share of the measured set that completed within that target of its class.

    Same denominator as ``slo_attainment`` (every measured request; rejected and
    unfinished ones miss every target). TVT's rate is ``None`` where no class
    sets a TVT target or no measured request ran verify rounds over a network
    (TVT does not apply), so a run is never credited with a target it did not face.
    ``measured`` has the SLO flag columns (:data:`SLO_FLAG_COLUMNS`, see :func:`slo_flags`).
    """
    if measured.empty:
        return dict.fromkeys(SLO_NAMES)
    rates: dict[str, Any] = {name: float(measured[f"{name}_ok"].mean()) for name in SLO_NAMES}
    has_tvt_target = any(targets.tvt_ms is not None for targets in slos.values())
    if not has_tvt_target or measured["tvt_ms"].isna().all():
        rates["tvt"] = None
    return rates


def slo_targets_ms(slos: Mapping[str, SloTargets]) -> dict[str, dict[str, float | None]]:
    """SLO class name -> its targets in ms (``None`` where the class sets none)."""
    return {
        name: {f"{slo}_ms": _finite(getattr(targets, f"{slo}_ms")) for slo in SLO_NAMES}
        for name, targets in sorted(slos.items())
    }


def _attainment_by(frame: pd.DataFrame, met: pd.Series, column: str) -> dict[str, float]:
    out: dict[str, float] = {}
    # Group the one column (a group of the whole frame would copy every column).
    values = frame[column]
    for name, group in values.groupby(values, sort=True):
        label = str(name) if str(name) else "(none)"
        out[label] = float(met.loc[group.index].mean())
    return out


def by_category(frame: pd.DataFrame, met: pd.Series) -> dict[str, dict[str, Any]]:
    """Per task category of the measured set: attainment, tokens per verify, acceptance, latency.

    Requests without a category are left out; a workload without categories gives ``{}``.
    """
    out: dict[str, dict[str, Any]] = {}
    has_category = frame["category"] != ""
    if not has_category.any():
        return out  # a workload without categories (no grouping of an empty table)
    named = frame[has_category]
    for name, group in named.groupby("category", sort=True):
        done = group[group["outcome"] == "completed"]
        spec = group[group["verify_rounds"] > 0]
        rounds = int(spec["verify_rounds"].sum())
        drafted = int(spec["drafted_tokens"].sum())
        committed = int((spec["generated_tokens"] - 1).clip(lower=0).sum())
        out[str(name)] = {
            "requests": len(group),
            "completed": len(done),
            "slo_attainment": float(met.loc[group.index].mean()),
            "mean_tokens_per_verify": committed / rounds if rounds else None,
            "acceptance_rate": int(spec["accepted_tokens"].sum()) / drafted if drafted else None,
            "tpot_ms_mean": _stats(done["tpot_ms"])["mean"],
            "ttft_ms_p99": _stats(done["ttft_ms"])["p99"],
        }
    return out


CENSORED_SET = (
    "completed and unfinished requests of the measured set; an unfinished one counts at its age at "
    "the end of the run (end_s - arrival), a lower bound, where its latency is not known yet"
)
ATTAINMENT_DENOMINATOR = (
    "measured arrivals (completed + rejected + unfinished, arriving at or after metrics.warmup_s)"
)
SECTION_SETS = {
    "requests": "the measured set (arrived also counts warm-up arrivals)",
    "latency_ms": "completed requests of the measured set",
    "latency_ms_server": "completed requests of the measured set",
    "latency_ms_censored": CENSORED_SET,
    "throughput": "completed requests of the measured set, per second of measured_s",
    "goodput": "the measured set; rejected and unfinished requests miss their SLO",
    "speculation": "the measured set (every round its requests ran, finished or not)",
    "fairness": "jain_index: completed requests of the measured set; attainment: the measured set",
    "by_category": "the measured set, by task category (latency: its completed requests)",
    "resources": "the whole run, 0 to simulated_s (not per request)",
    "energy": "the whole run, 0 to simulated_s; per-token figures divide by every output "
    "token the run produced (all arrived requests, finished or not)",
    "cost": "the whole run, 0 to simulated_s; per-token figures divide by every output "
    "token the run produced (all arrived requests, finished or not)",
}
"""Which requests (or span) each section of the summary aggregates."""


def censored_latency(frame: pd.DataFrame, end_s: float) -> dict[str, Any]:
    """TTFT and E2E of completed and unfinished requests, the unfinished at their age at ``end_s``.

    An unfinished request's age ``end_s - arrival_s`` is a lower bound of
    its E2E, and of its TTFT when its first token has not reached the client
    yet (one that has contributes its exact TTFT). Rejected rows are left out.

    Args:
        frame: Request rows (``requests.csv`` columns) of the set to aggregate.
        end_s: The end of the run (the cut of a run with ``until_s``).
    """
    # On the columns' arrays (pandas' selection and where() cost more than the arithmetic).
    outcome = frame["outcome"].to_numpy()
    unfinished_rows = outcome == "unfinished"
    kept = (outcome == "completed") | unfinished_rows
    unfinished = unfinished_rows[kept]
    age_ms = (end_s - frame["arrival_s"].to_numpy(dtype=float)[kept]) * 1000.0
    ttft_written = frame["ttft_ms"].to_numpy(dtype=float)[kept]
    ttft_known = ~np.isnan(ttft_written)
    ttft = np.where(ttft_known, ttft_written, age_ms)
    e2e = np.where(unfinished, age_ms, frame["e2e_ms"].to_numpy(dtype=float)[kept])
    return {
        "ttft": _stats(ttft),
        "e2e": _stats(e2e),
        "requests": int(kept.sum()),
        "unfinished": int(unfinished.sum()),
        "ttft_lower_bounds": int((~ttft_known).sum()),
    }


def jain_index(values: Iterable[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2) of positive values."""
    array = np.asarray(
        values if isinstance(values, (pd.Series, np.ndarray)) else list(values), dtype=float
    )
    array = array[np.isfinite(array) & (array > 0)]
    if array.size == 0:
        return None
    return float(array.sum() ** 2 / (array.size * np.square(array).sum()))


def summarise(
    output: EngineOutput,
    frame: pd.DataFrame,
    slos: Mapping[str, SloTargets],
    *,
    scenario_id: str,
    label: str,
    mode: str,
    seed: int,
    warmup_s: float,
    record_energy: bool,
    record_cost: bool,
    electricity_usd_per_kwh: float | None = None,
) -> dict[str, Any]:
    """Build the summary mapping from a run's output and its request table.

    ``frame`` is the table of ``requests.csv``, its SLO flag columns
    (:data:`SLO_FLAG_COLUMNS`) included: they are computed once, by :func:`slo_flags`.
    Energy and cost per device class follow :mod:`simulator.metrics.energy_cost`;
    ``electricity_usd_per_kwh`` prices the measured energy of draft devices.
    """
    in_set = frame["arrival_s"] >= warmup_s
    # Every row measured (no warm-up): the frame itself, not a copy of it.
    measured = frame if in_set.all() else frame[in_set]
    outcome = measured["outcome"]
    completed = measured.loc[outcome == "completed", list(COMPLETED_COLUMNS)]
    met = measured["slo_met"]
    measured_s = max(output.simulated_s - warmup_s, 1e-12)
    gpus = sum(output.replica_gpus)
    # GPU-seconds over the measured span (a planner's replicas count while they hold GPUs).
    measured_gpu_s = gpus * measured_s
    run_gpu_s = gpus * output.simulated_s
    if output.replica_spans_s:
        measured_gpu_s = held_gpu_s(output, warmup_s, output.simulated_s)
        run_gpu_s = held_gpu_s(output, 0.0, output.simulated_s)
    good = int(met.sum())
    out_tokens = int(completed["generated_tokens"].sum())
    speculative = measured.loc[measured["verify_rounds"] > 0, list(ROUND_COLUMNS)]
    rounds = int(speculative["verify_rounds"].sum())
    drafted = int(speculative["drafted_tokens"].sum())
    accepted = int(speculative["accepted_tokens"].sum())
    committed_by_rounds = int((speculative["generated_tokens"] - 1).clip(lower=0).sum())
    busy = np.asarray(output.replica_busy_s)
    # Seconds each replica was part of the run (a planner's: while it held its GPUs).
    held = (
        np.asarray([off - on for on, off in output.replica_spans_s])
        if output.replica_spans_s
        else np.full(len(busy), output.simulated_s)
    )
    # Energy and cost cover the whole run, so their per-token figures divide by every
    # output token the run produced (warm-up and unfinished requests' tokens included).
    run_tokens = int(frame["generated_tokens"].sum())
    energy = energy_section(output.device_classes, run_tokens, record_energy)
    cost = cost_section(
        output.device_classes,
        energy,
        run_tokens,
        electricity_usd_per_kwh,
        record_cost,
    )
    speeds = 1000.0 / completed["tpot_ms"].dropna()
    summary: dict[str, Any] = {
        "scenario_id": scenario_id,
        "label": label,
        "mode": mode,
        "seed": seed,
        "simulated_s": output.simulated_s,
        "measured_s": measured_s,
        "measurement": {
            "warmup_s": warmup_s,
            "end_s": output.simulated_s,
            "measured_set": "requests arriving at or after metrics.warmup_s and before end_s",
            "warmup_requests": len(frame) - len(measured),
            "not_arrived": output.not_arrived,
            "sections": SECTION_SETS,
        },
        "requests": {
            "arrived": len(frame),
            "measured": len(measured),
            "completed": len(completed),
            "rejected": int((outcome == "rejected").sum()),
            "rejected_by_reason": {
                str(reason): int(count)
                for reason, count in sorted(
                    measured.loc[outcome == "rejected", "reason"].value_counts().items()
                )
            },
            "unfinished": int((outcome == "unfinished").sum()),
            "spilled_to_fused": int(measured["spilled"].sum()),
            # Only in a stalled run (see EngineOutput.stalled_at_s).
            **({"stalled_at_s": output.stalled_at_s} if output.stalled_at_s is not None else {}),
        },
        "latency_ms": {name: _stats(completed[column]) for name, column in LATENCY_COLUMNS.items()},
        "latency_ms_server": {"ttft": _stats(completed["ttft_server_ms"])},
        "latency_ms_censored": censored_latency(measured, output.simulated_s),
        "throughput": {
            "requests_per_s": len(completed) / measured_s,
            "output_tokens_per_s": out_tokens / measured_s,
        },
        "goodput": {
            "slo_attainment": float(met.mean()) if len(measured) else None,
            "slo_attainment_denominator": ATTAINMENT_DENOMINATOR,
            "slo_met_requests": good,
            "measured_requests": len(measured),
            "requests_per_s": good / measured_s,
            "requests_per_gpu_s": good / max(measured_gpu_s, 1e-12) if gpus else None,
            "slo_pass_rate": slo_pass_rates(measured, slos),
            "slo_targets_ms": slo_targets_ms(slos),
        },
        "speculation": {
            "verify_steps": rounds,
            "drafted_tokens": drafted,
            "accepted_tokens": accepted,
            "acceptance_rate": accepted / drafted if drafted else None,
            "mean_tokens_per_verify": committed_by_rounds / rounds if rounds else None,
            "mean_k": drafted / rounds if rounds else None,
            "requests_by_draft_model": {
                str(name): int(count)
                for name, count in sorted(
                    measured.loc[measured["draft_model"] != "", "draft_model"]
                    .value_counts()
                    .items()
                )
            },
        },
        "fairness": {
            "jain_index": jain_index(speeds),
            "slo_attainment_by_class": _attainment_by(measured, met, "slo_class"),
            "slo_attainment_by_device": _attainment_by(measured, met, "origin"),
        },
        "by_category": by_category(measured, met),
        "resources": {
            "gpu_utilization": float(busy.sum() / held.sum())
            if len(busy) and held.sum() > 0
            else None,
            "gpu_utilization_by_pool": {
                pool: float(
                    busy[[p == pool for p in output.replica_pools]].sum()
                    / held[[p == pool for p in output.replica_pools]].sum()
                )
                if output.simulated_s > 0
                else None
                for pool in sorted(set(output.replica_pools))
            },
            **lane_gpu_clocks(output.replica_gpu_time, held),
            "kv_occupancy_mean": float(np.mean(output.kv_occupancy_mean))
            if output.kv_occupancy_mean
            else None,
            "gpu_hours": run_gpu_s / 3600.0,
            "network_bytes": float(sum(output.network_bytes.values())),
            "network_bytes_by_link": dict(output.network_bytes),
        },
        "energy": energy,
        "cost": cost,
    }
    if output.prefix_cache is not None:
        summary["prefix_cache"] = prefix_cache_summary(output.prefix_cache)
    if output.disaggregation is not None:
        summary["disaggregation"] = disaggregation_summary(output, output.disaggregation, held)
    cleaned: dict[str, Any] = _clean(summary)
    return cleaned


def lane_gpu_clocks(
    gpu_time: Sequence[GpuTime | None], held_s: np.ndarray
) -> dict[str, float | None]:
    """``gpu_kernel_active`` and ``gpu_work_rate`` over the replicas that run lanes.

    ``gpu_kernel_active``: the share of their held time during which a GPU pass
    ran (what ``nvidia-smi`` reports as utilisation: some kernel executing;
    host time, when the engine launches from the CPU, does not count).
    ``gpu_work_rate``: the GPU work they got through per held second, each pass
    counted at its standalone (LUT) speed; above ``gpu_kernel_active`` when
    overlapping passes progressed faster together than one alone. ``None``
    when no replica runs lanes (only a lane replica's iterations are split into
    host and GPU segments; ``gpu_utilization`` covers every replica).
    """
    lanes = [i for i, clocks in enumerate(gpu_time) if clocks is not None]
    held = float(held_s[lanes].sum()) if lanes else 0.0
    if held <= 0:
        return {"gpu_kernel_active": None, "gpu_work_rate": None}
    active = sum(clocks.active_s for clocks in gpu_time if clocks is not None)
    work = sum(clocks.work_s for clocks in gpu_time if clocks is not None)
    return {"gpu_kernel_active": active / held, "gpu_work_rate": work / held}


def _clean(value: Any, where: str = "") -> Any:
    """Replace NaN (no value) by None and numpy scalars by Python numbers (JSON-safe).

    Raises:
        NonFiniteResult: A value is infinite (an overflow, never "no value").
    """
    if isinstance(value, dict):
        return {k: _clean(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (np.floating, float)):
        if math.isinf(value):
            raise NonFiniteResult("summary.json", where, float(value))
        return _finite(float(value))
    if isinstance(value, np.integer):
        return int(value)
    return value
