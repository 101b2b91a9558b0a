"""Event tracers: injected observers of what the engine does (null by default)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Tracer(Protocol):
    """Receives one call per engine event, in simulated-time order."""

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Record that ``kind`` happened to ``subject`` (e.g. ``request 3``, ``replica 0``)."""
        ...


class NullTracer:
    """Discards every event."""

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Do nothing."""


@dataclass
class ListTracer:
    """Keeps every event as a ``(time_s, kind, subject, detail)`` tuple (for tests and debugging)."""

    events: list[tuple[float, str, str, str]] = field(default_factory=list)

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Append the event."""
        self.events.append((time_s, kind, subject, detail))
