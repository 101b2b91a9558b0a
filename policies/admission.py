"""Admission control: which arriving requests enter the system."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from policies.base import Policy
from policies.families import ADMISSION
from policies.params import NoParams, param
from policies.views import AdmissionDecision, AdmissionQuery


class AdmissionPolicy(Policy, Protocol):
    """Admits or rejects an arriving request.

    Attributes:
        predicts_ttft: The engine fills the TTFT prediction of
            ``AdmissionQuery`` (and keeps the predicted prefill queues it
            needs). Default ``False``.
        admits_all: The policy's ``decide`` admits every request whatever
            its query says, so the engine admits them without building the
            query or asking. It holds only where declared in the class whose
            ``decide`` runs (:func:`policies.base.promised_by_method`): a
            subclass that overrides ``decide`` is asked unless it declares
            it again. Default ``False``.
    """

    predicts_ttft: ClassVar[bool] = False
    admits_all: ClassVar[bool] = False

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Return whether to admit, with a reason when rejecting."""
        ...


ADMISSION.declare_protocol(AdmissionPolicy)


@ADMISSION.register
class AdmitAll(AdmissionPolicy):
    """Admit every request (queues grow without bound under overload)."""

    name: ClassVar[str] = "admit_all"
    admits_all: ClassVar[bool] = True

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Admit."""
        return AdmissionDecision(True)


@dataclass(frozen=True)
class MaxInFlightParams:
    """Parameters of ``max_in_flight``.

    Attributes:
        limit: Most requests admitted and not yet finished at once.
    """

    limit: int = param(minimum=1)


@ADMISSION.register
class MaxInFlight(AdmissionPolicy):
    """Admit while fewer than ``limit`` requests are in flight; defer the others.

    Never rejects: a deferred request is admitted, in arrival order, once a
    request in flight ends; its wait counts in its TTFT.
    """

    name: ClassVar[str] = "max_in_flight"
    Params = MaxInFlightParams

    def __init__(self, params: MaxInFlightParams) -> None:
        self.params = params

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Admit below the limit, else defer until a request ends."""
        if query.queued_requests < self.params.limit:
            return AdmissionDecision(True)
        return AdmissionDecision(False, "max_in_flight", defer=True)


@dataclass(frozen=True)
class TokenBucketParams:
    """Parameters of ``token_bucket``.

    Attributes:
        rate_per_s: Tokens added per second.
        burst: Most tokens the bucket holds (it starts full).
        on_empty: ``defer`` (wait for a token) or ``reject`` a request
            arriving to an empty bucket.
    """

    rate_per_s: float = param(exclusive_minimum=0)
    burst: int = param(1, minimum=1)
    on_empty: str = param("defer", enum=("defer", "reject"))


TIME_EPSILON = 1e-9
"""Slack, in tokens or seconds, against rounding in refills and deadlines."""


@ADMISSION.register
class TokenBucket(AdmissionPolicy):
    """Admit a request only with a token; tokens refill at ``rate_per_s`` up to ``burst``."""

    name: ClassVar[str] = "token_bucket"
    Params = TokenBucketParams

    def __init__(self, params: TokenBucketParams) -> None:
        self.params = params
        self._tokens = float(params.burst)
        self._last_s: float | None = None

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Spend a token and admit, or defer until one is due (or reject)."""
        p = self.params
        now = query.now_s
        if self._last_s is not None:
            self._tokens = min(float(p.burst), self._tokens + (now - self._last_s) * p.rate_per_s)
        self._last_s = now
        if self._tokens >= 1.0 - TIME_EPSILON:
            self._tokens = max(0.0, self._tokens - 1.0)
            return AdmissionDecision(True)
        if p.on_empty == "reject":
            return AdmissionDecision(False, "token_bucket")
        due_s = now + max((1.0 - self._tokens) / p.rate_per_s, TIME_EPSILON)
        return AdmissionDecision(False, "token_bucket", defer=True, retry_at_s=due_s)


@dataclass(frozen=True)
class SloGuardParams:
    """Parameters of ``slo_guard``.

    Attributes:
        action: ``reject`` a request whose predicted TTFT breaks its target,
            or ``defer`` it, up to ``max_defer_ms`` after its arrival.
        max_defer_ms: With ``defer``: longest a request waits for admission
            before it is rejected.
        recheck_ms: With ``defer``: how often a deferred request is looked at
            again when no request ends meanwhile.
    """

    action: str = param("reject", enum=("reject", "defer"))
    max_defer_ms: float = param(1000.0, minimum=0)
    recheck_ms: float = param(10.0, exclusive_minimum=0)


@ADMISSION.register
class SloGuard(AdmissionPolicy):
    """Turn away requests whose predicted TTFT breaks their SLO (reason ``slo_guard``).

    Predicted TTFT = time already waited for admission + predicted prefill
    queue of the best candidate replica + the request's own batch-1 prefill
    (see ``policies/README.md``).
    """

    name: ClassVar[str] = "slo_guard"
    predicts_ttft: ClassVar[bool] = True
    Params = SloGuardParams

    def __init__(self, params: SloGuardParams | None = None) -> None:
        self.params = params if params is not None else SloGuardParams()

    @staticmethod
    def predicted_ttft_s(query: AdmissionQuery) -> float:
        """The request's predicted TTFT if admitted now."""
        return query.waited_s + query.predicted_queue_s + query.predicted_prefill_s

    def decide(self, query: AdmissionQuery) -> AdmissionDecision:
        """Admit when the predicted TTFT meets the target; else reject, or defer a while."""
        if self.predicted_ttft_s(query) * 1000.0 <= query.ttft_slo_ms:
            return AdmissionDecision(True)
        p = self.params
        if p.action == "defer":
            give_up_s = query.now_s - query.waited_s + p.max_defer_ms / 1000.0
            if query.now_s < give_up_s - TIME_EPSILON:
                retry_s = min(query.now_s + p.recheck_ms / 1000.0, give_up_s)
                return AdmissionDecision(False, "slo_guard", defer=True, retry_at_s=retry_s)
        return AdmissionDecision(False, "slo_guard")
