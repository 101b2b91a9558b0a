"""Routing: which target replica serves a request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from policies.batching import NO_PARAMS_SCHEMA, NoParams
from policies.families import ROUTING
from policies.views import ReplicaLoad, RoutingQuery


class RoutingPolicy(Protocol):
    """Chooses a replica for each admitted request."""

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the ``index`` of the chosen replica (one of ``replicas``)."""
        ...


@ROUTING.register
class RoundRobin:
    """Replicas in turn, in index order, whatever their load."""

    name: ClassVar[str] = "round_robin"
    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()
        self._next = 0

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the next replica in turn."""
        if not replicas:
            raise ValueError("no replica to route to")
        chosen = replicas[self._next % len(replicas)].index
        self._next += 1
        return chosen


@ROUTING.register
class LeastOutstanding:
    """The replica with the fewest outstanding requests (lowest index on ties)."""

    name: ClassVar[str] = "least_outstanding"
    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the least-loaded replica."""
        if not replicas:
            raise ValueError("no replica to route to")
        best = min(replicas, key=lambda r: (r.outstanding_requests, r.index))
        return best.index
