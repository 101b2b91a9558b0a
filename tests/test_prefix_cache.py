"""Prefix caching (``scheduler.kv.prefix_cache``): pricing, capacity, eviction, hit rates."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.engine.core import Engine
from simulator.engine.prefix_cache import PrefixCache
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import ListTracer
from simulator.loading import load_packaged_schema
from simulator.metrics.disaggregation import KV_COLUMNS
from simulator.rng import RandomStreams
from simulator.runner import build_requests, run_window, snapshot
from simulator.validate import validate_file
from simulator.workload.trace_readers import read_trace
from tests.engine_fixtures import synthetic, write_scenario
from tests.script_modules import load_script

SLO = {"ttft_ms": 60000, "tpot_ms": 1000}
TRACES = Path(__file__).resolve().parent.parent / "scenarios" / "traces"
EXAMPLE = TRACES.parent / "prefix_cache" / "mooncake_llama31_8b_h100.yaml"


def trace(tmp_path: Path, rows: list[tuple[float, int, int, str]]) -> dict[str, object]:
    """A generic CSV trace with block ids, as a workload section."""
    lines = ["arrival_s,prompt_tokens,output_tokens,hash_ids"]
    lines += [f"{t},{p},{o},{ids}" for t, p, o, ids in rows]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    return {"source": "trace://trace.csv", "slo": SLO}


def chain(start: int, blocks: int) -> str:
    return " ".join(str(start + i) for i in range(blocks))


def simulate(tmp_path: Path, rows, cache: dict[str, object] | None, replicas: int = 1, **extra):
    settings = dict(extra)
    if cache is not None:
        settings["scheduler.kv.prefix_cache"] = cache
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=trace(tmp_path, rows),
        replicas=replicas,
        extra=settings,
    )
    return run(load_scenario(path))


# -- the cache on its own ----------------------------------------------------------------


def test_match_stops_at_the_first_missing_block_and_leaves_one_token():
    cache = PrefixCache(block_tokens=10)
    cache.insert("verify", (1, 2, 3, 4), [], 4, 5.0, 0.0)
    assert [b.key for b in cache.match("verify", (1, 2, 9, 4), 100)] == [1, 2]
    # 40 prompt tokens: at most (40 - 1) // 10 = 3 blocks may be found.
    assert [b.key for b in cache.match("verify", (1, 2, 3, 4), 40)] == [1, 2, 3]
    # Another model's cache is another tree.
    assert cache.match("fused", (1, 2, 3, 4), 100) == []


def test_eviction_takes_least_recently_used_leaves_first():
    cache = PrefixCache(block_tokens=10)
    old, _, _ = cache.insert("verify", (1, 2, 3), [], 3, 5.0, 0.0)
    new, _, _ = cache.insert("verify", (7, 8), [], 2, 5.0, 0.0)
    assert cache.unpin(old, 1.0) == 15.0
    assert cache.unpin(new, 2.0) == 10.0
    assert cache.evictable_mb == 25.0
    # Referenced blocks are never evicted; the oldest chain goes first, from its end.
    assert cache.evict(10.0) == 10.0
    assert [b.key for b in cache.match("verify", (1, 2, 3), 100)] == [1]
    assert [b.key for b in cache.match("verify", (7, 8), 100)] == [7, 8]
    assert cache.evict(100.0) == 15.0
    assert cache.evictable_mb == 0.0
    assert cache.blocks_evicted == 5


def test_a_referenced_block_is_not_evicted():
    cache = PrefixCache(block_tokens=10)
    path, _, _ = cache.insert("verify", (1, 2), [], 2, 5.0, 0.0)
    assert cache.evict(100.0) == 0.0
    cache.unpin(path, 1.0)
    hit = cache.match("verify", (1, 2), 100)
    assert cache.pin(hit) == 10.0  # free-but-cached KV taken back
    assert cache.evict(100.0) == 0.0


# -- pricing -----------------------------------------------------------------------------


def test_a_cached_prefix_shortens_prefill_by_exactly_its_cost(tmp_path):
    """Prefill is ``10 + 0.01 L`` ms (batch 1, no engine terms): ``F(L) - F(p)`` when cached."""
    rows = [(0.0, 1000, 2, chain(1, 10)), (100.0, 1000, 2, chain(1, 10))]
    cache = {"enabled": True, "block_tokens": 100}
    on = simulate(tmp_path, rows, cache).requests
    off = simulate(tmp_path, rows, None).requests
    # (1000 - 1) // 100 = 9 blocks are found: 900 tokens.
    assert list(on["cached_tokens"]) == [0, 900]
    assert "cached_tokens" not in off.columns
    # (The prompt's upload over the fixture's client link adds 32 ns to both.)
    assert off["ttft_ms"][1] == pytest.approx(10.0 + 0.01 * 1000, abs=1e-4)
    assert on["ttft_ms"][1] == pytest.approx(0.01 * (1000 - 900), abs=1e-4)
    # The saving is exactly the cached tokens' prefill F(900).
    assert off["ttft_ms"][1] - on["ttft_ms"][1] == pytest.approx(10.0 + 0.01 * 900)
    assert on["ttft_ms"][0] == off["ttft_ms"][0]


def test_block_tokens_sets_what_a_block_id_covers(tmp_path):
    rows = [(0.0, 1000, 2, chain(1, 10)), (100.0, 1000, 2, chain(1, 10))]
    on = simulate(tmp_path, rows, {"enabled": True, "block_tokens": 400}).requests
    assert list(on["cached_tokens"]) == [0, 800]  # (1000 - 1) // 400 = 2 blocks


def test_chunked_prefill_continues_the_cached_prefix(tmp_path):
    rows = [(0.0, 1000, 2, chain(1, 10)), (100.0, 1000, 2, chain(1, 10))]
    chunked = {"scheduler.arbitration": {"policy": "chunked_prefill"}}
    on = simulate(tmp_path, rows, {"enabled": True, "block_tokens": 100}, **chunked).requests
    off = simulate(tmp_path, rows, None, **chunked).requests
    assert list(on["cached_tokens"]) == [0, 900]
    # A chunk of c tokens continuing p computed ones costs F(p + c) - F(p) = 0.01 c.
    assert off["ttft_ms"][1] - on["ttft_ms"][1] == pytest.approx(10.0 + 0.01 * 900)


# -- capacity, eviction and exact hit rates ----------------------------------------------


def test_capacity_and_lru_eviction_follow_the_rule(tmp_path):
    """Seven 40,000-token prompts in 1,000-token blocks on one replica (hand-computed).

    KV: 80 GiB less 1,000 MB static = 80,920 MB, 0.5 MB per token, so a block is
    500 MB and each request holds 20,000.5 MB while it runs (prompt + 1 output
    token). A..E have distinct prompts; each leaves its 40 blocks cached
    (20,000 MB free-but-cached). D fits beside A, B and C's 60,000 MB; E finds
    920 MB really free and evicts 39 of A's blocks (LRU, from A's end), so F
    (A's prompt again) finds 1 block; F's own room evicts 39 of B's blocks;
    G (C's prompt) finds C's 39 usable blocks and evicts B's first block for
    the 80.5 MB it still lacks.
    """
    prompts = {name: chain(1000 * i, 40) for i, name in enumerate("ABCDE", start=1)}
    order = [*"ABCDE", "A", "C"]
    rows = [(10.0 * i, 40_000, 1, prompts[name]) for i, name in enumerate(order)]
    result = simulate(tmp_path, rows, {"enabled": True, "block_tokens": 1000})
    assert list(result.requests["cached_tokens"]) == [0, 0, 0, 0, 0, 1000, 39_000]
    assert list(result.requests["outcome"]) == ["completed"] * 7
    section = result.summary["prefix_cache"]
    assert section["blocks_evicted"] == 39 + 39 + 1
    assert section["blocks_queried"] == 7 * 39
    assert section["blocks_hit"] == 40
    assert section["block_hit_rate"] == pytest.approx(40 / 273)
    assert section["tokens_hit"] == section["prefill_tokens_saved"] == 40_000
    assert section["token_hit_rate"] == pytest.approx(40_000 / 280_000)
    assert section["by_replica"][0]["blocks_hit"] == 40
    jsonschema.validate(
        json.loads(json.dumps(result.summary)), load_packaged_schema("summary.schema.json")
    )


def test_summary_and_requests_have_no_cache_figures_when_off(tmp_path):
    rows = [(0.0, 1000, 2, chain(1, 10))]
    result = simulate(tmp_path, rows, None)
    assert "prefix_cache" not in result.summary
    assert "cached_tokens" not in result.requests.columns


@pytest.mark.parametrize("mode", ["fused", "distributed"])
def test_speculation_modes_use_the_targets_cache(tmp_path, mode):
    rows = [(0.0, 1000, 20, chain(1, 10)), (100.0, 1000, 20, chain(1, 10))]
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=trace(tmp_path, rows),
        extra={"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 100}},
    )
    result = run(load_scenario(path))
    assert list(result.requests["cached_tokens"]) == [0, 900]
    assert list(result.requests["outcome"]) == ["completed"] * 2


# -- refusals and traces -----------------------------------------------------------------


def _issues(tmp_path: Path, extra: dict[str, object], rows=None) -> list[str]:
    rows = rows or [(0.0, 1000, 2, chain(1, 10))]
    path = write_scenario(tmp_path, mode="none", workload=trace(tmp_path, rows), extra=extra)
    verdict = validate_file(path)
    assert verdict.error is not None
    return [issue.format() for issue in verdict.error.issues]


@pytest.mark.parametrize(
    ("extra", "key", "value", "allowed"),
    [
        (
            {"scheduler.kv.prefix_cache": {"block_tokens": 64}},
            "scheduler.kv.prefix_cache.block_tokens",
            "64",
            "the prefix cache is not enabled",
        ),
        (
            {"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 0}},
            "scheduler.kv.prefix_cache.block_tokens",
            "0",
            ">= 1",
        ),
    ],
)
def test_settings_it_cannot_run_with_are_refused(tmp_path, extra, key, value, allowed):
    lines = _issues(tmp_path, extra)
    matching = [line for line in lines if "scenario.yaml" in line and key in line and value in line]
    assert matching, "\n".join(lines)
    assert any(allowed in line for line in matching), "\n".join(lines)


def test_bad_block_ids_are_refused_with_their_row(tmp_path):
    rows = [(0.0, 1000, 2, "1 2 x")]
    lines = _issues(tmp_path, {}, rows)
    assert any("trace.csv" in line and "row 1" in line and "hash_ids" in line for line in lines)


def test_the_shipped_mooncake_slice_keeps_its_block_ids():
    table = read_trace(TRACES / "mooncake_conv_prefix_600.csv")
    assert table.format == "mooncake"
    assert len(table) == 600
    assert table.hash_ids is not None
    assert table.hash_ids[0] == tuple(range(14))
    assert table.hash_ids[1][:3] == (0, 14, 15)
    # One id per 512-token block of the prompt, the last one partial.
    assert all(
        len(ids) == -(-int(p) // 512)
        for ids, p in zip(table.hash_ids, table.prompt_tokens, strict=True)
    )
    assert read_trace(TRACES / "mooncake_conv_2k.csv").hash_ids is None


def test_jsonl_block_ids_are_read_as_lists(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n'
        '{"timestamp": 5, "input_length": 700, "output_length": 5, "hash_ids": [0, 2]}\n'
    )
    table = read_trace(path)
    assert table.hash_ids == ((0, 1), (0, 2))


def test_requests_csv_columns_with_the_cache_are_the_documented_ones(tmp_path):
    rows = [(0.0, 1000, 2, chain(1, 10))]
    result = simulate(tmp_path, rows, {"enabled": True})
    reference = (Path(__file__).resolve().parent.parent / "docs" / "outputs.md").read_text()
    section = reference.split("## requests.csv")[1].split("\n## ")[0]
    documented = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    # The KV transfer columns are written only with prefill and decode pools.
    assert [c for c in documented if c not in KV_COLUMNS] == list(result.requests.columns)


# -- cache-aware routing -----------------------------------------------------------------

ALTERNATING = [(float(i), 1000, 2000, chain(100 if i % 2 == 0 else 200, 10)) for i in range(6)]
"""Two prompts (A, B, A, B, ...), one a second, each decoding for about 40 s."""


def _routed(tmp_path: Path, routing: dict[str, object]) -> pd.DataFrame:
    result = simulate(
        tmp_path,
        ALTERNATING,
        {"enabled": True, "block_tokens": 100},
        replicas=3,
        **{"scheduler.routing": routing},
    )
    return result.requests


def test_cache_aware_routing_sends_a_repeated_prefix_to_the_same_replica(tmp_path):
    cached = _routed(tmp_path, {"policy": "cache_aware"})
    assert list(cached["replica"]) == [0, 1, 0, 1, 0, 1]
    assert list(cached["cached_tokens"]) == [0, 0, 900, 900, 900, 900]
    spread = _routed(tmp_path, {"policy": "round_robin"})
    assert list(spread["replica"]) == [0, 1, 2, 0, 1, 2]
    assert list(spread["cached_tokens"]) == [0, 0, 0, 0, 0, 0]


def test_cache_aware_match_threshold_sets_how_much_must_be_cached(tmp_path):
    # 900 of 1,000 tokens cached: not more than a threshold of 0.95.
    routed = _routed(tmp_path, {"policy": "cache_aware", "params": {"match_threshold": 0.95}})
    assert list(routed["replica"]) == [0, 1, 2, 0, 1, 2]


def test_cache_aware_goes_to_the_least_loaded_while_unbalanced(tmp_path):
    params = {"balance_abs_threshold": 0}
    routed = _routed(tmp_path, {"policy": "cache_aware", "params": params})
    # Outstanding requests at each arrival: (0,0,0) (1,0,0) (1,1,0) (1,1,1) (1,2,1)
    # (2,2,1); any difference is unbalanced but at the fourth: B's cached replica.
    assert list(routed["replica"]) == [0, 1, 2, 1, 0, 2]
    params = {"balance_abs_threshold": 0, "balance_rel_threshold": 5.0}
    routed = _routed(tmp_path, {"policy": "cache_aware", "params": params})
    # 2 is not more than 5 times 1: the last two go where their prompts are cached.
    assert list(routed["replica"]) == [0, 1, 2, 1, 0, 1]


def test_cache_aware_routing_needs_the_cache(tmp_path):
    lines = _issues(tmp_path, {"scheduler.routing": {"policy": "cache_aware"}})
    assert any(
        "scheduler.routing.policy" in line and "cache_aware" in line and "enabled true" in line
        for line in lines
    ), "\n".join(lines)


def test_a_cache_no_request_could_hit_is_refused(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(5, 1.0, 100, 10),
        extra={"scheduler.kv.prefix_cache": {"enabled": True}},
    )
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    assert any(
        "scheduler.kv.prefix_cache.enabled" in line and "hash_ids" in line for line in lines
    ), "\n".join(lines)


def test_mooncake_block_ids_need_512_token_blocks(tmp_path):
    (tmp_path / "trace.csv").write_text(
        "timestamp_ms,input_length,output_length,hash_ids\n0,1000,2,0 1\n10,1000,2,0 2\n"
    )
    workload = {"source": "trace://trace.csv", "slo": SLO}
    extra = {"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 256}}
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=extra)
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    assert any(
        "scheduler.kv.prefix_cache.block_tokens" in line and "256" in line and "512" in line
        for line in lines
    ), "\n".join(lines)
    extra = {"scheduler.kv.prefix_cache": {"enabled": True}}
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=extra)
    assert list(run(load_scenario(path)).requests["cached_tokens"]) == [0, 512]


def test_the_slice_script_converts_mooncake_json_lines_keeping_block_ids():
    slicer = load_script(
        Path(__file__).resolve().parent.parent / "scripts" / "slice_traces.py", "slice_traces"
    )
    shipped = (TRACES / "mooncake_conv_prefix_600.csv").read_bytes()
    records = []
    for line in shipped.decode().splitlines()[1:]:
        time_ms, prompt, output, ids = line.split(",")
        record = {
            "timestamp": int(time_ms),
            "input_length": int(prompt),
            "output_length": int(output),
            "hash_ids": [int(i) for i in ids.split()],
        }
        records.append(json.dumps(record))
    original = ("\n".join(records) + "\n").encode()
    assert slicer.prefix_slice_bytes(original, 600) == shipped
    assert slicer.prefix_slice_bytes(original, 2).count(b"\n") == 3
    with pytest.raises(ValueError, match="only 600 records"):
        slicer.prefix_slice_bytes(original, 601)


# -- synthetic shared prefixes -----------------------------------------------------------


def _synthetic_run(tmp_path: Path, shared: dict[str, object], cache: bool = True):
    workload = synthetic(8, 0.5, 500, 2, slo=SLO)
    workload["synthetic"]["shared_prefix"] = shared
    extra = {"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 100}} if cache else {}
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=extra)
    return run(load_scenario(path)).requests


def test_a_shared_system_prompt_is_found_after_its_first_prefill(tmp_path):
    requests = _synthetic_run(tmp_path, {"tokens": 1000, "fraction": 1.0})
    assert set(requests["prompt_tokens"]) == {1500}  # 1,000 shared + 500 drawn
    # Its 10 full blocks are shared; the drawn part's blocks are each prompt's own.
    assert list(requests["cached_tokens"]) == [0] + [1000] * 7
    longer = _synthetic_run(tmp_path, {"tokens": 2050, "fraction": 1.0})
    assert set(longer["prompt_tokens"]) == {2550}
    assert list(longer["cached_tokens"]) == [0] + [2000] * 7  # 2,050 // 100 full blocks


def test_only_the_requests_drawn_to_have_the_prefix_share_it(tmp_path):
    requests = _synthetic_run(tmp_path, {"tokens": 1000, "fraction": 0.5})
    has = requests["prompt_tokens"] == 1500
    assert 0 < has.sum() < len(requests)
    assert set(requests.loc[~has, "prompt_tokens"]) == {500}
    assert (requests.loc[~has, "cached_tokens"] == 0).all()
    hits = list(requests.loc[has, "cached_tokens"])
    assert hits == [0] + [1000] * (len(hits) - 1)
    # The draw does not depend on the cache (stream prefixes).
    off = _synthetic_run(tmp_path, {"tokens": 1000, "fraction": 0.5}, cache=False)
    assert list(off["prompt_tokens"]) == list(requests["prompt_tokens"])
    assert "cached_tokens" not in off.columns


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arbitration", "on_full"),
    [
        ("prefill_first", "queue"),
        ("chunked_prefill", "queue"),
        ("prefill_first", "preempt_recompute"),
        ("chunked_prefill", "preempt_recompute"),
    ],
)
def test_kv_is_conserved_on_the_mooncake_example(arbitration, on_full):
    """Every request's KV comes back; what stays is free-but-cached blocks, all evictable."""
    scenario = load_scenario(
        EXAMPLE,
        [
            "scheduler.kv.prefix_cache.enabled=true",
            "scheduler.routing.policy=cache_aware",
            f"scheduler.arbitration.policy={arbitration}",
            f"scheduler.kv.on_full={on_full}",
            "hardware_profiles.0.count=4",
            *(
                ["scheduler.prefill.batching.max_tokens=null"]
                if arbitration != "prefill_first"
                else []
            ),
        ],
    )
    engine = Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(scenario.seed))
    output = engine.run()
    assert {r.outcome for r in output.records} == {"completed"}
    assert output.prefix_cache is not None
    assert sum(s.blocks_hit for s in output.prefix_cache.replicas) > 0
    for replica in engine.replicas:
        pool = replica.kv
        cache = replica.kv_rule.cache
        assert cache is not None
        assert pool.peak_mb <= pool.capacity_mb + 1e-6
        assert pool.used_mb == pytest.approx(0.0, abs=1e-6)
        cached_mb = cache.evictable_mb
        assert 0 < cached_mb <= pool.capacity_mb + 1e-6
        assert cache.evict(float("inf")) == pytest.approx(cached_mb)  # all of it, leaf by leaf
        assert cache.evictable_mb == pytest.approx(0.0, abs=1e-6)


# -- predictions price the cached prefix ------------------------------------------------

CACHE_100 = {"enabled": True, "block_tokens": 100}
PREDICTED = [
    (0.0, 1000, 2, chain(1, 10)),  # prompt A, prefilled by 20 ms
    (0.1, 1000, 2, chain(1, 10)),  # A again: F(1000) - F(900) = 1 ms where A is cached
    (0.1, 500, 2, chain(100, 5)),  # C: F(500) = 15 ms
    (0.1, 500, 2, chain(200, 5)),  # D: F(500) = 15 ms
]
"""Prefill is ``10 + 0.01 L`` ms: F(1000) = 20 ms, F(900) = 19 ms, F(500) = 15 ms."""


def test_network_aware_routing_sees_the_cached_prefix_in_the_predicted_queue(tmp_path):
    """The predicted prefill queue counts a cached prompt's prefill as ``F(L) - F(p)``.

    At 0.1 s both replicas are idle: A's second copy goes to replica 0 (the
    lowest index), where A is cached: 1 ms of predicted queue with the cache,
    20 ms without. C goes to replica 1 (queue 0 ms). D compares replica 0's
    queue with replica 1's 15 ms: 1 ms takes it to replica 0, 20 ms to 1.
    """
    routing = {"scheduler.routing": {"policy": "network_aware"}}
    on = simulate(tmp_path, PREDICTED, CACHE_100, replicas=2, **routing).requests
    assert list(on["cached_tokens"]) == [0, 900, 0, 0]
    assert list(on["replica"]) == [0, 0, 1, 0]
    off = simulate(tmp_path, PREDICTED, None, replicas=2, **routing).requests
    assert list(off["replica"]) == [0, 0, 1, 1]


@pytest.mark.parametrize(("ttft_slo_ms", "admitted"), [(20.999, False), (21.001, True)])
def test_slo_guard_predicts_a_cached_prompts_prefill_as_its_uncached_part(
    tmp_path, ttft_slo_ms, admitted
):
    """slo_guard's predicted TTFT counts a cached prompt's prefill as ``F(L) - F(p)``.

    At 0.1 s, on one replica, A's second copy is queued (1 ms predicted: 900
    tokens cached) when C' (1,000 tokens, nothing cached) arrives: C''s
    predicted TTFT is 1 + 20 = 21 ms (40 ms if A were priced whole).
    """
    rows = [*PREDICTED[:2], (0.1, 1000, 2, chain(100, 10))]  # C': F(1000) = 20 ms
    slo = {"ttft_ms": ttft_slo_ms, "tpot_ms": 1000}
    extra = {
        "scheduler.kv.prefix_cache": CACHE_100,
        "scheduler.admission_control": {"policy": "slo_guard"},
    }
    workload = trace(tmp_path, rows)
    workload["slo"] = slo
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=extra)
    requests = run(load_scenario(path)).requests
    assert list(requests["cached_tokens"][:2]) == [0, 900]
    assert bool(requests["outcome"][2] == "completed") is admitted


def test_ttft_bounded_prefill_waits_by_the_cached_prompts_predicted_prefill(tmp_path):
    """TTFT target 50 ms; a lone prompt waits until its deadline less its predicted prefill.

    A first: 20 ms predicted, it starts 30 ms after its arrival. A again at
    0.1 s: 1 ms predicted (F(1000) - F(900)), it starts at 0.149 s and its
    first token is out at its deadline (priced whole it would start at 0.13 s).
    """
    rows = PREDICTED[:2]
    workload = trace(tmp_path, rows)
    workload["slo"] = {"ttft_ms": 50, "tpot_ms": 1000}
    extra = {
        "scheduler.kv.prefix_cache": CACHE_100,
        "scheduler.prefill": {
            "policy": "ttft_bounded",
            "batching": {"max_batch": 4, "max_wait_ms": 1000},
        },
    }
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=extra)
    tracer = ListTracer()
    run(load_scenario(path), tracer=tracer)
    starts = [t for t, kind, _subject, _detail in tracer.events if kind == "prefill_start"]
    # (The prompt's upload over the fixture's client link adds 32 ns.)
    assert starts == pytest.approx([0.030, 0.149], abs=1e-6)


# -- with KV that grows (scheduler.kv.on_full: preempt_recompute) -------------------------


@pytest.mark.parametrize(
    ("a_output", "b_cached", "evicted"), [(1_500, 59_000, 1), (3_000, 58_000, 2)]
)
def test_a_preempted_request_recomputes_from_its_cached_prompt_blocks(
    tmp_path, a_output, b_cached, evicted
):
    """A (100,000 tokens) and B (60,000) in 1,000-token blocks; 161,840 tokens of KV.

    Both are prefilled (A holds 100,001 tokens, B 60,001) and grow a token a
    step until the pool is full (919 steps); B, the newest, is preempted: its
    own 920 tokens are freed and its 60 blocks stay cached, unreferenced. B
    waits (its context and one token exceed the free KV) until A ends, then
    recomputes. With 1,500 output tokens A's last 580 fit in the 920 really
    free: B finds its 59 usable blocks (59,000 tokens) and evicts one block for
    the rest (its own 60th: the least recently used leaf). With 3,000, A's
    last 2,080 tokens evict B's 60th and 59th blocks (leaves, from B's end):
    B finds 58 blocks and the really free KV (3,840 tokens) holds the rest.
    """
    rows = [(0.0, 100_000, a_output, chain(1, 100)), (0.001, 60_000, 1_500, chain(1000, 60))]
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=trace(tmp_path, rows),
        extra={
            "scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 1000},
            "scheduler.kv.on_full": "preempt_recompute",
        },
    )
    scenario = load_scenario(path)
    engine = Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(scenario.seed))
    output = engine.run()
    records = sorted(output.records, key=lambda r: r.request_id)
    assert [r.outcome for r in records] == ["completed", "completed"]
    assert [r.preemptions for r in records] == [0, 1]
    assert output.prefix_cache is not None
    assert dict(output.prefix_cache.cached_tokens) == {0: 0, 1: b_cached}
    stats = output.prefix_cache.replicas[0]
    hit = b_cached // 1000
    assert (stats.lookups, stats.blocks_queried, stats.blocks_hit) == (3, 99 + 59 + 59, hit)
    assert stats.blocks_evicted == evicted
    pool = engine.replicas[0].kv
    cache = engine.replicas[0].kv_rule.cache
    assert cache is not None
    assert pool.peak_mb <= pool.capacity_mb + 1e-6
    # Every request's KV came back: what is used is the cached blocks, all evictable.
    assert pool.used_mb == pytest.approx(0.0, abs=1e-6)
    assert cache.evictable_mb == pytest.approx((100 + 60) * 500.0)  # B cached its 60 again


def test_a_deep_cache_is_copied_without_recursion(tmp_path: Path) -> None:
    """A what-if window copies a stopped run, its prefix caches included.

    The radix tree is as deep as a prompt has blocks; copying it recursively
    went past Python's recursion limit at about 200 blocks (a 3,200-token
    prompt in 16-token blocks), so ``run_window`` raised ``RecursionError``.
    The copy keeps the tree, the references and the eviction heap.
    """
    cache = PrefixCache(block_tokens=16)
    blocks, _, _ = cache.insert("verify", tuple(range(3000)), [], 3000, 1.0, 0.0)
    cache.unpin(blocks[-5:], 1.0)
    twin = copy.deepcopy(cache)
    found = twin.match("verify", tuple(range(3000)), 3000 * 16 + 1)
    assert [b.key for b in found] == list(range(3000))
    assert found[-1].parent is found[-2] and found[0].parent is not None
    assert all(b is not c for b, c in zip(found, blocks, strict=True))
    assert [b.refs for b in found[-6:]] == [1, 0, 0, 0, 0, 0]
    assert twin.evict(2.0) == 2.0 and cache.evictable_mb == 5.0
    # A run stopped while long prompts are cached forks and continues exactly.
    rows = [(0.0, 6400, 4, chain(0, 400)), (0.01, 6400, 4, chain(0, 400))]
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=trace(tmp_path, rows),
        extra={"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 16}},
    )
    scenario = load_scenario(path)
    full = run(scenario).output.records
    window = run_window(snapshot(scenario, 0.12), 10.0).output.records
    assert repr(window) == repr(full)  # field for field, nan as nan
