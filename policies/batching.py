"""Batch formation: the size/timeout rule and the protocol every batcher follows.

One protocol serves prefill batching on targets, draft iterations on draft
devices and verify (or fused / plain decode) iterations on targets: given the
waiting items and the clock, say which to run now or when to look again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from policies.base import Policy
from policies.families import DRAFT_SCHEDULING, PREFILL_BATCHING, VERIFY_BATCHING
from policies.params import NoParams as NoParams  # re-exported: a policy without parameters
from policies.params import param
from policies.views import BatchChoice, QueuedItem


@dataclass(frozen=True)
class BatchLimits:
    """Limits shared by every batching policy of a lane.

    Attributes:
        max_batch: Most sequences in one iteration.
        max_wait_ms: Longest the oldest waiting item is held back to let a
            batch fill; 0 runs whatever is waiting as soon as the lane is free.
        max_tokens: Most new tokens in one iteration (``None``: no limit).
    """

    max_batch: int
    max_wait_ms: float
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


class BatchingPolicy(Policy, Protocol):
    """Decides which waiting items form the next iteration of a lane.

    Attributes:
        predicts_ttft: (prefill lane) The engine fills ``QueuedItem.prefill_s``
            for prefill items: the LUT prefill time of the batch made of the
            waiting prompts up to and including the item. Default ``False``.
        reads_kv: (verify lane) The engine fills ``QueuedItem.kv_need_mb``
            and ``kv_free_mb`` for verify items. Default ``False``.
        takes_lone_item: ``select`` given a single item enqueued at or before
            ``now_s`` always takes it (``BatchChoice((0,))``): the engine runs
            a draft device's or decode lane's lone item without asking (and
            builds no ``QueuedItem`` for it). A class or instance attribute.
            Default ``False``.
        orders_by_arrival: ``select`` reads only each item's ``enqueued_s`` and
            ``new_tokens`` and takes the oldest first: the policy also has
            ``select_by_arrival(enqueued_s, new_tokens, now_s)``, which the
            engine calls with those two columns instead of building a
            ``QueuedItem`` per waiting item (see :class:`SizeTimeoutBatcher`).
            Default ``False``.
    """

    predicts_ttft: ClassVar[bool] = False
    reads_kv: ClassVar[bool] = False
    takes_lone_item: bool = False
    orders_by_arrival: bool = False

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Return the items to run now, or when to be asked again.

        Called whenever the lane is free and ``waiting`` is not empty, and
        again at ``wake_at_s`` if the policy asked for it.
        """
        ...


for _family in (PREFILL_BATCHING, DRAFT_SCHEDULING, VERIFY_BATCHING):
    _family.declare_protocol(BatchingPolicy)


_TAKE_FIRST = BatchChoice((0,))


class SizeTimeoutBatcher(BatchingPolicy):
    """First come, first served with a size/timeout rule.

    Runs the oldest items as soon as ``max_batch`` are waiting, or when the
    oldest has waited ``max_wait_ms``; never exceeds ``max_tokens`` new tokens
    (an item larger than the token budget on its own still runs alone, so
    nothing starves).
    """

    def __init__(self, limits: BatchLimits, params: NoParams | None = None) -> None:
        self.limits = limits
        self.params = params if params is not None else NoParams()
        self._max_wait_s = limits.max_wait_ms / 1000.0
        # A lone item waits only for a batch to fill (max_batch > 1, max_wait_ms > 0);
        # a subclass with its own select rule decides for itself.
        plain = type(self).select is SizeTimeoutBatcher.select
        self.takes_lone_item = plain and (limits.max_batch == 1 or self._max_wait_s == 0.0)
        self.orders_by_arrival = plain and type(self)._order is SizeTimeoutBatcher._order

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Apply the size/timeout rule (see the class docstring)."""
        if not waiting:
            return BatchChoice(())
        if len(waiting) == 1:
            return self._lone(waiting[0].enqueued_s, now_s)
        held = self._held(min(item.enqueued_s for item in waiting), len(waiting), now_s)
        if held is not None:
            return held
        tokens = [item.new_tokens for item in waiting] if self.limits.max_tokens is not None else ()
        return self._fill(self._order(waiting, now_s), tokens)

    def select_by_arrival(
        self, enqueued_s: Sequence[float], new_tokens: Sequence[int], now_s: float
    ) -> BatchChoice:
        """:meth:`select` of the items with these enqueue times and new tokens, oldest first.

        ``new_tokens`` may be empty when the limits have no ``max_tokens``
        (nothing reads it then). Only for a policy whose ``orders_by_arrival``
        is true (its :meth:`select` and order are this class's).
        """
        if not enqueued_s:
            return BatchChoice(())
        if len(enqueued_s) == 1:
            return self._lone(enqueued_s[0], now_s)
        held = self._held(min(enqueued_s), len(enqueued_s), now_s)
        if held is not None:
            return held
        order = sorted(range(len(enqueued_s)), key=enqueued_s.__getitem__)
        return self._fill(order, new_tokens)

    def _lone(self, enqueued_s: float, now_s: float) -> BatchChoice:
        """The rule for a single waiting item: it waits only for a batch to fill."""
        due_s = enqueued_s + self._max_wait_s
        if self.limits.max_batch > 1 and now_s < due_s:
            return BatchChoice((), wake_at_s=due_s)
        return _TAKE_FIRST

    def _held(self, oldest_s: float, waiting: int, now_s: float) -> BatchChoice | None:
        """The choice to wait for a fuller batch, or ``None`` when a batch runs now."""
        due_s = oldest_s + self._max_wait_s
        if waiting < self.limits.max_batch and now_s < due_s:
            return BatchChoice((), wake_at_s=due_s)
        return None

    def _fill(self, order: Sequence[int], new_tokens: Sequence[int]) -> BatchChoice:
        """The items in ``order`` up to ``max_batch`` and ``max_tokens`` (``new_tokens`` by index)."""
        limits = self.limits
        if limits.max_tokens is None:
            return BatchChoice(tuple(order[: limits.max_batch]))
        take: list[int] = []
        tokens = 0
        for index in order:
            if len(take) == limits.max_batch:
                break
            tokens_of = new_tokens[index]
            if take and tokens + tokens_of > limits.max_tokens:
                break
            take.append(index)
            tokens += tokens_of
        return BatchChoice(tuple(take))

    def _order(self, waiting: Sequence[QueuedItem], now_s: float) -> list[int]:
        """Indices of ``waiting`` in the order they join a batch: oldest first.

        The sort is stable, so equal times keep their queue order.
        """
        return sorted(range(len(waiting)), key=[item.enqueued_s for item in waiting].__getitem__)


@PREFILL_BATCHING.register
class FcfsPrefill(SizeTimeoutBatcher):
    """Prefill batches in arrival order under the size/timeout rule."""

    name: ClassVar[str] = "fcfs"


@DRAFT_SCHEDULING.register
class IterationLevelDraft(SizeTimeoutBatcher):
    """Orca-style iteration-level draft batching on a draft device.

    Requests join and leave between iterations; each iteration drafts one
    token for every request in it, in arrival order, under the size/timeout
    rule (``max_batch`` is capped by the device's concurrency limit).
    """

    name: ClassVar[str] = "iteration_level"


@VERIFY_BATCHING.register
class FcfsVerify(SizeTimeoutBatcher):
    """Verify iterations in arrival order under the size/timeout rule."""

    name: ClassVar[str] = "fcfs"


@VERIFY_BATCHING.register
class EdfVerify(SizeTimeoutBatcher):
    """Earliest deadline first under the size/timeout rule.

    When the rule says a batch runs (``max_batch`` waiting, or the oldest has
    waited ``max_wait_ms``), its members are taken by earliest
    ``deadline_s``, ties broken by arrival in the lane then queue order, up to
    ``max_batch`` and ``max_tokens``.
    """

    name: ClassVar[str] = "edf"

    def _order(self, waiting: Sequence[QueuedItem], now_s: float) -> list[int]:
        """Earliest deadline first; then oldest; then queue order."""
        return sorted(
            range(len(waiting)), key=lambda i: (waiting[i].deadline_s, waiting[i].enqueued_s)
        )


@dataclass(frozen=True)
class LeastSlackParams:
    """Parameters of least-slack scheduling: a linear model of an item's service time.

    Attributes:
        base_ms: Service time of an item regardless of its size.
        per_new_token_ms: Added per token the iteration processes for it.
        per_context_token_us: Added per token of context it attends over.
    """

    base_ms: float = param(0.0, minimum=0)
    per_new_token_ms: float = param(0.0, minimum=0)
    per_context_token_us: float = param(0.0, minimum=0)


@VERIFY_BATCHING.register
class LeastSlackVerify(SizeTimeoutBatcher):
    """Least slack first under the size/timeout rule.

    An item's slack is ``deadline_s - now_s - service_s``, with its predicted
    service time ``service_s = base_ms + per_new_token_ms * new_tokens +
    per_context_token_us * context_len`` (converted to seconds): how long it
    can still wait and meet its deadline. When the rule says a batch runs,
    members are taken by smallest slack, ties broken by arrival in the lane
    then queue order, up to ``max_batch`` and ``max_tokens``. With every
    coefficient 0 (the default) it orders as ``edf``.
    """

    name: ClassVar[str] = "least_slack"
    Params = LeastSlackParams

    def __init__(self, limits: BatchLimits, params: LeastSlackParams | None = None) -> None:
        super().__init__(limits)
        self.params = params if params is not None else LeastSlackParams()  # type: ignore[assignment]

    def service_s(self, item: QueuedItem) -> float:
        """The item's predicted service time (see the class docstring)."""
        p = self.params
        assert isinstance(p, LeastSlackParams)
        return (
            p.base_ms / 1e3
            + p.per_new_token_ms / 1e3 * item.new_tokens
            + p.per_context_token_us / 1e6 * item.context_len
        )

    def slack_s(self, item: QueuedItem, now_s: float) -> float:
        """How long the item can still wait and meet its deadline."""
        return item.deadline_s - now_s - self.service_s(item)

    def _order(self, waiting: Sequence[QueuedItem], now_s: float) -> list[int]:
        """Smallest slack first; then oldest; then queue order."""
        return sorted(
            range(len(waiting)),
            key=lambda i: (self.slack_s(waiting[i], now_s), waiting[i].enqueued_s),
        )


KV_SHORT_ACTIONS = ("delay", "spill_fused")
"""What ``kv_aware_edf`` does with a verify item whose KV does not fit."""


@dataclass(frozen=True)
class KvAwareEdfParams:
    """Parameters of KV-aware earliest deadline first.

    Attributes:
        on_kv_short: ``delay``: an item whose KV does not fit waits for a
            later iteration; ``spill_fused``: it leaves the distributed path
            and continues in fused mode on the same replica.
    """

    on_kv_short: str = param(
        "delay",
        enum=KV_SHORT_ACTIONS,
        description="delay: a verify item whose KV does not fit waits; spill_fused: "
        "it continues in fused mode on its replica (needs a fused model there).",
    )

    def __post_init__(self) -> None:
        if self.on_kv_short not in KV_SHORT_ACTIONS:
            raise ValueError(
                f"on_kv_short must be one of {KV_SHORT_ACTIONS}, got {self.on_kv_short!r}"
            )


@VERIFY_BATCHING.register
class KvAwareEdfVerify(EdfVerify):
    """Earliest deadline first, admitting an item only while the batch's KV fits.

    When the size/timeout rule says a batch runs, items are considered in EDF
    order (as ``edf``). An item joins while the batch's KV growth fits the
    replica's free KV: ``len(batch) * max(kv_need_mb)`` over the batch with
    the item, as the engine reserves room for a verify batch (every member
    padded to its longest draft). An item that does not fit is skipped, not
    a barrier: later items that fit still join (no head-of-line blocking).
    Skipped items wait (``delay``) or are returned in ``spill``
    (``spill_fused``). With ``delay``, when not even the most urgent item
    fits alone the batch ``edf`` would take runs and the engine's
    ``scheduler.kv.on_full`` rule makes room (evicting the most recently
    admitted requests, so the oldest progress): nothing waits forever on KV
    that only the waiting requests themselves could free. Only verify work
    carries KV needs; fused
    rounds and plain decode (the continuous lane) are ordered as ``edf``.
    Scenarios use it with ``scheduler.kv.on_full: preempt_recompute`` only
    (under ``queue`` a verify step adds no KV, so it is refused there).
    """

    name: ClassVar[str] = "kv_aware_edf"
    reads_kv: ClassVar[bool] = True
    Params = KvAwareEdfParams

    def __init__(self, limits: BatchLimits, params: KvAwareEdfParams | None = None) -> None:
        super().__init__(limits)
        self.params = params if params is not None else KvAwareEdfParams()  # type: ignore[assignment]
        self._spill = self.params.on_kv_short == "spill_fused"  # type: ignore[attr-defined]

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Apply the size/timeout rule, then the KV guard (see the class docstring)."""
        if not waiting:
            return BatchChoice(())
        limits = self.limits
        due_s = min(item.enqueued_s for item in waiting) + self._max_wait_s
        if len(waiting) < limits.max_batch and now_s < due_s:
            return BatchChoice((), wake_at_s=due_s)
        order = self._order(waiting, now_s)
        free_mb = waiting[0].kv_free_mb
        take: list[int] = []
        short: list[int] = []
        tokens = 0
        widest_mb = 0.0
        for index in order:
            if len(take) == limits.max_batch:
                break
            item = waiting[index]
            if (
                limits.max_tokens is not None
                and take
                and tokens + item.new_tokens > limits.max_tokens
            ):
                break
            wide_mb = max(widest_mb, item.kv_need_mb)
            if wide_mb * (len(take) + 1) > free_mb + 1e-9:
                short.append(index)
                continue
            take.append(index)
            tokens += item.new_tokens
            widest_mb = wide_mb
        if self._spill:
            return BatchChoice(tuple(take), spill=tuple(short))
        if not take:
            return super().select(waiting, now_s)
        return BatchChoice(tuple(take))


@PREFILL_BATCHING.register
class TtftBoundedPrefill(SizeTimeoutBatcher):
    """Prefill batches closed early when waiting longer would break a TTFT target.

    The candidate batch is the waiting prompts in queue order up to
    ``max_batch`` and ``max_tokens`` (as ``fcfs``). It runs when it is full,
    when the oldest has waited ``max_wait_ms``, or at the latest start that
    still lets the earliest TTFT deadline among its members be met:
    ``min(deadline_s) - prefill_s``, with ``prefill_s`` the LUT's prefill time
    of the candidate batch (``QueuedItem.prefill_s``, which the engine fills
    because the class sets ``predicts_ttft``). A deadline already out of
    reach runs the batch now. The prediction covers the prefill iteration
    only: neither the first token's trip back to the client nor an iteration
    already under way on the replica is counted.
    """

    name: ClassVar[str] = "ttft_bounded"
    predicts_ttft: ClassVar[bool] = True

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Apply the TTFT-bounded size/timeout rule (see the class docstring)."""
        if not waiting:
            return BatchChoice(())
        limits = self.limits
        take: list[int] = []
        tokens = 0
        for index, item in enumerate(waiting):
            if len(take) == limits.max_batch:
                break
            if (
                limits.max_tokens is not None
                and take
                and tokens + item.new_tokens > limits.max_tokens
            ):
                break
            take.append(index)
            tokens += item.new_tokens
        if len(take) == limits.max_batch or len(take) < len(waiting):
            return BatchChoice(tuple(take))  # full: by size or by tokens
        due_s = min(item.enqueued_s for item in waiting) + self._max_wait_s
        latest_s = min(item.deadline_s for item in waiting) - waiting[take[-1]].prefill_s
        release_s = min(due_s, latest_s)
        if now_s >= release_s:
            return BatchChoice(tuple(take))
        return BatchChoice((), wake_at_s=release_s)
