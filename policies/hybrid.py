"""Per-request choice between distributed and fused speculation (hybrid mode)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from policies.families import HYBRID_MODE
from policies.views import ModeQuery

SpeculationRoute = Literal["distributed", "fused"]


class HybridModePolicy(Protocol):
    """Picks the speculation mode of one request."""

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return ``"distributed"`` or ``"fused"``."""
        ...


@dataclass(frozen=True)
class RttThresholdParams:
    """Parameters of :class:`RttThreshold`.

    Attributes:
        threshold_ms: Links with an RTT above this go fused.
    """

    threshold_ms: float


@HYBRID_MODE.register
class RttThreshold:
    """Fused when the origin's link RTT exceeds a threshold, distributed otherwise.

    A speculation round over a slow link pays one RTT per verify; above the
    threshold the server drafts for the client instead.
    """

    name: ClassVar[str] = "rtt_threshold"
    Params: ClassVar[type[RttThresholdParams]] = RttThresholdParams
    params_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["threshold_ms"],
        "properties": {
            "threshold_ms": {
                "type": "number",
                "minimum": 0,
                "description": "Links with a round-trip time above this (ms) use fused mode.",
            }
        },
    }

    def __init__(self, params: RttThresholdParams) -> None:
        self.params = params

    def choose(self, query: ModeQuery) -> SpeculationRoute:
        """Return fused above the threshold, distributed at or below it."""
        return "fused" if query.link_rtt_ms > self.params.threshold_ms else "distributed"
