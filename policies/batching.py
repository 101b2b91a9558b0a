"""Batch formation: the size/timeout rule and the protocol every batcher follows.

One protocol serves prefill batching on targets, draft iterations on draft
devices and verify (or fused / plain decode) iterations on targets: given the
waiting items and the clock, say which to run now or when to look again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from policies.families import DRAFT_SCHEDULING, PREFILL_BATCHING, VERIFY_BATCHING
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


class BatchingPolicy(Protocol):
    """Decides which waiting items form the next iteration of a lane."""

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Return the items to run now, or when to be asked again.

        Called whenever the lane is free and ``waiting`` is not empty, and
        again at ``wake_at_s`` if the policy asked for it.
        """
        ...


@dataclass(frozen=True)
class NoParams:
    """Parameters of a policy that has none."""


NO_PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {},
}


_TAKE_FIRST = BatchChoice((0,))


class SizeTimeoutBatcher:
    """First come, first served with a size/timeout rule.

    Runs the oldest items as soon as ``max_batch`` are waiting, or when the
    oldest has waited ``max_wait_ms``; never exceeds ``max_tokens`` new tokens
    (an item larger than the token budget on its own still runs alone, so
    nothing starves).
    """

    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA

    def __init__(self, limits: BatchLimits, params: NoParams | None = None) -> None:
        self.limits = limits
        self.params = params if params is not None else NoParams()
        self._max_wait_s = limits.max_wait_ms / 1000.0

    def select(self, waiting: Sequence[QueuedItem], now_s: float) -> BatchChoice:
        """Apply the size/timeout rule (see the class docstring)."""
        if not waiting:
            return BatchChoice(())
        limits = self.limits
        if len(waiting) == 1:
            # The common case on a lightly loaded lane, without the sorting.
            due_s = waiting[0].enqueued_s + self._max_wait_s
            if limits.max_batch > 1 and now_s < due_s:
                return BatchChoice((), wake_at_s=due_s)
            return _TAKE_FIRST
        oldest_s = min(item.enqueued_s for item in waiting)
        due_s = oldest_s + self._max_wait_s
        if len(waiting) < limits.max_batch and now_s < due_s:
            return BatchChoice((), wake_at_s=due_s)
        order = self._order(waiting, now_s)
        take: list[int] = []
        tokens = 0
        for index in order:
            if len(take) == limits.max_batch:
                break
            new_tokens = waiting[index].new_tokens
            if limits.max_tokens is not None and take and tokens + new_tokens > limits.max_tokens:
                break
            take.append(index)
            tokens += new_tokens
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

    base_ms: float = 0.0
    per_new_token_ms: float = 0.0
    per_context_token_us: float = 0.0


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
    Params: ClassVar[type[LeastSlackParams]] = LeastSlackParams  # type: ignore[assignment]
    params_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_ms": {"type": "number", "minimum": 0, "default": 0.0},
            "per_new_token_ms": {"type": "number", "minimum": 0, "default": 0.0},
            "per_context_token_us": {"type": "number", "minimum": 0, "default": 0.0},
        },
    }

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
