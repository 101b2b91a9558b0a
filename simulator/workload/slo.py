"""Service-level objectives of a request class."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CLASS = "default"
"""The SLO class of requests that name none; its targets are ``workload.slo``."""


@dataclass(frozen=True)
class SloTargets:
    """Latency targets a request of one SLO class should meet.

    Attributes:
        ttft_ms: Time to first token (milliseconds).
        tpot_ms: Time per output token after the first (milliseconds).
        tvt_ms: Time to verify a token (milliseconds); None when not applied.
    """

    ttft_ms: float
    tpot_ms: float
    tvt_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_ms", "tpot_ms", "tvt_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"SloTargets.{name} must be > 0, got {value}")
