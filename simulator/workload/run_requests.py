"""The request table of one run, built from a loaded scenario's workload and seed, bounded.

:func:`build_requests` generates the table (see
:func:`~simulator.workload.generate.generate_requests`) and refuses one a run
may not hold: arrival times past :data:`~simulator.limits.MAX_ARRIVAL_S` once
scaled, more than :data:`~simulator.limits.MAX_REQUESTS` requests. It reads
the scenario through :class:`RequestSource`, so this package never imports
:mod:`simulator.scenario` (which imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from simulator.errors import InputError, Issue, make_issue
from simulator.limits import MAX_ARRIVAL_S, MAX_REQUESTS
from simulator.rng import RandomStreams
from simulator.workload.generate import ArrivalOverflowError, generate_requests
from simulator.workload.requests import RequestTable
from simulator.workload.spec import SyntheticSource, WorkloadSpec


class ClientClass(Protocol):
    """A client (draft-role) device class, as far as origins are concerned."""

    @property
    def id(self) -> str:
        """The class id (a request's ``origin``)."""
        ...

    @property
    def count(self) -> int:
        """How many devices the class has (its weight under the ``by_count`` rule)."""
        ...


class RequestSource(Protocol):
    """What a request table is built from (a :class:`~simulator.scenario.model.Scenario`)."""

    @property
    def seed(self) -> int:
        """The root seed of the run's random streams."""
        ...

    @property
    def workload(self) -> WorkloadSpec:
        """The workload specification."""
        ...

    @property
    def source_file(self) -> Path:
        """The scenario file, named by the issues."""
        ...

    def clients(self) -> Sequence[ClientClass]:
        """The client device classes, in declaration order."""
        ...


def build_requests(source: RequestSource) -> RequestTable:
    """Generate the request table of ``source`` from its workload and seed.

    Raises:
        InputError: The workload has more requests than a run may hold
            (:data:`simulator.limits.MAX_REQUESTS`), or an arrival time divided
            by ``workload.arrival_scale`` is later than
            :data:`simulator.limits.MAX_ARRIVAL_S` or not finite.
    """
    streams = RandomStreams(source.seed)
    clients = [(d.id, d.count) for d in source.clients()]
    try:
        table = generate_requests(source.workload, clients, streams)
    except ArrivalOverflowError as exc:
        raise InputError([_overflow_issue(source, exc)]) from None
    if len(table) > MAX_REQUESTS:
        raise InputError(
            [
                make_issue(
                    source.source_file,
                    "workload.max_requests",
                    f"{len(table):,} requests in the workload",
                    f"at most {MAX_REQUESTS:,} requests per run (set workload.max_requests "
                    "or slice the trace)",
                    "too many requests to simulate",
                )
            ]
        )
    return table


def _overflow_issue(source: RequestSource, exc: ArrivalOverflowError) -> Issue:
    """The issue of arrival times too late for a run, named at the key that makes them so."""
    workload = source.workload
    late = f"arrival times up to {MAX_ARRIVAL_S:g} s (the latest a run may have)"
    if exc.last_s <= MAX_ARRIVAL_S:
        return make_issue(
            source.source_file,
            "workload.arrival_scale",
            exc.scale,
            f">= {exc.last_s / MAX_ARRIVAL_S:.3g}: {late}; the last arrival is at "
            f"{exc.last_s:.6g} s before scaling",
            "arrival times too late once scaled",
        )
    if isinstance(workload.source, SyntheticSource):
        return make_issue(
            source.source_file,
            "workload.synthetic.arrival",
            repr(workload.source.arrival),
            f"an arrival process giving {late}: a higher rate_per_s, a shorter off_s",
            "arrival times too late",
        )
    return make_issue(
        source.source_file,
        "workload.duration_s",
        getattr(workload.source, "duration_s", None),
        f"a trace slice whose arrivals span at most {MAX_ARRIVAL_S:g} s (set duration_s "
        "or max_requests)",
        f"the slice's last arrival is at {exc.last_s:.6g} s",
    )
