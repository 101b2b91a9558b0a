"""Event tracers: injected observers of what the engine does (null by default).

A tracer gets two kinds of calls: :meth:`Tracer.event` for each engine event
(in simulated-time order, as a short text), and :meth:`Tracer.span` for each
stretch of work a timeline draws (a replica iteration, a draft device job, a
network transfer), with its start, duration, requests and sizes. Spans are
reported when the engine knows them: an iteration when it starts (a run of
plain decode iterations when it ends), a transfer when it is sent, so they
do not come in start order. The engine builds neither unless a tracer is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class Span(NamedTuple):
    """One stretch of work on one resource, for timelines.

    Attributes:
        place: ``replica``, ``device`` or ``link``.
        owner: The resource: a replica (``"a100-tp4/0"``: its pool and its
            index among all target replicas), a draft device
            (``"phones/3"``: its class and index) or a device's instance of a
            scenario link (``"phones->pool/3"``).
        lane: ``prefill`` or ``decode`` on a replica, ``draft`` on a device,
            ``up`` or ``down`` on a link.
        phase: What ran: ``prefill``, ``decode``, ``verify``, ``fused`` or
            ``mixed`` (replica); ``draft_prefill`` or ``draft`` (device);
            ``prompt``, ``bundle``, ``first_token``, ``result`` or
            ``last_token`` (link).
        start_s: When it started (simulated seconds).
        duration_s: How long it took (a transfer: from hand-over to arrival).
        requests: Ids of the requests it served.
        tokens: Tokens it processed (prefill: prompt tokens; a round: its
            ``k + 1`` per request; a draft burst: the drafted tokens; a
            transfer: the tokens it carries).
        k: Largest draft length of the requests (0 where none applies).
        iterations: Model iterations it stands for (a run of plain decode
            iterations, a draft burst's steps).
    """

    place: str
    owner: str
    lane: str
    phase: str
    start_s: float
    duration_s: float
    requests: tuple[int, ...]
    tokens: int
    k: int = 0
    iterations: int = 1


class Tracer(Protocol):
    """Receives engine events (in simulated-time order) and timeline spans."""

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Record that ``kind`` happened to ``subject`` (e.g. ``request 3``, ``replica 0``)."""
        ...

    def span(self, span: Span) -> None:
        """Record a stretch of work (see :class:`Span`)."""
        ...


class NullTracer:
    """Discards every event."""

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Do nothing."""

    def span(self, span: Span) -> None:
        """Do nothing."""


@dataclass
class ListTracer:
    """Keeps every event as a ``(time_s, kind, subject, detail)`` tuple and every span (for tests)."""

    events: list[tuple[float, str, str, str]] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Append the event."""
        self.events.append((time_s, kind, subject, detail))

    def span(self, span: Span) -> None:
        """Append the span."""
        self.spans.append(span)
