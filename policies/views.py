"""Read-only snapshots the engine hands to policies.

Policies never see the engine's mutable state: they get small frozen records
describing exactly what a decision needs, and return a decision record. The
records made once per queued item or per speculation round are named tuples
(cheap to build on the engine's hot path); the others are frozen dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class QueuedItem(NamedTuple):
    """A request waiting in a queue for an iteration.

    Attributes:
        request_id: The request's id.
        enqueued_s: Simulated time at which it joined this queue.
        deadline_s: The time by which its next SLO-relevant event is due
            (used by deadline-aware policies): for a prompt awaiting prefill,
            arrival + TTFT target; for a verify bundle of a class with a TVT
            target, the time it was sent + TVT target; for any other decode,
            fused, verify or draft step, the time its next output token is due
            to keep the request on its TPOT pace (the target's first-token
            time + output tokens so far × TPOT target). See
            ``policies/README.md``. ``inf`` when no target applies.
        context_len: Tokens of context the iteration attends over.
        new_tokens: Tokens the iteration processes for this request.
        kv_need_mb: KV memory the iteration would add for this request (a
            verify step: its ``new_tokens`` at the verifier's KV per token
            when KV grows per token, 0 when it was reserved at prefill).
            Filled only for verify work and a policy whose class sets
            ``reads_kv = True`` (0 otherwise); see ``policies/README.md``.
        kv_free_mb: The replica's free KV memory now (same condition;
            ``inf`` otherwise).
        prefill_s: For a prompt awaiting prefill: the predicted duration of a
            prefill batch made of the waiting items up to and including this
            one, in queue order (the LUT's batch prefill time). Filled only
            for a prefill policy whose class sets ``predicts_ttft = True``
            (0 otherwise).
    """

    request_id: int
    enqueued_s: float
    deadline_s: float
    context_len: int
    new_tokens: int
    kv_need_mb: float = 0.0
    kv_free_mb: float = math.inf
    prefill_s: float = 0.0


class BatchChoice(NamedTuple):
    """A batching decision.

    Attributes:
        take: Indices (into the waiting sequence) of the items to run now, in
            the order they join the batch; empty to wait.
        wake_at_s: When ``take`` is empty, the time at which the policy wants
            to be asked again even if nothing else changes (``None``: only
            when the queue changes).
        spill: Indices of verify items to move to fused mode on the replica
            instead of running them (``kv_aware_edf`` with ``spill_fused``);
            ignored for other work.
    """

    take: tuple[int, ...]
    wake_at_s: float | None = None
    spill: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReplicaLoad:
    """The load of one target replica, as a router sees it.

    Attributes:
        index: Replica index over all target pools (scenario order).
        outstanding_requests: Requests routed to it and not yet finished.
        kv_free_mb: KV cache memory currently free.
        pool: Its target pool (class id).
        kv_capacity_mb: Its whole KV budget.
        kv_need_mb: KV the request being routed must hold there to be
            prefilled (as its prefill lane reserves it; see
            ``scheduler.kv.on_full``).
        predicted_queue_s: Its predicted prefill queue: the batch-1 prefill
            time (from its LUT) of every request admitted to it whose first
            token is not out yet (the admission TTFT predictor's queue; with
            a prefix cache, less what each found cached when admitted).
        link_rtt_ms: Round-trip time of the request's origin link to its
            pool (0 for a request without origin).
        link_bw_mbps: Bandwidth of that link (``inf`` without origin).
        cached_prefix_tokens: Prompt tokens of the request its prefix cache
            holds now (``scheduler.kv.prefix_cache``; filled only for a router
            whose class sets ``reads_prefix = True``, else 0).
        kv_transfer_s: Choosing a disaggregated fleet's decode replica
            (``scheduler.routing.decode``): the nominal time to move the
            request's KV there from its prefill replica (bytes / bandwidth +
            RTT / 2 of the link between their pools, on an idle link). 0 when
            routing a new request.

    Choosing a decode replica, every field is filled: ``link_rtt_ms`` and
    ``link_bw_mbps`` are those of the link carrying the KV from the prefill
    replica's pool, ``kv_need_mb`` what the decode replica reserves for the
    request, and ``predicted_queue_s`` is 0 (decode replicas prefill nothing).

    The fields after ``kv_free_mb`` up to ``link_bw_mbps`` are filled only for
    a router whose class sets ``reads_replica_detail = True``; otherwise they
    keep their defaults.
    """

    index: int
    outstanding_requests: int
    kv_free_mb: float
    pool: str = ""
    kv_capacity_mb: float = math.inf
    kv_need_mb: float = 0.0
    predicted_queue_s: float = 0.0
    link_rtt_ms: float = 0.0
    link_bw_mbps: float = math.inf
    cached_prefix_tokens: int = 0
    kv_transfer_s: float = 0.0


@dataclass(frozen=True)
class RoutingQuery:
    """One routing decision's input.

    Attributes:
        request_id: The request to place.
        origin: The client device class it came from ("" if none).
        prompt_tokens: Its prompt length.
        kv_from: Choosing a disaggregated fleet's decode replica: the index of
            the prefill replica holding the request's KV (-1 when routing a new
            request).
    """

    request_id: int
    origin: str
    prompt_tokens: int
    kv_from: int = -1


class StepPredictor(Protocol):
    """Predicted duration of a decode-lane iteration on one replica, from its LUT."""

    def step_s(self, batch: int, k: int, context_len: float) -> float:
        """Latency of one iteration of ``batch`` requests of mean context ``context_len``.

        ``k`` is the draft length every request of the batch verifies (its
        replica's verify or fused LUT phase); ``k = 0`` is a plain decode step
        (``inf`` where the replica cannot run one). Thermal throttling is not
        included.
        """
        ...


class KSignals(NamedTuple):
    """What a draft-length controller may look at.

    Attributes:
        now_s: Simulated time.
        k_current: The k of the previous round of this request.
        k_min: Smallest allowed k (0: a round without speculation, mode distributed only).
        k_max: Largest allowed k.
        acceptance_rate: Recent accepted / drafted tokens (``nan`` before any round).
        verify_queue_len: Requests waiting in the request's decode lane on its replica
            (verify steps, or fused steps for a fused request).
        context_len: The request's current context length.
        replica: Index of the request's target replica (``-1`` when not given);
            controllers keep per-replica state under it.
        request_acceptance: Exponentially weighted moving average of the
            request's per-round acceptance (accepted / drafted tokens of a
            round), weight 0.3 on the newest round (``nan`` before any round).
        window_acceptance: Accepted / drafted tokens over the replica's last
            ``signal_window`` verified rounds (``nan`` before any).
        running_batch: Requests running on the replica (holding KV: prefilled
            or being prefilled, not finished).
        decode_p95_ms: 95th percentile of the replica's last ``signal_window``
            decode-lane iteration latencies (``nan`` before any).
        queue_delay_ms: Mean time the replica's last ``signal_window``
            speculative steps' requests (verify or fused) waited in its queue
            before their step started (``nan`` before any).
        predictor: The request's replica's iteration-time predictor for the
            request's decode-lane work (verify or fused), filled only for a
            controller whose class sets ``predicts_iteration = True``
            (``None`` otherwise).

    The fields after ``context_len`` are filled only for controllers whose
    ``signal_window`` is positive; otherwise they keep their defaults.
    """

    now_s: float
    k_current: int
    k_min: int
    k_max: int
    acceptance_rate: float
    verify_queue_len: int
    context_len: int
    replica: int = -1
    request_acceptance: float = math.nan
    window_acceptance: float = math.nan
    running_batch: int = 0
    decode_p95_ms: float = math.nan
    queue_delay_ms: float = math.nan
    predictor: StepPredictor | None = None


@dataclass(frozen=True)
class AdmissionQuery:
    """One admission decision's input.

    Attributes:
        now_s: Simulated time.
        request_id: The arriving request.
        prompt_tokens: Its prompt length.
        output_tokens: Its requested output length.
        ttft_slo_ms: Its TTFT target.
        queued_requests: Requests admitted and not yet finished, system-wide.
        kv_free_mb: Free KV memory summed over replicas.
        waited_s: How long it has waited for admission (0 when it has just
            arrived; more when it was deferred). It counts in its TTFT.
        tpot_slo_ms: Its TPOT target.
        predicted_queue_s: Predicted wait for prefill on the candidate
            replica where its predicted TTFT is smallest: the batch-1 prefill
            time (from the LUT) of every prompt admitted to that replica and
            not yet prefilled. Filled only for a policy whose class sets
            ``predicts_ttft = True`` (0 otherwise); see ``policies/README.md``.
        predicted_prefill_s: Its own batch-1 prefill time on that replica
            (same condition).
        kv_need_mb: KV it must hold there to be prefilled (same condition).
        replica_kv_free_mb: Free KV of that replica (same condition; ``inf``
            otherwise).
    """

    now_s: float
    request_id: int
    prompt_tokens: int
    output_tokens: int
    ttft_slo_ms: float
    queued_requests: int
    kv_free_mb: float
    waited_s: float = 0.0
    tpot_slo_ms: float = float("inf")
    predicted_queue_s: float = 0.0
    predicted_prefill_s: float = 0.0
    kv_need_mb: float = 0.0
    replica_kv_free_mb: float = float("inf")


@dataclass(frozen=True)
class AdmissionDecision:
    """Admit, reject with a reason recorded in the request's outcome, or defer.

    Attributes:
        admit: Whether the request enters the system now.
        reason: Why not (recorded as the outcome's reason when rejected).
        defer: When not admitted: hold the request and ask again later
            instead of rejecting it (see ``policies/README.md``, deferral).
        retry_at_s: With ``defer``: also ask again at this time (``None``:
            only when a request ends or arrives). A time not after now is
            ignored.
    """

    admit: bool
    reason: str = ""
    defer: bool = False
    retry_at_s: float | None = None


@dataclass(frozen=True)
class ModeQuery:
    """Input of the per-request mode choice in hybrid serving.

    Attributes:
        origin: The client device class.
        link_rtt_ms: Round-trip time of the origin's link to the targets (in a
            disaggregated fleet, to the decode pool, where its rounds would run).
        link_bw_mbps: Bandwidth of that link.
        target_outstanding_requests: Requests outstanding on the target pool.
        k: Draft length of the request's first round (``speculation.k``).
        draft_s: Time of ``k`` draft-model decode steps on the origin's
            device (batch 1, at the prompt's context, from its LUT).
        verify_s: Time of one batch-1 verify step of ``k`` drafts on the
            chosen replica (from its LUT).
        transfer_s: Serialisation time of one round's bytes on the link:
            ``k`` drafted tokens up and the expected committed tokens down, at
            ``link_bw_mbps`` (the RTT is ``link_rtt_ms``, apart).
        distributed_tokens: Expected tokens one distributed round commits,
            E[accepted] + 1, from the origin's drafter acceptance curve.
        fused_step_s: Time of one batch-1 fused draft + verify step of ``k``
            on the chosen replica (from its LUT).
        fused_tokens: Expected tokens one fused round commits, from the
            replica's fused acceptance curve.

    The fields after ``target_outstanding_requests`` are filled only for a
    policy whose class sets ``predicts_latency = True`` (``nan`` otherwise).
    """

    origin: str
    link_rtt_ms: float
    link_bw_mbps: float
    target_outstanding_requests: int
    k: int = 0
    draft_s: float = math.nan
    verify_s: float = math.nan
    transfer_s: float = math.nan
    distributed_tokens: float = math.nan
    fused_step_s: float = math.nan
    fused_tokens: float = math.nan


class DraftCandidate(NamedTuple):
    """One drafter model a draft device could run for a request, with its predictions.

    Attributes:
        name: The model's scenario name (``speculation.drafter_models[].name``).
        acceptance: Predicted mean accepted fraction of a ``k``-token draft,
            E[A] / k, from the model's acceptance curve at the request's
            prompt context (for an iid curve: what its per-token α gives).
        expected_tokens: Predicted tokens one verify round commits, E[A + 1],
            from the same curve at ``k`` and the prompt context (for an iid
            curve with per-token acceptance α: (1 − α^(k+1)) / (1 − α)).
        draft_step_s: One batch-1 draft iteration of the model on the
            request's device at the prompt context (its ``draft_decode`` LUT).
        weights_mb: Memory the model holds on the device besides KV, from
            its prefill LUT (peak memory less KV at the smallest grid point).
    """

    name: str
    acceptance: float
    expected_tokens: float
    draft_step_s: float
    weights_mb: float


class DraftModelQuery(NamedTuple):
    """Input of the per-request drafter-model choice.

    Attributes:
        request_id: The request.
        origin: Its client device class.
        prompt_tokens: Its prompt length (the context of every prediction).
        k: The draft length of its first round (``speculation.k``).
        verify_step_s: One batch-1 verify iteration of ``k`` draft tokens on
            its target replica at the prompt context (the verifier's LUT).
        candidates: The models its device may run for it, in the order of
            ``hardware_profiles[].model``: those whose LUTs cover the
            request's longest context and whose KV for it fits the device's
            KV budget.
    """

    request_id: int
    origin: str
    prompt_tokens: int
    k: int
    verify_step_s: float
    candidates: tuple[DraftCandidate, ...]


class RoundOutcome(NamedTuple):
    """A verified round, reported to the k controller that chose its k.

    Attributes:
        now_s: Simulated time the verify step ended.
        replica: Index of the target replica that verified it.
        k: Draft tokens of the round.
        accepted: Draft tokens accepted.
        gained: Tokens committed (accepted plus the bonus token, capped at the output).
        target_s: Duration of the target iteration that verified it.
    """

    now_s: float
    replica: int
    k: int
    accepted: int
    gained: int
    target_s: float
