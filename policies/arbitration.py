"""Lane arbitration on a target replica: which lane's work forms the next iteration.

A replica is a set of lanes (prefill, and the decode lane that runs plain
decode, verify or fused work) plus an arbitration rule. At every decision
the rule asks the lanes what they could run now (each lane applies its own
batching policy, the running-set cap and KV) and chooses one iteration:

- ``prefill_first``: a whole-prompt prefill batch whenever the prefill lane
  has one, else a decode-lane iteration (vLLM's default scheduler before
  chunked prefill; SGLang with chunked prefill off).
- ``chunked_prefill``: every iteration has a token budget; decode-lane work
  takes its tokens first (1 per plain decode, k + 1 per verify or fused
  round) and prefill chunks fill the rest, a prompt's prefill spreading over
  several iterations (Sarathi-Serve, Agrawal et al., OSDI 2024; the default
  of current vLLM and SGLang).

Lane rules split every fused round into a **draft** iteration (the draft
model's ``k`` decode steps, on the decode lane) and a **verify** iteration
(the target's pass over the drafts, on the verify lane), or run it as one
**atomic round** on the decode lane; the lanes share the GPU as
``scheduler.lanes`` says (Verify-PD documents' architectures):

- ``baseline``: every request of the running set is its own worker running
  batch-1 iterations (its prefill, then atomic rounds to completion); the
  oldest waiting item goes first.
- ``pd``: a prefill lane and a decode lane running atomic batch-1 rounds,
  round-robin over the admitted requests; the lane whose head has waited
  longest goes first (ties: decode).
- ``pdv``: prefill, decode (draft iterations) and verify lanes, priorities
  decode > verify > prefill at iteration boundaries; with
  ``verify_first_margin`` m, verify goes first while its queue is longer than
  the decode queue by more than m.
- ``pdv_hybrid``: as ``pdv``, but while at most ``hybrid_threshold``
  requests run the decode lane runs atomic batch-1 rounds.
- ``pdv_unified``: one worker making passes: a pass admits one prompt while
  the decode queue holds fewer than ``unified_admit_factor`` times the batch
  size, then runs an atomic round for each of up to a batch of ready
  requests, one after the other.

Rules see the replica only through :class:`ReplicaLanes`; what a lane offers
is an opaque batch that the replica knows how to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from policies.base import Policy
from policies.families import ARBITRATION
from policies.lanes import DECODE_LANE, PREFILL_LANE, VERIFY_LANE
from policies.params import NoParams, param

INF = float("inf")

PREFILL = PREFILL_LANE
DECODE = DECODE_LANE
VERIFY = VERIFY_LANE
"""A replica's lanes (:mod:`policies.lanes`), by the short names the rules use."""


class Work(NamedTuple):
    """One iteration chosen by an arbitration rule (opaque batches from the lanes).

    Attributes:
        prefill: A whole-prompt prefill batch, or ``None``.
        step: A decode-lane batch, or ``None``.
        chunks: Prefill chunks riding with ``step`` (chunked prefill), or ``None``.
    """

    prefill: Any = None
    step: Any = None
    chunks: Any = None


class ReplicaLanes(Protocol):
    """What an arbitration rule may ask a replica's lanes."""

    def offer_prefill(self, limit: int | None = None) -> tuple[Any, float]:
        """Return the prefill lane's batch (at most ``limit`` prompts), else ``None`` and a wake time."""
        ...

    def offer_step(self, token_budget: int | None = None) -> tuple[Any, float]:
        """Return the decode lane's batch now (within ``token_budget`` tokens), else ``None`` and a wake time."""
        ...

    def step_tokens(self, step: Any) -> int:
        """Return the tokens a decode-lane batch processes."""
        ...

    def offer_chunks(self, step: Any, token_budget: int) -> Any:
        """Return prefill chunks that fit ``token_budget`` tokens beside ``step``, or ``None``."""
        ...

    # -- what lane rules (split rounds) also ask ---------------------------
    @property
    def running(self) -> int:
        """Requests prefilled (or being prefilled) and not finished."""
        ...

    def queue_length(self, lane: str) -> int:
        """Return how many items wait in ``lane`` (``prefill``, ``decode`` or ``verify``)."""
        ...

    def head_since_s(self, lane: str) -> float:
        """Return since when the head of ``lane`` has waited (inf: the lane is empty)."""
        ...

    def lane_idle(self, lane: str) -> bool:
        """Return whether ``lane`` runs no iteration now."""
        ...

    def iterations_running(self) -> int:
        """Return how many iterations run on the GPU now."""
        ...

    def batch_limit(self) -> int:
        """Return the decode and verify lanes' batch size (``scheduler.verify`` max_batch)."""
        ...

    def offer_draft(self) -> Any:
        """Take the decode lane's batch for a draft iteration, or return ``None``."""
        ...

    def offer_verify(self) -> Any:
        """Take the verify lane's batch for a verify iteration, or return ``None``."""
        ...

    def offer_round(self) -> Any:
        """Take the next request for an atomic round (the pass first), or return ``None``."""
        ...

    def pass_left(self) -> int:
        """Return the requests of the current pass still to run their round."""
        ...

    def start_pass(self, limit: int) -> int:
        """Move up to ``limit`` requests from the decode lane's head into a pass; return the count."""
        ...


class ArbitrationRule(Policy, Protocol):
    """Chooses a replica's next iteration.

    A replica builds its own rule, so a rule may keep per-replica state.

    Attributes:
        splits_rounds: The rule runs a fused replica's rounds as separate
            draft and verify iterations (and atomic rounds), on a GPU shared
            as ``scheduler.lanes`` says; the replica then asks it again
            whenever the GPU may take another iteration. Default ``False``.
        verify_lane: A k controller's queue depth is the verify lane's
            (else the decode lane's). Default ``False``.
        idle_when_empty: With no prompt waiting or being chunked and every
            decode-lane queue empty, the rule's ``choose`` chooses nothing
            and sets no wake time, so the replica need not ask it (it then
            only waits for the work announced to it). It holds only where
            declared in the class whose ``choose`` runs
            (:func:`policies.base.promised_by_method`): a subclass that
            overrides ``choose`` is asked unless it declares it again.
            Default ``False``: the rule is asked whatever the lanes hold.
    """

    splits_rounds: ClassVar[bool] = False
    verify_lane: ClassVar[bool] = False
    idle_when_empty: ClassVar[bool] = False

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Return the next iteration, or ``None`` and when to decide again (inf: on a change)."""
        ...


ARBITRATION.declare_protocol(ArbitrationRule)


@ARBITRATION.register
class PrefillFirst(ArbitrationRule):
    """Whole-prompt prefill batches go before decode-lane iterations."""

    name: ClassVar[str] = "prefill_first"
    idle_when_empty: ClassVar[bool] = True

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Run the prefill lane's batch if it has one, else the decode lane's."""
        batch, wake_at = lanes.offer_prefill()
        if batch is not None:
            return Work(prefill=batch), INF
        step, step_wake_at = lanes.offer_step()
        if step is not None:
            return Work(step=step), wake_at
        return None, min(wake_at, step_wake_at)


@dataclass(frozen=True)
class ChunkedPrefillParams:
    """Parameters of :class:`ChunkedPrefill`.

    Attributes:
        token_budget: Most tokens one iteration processes (decode tokens plus
            prefill chunk tokens), like vLLM's ``max_num_batched_tokens``.
    """

    token_budget: int = param(
        2048,
        minimum=1,
        description="Most tokens per iteration: decode tokens (1 per plain decode, "
        "k + 1 per verify or fused round) plus prefill chunk tokens (vLLM's "
        "max_num_batched_tokens; 2048 is a budget Sarathi-Serve evaluates).",
    )


@ARBITRATION.register
class ChunkedPrefill(ArbitrationRule):
    """Decode-lane work first, prefill chunks in the rest of a per-iteration token budget."""

    name: ClassVar[str] = "chunked_prefill"
    idle_when_empty: ClassVar[bool] = True
    Params = ChunkedPrefillParams

    def __init__(self, params: ChunkedPrefillParams | None = None) -> None:
        self.params = params if params is not None else ChunkedPrefillParams()
        self.token_budget = self.params.token_budget

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Fill the budget with the decode lane's batch, then with prefill chunks."""
        budget = self.token_budget
        step, wake_at = lanes.offer_step(budget)
        left = budget - (lanes.step_tokens(step) if step is not None else 0)
        chunks = lanes.offer_chunks(step, left) if left > 0 else None
        if step is None and chunks is None:
            return None, wake_at
        return Work(step=step, chunks=chunks), wake_at if step is None else INF


# -- lane rules: split rounds ------------------------------------------------
class _LaneRule(ArbitrationRule):
    """What every lane rule shares: it splits rounds (and has no verify lane unless it says so)."""

    splits_rounds: ClassVar[bool] = True


class _OldestFirst(_LaneRule):
    """Prefill lane and a decode lane of atomic batch-1 rounds; the oldest head goes first."""

    per_request: ClassVar[bool] = False
    """Every request is its own worker (its prefills and rounds are batch-1 and never wait
    for another request's iteration to end)."""

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Try the lane whose head waited longest first (ties: decode), the other after."""
        if lanes.head_since_s(PREFILL) < lanes.head_since_s(DECODE):
            order: tuple[str, str] = (PREFILL, DECODE)
        else:
            order = (DECODE, PREFILL)
        per_request = self.per_request
        wake_s = INF
        for lane in order:
            if not per_request and not lanes.lane_idle(lane):
                continue
            if lane == PREFILL:
                batch, wake_at = lanes.offer_prefill(1 if per_request else None)
                if batch is not None:
                    return Work(prefill=batch), INF
                wake_s = min(wake_s, wake_at)
            else:
                step = lanes.offer_round()
                if step is not None:
                    return Work(step=step), INF
        return None, wake_s


@ARBITRATION.register
class Baseline(_OldestFirst):
    """Every running request is its own batch-1 worker (Verify-PD baseline)."""

    name: ClassVar[str] = "baseline"
    per_request: ClassVar[bool] = True


@ARBITRATION.register
class PrefillDecode(_OldestFirst):
    """A prefill lane and a round-robin decode lane of atomic batch-1 rounds (Verify-PD PD)."""

    name: ClassVar[str] = "pd"


@dataclass(frozen=True)
class PdvParams:
    """Parameters of :class:`PrefillDecodeVerify`.

    Attributes:
        verify_first_margin: Verify before decode while the verify queue is
            longer than the decode queue by more than this (``None``: never).
    """

    verify_first_margin: int | None = param(
        None,
        minimum=0,
        description="Verify goes before decode while the verify queue is longer than the "
        "decode queue by more than this (the Verify-PD scheduler's rule uses 2); null: never.",
    )


@ARBITRATION.register
class PrefillDecodeVerify(_LaneRule):
    """Prefill, decode (draft) and verify lanes, decode > verify > prefill (Verify-PD PDV)."""

    name: ClassVar[str] = "pdv"
    Params = PdvParams
    verify_lane: ClassVar[bool] = True

    def __init__(self, params: Any = None) -> None:
        self.params = params if params is not None else self.Params()
        self.margin: int | None = self.params.verify_first_margin
        self.rounds_up_to = -1
        """Atomic rounds instead of draft iterations while at most this many requests run."""

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """The first idle lane with work, in priority order."""
        margin = self.margin
        if margin is not None and lanes.queue_length(VERIFY) > lanes.queue_length(DECODE) + margin:
            order: tuple[str, ...] = (VERIFY, DECODE, PREFILL)
        else:
            order = (DECODE, VERIFY, PREFILL)
        atomic = lanes.running <= self.rounds_up_to
        for lane in order:
            if not lanes.lane_idle(lane):
                continue
            if lane == PREFILL:
                batch, wake_at = lanes.offer_prefill()
                if batch is not None:
                    return Work(prefill=batch), INF
                return None, wake_at
            if lane == DECODE:
                step = lanes.offer_round() if atomic else lanes.offer_draft()
            else:
                step = lanes.offer_verify()
            if step is not None:
                return Work(step=step), INF
        return None, INF


@dataclass(frozen=True)
class PdvHybridParams(PdvParams):
    """Parameters of :class:`PrefillDecodeVerifyHybrid`: :class:`PdvParams`' and one more.

    Attributes:
        hybrid_threshold: Atomic batch-1 rounds while at most this many
            requests run; draft and verify iterations above.
    """

    hybrid_threshold: int = param(
        3,
        minimum=0,
        description="Atomic rounds while at most this many requests run "
        "(the Verify-PD hybrid uses 3).",
    )


@ARBITRATION.register
class PrefillDecodeVerifyHybrid(PrefillDecodeVerify):
    """As ``pdv``, with ``pd``'s atomic rounds while few requests run (Verify-PD hybrid)."""

    name: ClassVar[str] = "pdv_hybrid"
    Params = PdvHybridParams

    def __init__(self, params: PdvHybridParams | None = None) -> None:
        chosen = params if params is not None else PdvHybridParams()
        super().__init__(chosen)
        self.rounds_up_to = chosen.hybrid_threshold


@dataclass(frozen=True)
class UnifiedParams:
    """Parameters of :class:`UnifiedWorker`.

    Attributes:
        unified_admit_factor: A pass admits one prompt while the decode queue
            holds fewer than this many times the batch size.
    """

    unified_admit_factor: float = param(
        1.2,
        exclusive_minimum=0,
        description="A pass admits one prompt while the decode queue holds fewer "
        "than this many times scheduler.verify.batching.max_batch requests (the "
        "Verify-PD unified worker uses 1.2).",
    )


@ARBITRATION.register
class UnifiedWorker(_LaneRule):
    """One worker making passes: a prompt, then a batch's atomic rounds (Verify-PD unified)."""

    name: ClassVar[str] = "pdv_unified"
    Params = UnifiedParams

    def __init__(self, params: UnifiedParams | None = None) -> None:
        self.params = params if params is not None else UnifiedParams()
        self.admit_factor = self.params.unified_admit_factor
        self.admitted = False
        """The current pass has admitted its prompt."""

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """One iteration at a time: the pass's prompt, then its rounds one by one."""
        if lanes.iterations_running():
            return None, INF
        wake_s = INF
        if not lanes.pass_left():
            if not self.admitted:
                work, wake_s = self._admit(lanes)
                if work is not None:
                    return work, INF
            self.admitted = False
            if not lanes.start_pass(lanes.batch_limit()):
                # An empty pass (its prompt's request ended at its prefill, as a
                # one-token request does): the next pass starts now and may admit
                # a prompt. Before, the worker stopped with prompts waiting.
                work, wake_s = self._admit(lanes)
                return (work, INF) if work is not None else (None, wake_s)
        return Work(step=lanes.offer_round()), wake_s

    def _admit(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """The pass's prompt, while the decode queue is short enough (else ``None``, a wake time)."""
        if not lanes.queue_length(PREFILL) or (
            lanes.queue_length(DECODE) >= self.admit_factor * lanes.batch_limit()
        ):
            return None, INF
        batch, wake_s = lanes.offer_prefill(1)
        if batch is None:
            return None, wake_s
        self.admitted = True
        return Work(prefill=batch), INF
