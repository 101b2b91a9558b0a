"""Speculation on the decode side of a disaggregated fleet: modes distributed and hybrid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from simulator import load_scenario, run
from simulator.console import headline_table
from simulator.engine.kv_transfer import BYTES_PER_MB
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import ListTracer, Span
from simulator.loading import load_packaged_schema
from simulator.outputs import write_results
from simulator.validate import validate_file
from tests.engine_fixtures import planner_every_second, synthetic, write_scenario
from tests.test_disaggregation import BW_MBPS, RTT_MS, SLO, _disaggregated

HYBRID = {"speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 30}}}


def _spans(tracer: ListTracer, place: str, phase: str) -> list[Span]:
    return [s for s in tracer.spans if s.place == place and s.phase == phase]


def test_distributed_ttft_is_the_colocated_ttft_plus_the_transfer(tmp_path: Path) -> None:
    workload = synthetic(1, 1.0, 100, 10, slo=SLO)
    (tmp_path / "c").mkdir()
    colocated = run(
        load_scenario(write_scenario(tmp_path / "c", mode="distributed", workload=workload))
    )
    (tmp_path / "d").mkdir()
    scenario = load_scenario(_disaggregated(tmp_path / "d", mode="distributed", workload=workload))
    result = run(scenario)
    per_token_mb = build_runtime(scenario).replicas[0].kv_mb_per_token["verify"]
    transfer_ms = 101 * per_token_mb * BYTES_PER_MB * 8 / (BW_MBPS * 1e6) * 1000 + RTT_MS / 2
    d, c = result.requests.iloc[0], colocated.requests.iloc[0]
    assert (d["mode"], d["prefill_replica"], d["replica"]) == ("distributed", 0, 1)
    assert d["kv_transfer_ms"] == pytest.approx(transfer_ms, rel=1e-9)
    assert d["ttft_ms"] == pytest.approx(c["ttft_ms"] + transfer_ms, rel=1e-9)
    assert d["e2e_ms"] == pytest.approx(c["e2e_ms"] + transfer_ms, rel=1e-9)
    # The same rounds, on the decode replica: the device's draft prefill was
    # done before the first token came back in both runs.
    for column in ("tpot_ms", "tvt_ms", "verify_rounds", "accepted_tokens", "draft_energy_j"):
        assert d[column] == pytest.approx(c[column], rel=1e-9), column
    busy = result.output.replica_busy_s
    assert busy[0] == pytest.approx(0.011, rel=1e-9)  # its prefill: 10 + 0.01 x 100 ms
    assert sum(busy) == pytest.approx(colocated.output.replica_busy_s[0], rel=1e-9)
    assert result.output.device_busy_s == pytest.approx(colocated.output.device_busy_s, rel=1e-9)


def _two_by_two(tmp_path: Path, mode: str, n: int, **kw: Any) -> Path:
    """Two prefill and two decode replicas, three client devices."""
    edit = {"hardware_profiles.0.count": 3, "hardware_profiles.1.count": 2}
    edit.update(kw.pop("edit", {}))
    path = _disaggregated(
        tmp_path, mode=mode, workload=synthetic(n, 40.0, 200, 30, slo=SLO), edit=edit, **kw
    )
    doc = yaml.safe_load(path.read_text())
    doc["hardware_profiles"][2]["count"] = 2
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_every_verify_round_runs_on_the_decode_replica(tmp_path: Path) -> None:
    tracer = ListTracer()
    result = run(load_scenario(_two_by_two(tmp_path, "distributed", 12)), tracer=tracer)
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert (frame["verify_rounds"] > 0).all()
    assert set(frame["prefill_replica"]) == {0, 1} and set(frame["replica"]) == {2, 3}
    decode_of = dict(zip(frame["request_id"], frame["replica"], strict=True))
    prefill_of = dict(zip(frame["request_id"], frame["prefill_replica"], strict=True))
    rounds: dict[int, int] = {}
    for span in _spans(tracer, "replica", "verify"):
        assert span.owner.startswith("dpool/"), span
        for rid in span.requests:
            assert span.owner == f"dpool/{decode_of[rid]}"
            rounds[rid] = rounds.get(rid, 0) + 1
    assert rounds == dict(zip(frame["request_id"], frame["verify_rounds"], strict=True))
    for span in _spans(tracer, "replica", "prefill"):
        assert all(span.owner == f"pool/{prefill_of[rid]}" for rid in span.requests)
    assert not [s for s in tracer.spans if s.owner.startswith("pool/") and s.lane == "decode"]
    # The prompt goes to the prefill pool, bundles and results cross the link to the decode pool.
    assert {s.owner.split("/")[0] for s in _spans(tracer, "link", "prompt")} == {"laptops->pool"}
    for phase in ("bundle", "result", "first_token"):
        assert {s.owner.split("/")[0] for s in _spans(tracer, "link", phase)} == {"laptops->dpool"}


def test_decode_kv_reserves_the_draft_tokens_of_a_round(tmp_path: Path) -> None:
    # Two requests at once; the decode replica's KV holds two of them without
    # speculation but only one with its k_max + 1 draft tokens reserved.
    results = {}
    tracers = {}
    for mode in ("none", "distributed"):
        (tmp_path / mode).mkdir()
        path = _disaggregated(
            tmp_path / mode,
            mode=mode,
            workload=synthetic(2, 1e6, 100, 10, slo=SLO),
            decode_kv_limit_mb=112.0,
        )
        scenario = load_scenario(path)
        runtime = build_runtime(scenario)
        per_token_mb = runtime.replicas[1].kv_mb_per_token["verify"]
        reserve = runtime.settings.k_max + 1 if mode == "distributed" else 0
        need_mb = (110 + reserve) * per_token_mb
        tracers[mode] = ListTracer()
        results[mode] = run(scenario, tracer=tracers[mode]).requests
        frame = results[mode]
        assert frame["kv_peak_mb"].tolist() == pytest.approx([need_mb, need_mb], rel=1e-12)
        assert (frame["outcome"] == "completed").all()
    none, distributed = results["none"], results["distributed"]
    assert none["kv_wait_ms"].tolist() == [0.0, 0.0]
    first, second = distributed.iloc[0], distributed.iloc[1]
    assert first["kv_wait_ms"] == 0.0 and second["kv_wait_ms"] > 0.0
    # The second transfer starts when the decode replica has verified the first
    # request's last tokens (and freed its KV), not when they reach the client.
    last_round = max(
        s.start_s + s.duration_s
        for s in _spans(tracers["distributed"], "replica", "verify")
        if 0 in s.requests
    )
    sent_s = second["arrival_s"] + (second["ttft_server_ms"] - second["kv_transfer_ms"]) / 1000
    assert sent_s == pytest.approx(last_round, abs=1e-9)


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "run.json"}


@pytest.mark.parametrize("mode", ["distributed", "hybrid"])
def test_a_repeat_with_the_same_seed_is_byte_identical(tmp_path: Path, mode: str) -> None:
    extra = HYBRID if mode == "hybrid" else {}
    scenario = load_scenario(_two_by_two(tmp_path, mode, 10, edit=extra))
    outputs = []
    for attempt in ("a", "b"):
        write_results(run(scenario), tmp_path / attempt)
        outputs.append(_files(tmp_path / attempt))
    assert outputs[0] == outputs[1]
    assert "requests.csv" in outputs[0]


def test_the_hybrid_policy_sees_the_link_to_the_decode_pool(tmp_path: Path) -> None:
    # The client's link to the prefill pool is fast, its link to the decode
    # pool (where the rounds would cross) slow: rtt_threshold sends every
    # request fused; with the links the other way round, distributed.
    modes = {}
    for slow in ("pool", "dpool"):
        folder = tmp_path / slow
        folder.mkdir()
        index = 0 if slow == "pool" else 1
        path = _disaggregated(
            folder,
            mode="hybrid",
            workload=synthetic(4, 20.0, 100, 10, slo=SLO),
            edit={**HYBRID, f"network.links.{index}.rtt_ms": 60.0},
        )
        frame = run(load_scenario(path)).requests
        assert (frame["outcome"] == "completed").all()
        assert (frame["replica"] == 1).all() and (frame["verify_rounds"] > 0).all()
        modes[slow] = set(frame["mode"])
    assert modes == {"pool": {"distributed"}, "dpool": {"fused"}}


def test_hybrid_mixes_fused_and_distributed_requests_on_the_decode_replicas(
    tmp_path: Path,
) -> None:
    tracer = ListTracer()
    edit = {"speculation.hybrid": {"policy": "fused_fraction", "params": {"fraction": 0.5}}}
    result = run(load_scenario(_two_by_two(tmp_path, "hybrid", 12, edit=edit)), tracer=tracer)
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert frame["mode"].value_counts().to_dict() == {"distributed": 6, "fused": 6}
    assert (frame["generated_tokens"] == 30).all()
    for phase in ("verify", "fused"):
        spans = _spans(tracer, "replica", phase)
        assert spans and all(s.owner.startswith("dpool/") for s in spans)
    distributed = set(frame.loc[frame["mode"] == "distributed", "request_id"])
    drafted = {rid for s in _spans(tracer, "device", "draft") for rid in s.requests}
    assert drafted == distributed


def test_several_client_classes_draft_over_their_own_links(tmp_path: Path) -> None:
    path = _two_by_two(tmp_path, "distributed", 16)
    doc = yaml.safe_load(path.read_text())
    phones = dict(doc["hardware_profiles"][0], id="phones", count=2)
    doc["hardware_profiles"].insert(1, phones)
    doc["network"]["links"] += [
        {"src": "phones", "dst": "pool", "rtt_ms": 20.0, "bw_mbps": 50.0},
        {"src": "phones", "dst": "dpool", "rtt_ms": 40.0, "bw_mbps": 20.0},
    ]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    tracer = ListTracer()
    frame = run(load_scenario(path), tracer=tracer).requests
    assert (frame["outcome"] == "completed").all()
    assert set(frame["origin"]) == {"laptops", "phones"}
    origin_of = dict(zip(frame["request_id"], frame["origin"], strict=True))
    for span in _spans(tracer, "link", "bundle"):
        (rid,) = span.requests
        assert span.owner.split("/")[0] == f"{origin_of[rid]}->dpool"


@pytest.mark.parametrize("mode", ["distributed", "hybrid"])
def test_a_disaggregated_fleet_validates_in_every_drafting_mode(tmp_path: Path, mode: str) -> None:
    path = _disaggregated(tmp_path, mode=mode, edit=HYBRID if mode == "hybrid" else {})
    assert validate_file(path).error is None


def test_a_one_token_distributed_request_ends_on_its_prefill_replica(tmp_path: Path) -> None:
    tracer = ListTracer()
    path = _disaggregated(tmp_path, mode="distributed", workload=synthetic(2, 5.0, 100, 1, slo=SLO))
    result = run(load_scenario(path), tracer=tracer)
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert (frame["replica"] == 0).all() and (frame["verify_rounds"] == 0).all()
    assert result.summary["disaggregation"]["transfers"] == 0
    assert not _spans(tracer, "device", "draft")  # the device prefilled, drafted nothing


def test_a_latency_predicting_hybrid_policy_runs(tmp_path: Path) -> None:
    edit = {"speculation.hybrid": {"policy": "predicted_latency"}}
    frame = run(load_scenario(_two_by_two(tmp_path, "hybrid", 8, edit=edit))).requests
    assert (frame["outcome"] == "completed").all()
    assert set(frame["replica"]) <= {2, 3}


def test_a_hand_over_placed_while_a_round_commits_leaves_the_others_growth(
    tmp_path: Path,
) -> None:
    """Fused rounds on a decode replica of 130 MB (260 tokens, 0.5 MB each), acceptance 1.

    Requests 0 (100 + 100 tokens) and 1 (100 + 6) decode together; request 2's context
    (151 tokens) waits for room. The round in which request 1 finishes frees its KV while
    it commits, before request 0 has grown by its 5 tokens: request 2's KV may be placed
    then only where request 0's growth still fits, and it does not. Before, the first
    member's growth ended the round's promise, request 2 took that room and the run
    stopped with "KV allocation beyond capacity".
    """
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,100\n0,100,6\n0,150,10\n")
    path = _disaggregated(
        tmp_path,
        mode="fused",
        workload={"source": f"trace://{trace}", "slo": SLO},
        decode_kv_limit_mb=130.0,
        edit={"scheduler.kv": {"on_full": "preempt_recompute"}, "network.links.2.bw_mbps": 1e6},
    )
    (tmp_path / "acc.yaml").write_text(
        (tmp_path / "acc.yaml").read_text().replace("alpha: 0.7", "alpha: 1.0")
    )
    frame = run(load_scenario(path)).requests
    assert (frame["outcome"] == "completed").all()
    assert list(frame["generated_tokens"]) == [100, 6, 10]
    assert frame["kv_peak_mb"].max() <= 130.0
    # Request 2 moves to the decode replica only once request 0 has finished.
    assert frame.loc[2, "e2e_ms"] > frame.loc[0, "e2e_ms"]


def _decode_slot_cycle(tmp_path: Path, **edit: Any) -> Path:
    """One laptop drafting one request at a time, two prefill replicas, one decode slot.

    The first request (1,000-token prompt) takes the laptop; the second (100 tokens), waiting
    for the laptop, is prefilled sooner and takes the decode replica's only running slot:
    each then waits for what the other holds. ``edit``: more dotted keys to set.
    """
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,1000,10\n0.001,100,10\n")
    return _disaggregated(
        tmp_path,
        mode="distributed",
        workload={"source": f"trace://{trace}", "slo": SLO},
        edit={"hardware_profiles.1.count": 2, "scheduler.max_running_requests": 1, **edit},
    )


def test_a_run_whose_requests_wait_on_each_other_through_a_decode_slot_reports_the_stall(
    tmp_path: Path,
) -> None:
    """One laptop drafting one request at a time; two prefill replicas; one decode slot.

    The first request takes the laptop and prefills its long prompt; the second, waiting for
    the laptop, prefills its short one sooner and takes the decode replica's only running slot.
    Each then waits for what the other holds (a cycle the engine does not break): the run runs
    out of events with both unfinished and says so.
    """
    result = run(load_scenario(_decode_slot_cycle(tmp_path)))
    assert list(result.requests["outcome"]) == ["unfinished", "unfinished"]
    assert result.summary["requests"]["stalled_at_s"] > 0.0


def test_a_stalled_run_ends_at_its_last_event(tmp_path: Path) -> None:
    """The decode-slot cycle: the run's time, and what is divided by it, reach the stall.

    Before, a run that ran out of events ended at its last request's end, so this one,
    where no request ended, lasted 0 s (``simulated_s`` 0, ``gpu_hours`` 0, utilisation
    null) while its prefill replicas had been busy.
    """
    summary = run(load_scenario(_decode_slot_cycle(tmp_path))).summary
    assert summary["simulated_s"] == summary["requests"]["stalled_at_s"] > 0.0
    busy_s = sum(c["busy_s"] for c in summary["energy"]["by_device_class"].values())
    assert busy_s > 0.0
    assert 0.0 < summary["resources"]["gpu_utilization"] <= 1.0


def test_a_planner_run_that_stalls_ends_and_reports_the_stall(tmp_path: Path) -> None:
    """The decode-slot cycle above, with a planner whose only candidate is the fleet as it is.

    Once the two requests wait on each other nothing is left on the clock but the
    sampler and the planner's next round, and every round keeps the configuration.
    Before, each round planned the next one, so the run never ran out of events: it
    planned for ever (with ``until_s`` 60 s, 60 rounds of windows). Now a round that
    keeps the configuration with nothing else pending plans no next one: the run ends
    as it would without a planner, reported stalled.
    """
    path = _decode_slot_cycle(tmp_path, planner=planner_every_second({"decode_replicas": [1]}))
    cut = run(load_scenario(path), until_s=60.0)
    assert cut.planner_log["time_s"].nunique() == 1
    result = run(load_scenario(path))
    assert list(result.requests["outcome"]) == ["unfinished", "unfinished"]
    assert 1.0 <= result.summary["requests"]["stalled_at_s"] < 2.0


def test_a_run_whose_requests_wait_on_each_other_reports_the_stall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that runs out of events with requests unfinished says so instead of ending quietly.

    Here the devices never draft (their rounds are dropped), so both requests wait after their
    first token with nothing left to simulate.
    """
    from simulator.engine.draft_device import DraftDevice

    monkeypatch.setattr(DraftDevice, "next_round", lambda self, req: None)
    result = run(load_scenario(_two_by_two(tmp_path, "distributed", 2)))
    assert list(result.requests["outcome"]) == ["unfinished", "unfinished"]
    stalled_s = result.summary["requests"]["stalled_at_s"]
    assert 0.0 < stalled_s <= 2.0  # the last event: a sample of the timeseries
    assert "warning: stalled at" in headline_table(result.summary)
    jsonschema.validate(
        json.loads(json.dumps(result.summary)), load_packaged_schema("summary.schema.json")
    )


def test_a_run_that_ends_or_is_cut_reports_no_stall(tmp_path: Path) -> None:
    path = _two_by_two(tmp_path, "distributed", 6)
    assert "stalled_at_s" not in run(load_scenario(path)).summary["requests"]
    cut = run(load_scenario(path), until_s=0.05)
    assert (cut.requests["outcome"] == "unfinished").any()
    assert "stalled_at_s" not in cut.summary["requests"]
