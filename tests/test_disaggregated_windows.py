"""What-if windows and resizing of disaggregated prefill and decode pools."""

from __future__ import annotations

import math
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.runner import run_candidate, run_window, snapshot
from tests.engine_fixtures import synthetic, write_scenario

START_S = 2.0
"""The snapshot time: decode replicas are full, requests wait for them and KV is moving."""

MODES = pytest.mark.parametrize("mode", ["none", "distributed"])
"""Plain decoding, and clients drafting for the decode replicas."""


def disaggregated(
    tmp_path: Path,
    *,
    prefill: int = 2,
    decode: int = 2,
    name: str = "scenario.yaml",
    workload: dict[str, Any] | None = None,
    max_running: int = 6,
    extra: dict[str, Any] | None = None,
    mode: str = "none",
) -> Path:
    """``prefill`` prefill replicas and ``decode`` decode replicas of the fixtures' pool.

    KV crosses an 8 Gbit/s link (a 300-token prompt's KV takes about 160 ms)
    and a decode replica runs at most ``max_running`` requests, so at the
    snapshot requests decode, move and wait for a decode replica. In mode
    ``distributed`` the five laptops draft for the decode replicas.
    """
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=workload or synthetic(200, 40, 300, 60),
        clients=5,
        replicas=prefill,
        link={"src": "laptops", "dst": "pool", "rtt_ms": 20, "bw_mbps": 100},
        extra=extra,
        name=name,
    )
    doc = yaml.safe_load(path.read_text())
    pool = doc["hardware_profiles"][1]
    pool["role"] = "prefill"
    doc["hardware_profiles"].append(dict(pool, id="dpool", role="decode", count=decode))
    client = doc["network"]["links"][0]
    doc["network"]["links"] += [
        dict(client, dst="dpool"),
        {"src": "pool", "dst": "dpool", "rtt_ms": 2.0, "bw_mbps": 8000.0},
    ]
    doc["scheduler"]["max_running_requests"] = max_running
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _same(a: object, b: object) -> bool:
    """Records equal field for field, ``nan`` equal to ``nan``."""
    return all(
        (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        or x == y
        for x, y in zip(astuple(a), astuple(b), strict=True)
    )


@MODES
def test_a_forked_window_reproduces_the_full_run_exactly(tmp_path: Path, mode: str) -> None:
    """The copy's hand-overs read the copy's clock: every request ending in it is the full run's."""
    scenario = load_scenario(disaggregated(tmp_path, mode=mode))
    full = {r.request_id: r for r in run(scenario).output.records}
    state = snapshot(scenario, START_S)
    ended = [r for r in run_window(state, 8.0).output.records if r.outcome != "unfinished"]
    handed = {i.request_id for i in state.in_flight if i.kv_from >= 0}
    assert handed & {r.request_id for r in ended}
    assert all(_same(record, full[record.request_id]) for record in ended)


@MODES
def test_a_snapshot_says_where_each_handed_over_kv_is(tmp_path: Path, mode: str) -> None:
    scenario = load_scenario(disaggregated(tmp_path, mode=mode))
    state = snapshot(scenario, START_S)
    moving = [i for i in state.in_flight if math.isfinite(i.kv_arrive_s)]
    waiting = [i for i in state.in_flight if i.kv_from >= 0 and math.isnan(i.kv_arrive_s)]
    assert moving and waiting
    # Replicas 0-1 prefill, 2-3 decode.
    for item in moving:
        assert item.kv_from in (0, 1) and item.replica in (2, 3)
        assert item.kv_arrive_s >= START_S > item.kv_since_s
        assert item.kv_rank == -1 and math.isnan(item.first_token_server_s)
    assert sorted(i.kv_rank for i in waiting) == list(range(len(waiting)))
    assert all(i.replica == i.kv_from and i.generated == 1 for i in waiting)
    others = [i for i in state.in_flight if i.kv_from < 0]
    assert all(i.kv_rank == -1 and math.isnan(i.kv_arrive_s) for i in others)


@MODES
def test_a_window_of_the_same_pools_keeps_every_hand_over(tmp_path: Path, mode: str) -> None:
    """Moving KV arrives when it did in the run; waiting requests decode on decode replicas only."""
    scenario = load_scenario(disaggregated(tmp_path, mode=mode))
    full = run(scenario).requests.set_index("request_id")
    state = snapshot(scenario, START_S)
    result = run_candidate(scenario, state, 600.0)
    frame = result.requests.set_index("request_id")
    assert (frame["outcome"] == "completed").all()
    assert frame["replica"].isin([2, 3]).all()  # every request decodes on a decode replica
    items = {i.request_id: i for i in state.in_flight}
    moving = [r for r, i in items.items() if math.isfinite(i.kv_arrive_s)]
    decoding = [r for r, i in items.items() if i.generated > 0 and i.kv_from < 0]
    waiting = [r for r, i in items.items() if i.kv_from >= 0 and math.isnan(i.kv_arrive_s)]
    assert moving and decoding and waiting
    # The first token of moving KV leaves on arrival, as in the run; decoding ones had theirs.
    same = full.loc[moving + decoding]
    assert (frame.loc[moving + decoding, "ttft_ms"] - same["ttft_ms"]).abs().max() < 1e-6
    assert (frame.loc[moving + decoding, "replica"] == same["replica"]).all()
    # Only the waiting and new requests cross the link in the window, the waiting ones first.
    transfers = result.output.disaggregation
    assert transfers is not None
    sent = [t.request_id for t in transfers.transfers]
    assert not set(moving) & set(sent)
    order = sorted(waiting, key=lambda r: items[r].kv_rank)
    assert sent[: len(waiting)] == order
    waits = {t.request_id: t.wait_s for t in transfers.transfers}
    assert all(waits[r] >= START_S - items[r].kv_since_s for r in waiting)


@MODES
def test_a_window_without_a_decode_replica_migrates_its_requests_by_recompute(
    tmp_path: Path,
    mode: str,
) -> None:
    """Requests on the decode replica the window lacks re-prefill, move again and keep their TTFT."""
    scenario = load_scenario(disaggregated(tmp_path, mode=mode))
    full = run(scenario).requests.set_index("request_id")
    state = snapshot(scenario, START_S)
    items = {i.request_id: i for i in state.in_flight}
    lost = [
        r
        for r, i in items.items()
        if i.replica == 3 and i.kv_from < 0 and 0 < i.generated < i.output_tokens
    ]
    assert lost
    smaller = load_scenario(disaggregated(tmp_path, decode=1, name="smaller.yaml", mode=mode))
    tracer = ListTracer()
    result = run_candidate(smaller, state, 600.0, tracer=tracer)
    frame = result.requests.set_index("request_id")
    assert (frame["outcome"] == "completed").all()
    assert (frame["replica"] == 2).all()
    assert (frame["generated_tokens"] == frame["output_tokens"]).all()
    migrated = {int(s.split()[1]) for _, kind, s, _ in tracer.events if kind == "migrate"}
    assert set(lost) <= migrated
    assert (frame.loc[lost, "ttft_ms"] - full.loc[lost, "ttft_ms"]).abs().max() < 1e-6
    transfers = result.output.disaggregation
    assert transfers is not None
    assert set(lost) <= {t.request_id for t in transfers.transfers}


@MODES
def test_resized_pools_route_and_hand_over_to_the_replicas_serving(
    tmp_path: Path, mode: str
) -> None:
    """A decode replica started mid-run takes KV once loaded; a drained prefill replica retires."""
    scenario = load_scenario(disaggregated(tmp_path, mode=mode))
    state = snapshot(scenario, START_S)
    engine = state.engine
    load_s = 0.5
    engine.set_replica_count("dpool", 3, load_s)
    engine.set_replica_count("pool", 1, load_s)
    engine.advance(600.0)
    output = engine.output()
    frame = output.records
    assert all(r.outcome == "completed" for r in frame)
    transfers = output.disaggregation
    assert transfers is not None
    assert output.replica_pools == ("pool", "pool", "dpool", "dpool", "dpool")
    new = [t for t in transfers.transfers if t.decode_replica == 4]
    assert new
    spans = engine.fleet.spans_s(engine.env.now)
    assert spans[4][0] == START_S
    # Nothing reached replica 4 before its model was loaded.
    arrivals = {r.request_id: r for r in frame}
    assert all(
        arrivals[t.request_id].arrival_s + arrivals[t.request_id].ttft_ms / 1000 > START_S + load_s
        for t in new
    )
    # The drained prefill replica took no request after the change and retired.
    later = [r for r in frame if r.arrival_s > START_S]
    assert later and all(r.request_id not in _prefilled_on(transfers, 1) for r in later)
    assert spans[1][1] < engine.env.now


def _prefilled_on(transfers: Any, replica: int) -> set[int]:
    """Requests prefilled on ``replica`` (their KV left it)."""
    return {t.request_id for t in transfers.transfers if t.prefill_replica == replica}
