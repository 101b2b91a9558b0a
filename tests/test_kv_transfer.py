"""The KV hand-over of disaggregated serving (simulator.engine.kv_transfer)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

from policies.routing import KvTransferAware, RoundRobin, RoutingPolicy
from policies.views import ReplicaLoad, RoutingQuery
from simulator.engine.kv import KvPool
from simulator.engine.kv_transfer import (
    BYTES_PER_MB,
    KvHolder,
    KvTransfers,
    kv_bytes,
    nominal_transfer_s,
)
from simulator.engine.network import Channel, Network
from simulator.engine.request_state import RequestState
from simulator.scenario.model import JitterSpec, Link

MB_PER_TOKEN = 0.125
"""KV per token of Llama-3.1-8B in MiB (32 layers x 8 KV heads x 128 x 2 x 2 bytes)."""


class FakeReplica:
    """A replica with a KV pool that reserves prompt + output tokens (``on_full: queue``)."""

    def __init__(self, index: int, pool: str, capacity_mb: float) -> None:
        self.index = index
        self.pool = pool
        self.kv = KvPool(capacity_mb)
        self.outstanding = 0
        self.kv_mb_per_token: Mapping[str, float] = {"decode": MB_PER_TOKEN}
        self.finished: list[tuple[int, float]] = []
        self.holders: list[RequestState] = []
        self.max_running = 1000
        self.clock = 0.0

    def kv_need_mb(self, req: RequestState, kind: str) -> float:
        return (req.prompt_tokens + req.output_tokens) * self.kv_mb_per_token[kind]

    def take_over(self, req: RequestState, kind: str) -> None:
        need = self.kv_need_mb(req, kind)
        self.kv.allocate(need, self.clock)
        req.kv_mb = need
        req.kv_peak_mb = need

    hold = take_over  # a window's start reserves what the hand-over did

    def finish(self, req: RequestState) -> None:
        self.kv.free(req.kv_mb, self.clock)
        self.finished.append((req.request_id, req.kv_mb))
        req.kv_mb = 0.0


class Clock:
    """A minimal event loop: actions run in time order."""

    def __init__(self, replicas: list[FakeReplica]) -> None:
        self.now_s = 0.0
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.replicas = replicas

    def at(self, time_s: float, action: Callable[[], None]) -> None:
        self.events.append((time_s, len(self.events), action))

    def run(self) -> None:
        while self.events:
            self.events.sort(key=lambda e: (e[0], e[1]))
            time_s, _, action = self.events.pop(0)
            self.set(time_s)
            action()

    def set(self, time_s: float) -> None:
        self.now_s = time_s
        for replica in self.replicas:
            replica.clock = time_s


def _request(request_id: int, prompt: int, output: int, kv_mb: float) -> RequestState:
    req = RequestState(request_id, 0.0, prompt, output, "default", "")
    req.kv_mb = kv_mb
    req.kv_peak_mb = kv_mb
    return req


def _setup(
    decode_capacity_mb: float,
    rtt_ms: float = 2.0,
    bw_mbps: float = 400_000.0,
    router: RoutingPolicy | None = None,
) -> tuple[Clock, FakeReplica, list[FakeReplica], KvTransfers, list[tuple[int, int, float]]]:
    prefill = FakeReplica(0, "prefill", 10_000.0)
    decodes = [
        FakeReplica(1, "decode", decode_capacity_mb),
        FakeReplica(2, "decode", decode_capacity_mb),
    ]
    clock = Clock([prefill, *decodes])
    network = Network(JitterSpec(False, 0.0, 0.0), np.random.default_rng(0))
    link = Link("prefill", "decode", rtt_ms, bw_mbps, 0.0)

    def channel(req: RequestState, replica: KvHolder, pool: str) -> Channel | None:
        return network.channels(link, replica.index)[0] if pool == "decode" else None

    arrived: list[tuple[int, int, float]] = []
    transfers = KvTransfers(
        lambda: clock.now_s,
        clock.at,
        decodes,
        channel,
        lambda req, kind, decode: arrived.append((req.request_id, decode.index, clock.now_s)),
        router if router is not None else KvTransferAware(),
    )
    return clock, prefill, decodes, transfers, arrived


def test_a_transfer_takes_bytes_over_bandwidth_plus_half_the_rtt() -> None:
    clock, prefill, _, transfers, arrived = _setup(1_000.0, rtt_ms=2.0, bw_mbps=400_000.0)
    req = _request(7, 1023, 100, 1024 * MB_PER_TOKEN)
    transfers.hand_over(req, "decode", prefill)
    clock.run()
    nbytes = 1024 * MB_PER_TOKEN * BYTES_PER_MB
    assert kv_bytes(1023, MB_PER_TOKEN) == nbytes
    expected_s = nbytes * 8 / 400e9 + 0.001
    assert nominal_transfer_s(nbytes, 400_000.0, 2.0) == pytest.approx(expected_s, rel=1e-12)
    assert arrived == [(7, 1, pytest.approx(expected_s, rel=1e-12))]
    record = transfers.records[0]
    assert record.nbytes == nbytes
    assert record.transfer_s == pytest.approx(expected_s, rel=1e-12)
    assert transfers.bytes_moved == nbytes


def test_transfers_from_one_prefill_replica_share_its_link() -> None:
    clock, prefill, _, transfers, arrived = _setup(1_000.0, rtt_ms=0.0, bw_mbps=8.0)
    transfers.hand_over(_request(1, 0, 1, 0.0), "decode", prefill)
    transfers.hand_over(_request(2, 0, 1, 0.0), "decode", prefill)
    clock.run()
    one_s = MB_PER_TOKEN * BYTES_PER_MB * 8 / 8e6
    assert [t for _, _, t in arrived] == [pytest.approx(one_s), pytest.approx(2 * one_s)]


def test_the_decode_kv_is_reserved_before_the_transfer_and_the_prefill_kv_freed_after() -> None:
    clock, prefill, decodes, transfers, _ = _setup(1_000.0)
    prefill.kv.allocate(1024 * MB_PER_TOKEN, 0.0)
    req = _request(3, 1023, 977, 1024 * MB_PER_TOKEN)
    transfers.hand_over(req, "decode", prefill)
    assert decodes[0].kv.used_mb == 2000 * MB_PER_TOKEN
    assert prefill.kv.used_mb == 1024 * MB_PER_TOKEN
    assert (decodes[0].outstanding, prefill.outstanding) == (1, -1)
    clock.run()
    assert prefill.kv.used_mb == 0.0
    assert prefill.finished == [(3, 1024 * MB_PER_TOKEN)]
    assert req.kv_mb == 2000 * MB_PER_TOKEN


def test_a_request_waits_on_its_prefill_replica_until_a_decode_replica_has_room() -> None:
    clock, prefill, decodes, transfers, arrived = _setup(100 * MB_PER_TOKEN, rtt_ms=0.0)
    for decode in decodes:
        decode.kv.allocate(60 * MB_PER_TOKEN, 0.0)
    req = _request(4, 30, 20, 31 * MB_PER_TOKEN)
    transfers.hand_over(req, "decode", prefill)
    assert list(transfers.waiting) == [(req, "decode", prefill, 0.0)]
    assert arrived == []
    clock.set(0.5)
    decodes[1].kv.free(60 * MB_PER_TOKEN, 0.5)
    transfers.retry()
    clock.run()
    assert not transfers.waiting
    record = transfers.records[0]
    assert (record.decode_replica, record.wait_s) == (2, 0.5)
    expected_s = 0.5 + 31 * MB_PER_TOKEN * BYTES_PER_MB * 8 / 400e9
    assert arrived == [(4, 2, pytest.approx(expected_s, rel=1e-12))]


def test_waiting_requests_are_placed_first_come_first() -> None:
    _, prefill, decodes, transfers, _ = _setup(100 * MB_PER_TOKEN)
    for decode in decodes:
        decode.kv.allocate(100 * MB_PER_TOKEN, 0.0)
    big, small = _request(1, 79, 20, 0.0), _request(2, 9, 1, 0.0)
    transfers.hand_over(big, "decode", prefill)
    transfers.hand_over(small, "decode", prefill)
    decodes[0].kv.free(50 * MB_PER_TOKEN, 0.0)
    transfers.retry()
    assert [r.request_id for r, *_ in transfers.waiting] == [1, 2]
    decodes[1].kv.free(100 * MB_PER_TOKEN, 0.0)
    transfers.retry()
    assert not transfers.waiting
    assert [(r.request_id, r.decode_replica) for r in transfers.records] == [(1, 2), (2, 1)]


def test_the_decode_replica_with_fewest_outstanding_requests_is_chosen() -> None:
    _, prefill, decodes, transfers, _ = _setup(1_000.0)
    decodes[0].outstanding = 3
    transfers.hand_over(_request(5, 10, 10, 0.0), "decode", prefill)
    transfers.hand_over(_request(6, 10, 10, 0.0), "decode", prefill)
    assert [r.decode_replica for r in transfers.records] == [2, 2]
    assert decodes[1].outstanding == 2


def test_a_decode_replica_running_its_most_requests_takes_no_more() -> None:
    _, prefill, decodes, transfers, _ = _setup(1_000.0)
    decodes[0].max_running = 0
    decodes[1].max_running = 0
    req = _request(8, 10, 10, 0.0)
    transfers.hand_over(req, "decode", prefill)
    assert [r.request_id for r, *_ in transfers.waiting] == [8]
    decodes[1].max_running = 1
    transfers.retry()
    assert [r.decode_replica for r in transfers.records] == [2]


class Recorder(KvTransferAware):
    """``kv_transfer_aware`` that keeps what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[RoutingQuery, list[ReplicaLoad]]] = []

    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        self.asked.append((query, list(replicas)))
        return super().route(query, replicas)


def test_the_decode_router_sees_the_candidates_kv_and_their_transfer() -> None:
    router = Recorder()
    _, prefill, decodes, transfers, _ = _setup(1_000.0, rtt_ms=2.0, router=router)
    decodes[1].kv.allocate(900.0, 0.0)  # 100 MiB free, less than the 125 MiB it needs
    transfers.hand_over(_request(3, 900, 100, 0.0), "decode", prefill)
    [(query, loads)] = router.asked
    assert (query.request_id, query.prompt_tokens, query.kv_from) == (3, 900, 0)
    [load] = loads
    nbytes = 901 * MB_PER_TOKEN * BYTES_PER_MB
    assert (load.index, load.pool, load.kv_free_mb, load.kv_need_mb) == (1, "decode", 1000.0, 125.0)
    assert (load.link_rtt_ms, load.link_bw_mbps) == (2.0, 400_000.0)
    assert load.kv_transfer_s == pytest.approx(nbytes * 8 / 400e9 + 0.001, rel=1e-12)
    assert load.predicted_queue_s == 0.0


def test_another_routing_policy_chooses_the_decode_replica() -> None:
    _, prefill, decodes, transfers, _ = _setup(1_000.0, router=RoundRobin())
    decodes[0].outstanding = 3  # kv_transfer_aware would send all three to replica 2
    for request_id in (1, 2, 3):
        transfers.hand_over(_request(request_id, 10, 10, 0.0), "decode", prefill)
    assert [r.decode_replica for r in transfers.records] == [1, 2, 1]


class Stray(RoundRobin):
    def route(self, query: RoutingQuery, replicas: Sequence[ReplicaLoad]) -> int:
        return 99


def test_a_decode_router_choosing_no_candidate_is_an_error() -> None:
    _, prefill, _, transfers, _ = _setup(1_000.0, router=Stray())
    with pytest.raises(ValueError, match="chose replica 99, not one of the candidates"):
        transfers.hand_over(_request(1, 10, 10, 0.0), "decode", prefill)
