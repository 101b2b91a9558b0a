"""Routing: which target replica serves a request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from policies.base import Policy
from policies.families import ROUTING
from policies.params import NoParams, param
from policies.views import ReplicaLoad, RoutingQuery

if TYPE_CHECKING:
    import numpy as np


class RoutingPolicy(Policy, Protocol):
    """Chooses a replica for each admitted request.

    Attributes:
        reads_replica_detail: The engine fills the ``ReplicaLoad`` fields
            after ``kv_free_mb`` (and keeps the predicted prefill queues they
            need). Default ``False``.
        reads_prefix: The engine fills ``ReplicaLoad.cached_prefix_tokens``
            from each replica's prefix cache (``scheduler.kv.prefix_cache``
            must be enabled). Default ``False``.
        reads_kv_transfer: It ranks replicas by ``ReplicaLoad.kv_transfer_s``,
            filled only when choosing a disaggregated fleet's decode replica
            (``scheduler.routing.decode``), so it is refused as the router of
            new requests. Default ``False``.
    """

    reads_replica_detail: ClassVar[bool] = False
    reads_prefix: ClassVar[bool] = False
    reads_kv_transfer: ClassVar[bool] = False

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the ``index`` of the chosen replica (one of ``replicas``)."""
        ...


ROUTING.declare_protocol(RoutingPolicy)


@ROUTING.register
class RoundRobin(RoutingPolicy):
    """Replicas in turn, in index order, whatever their load."""

    name: ClassVar[str] = "round_robin"

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


class _LowestKey(RoutingPolicy):
    """Base of routers that take the replica with the smallest :meth:`key`."""

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def key(self, replica: ReplicaLoad) -> tuple[float, ...]:
        """The ordering key of ``replica`` (the smallest is chosen)."""
        raise NotImplementedError

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the replica with the smallest key."""
        if not replicas:
            raise ValueError("no replica to route to")
        return min(replicas, key=self.key).index


@ROUTING.register
class LeastOutstanding(_LowestKey):
    """The replica with the fewest outstanding requests (lowest index on ties)."""

    name: ClassVar[str] = "least_outstanding"

    def key(self, replica: ReplicaLoad) -> tuple[float, ...]:
        """Outstanding requests, then index."""
        return (replica.outstanding_requests, replica.index)


@ROUTING.register
class KvAware(_LowestKey):
    """The replica with the most KV free after placing the request.

    It compares ``kv_free_mb - kv_need_mb``: the replica's free KV less what
    the request must hold there to be prefilled, so pools whose models take
    more KV per token count that. Ties go to the fewest outstanding requests,
    then the lowest index: requests admitted at one instant, before any of
    them holds KV, spread over the replicas instead of herding onto one.
    """

    name: ClassVar[str] = "kv_aware"
    reads_replica_detail: ClassVar[bool] = True

    def key(self, replica: ReplicaLoad) -> tuple[float, ...]:
        """KV left after the request's (negated), outstanding requests, index."""
        return (
            replica.kv_need_mb - replica.kv_free_mb,
            replica.outstanding_requests,
            replica.index,
        )


@ROUTING.register
class NetworkAware(_LowestKey):
    """The replica with the smallest predicted RTT + prefill queue delay.

    ``score = link_rtt_ms / 1000 + predicted_queue_s``: the round trip of the
    request's origin link to the replica's pool (paid by its prompt upload
    and first token, and by every distributed round) plus the replica's
    predicted prefill queue. Ties go to the fewest outstanding requests, then
    the lowest index.
    """

    name: ClassVar[str] = "network_aware"
    reads_replica_detail: ClassVar[bool] = True

    def key(self, replica: ReplicaLoad) -> tuple[float, ...]:
        """Predicted RTT + prefill queue delay in s, outstanding requests, index."""
        return (
            replica.link_rtt_ms / 1000.0 + replica.predicted_queue_s,
            replica.outstanding_requests,
            replica.index,
        )


@ROUTING.register
class KvTransferAware(_LowestKey):
    """For a prefilled request's decode replica: the fewest outstanding requests, then the fastest KV move.

    The default of ``scheduler.routing.decode``. Among the decode replicas
    that can reserve the request's KV now it takes the one with the fewest
    outstanding requests, then the shortest nominal transfer of the KV
    (``kv_transfer_s``: bytes / bandwidth + RTT / 2 of the link from the
    prefill replica's pool), then the lowest index: load decides, and the
    transfer breaks ties between equally loaded replicas behind links of
    different speeds (a faster link hands the first token over sooner).
    """

    name: ClassVar[str] = "kv_transfer_aware"
    reads_replica_detail: ClassVar[bool] = True
    reads_kv_transfer: ClassVar[bool] = True

    def key(self, replica: ReplicaLoad) -> tuple[float, ...]:
        """Outstanding requests, nominal KV transfer time, index."""
        return (replica.outstanding_requests, replica.kv_transfer_s, replica.index)


@ROUTING.register
class PowerOfTwo(RoutingPolicy):
    """Two distinct candidates drawn at random; the one with fewer outstanding requests.

    Mitzenmacher's power of two choices (IEEE TPDS 2001): the two are drawn
    uniformly without replacement from the ``routing`` random stream; ties go
    to the lower index. With one candidate it is chosen without a draw.
    """

    name: ClassVar[str] = "power_of_two"
    random_stream: ClassVar[str | None] = "routing"

    def __init__(self, params: NoParams | None = None, *, rng: np.random.Generator) -> None:
        self.params = params if params is not None else NoParams()
        self._rng = rng

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the less loaded of two replicas drawn at random."""
        n = len(replicas)
        if n == 0:
            raise ValueError("no replica to route to")
        if n == 1:
            return replicas[0].index
        first = int(self._rng.integers(n))
        second = int(self._rng.integers(n - 1))
        if second >= first:
            second += 1
        a, b = replicas[first], replicas[second]
        best = min(a, b, key=lambda r: (r.outstanding_requests, r.index))
        return best.index


@dataclass(frozen=True)
class CacheAwareParams:
    """Parameters of ``cache_aware``.

    The defaults are SGLang router's ``cache_threshold`` (0.5),
    ``balance_abs_threshold`` (32) and ``balance_rel_threshold`` (1.0001).

    Attributes:
        match_threshold: Share of the prompt's tokens the best replica must
            hold cached for the request to go there.
        balance_abs_threshold: The load counts as unbalanced only when the
            most and least loaded replicas differ by more than this many
            outstanding requests...
        balance_rel_threshold: ...and the most loaded has more than this
            many times the least loaded's.
    """

    match_threshold: float = param(
        0.5,
        minimum=0,
        maximum=1,
        description="share of the prompt the best replica must hold cached to get the request",
    )
    balance_abs_threshold: int = param(
        32,
        minimum=0,
        description="unbalanced when the outstanding requests of the most and least loaded "
        "replicas differ by more than this",
    )
    balance_rel_threshold: float = param(
        1.0001,
        minimum=1,
        description="and the most loaded has more than this many times the least loaded's",
    )


@ROUTING.register
class CacheAware(RoutingPolicy):
    """The replica holding the longest cached prefix of the request, unless the load is unbalanced.

    As SGLang's cache-aware router: while the outstanding requests are
    unbalanced (the most loaded replica has more than
    ``balance_abs_threshold`` more than the least loaded, and more than
    ``balance_rel_threshold`` times as many) the least loaded replica gets
    the request. Otherwise the replica whose prefix cache holds the most of
    its prompt gets it when that is more than ``match_threshold`` of the
    prompt's tokens, else the least loaded one. Ties go to the fewest
    outstanding requests, then the lowest index. The cached prefix is read
    from the replicas' caches themselves (SGLang's router keeps its own
    approximate tree of what it sent). Needs ``scheduler.kv.prefix_cache``.
    """

    name: ClassVar[str] = "cache_aware"
    reads_prefix: ClassVar[bool] = True
    Params = CacheAwareParams

    def __init__(self, params: CacheAwareParams | None = None) -> None:
        self.params = params if params is not None else CacheAwareParams()

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        """Return the replica by cached prefix, or by load (see the class docstring)."""
        if not replicas:
            raise ValueError("no replica to route to")
        p = self.params
        least = min(replicas, key=lambda r: (r.outstanding_requests, r.index))
        most = max(r.outstanding_requests for r in replicas)
        fewest = least.outstanding_requests
        if most - fewest > p.balance_abs_threshold and most > fewest * p.balance_rel_threshold:
            return least.index
        best = min(
            replicas,
            key=lambda r: (-r.cached_prefix_tokens, r.outstanding_requests, r.index),
        )
        if best.cached_prefix_tokens > p.match_threshold * query.prompt_tokens:
            return best.index
        return least.index
