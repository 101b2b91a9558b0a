"""The validated workload section as frozen objects.

:class:`WorkloadSpec` is what :func:`~simulator.workload.build.build_workload_spec`
produces from a scenario's ``workload`` section and what
:func:`~simulator.workload.generate.generate_requests` turns into a
:class:`~simulator.workload.requests.RequestTable`. It holds everything a run
needs (trace files are already read), so generating requests does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simulator.workload.arrays import constructor_arguments, rebuild
from simulator.workload.arrivals import ArrivalProcess
from simulator.workload.closed_loop import ClosedLoop, ThinkTime
from simulator.workload.distributions import FixedLength, LengthDistribution, UniformLength
from simulator.workload.origins import OriginRule
from simulator.workload.slo import DEFAULT_CLASS, SloTargets
from simulator.workload.trace_table import TraceTable


@dataclass(frozen=True, eq=False)
class TraceSource:
    """Replay of a trace slice.

    Attributes:
        trace: The whole trace as read (arrival times from its first row).
        start_s: Slice start on the trace's clock (seconds).
        duration_s: Slice length (seconds of trace time); None = to the end.
    """

    trace: TraceTable
    start_s: float = 0.0
    duration_s: float | None = None

    def sliced(self, max_requests: int | None = None) -> TraceTable:
        """Return the slice, capped at ``max_requests``, rebased to start at 0."""
        return self.trace.window(self.start_s, self.duration_s, max_requests).rebased()


@dataclass(frozen=True)
class SharedPrefix:
    """A system prompt shared by a fraction of synthetic requests (``synthetic.shared_prefix``).

    Attributes:
        tokens: Its length; added in front of the drawn prompt of each request
            that has it.
        fraction: Probability that a request has it (drawn per request,
            stream ``prefixes``).
    """

    tokens: int
    fraction: float

    def __post_init__(self) -> None:
        if self.tokens < 1 or not 0 < self.fraction <= 1:
            raise ValueError("SharedPrefix needs tokens >= 1 and 0 < fraction <= 1")


@dataclass(frozen=True)
class Sessions:
    """Multi-turn sessions of synthetic requests (``synthetic.sessions``).

    Attributes:
        turns: Requests per session (drawn per session, stream ``sessions``
            sub-stream 0).
        think_time: Delay from a turn's arrival to the next turn's arrival
            (seconds; stream ``sessions`` sub-stream 1).
    """

    turns: FixedLength | UniformLength
    think_time: ThinkTime


@dataclass(frozen=True)
class SyntheticSource:
    """Synthetic request generation.

    Attributes:
        arrival: The arrival process; None with a closed-loop workload, whose
            users decide when requests are sent (then all arrivals are 0).
        prompt_tokens: Prompt length distribution.
        output_tokens: Output length distribution.
        num_requests: Generate this many requests (or None: use ``duration_s``).
        duration_s: Generate arrivals in ``[0, duration_s)`` (or None).
        slo_class_mix: ``(class name, weight)`` pairs; classes drawn by weight.
        category_mix: ``(task category, weight)`` pairs; categories drawn by
            weight (empty: requests carry no category).
        shared_prefix: A system prompt some requests share (None: none).
        sessions: Multi-turn sessions (None: every request is on its own);
            then the arrival process draws the sessions' first turns.
    """

    arrival: ArrivalProcess | None
    prompt_tokens: LengthDistribution
    output_tokens: LengthDistribution
    num_requests: int | None = None
    duration_s: float | None = None
    slo_class_mix: tuple[tuple[str, float], ...] = ((DEFAULT_CLASS, 1.0),)
    category_mix: tuple[tuple[str, float], ...] = ()
    shared_prefix: SharedPrefix | None = None
    sessions: Sessions | None = None

    def __post_init__(self) -> None:
        if (self.num_requests is None) == (self.duration_s is None):
            raise ValueError("SyntheticSource needs exactly one of num_requests and duration_s")
        if self.arrival is None and self.num_requests is None:
            raise ValueError("SyntheticSource without an arrival process needs num_requests")
        if not self.slo_class_mix or any(not w > 0 for _, w in self.slo_class_mix):
            raise ValueError("SyntheticSource.slo_class_mix needs weights > 0")
        if any(not w > 0 for _, w in self.category_mix):
            raise ValueError("SyntheticSource.category_mix needs weights > 0")


@dataclass(frozen=True, eq=False)
class WorkloadSpec:
    """Everything needed to generate a run's requests.

    Attributes:
        source: A trace slice or a synthetic generator.
        slo_classes: SLO class name -> targets, including ``default``.
        origin: How requests without an origin get one.
        max_requests: Keep at most this many requests (the earliest); None = all.
        arrival_scale: Arrival times are divided by this (> 0; 2.0 doubles the rate).
        prompt_length_override: Replaces the trace's prompt lengths (trace sources).
        output_length_override: Replaces the trace's output lengths (trace sources).
        closed_loop: Users that send the table's requests one after another
            (arrival times of the table are then not used); None = open loop.
    """

    source: TraceSource | SyntheticSource
    slo_classes: Mapping[str, SloTargets]
    origin: OriginRule = field(default_factory=OriginRule)
    max_requests: int | None = None
    arrival_scale: float = 1.0
    prompt_length_override: LengthDistribution | None = None
    output_length_override: LengthDistribution | None = None
    closed_loop: ClosedLoop | None = None

    def __post_init__(self) -> None:
        if DEFAULT_CLASS not in self.slo_classes:
            raise ValueError(f"WorkloadSpec.slo_classes must define {DEFAULT_CLASS!r}")
        if not self.arrival_scale > 0:
            raise ValueError(f"arrival_scale must be > 0, got {self.arrival_scale}")
        source = self.source
        timed = not isinstance(source, SyntheticSource) or source.arrival is not None
        if self.closed_loop is not None:
            if self.arrival_scale != 1.0 or (isinstance(source, SyntheticSource) and timed):
                raise ValueError("a closed-loop workload takes no arrival process or arrival_scale")
        elif not timed:
            raise ValueError("an open-loop synthetic workload needs an arrival process")
        object.__setattr__(self, "slo_classes", MappingProxyType(dict(self.slo_classes)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the constructor arguments (the read-only mapping cannot be pickled)."""
        return (rebuild, (type(self), constructor_arguments(self)))

    @property
    def is_synthetic(self) -> bool:
        """Whether requests are generated rather than replayed."""
        return isinstance(self.source, SyntheticSource)

    def slo_of(self, class_name: str) -> SloTargets:
        """Return the targets of SLO class ``class_name``.

        Raises:
            KeyError: The class is unknown.
        """
        return self.slo_classes[class_name]

    def category_names(self) -> frozenset[str]:
        """Return every task category the workload's requests may carry (trace column, mix).

        The scenario checks the acceptance curves in use have each of them.
        A trace's whole column is read, not only the slice.
        """
        if isinstance(self.source, SyntheticSource):
            return frozenset(name for name, _ in self.source.category_mix)
        column = self.source.trace.category
        if column is None:
            return frozenset()
        return frozenset(str(name) for name in set(column.tolist()) if name)

    def origin_names(self) -> frozenset[str]:
        """Return every client device class the workload names (trace column, weights).

        The scenario checks these are declared client (draft) device classes.
        """
        names = {name for name, _ in self.origin.weights}
        if isinstance(self.source, TraceSource) and self.source.trace.origin is not None:
            names.update(str(n) for n in set(self.source.trace.origin.tolist()) if n)
        return frozenset(names)
