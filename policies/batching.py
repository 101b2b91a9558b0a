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
        # Oldest first; the sort is stable, so equal times keep their queue order.
        order = sorted(range(len(waiting)), key=[item.enqueued_s for item in waiting].__getitem__)
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
