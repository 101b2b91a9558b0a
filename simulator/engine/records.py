"""What a run reports: one record per request, the requests a what-if window takes up, the flat output.

Plain frozen values with no behaviour: the metrics layer, the planner and
the runner read them without importing the engine's kernel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from simulator.engine.gpu_share import GpuTime
from simulator.engine.kv_records import DisaggregationOutput
from simulator.engine.prefix_cache import PrefixCacheOutput
from simulator.engine.usage import ClassUsage


@dataclass(frozen=True)
class RequestRecord:
    """What one request experienced: one row of ``requests.csv``.

    Latencies are milliseconds; ``nan`` where a quantity does not apply
    (e.g. TVT without speculation rounds, anything of a rejected request).
    """

    request_id: int
    arrival_s: float
    slo_class: str
    origin: str
    category: str
    device: int
    mode: str
    replica: int
    prompt_tokens: int
    output_tokens: int
    generated_tokens: int
    outcome: str
    reason: str
    ttft_ms: float
    ttft_server_ms: float
    tpot_ms: float
    tvt_ms: float
    e2e_ms: float
    drafted_tokens: int
    accepted_tokens: int
    verify_rounds: int
    draft_energy_j: float
    target_energy_j: float
    kv_peak_mb: float
    preemptions: int
    draft_model: str
    spilled: bool


REQUEST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))
"""The fields of :class:`RequestRecord`: the columns of ``requests.csv``, in order."""


@dataclass(frozen=True)
class RequestColumns:
    """The records of a run held as columns: one array per field of :class:`RequestRecord`.

    A run of a million requests keeps its results as a few arrays instead of
    a million objects; :meth:`records` builds the objects where they are
    wanted (a planner's small windows, tests).

    Attributes:
        columns: Field name -> its values, one per request in report order
            (``int64``, ``float64`` or ``bool`` arrays; ``object`` arrays of
            ``str`` for the text fields).
    """

    columns: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        if not self.columns:
            return 0
        return len(self.columns[REQUEST_COLUMNS[0]])

    def records(self) -> tuple[RequestRecord, ...]:
        """The rows as :class:`RequestRecord` objects (plain Python values)."""
        if not len(self):
            return ()
        lists = [self.columns[name].tolist() for name in REQUEST_COLUMNS]
        return tuple(RequestRecord(*row) for row in zip(*lists, strict=True))


@dataclass(frozen=True)
class InFlight:
    """A request of a run that was unfinished when it stopped: where a what-if window takes it up.

    The timing fields are on the run's absolute clock, so a window started
    at the stop time (``Engine(..., start_s=...)``) reports the request's
    TTFT from its real arrival and its TPOT from its real first token.

    Attributes:
        request_id: Its id.
        prompt_tokens: Prompt length.
        output_tokens: Requested output length.
        generated: Output tokens already produced (0: still waiting for prefill).
        slo_class: Its SLO class.
        origin: Its client device class ("" if none).
        replica: Global index of the replica serving it (-1: not admitted yet).
        mode: ``none``, ``fused`` or ``distributed`` ("" when not admitted yet).
        device: Index of its device within the origin class (-1 if none).
        arrival_s: When it arrived.
        first_token_server_s: When its first token was made (``nan``: not yet).
        first_token_s: When its first token reached the client (``nan``: not yet).
        tpot_origin_s: Origin of its TPOT deadlines (``inf``: not set yet).
        tvt_max_s: Its longest TVT so far (``nan``: no round timed yet).
        drafted: Draft tokens proposed so far.
        accepted: Draft tokens accepted so far.
        rounds: Verify rounds so far.
        preemptions: Times it was preempted so far.
        kv_peak_mb: Its peak target KV so far.
        draft_energy_j: Energy its drafting used so far.
        target_energy_j: Energy its target iterations used so far.
        deferred: Whether admission deferred it.
        spilled: Whether it moved from distributed to fused.
        acceptance_recent: Its moving per-round acceptance (``nan``: no round yet).
        draft_slot: Index of its drafter model among its class's models.
        category: Its task category ("" if none).
        kv_from: Disaggregated fleets: global index of the prefill replica holding
            its KV while the KV waits for a decode replica or moves to ``replica``
            (-1: none).
        kv_arrive_s: When its KV reaches ``replica`` (``nan``: waiting for a decode
            replica, or no hand-over under way).
        kv_since_s: When its hand-over began (its prefill ended).
        kv_rank: Its place in the queue of requests waiting for a decode replica
            (-1: not waiting).
        recompute: Past its first token, it holds no KV on ``replica``: it was
            preempted and waits to recompute its context there (queued for
            prefill, or parked while its device drafts).
    """

    request_id: int
    prompt_tokens: int
    output_tokens: int
    generated: int
    slo_class: str
    origin: str
    replica: int
    mode: str
    device: int = -1
    arrival_s: float = 0.0
    first_token_server_s: float = math.nan
    first_token_s: float = math.nan
    tpot_origin_s: float = math.inf
    tvt_max_s: float = math.nan
    drafted: int = 0
    accepted: int = 0
    rounds: int = 0
    preemptions: int = 0
    kv_peak_mb: float = 0.0
    draft_energy_j: float = 0.0
    target_energy_j: float = 0.0
    deferred: bool = False
    spilled: bool = False
    acceptance_recent: float = math.nan
    draft_slot: int = 0
    category: str = ""
    kv_from: int = -1
    kv_arrive_s: float = math.nan
    kv_since_s: float = math.nan
    kv_rank: int = -1
    recompute: bool = False


@dataclass(frozen=True)
class EngineOutput:
    """Flat results of a run, for the metrics layer."""

    requests: RequestColumns
    """One row per arrived request, in arrival order (see :attr:`records`)."""
    timeseries: Mapping[str, Any]
    """The periodic samples as columns: name -> one value per row (``{}``: no rows)."""
    simulated_s: float
    replica_busy_s: tuple[float, ...]
    replica_pools: tuple[str, ...]
    replica_gpus: tuple[int, ...]
    replica_energy_j: tuple[float, ...]
    replica_idle_power_w: tuple[float | None, ...]
    replica_usd_per_hour: tuple[float | None, ...]
    kv_occupancy_mean: tuple[float, ...]
    device_energy_j: float
    device_busy_s: float
    network_bytes: dict[str, float]
    device_classes: tuple[ClassUsage, ...] = ()
    """Per device class: busy time, energy, idle power and price (scenario order)."""
    replica_gpu_time: tuple[GpuTime | None, ...] = ()
    """Per replica that runs lanes, its shared GPU's busy clocks (``None`` otherwise)."""
    in_flight: tuple[InFlight, ...] = ()
    """Requests arrived and unfinished when the run stopped: the records a what-if
    window of another configuration starting at ``simulated_s`` continues from."""
    not_arrived: int = 0
    """Requests of the table still due when the run stopped (not in ``records``)."""
    stalled_at_s: float | None = None
    """A run to completion that ran out of events with requests unfinished: when its
    last event ran (those requests wait on each other; ``None``: it did not stall)."""
    replica_spans_s: tuple[tuple[float, float], ...] = ()
    """Runs with a planner: when each replica started holding its GPUs (added, or the
    run's start) and when it stopped (retired; the end of the run if it did not).
    Empty: every replica held its GPUs for the whole run."""
    planner_rounds: tuple[dict[str, Any], ...] = ()
    """Runs with a planner: its decisions, one row per candidate per round."""
    prefix_cache: PrefixCacheOutput | None = None
    """Runs with a prefix cache: its counts per replica and cached tokens per request."""
    disaggregation: DisaggregationOutput | None = None
    """Runs with prefill and decode pools: their KV transfers."""

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        """One :class:`RequestRecord` per arrived request, in arrival order (built on each call)."""
        return self.requests.records()
