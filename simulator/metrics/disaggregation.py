"""The ``disaggregation`` section of ``summary.json`` (runs with prefill and decode pools)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.engine.kv_records import DisaggregationOutput
from simulator.engine.records import EngineOutput

ROLES = ("prefill", "decode")
KV_COLUMNS = ("prefill_replica", "kv_wait_ms", "kv_transfer_ms")
"""The ``requests.csv`` columns a disaggregated run adds (after the others, before the SLO flags)."""


def _percentiles_ms(values_s: list[float]) -> dict[str, float | None]:
    if not values_s:
        return {"p50": None, "p99": None}
    ms = np.asarray(values_s) * 1000.0
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99))}


def disaggregation_summary(
    output: EngineOutput, disaggregation: DisaggregationOutput, held_s: np.ndarray
) -> dict[str, Any]:
    """KV moved, transfer and wait times, and each role's utilisation and GPU-hours.

    Transfers cover the whole run (warm-up included). ``transfer_ms`` runs
    from the start of a transfer to the arrival of its last byte;
    ``kv_wait_ms`` from the end of a request's prefill to the start of its
    transfer (waiting for a decode replica with room). A role's
    ``gpu_utilization`` is its replicas' busy time over the time they were
    part of the run; its ``gpu_hours`` their GPUs times that time.
    """
    records = disaggregation.transfers
    busy = np.asarray(output.replica_busy_s)
    gpus = np.asarray(output.replica_gpus, dtype=float)
    roles = disaggregation.replica_roles
    by_role: dict[str, Any] = {}
    for role in ROLES:
        mask = np.asarray([r == role for r in roles])
        held = float(held_s[mask].sum())
        by_role[role] = {
            "replicas": int(mask.sum()),
            "gpu_utilization": float(busy[mask].sum() / held) if held > 0 else None,
            "gpu_hours": float((gpus[mask] * held_s[mask]).sum() / 3600.0),
        }
    return {
        "transfers": len(records),
        "kv_bytes_moved": float(sum(r.nbytes for r in records)),
        "transfer_ms": _percentiles_ms([r.transfer_s for r in records]),
        "kv_wait_ms": _percentiles_ms([r.wait_s for r in records]),
        "waiting_at_end": disaggregation.waiting_at_end,
        "by_role": by_role,
    }


def add_transfer_columns(frame: pd.DataFrame, disaggregation: DisaggregationOutput) -> None:
    """Add each request's prefill replica, KV wait and KV transfer time to ``requests.csv``.

    ``replica`` stays the replica the request ended on (its decode replica
    once its KV moved). A request whose KV never moved (a one-token request,
    or one still waiting or rejected) has its ``replica`` as
    ``prefill_replica`` and empty times.
    """
    by_id = {r.request_id: r for r in disaggregation.transfers}
    ids = [int(i) for i in frame["request_id"]]
    records = [by_id.get(i) for i in ids]
    frame["prefill_replica"] = [
        r.prefill_replica if r is not None else int(replica)
        for r, replica in zip(records, frame["replica"], strict=True)
    ]
    frame["kv_wait_ms"] = [r.wait_s * 1000.0 if r is not None else np.nan for r in records]
    frame["kv_transfer_ms"] = [r.transfer_s * 1000.0 if r is not None else np.nan for r in records]
