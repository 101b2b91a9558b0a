"""The mutable state of one request while the engine runs it, frozen into its record at the end."""

from __future__ import annotations

import math
from dataclasses import fields
from operator import attrgetter
from typing import Protocol

import numpy as np

from simulator.acceptance import AcceptanceModel
from simulator.engine.network import Channel
from simulator.engine.records import RequestColumns, RequestRecord

NAN = math.nan
INF = math.inf

OUTCOMES = ("completed", "rejected", "unfinished")


class Drafter(Protocol):
    """The client device drafting for a distributed request, as the lifecycle drives it."""

    def context_window(self, req: RequestState, slot: int = -1) -> float:
        """Longest context the LUTs of the request's drafter model (or model ``slot``) cover."""
        ...

    def can_ever_fit(self, req: RequestState, slot: int = -1) -> bool:
        """Whether the request's KV (with model ``slot``, default its own) fits the budget at all."""
        ...

    def admit(self, req: RequestState) -> None:
        """Take a request from the device's user (it may wait for a slot)."""
        ...

    def on_first_token(self, req: RequestState) -> None:
        """The target's first token reached the device."""
        ...

    def next_round(self, req: RequestState) -> None:
        """Draft the request's next round."""
        ...

    def resume(self, req: RequestState) -> None:
        """Take a request already past both prefills (a what-if window's start)."""
        ...

    def finish(self, req: RequestState) -> None:
        """The request ended: free its slot."""
        ...

    def serves(self, req: RequestState) -> bool:
        """Whether the request holds one of the device's slots (it drafts, or will, there)."""
        ...

    def queued(self) -> list[RequestState]:
        """The requests waiting for a slot of the device, in the order they will take one."""
        ...


class RequestState:
    """Progress of one request; owned and mutated by the engine only.

    Times are simulated seconds. ``generated`` counts output tokens the
    target has committed (the first comes from prefill; each speculation
    round adds the accepted draft tokens plus one). What a request needs on
    every round (its drafter's acceptance curve, its draft device, its link
    channels) is resolved once, when it is admitted.
    """

    __slots__ = (
        "acceptance",
        "acceptance_recent",
        "accepted",
        "arrival_s",
        "category",
        "deferred",
        "device",
        "downlink",
        "draft_energy_j",
        "draft_model",
        "draft_slot",
        "drafted",
        "drafter",
        "finish_s",
        "finish_server_s",
        "first_token_s",
        "first_token_server_s",
        "generated",
        "k",
        "kv_mb",
        "kv_peak_mb",
        "mode",
        "origin",
        "outcome",
        "output_tokens",
        "preemptions",
        "prefill_estimate_s",
        "prefilled",
        "prompt_tokens",
        "ready_s",
        "reason",
        "replica",
        "request_id",
        "round_sent_s",
        "rounds",
        "slo_class",
        "spilled",
        "target_energy_j",
        "tpot_origin_s",
        "tpot_slo_s",
        "ttft_slo_s",
        "tvt_max_s",
        "tvt_slo_s",
        "uplink",
    )

    def __init__(
        self,
        request_id: int,
        arrival_s: float,
        prompt_tokens: int,
        output_tokens: int,
        slo_class: str,
        origin: str,
        category: str = "",
    ) -> None:
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.slo_class = slo_class
        self.origin = origin
        self.category = category
        """Its task category ("" for none): picks its acceptance bins."""
        self.device = -1
        self.mode = ""
        self.replica = -1
        self.generated = 0
        self.k = 0
        self.drafted = 0
        self.accepted = 0
        self.acceptance_recent = NAN
        """Moving average of the per-round acceptance (kept for adaptive k controllers)."""
        self.rounds = 0
        self.round_sent_s = NAN
        self.tvt_max_s = NAN
        self.first_token_server_s = NAN
        self.first_token_s = NAN
        self.finish_server_s = NAN
        self.finish_s = NAN
        self.ready_s = NAN
        self.kv_mb = 0.0
        self.kv_peak_mb = 0.0
        self.draft_energy_j = 0.0
        self.target_energy_j = 0.0
        self.preemptions = 0
        self.spilled = False
        """Moved from the distributed path to fused mode (``kv_aware_edf`` spill)."""
        self.prefilled = 0
        """Context tokens already computed by a prefill under way in chunks."""
        self.ttft_slo_s = INF
        """The request's TTFT target, seconds (set once when it arrives)."""
        self.tpot_slo_s = INF
        """Its TPOT target, seconds."""
        self.tvt_slo_s = INF
        """Its TVT target, seconds (``inf`` when its class has none)."""
        self.tpot_origin_s = INF
        """Origin of its TPOT deadlines: output token ``n + 1`` is due at
        ``tpot_origin_s + n * tpot_slo_s`` (the server's first-token time)."""
        self.deferred = False
        """Whether admission deferred it at least once."""
        self.prefill_estimate_s = 0.0
        """Its predicted prefill time while counted in its replica's predicted
        prefill queue (only kept for admission policies that predict TTFT)."""
        self.outcome = "unfinished"
        self.reason = ""
        self.acceptance: AcceptanceModel | None = None
        self.drafter: Drafter | None = None
        self.draft_slot = 0
        """Index of its drafter model among its draft class's models."""
        self.draft_model = ""
        """Name of the drafter model drafting for it ("" when it does not draft)."""
        self.uplink: Channel | None = None
        self.downlink: Channel | None = None

    @property
    def context(self) -> int:
        """Tokens of context: prompt plus committed output."""
        return self.prompt_tokens + self.generated

    @property
    def remaining(self) -> int:
        """Output tokens still to produce."""
        return self.output_tokens - self.generated


def next_token_due_s(req: RequestState) -> float:
    """When the request's next output token is due to keep it on its TPOT pace.

    Token ``n + 1`` is due ``n`` TPOTs after the first, ``n`` the tokens
    committed so far (the deadline of its decode, fused, verify without a TVT
    target, and draft steps; see ``policies/README.md``).
    """
    return req.tpot_origin_s + req.generated * req.tpot_slo_s


def to_record(state: RequestState) -> RequestRecord:
    """Freeze a request's final state into its record."""
    done = state.outcome == "completed"
    ttft = (state.first_token_s - state.arrival_s) * 1000.0
    ttft_server = (state.first_token_server_s - state.arrival_s) * 1000.0
    if done and state.output_tokens > 1:
        tpot = (state.finish_s - state.first_token_s) * 1000.0 / (state.output_tokens - 1)
    else:
        tpot = NAN
    return RequestRecord(
        request_id=state.request_id,
        arrival_s=state.arrival_s,
        slo_class=state.slo_class,
        origin=state.origin,
        category=state.category,
        device=state.device,
        mode=state.mode,
        replica=state.replica,
        prompt_tokens=state.prompt_tokens,
        output_tokens=state.output_tokens,
        generated_tokens=state.generated,
        outcome=state.outcome,
        reason=state.reason,
        ttft_ms=ttft,
        ttft_server_ms=ttft_server,
        tpot_ms=tpot,
        tvt_ms=state.tvt_max_s * 1000.0,
        e2e_ms=(state.finish_s - state.arrival_s) * 1000.0 if done else NAN,
        drafted_tokens=state.drafted,
        accepted_tokens=state.accepted,
        verify_rounds=state.rounds,
        draft_energy_j=state.draft_energy_j,
        target_energy_j=state.target_energy_j,
        kv_peak_mb=state.kv_peak_mb,
        preemptions=state.preemptions,
        draft_model=state.draft_model,
        spilled=state.spilled,
    )


COLUMN_CHUNK = 8192
"""States tabulated at a time by :func:`record_columns` (and freed after, when consumed)."""

_DTYPES = {"int": np.int64, "float": np.float64, "bool": np.bool_, "str": object}
_COLUMN_DTYPES = {f.name: _DTYPES[str(f.type)] for f in fields(RequestRecord)}
_STATE_FIELDS = {
    "request_id": "request_id",
    "arrival_s": "arrival_s",
    "slo_class": "slo_class",
    "origin": "origin",
    "category": "category",
    "device": "device",
    "mode": "mode",
    "replica": "replica",
    "prompt_tokens": "prompt_tokens",
    "output_tokens": "output_tokens",
    "generated_tokens": "generated",
    "outcome": "outcome",
    "reason": "reason",
    "drafted_tokens": "drafted",
    "accepted_tokens": "accepted",
    "verify_rounds": "rounds",
    "draft_energy_j": "draft_energy_j",
    "target_energy_j": "target_energy_j",
    "kv_peak_mb": "kv_peak_mb",
    "preemptions": "preemptions",
    "draft_model": "draft_model",
    "spilled": "spilled",
}
"""Record fields copied from a state attribute as they are (the others are derived)."""


def record_columns(states: list[RequestState], consume: bool = False) -> RequestColumns:
    """Tabulate the states' records as columns: what :func:`to_record` gives, row by row.

    The derived latencies are computed with the same float operations as
    :func:`to_record` (elementwise, so the values are identical).

    Args:
        states: The requests to report, in report order.
        consume: Remove the states from ``states`` as they are tabulated (the
            list ends empty), so a state no longer referenced elsewhere is
            freed before the next are read: the columns never sit beside
            every state.
    """
    n = len(states)
    columns: dict[str, np.ndarray] = {
        name: np.empty(n, dtype=dtype) for name, dtype in _COLUMN_DTYPES.items()
    }
    at = 0
    while at < n:
        if consume:
            chunk = states[:COLUMN_CHUNK]
            del states[:COLUMN_CHUNK]
        else:
            chunk = states[at : at + COLUMN_CHUNK]
        _fill(columns, chunk, at)
        at += len(chunk)
    return RequestColumns(columns)


def _fill(columns: dict[str, np.ndarray], chunk: list[RequestState], at: int) -> None:
    """Write the records of ``chunk`` into ``columns`` from row ``at`` on."""
    m = len(chunk)
    rows = slice(at, at + m)

    def values(attr: str, dtype: type) -> np.ndarray:
        return np.fromiter(map(attrgetter(attr), chunk), dtype=dtype, count=m)

    for name, attr in _STATE_FIELDS.items():
        columns[name][rows] = values(attr, _COLUMN_DTYPES[name])
    done = columns["outcome"][rows] == "completed"
    arrival = columns["arrival_s"][rows]
    first = values("first_token_s", np.float64)
    finish = values("finish_s", np.float64)
    output = columns["output_tokens"][rows]
    columns["ttft_ms"][rows] = (first - arrival) * 1000.0
    server_first = values("first_token_server_s", np.float64)
    columns["ttft_server_ms"][rows] = (server_first - arrival) * 1000.0
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = (finish - first) * 1000.0 / (output - 1)
    columns["tpot_ms"][rows] = np.where(done & (output > 1), tpot, NAN)
    columns["tvt_ms"][rows] = values("tvt_max_s", np.float64) * 1000.0
    columns["e2e_ms"][rows] = np.where(done, (finish - arrival) * 1000.0, NAN)


def past_first_token(req: RequestState, now_s: float) -> None:
    """A what-if window's request past its first token: the times its run had not set are the start's."""
    if math.isnan(req.first_token_server_s):
        req.first_token_server_s = now_s
    if not math.isfinite(req.tpot_origin_s):
        req.tpot_origin_s = req.first_token_server_s
    if math.isnan(req.first_token_s):
        req.first_token_s = now_s
