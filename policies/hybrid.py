"""Per-request choice between distributed and fused speculation (hybrid mode)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from policies.base import Policy
from policies.families import HYBRID_MODE
from policies.params import NoParams, param
from policies.views import ModeQuery

SpeculationRoute = Literal["distributed", "fused"]


class HybridModePolicy(Policy, Protocol):
    """Picks the speculation mode of one request.

    Attributes:
        predicts_latency: The engine fills the ``ModeQuery`` fields after
            ``target_outstanding_requests`` (the predicted round times of
            both modes). Default ``False``.
    """

    predicts_latency: ClassVar[bool] = False

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return ``"distributed"`` or ``"fused"``."""
        ...


HYBRID_MODE.declare_protocol(HybridModePolicy)


@dataclass(frozen=True)
class RttThresholdParams:
    """Parameters of :class:`RttThreshold`.

    Attributes:
        threshold_ms: Links with an RTT above this go fused.
    """

    threshold_ms: float = param(
        minimum=0, description="Links with a round-trip time above this (ms) use fused mode."
    )


@HYBRID_MODE.register
class RttThreshold(HybridModePolicy):
    """Fused when the origin's link RTT exceeds a threshold, distributed otherwise.

    A speculation round over a slow link pays one RTT per verify; above the
    threshold the server drafts for the client instead.
    """

    name: ClassVar[str] = "rtt_threshold"
    Params = RttThresholdParams

    def __init__(self, params: RttThresholdParams) -> None:
        self.params = params

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return fused above the threshold, distributed at or below it."""
        return "fused" if query.link_rtt_ms > self.params.threshold_ms else "distributed"


@HYBRID_MODE.register
class PredictedLatency(HybridModePolicy):
    """The mode with the smaller predicted time per committed token for this request.

    Per round of ``k`` drafts (Leviathan et al. 2023: a round commits
    E[accepted] + 1 tokens on average)::

        distributed = (draft_s + link_rtt_ms / 1000 + transfer_s + verify_s) / distributed_tokens
        fused = fused_step_s / fused_tokens

    Fused when it is strictly smaller; distributed on ties (it leaves the
    drafting to the client).
    """

    name: ClassVar[str] = "predicted_latency"
    predicts_latency: ClassVar[bool] = True

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    @staticmethod
    def per_token_s(query: ModeQuery) -> tuple[float, float]:
        """Return the predicted ``(distributed, fused)`` seconds per committed token."""
        distributed_round_s = (
            query.draft_s + query.link_rtt_ms / 1000.0 + query.transfer_s + query.verify_s
        )
        return (
            distributed_round_s / query.distributed_tokens,
            query.fused_step_s / query.fused_tokens,
        )

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return the mode with the smaller predicted time per token."""
        distributed, fused = self.per_token_s(query)
        return "fused" if fused < distributed else "distributed"


@dataclass(frozen=True)
class FusedFractionParams:
    """Parameters of :class:`FusedFraction`.

    Attributes:
        fraction: Share of requests served fused, in ``[0, 1]``.
    """

    fraction: float = param(
        minimum=0,
        maximum=1,
        description="Share of requests served fused (evenly spread over arrivals).",
    )


@HYBRID_MODE.register
class FusedFraction(HybridModePolicy):
    """A fixed share of requests goes fused, spread evenly over arrivals.

    Deterministic (a floor counter, no randomness): the ``n``-th request asked
    about (from 0) goes fused when ``floor((n + 1) f) > floor(n f)``, so after
    ``N`` requests exactly ``floor(N f)`` went fused and the fused ones are
    evenly spaced.
    """

    name: ClassVar[str] = "fused_fraction"
    Params = FusedFractionParams

    def __init__(self, params: FusedFractionParams) -> None:
        self.params = params
        self._asked = 0

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return fused for every ``1 / fraction``-th request on average."""
        n = self._asked
        self._asked = n + 1
        f = self.params.fraction
        return "fused" if math.floor((n + 1) * f) > math.floor(n * f) else "distributed"
