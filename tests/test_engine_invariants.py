"""Invariants of the engine: conservation, outcomes, determinism, monotonicity, fusion."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.outputs import write_results
from simulator.runner import build_requests
from tests.engine_fixtures import PROFILES, synthetic, write_scenario

MODES = ("none", "distributed", "fused", "hybrid")


def _hybrid_extra():
    return {"speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 30}}}


def _run(tmp_path, mode, workload, **kw):
    extra = kw.pop("extra", {})
    if mode == "hybrid":
        extra = {**_hybrid_extra(), **extra}
    path = write_scenario(tmp_path, mode=mode, workload=workload, extra=extra, **kw)
    return run(load_scenario(path))


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    mode=st.sampled_from(MODES),
    n=st.integers(1, 30),
    prompt=st.integers(1, 3000),
    output=st.integers(1, 300),
    rate=st.floats(0.5, 50),
    alpha=st.floats(0.0, 0.95),
    k=st.integers(1, 8),
    rtt=st.sampled_from([0.0, 10.0, 80.0]),
)
def test_token_conservation_and_single_outcome(
    tmp_path_factory, mode, n, prompt, output, rate, alpha, k, rtt
):
    tmp = tmp_path_factory.mktemp("inv")
    result = _run(
        tmp,
        mode,
        synthetic(n, rate, prompt, output),
        alpha=alpha,
        k=k,
        link={"src": "laptops", "dst": "pool", "rtt_ms": rtt, "bw_mbps": 50},
        clients=3,
        replicas=2,
    )
    frame = result.requests
    assert len(frame) == n
    assert set(frame["outcome"]) <= {"completed", "rejected", "unfinished"}
    done = frame[frame["outcome"] == "completed"]
    assert len(done) == n  # ample capacity: everything completes
    assert (done["generated_tokens"] == done["output_tokens"]).all()
    assert (frame["accepted_tokens"] <= frame["drafted_tokens"]).all()
    speculative = frame[frame["verify_rounds"] > 0]
    # Each round accepts at most k of k drafted: accepted <= drafted and tokens = rounds + accepted (capped).
    assert (
        speculative["generated_tokens"] - 1
        <= speculative["verify_rounds"] + speculative["accepted_tokens"]
    ).all()
    assert (speculative["drafted_tokens"] <= speculative["verify_rounds"] * k).all()
    if mode == "none":
        assert (frame["verify_rounds"] == 0).all()
    assert (done["ttft_ms"] >= done["ttft_server_ms"] - 1e-9).all()
    assert (done["e2e_ms"] >= done["ttft_ms"] - 1e-9).all()
    summary = result.summary
    req = summary["requests"]
    assert req["completed"] + req["rejected"] + req["unfinished"] == req["arrived"]


def test_unfinished_when_stopped_early(tmp_path):
    result = _run(tmp_path, "none", synthetic(50, 20, 500, 400), extra={"simulation.until_s": 1.0})
    outcomes = result.requests["outcome"].value_counts().to_dict()
    assert outcomes.get("unfinished", 0) > 0
    due = build_requests(result.scenario).arrival_s
    assert sum(outcomes.values()) == int((due < 1.0).sum()) < 50


def test_requests_due_after_the_cut_are_not_reported(tmp_path):
    result = _run(tmp_path, "none", synthetic(50, 20, 500, 40), extra={"simulation.until_s": 1.0})
    frame = result.requests
    assert (frame["arrival_s"] < 1.0).all()
    assert result.summary["requests"]["arrived"] == len(frame)
    unfinished = frame[frame["outcome"] == "unfinished"]
    # Unfinished requests report the tokens they got before the cut.
    assert (unfinished["generated_tokens"] < unfinished["output_tokens"]).all()
    assert unfinished["generated_tokens"].max() > 0


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_gives_byte_identical_outputs(tmp_path, mode):
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(40, 5, 300, 60),
        link={"src": "laptops", "dst": "pool", "rtt_ms": 20, "bw_mbps": 20},
        extra={
            **(_hybrid_extra() if mode == "hybrid" else {}),
            "network.jitter": {"enabled": True, "rtt_sigma_ms": 3, "bw_sigma_pct": 10},
        },
    )
    first = write_results(run(load_scenario(path)), tmp_path / "a")
    second = write_results(run(load_scenario(path)), tmp_path / "b")
    for one, two in zip(first, second, strict=True):
        if one.name == "run.json":
            continue
        assert one.read_bytes() == two.read_bytes(), one.name
    third = run(load_scenario(path, seed=2))
    assert third.requests["ttft_ms"].tolist() != pd.read_csv(first[1])["ttft_ms"].tolist()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(low=st.floats(0.5, 3.0), factor=st.floats(1.05, 3.0))
def test_compressed_arrivals_never_shorten_a_prefill_wait(tmp_path_factory, low, factor):
    """One-token requests through a batch-1 prefill queue obey Lindley's recursion.

    Dividing every arrival time by a larger ``arrival_scale`` shrinks every gap,
    so no request may see its server-side TTFT fall. (With decodes interleaved
    this is not a theorem: iteration alignment can shift either way.)
    """
    tmp = tmp_path_factory.mktemp("mono")
    workload = synthetic(150, 10, 800, 1)
    path = write_scenario(tmp, mode="none", workload=workload)
    light = run(load_scenario(path, overrides=[f"workload.arrival_scale={low}"])).requests
    heavy = run(load_scenario(path, overrides=[f"workload.arrival_scale={low * factor}"])).requests
    light = light.sort_values("request_id")
    heavy = heavy.sort_values("request_id")
    gap = heavy["ttft_server_ms"].to_numpy() - light["ttft_server_ms"].to_numpy()
    assert (gap >= -1e-6).all()
    assert heavy["ttft_server_ms"].mean() >= light["ttft_server_ms"].mean()


@pytest.mark.parametrize(
    ("kv", "prefill_wait_ms", "noise"),
    [
        ("queue", 0, "none"),
        ("preempt_recompute", 0, "none"),
        ("queue", 40, "none"),
        ("queue", 0, "measured"),
        ("queue", 40, "measured"),
    ],
)
def test_fused_iterations_equal_stepped_iterations(tmp_path, kv, prefill_wait_ms, noise):
    """A run of decode iterations in one event equals stepping them one by one.

    With ``prefill_wait_ms`` > 0 the prefill lane holds prompts back to fill
    a batch; a prefill falling due must cut a decode run at its next
    iteration boundary, as a stepped replica would start it there. With
    step-time noise a run uses exactly the draws its iterations would.
    Under ``preempt_recompute`` a run grows its requests' KV when it ends;
    before, ``kv_occupancy_mean`` left out the occupancy of the tokens its
    earlier iterations made (below stepping's, by up to a factor 3.6 in
    random small runs).
    """
    workload = synthetic(60, 8, 400, 120)
    workload["synthetic"]["output_tokens"] = {"dist": "uniform", "low": 1, "high": 300}
    workload["synthetic"]["prompt_tokens"] = {"dist": "uniform", "low": 50, "high": 800}
    base: dict[str, object] = {"scheduler.kv": {"on_full": kv}, "simulation.step_noise": noise}
    if prefill_wait_ms:
        base["scheduler.prefill"] = {"batching": {"max_batch": 4, "max_wait_ms": prefill_wait_ms}}
    fused = _run(
        tmp_path,
        "none",
        workload,
        extra={**base, "simulation.fuse_iterations": True},
        name="f.yaml",
    )
    stepped = _run(
        tmp_path,
        "none",
        workload,
        extra={**base, "simulation.fuse_iterations": False},
        name="s.yaml",
    )
    cols = ["request_id", "outcome", "generated_tokens", "ttft_ms", "tpot_ms", "e2e_ms"]
    pd.testing.assert_frame_equal(fused.requests[cols], stepped.requests[cols], rtol=1e-9)

    def busy_j(run):
        classes = run.summary["energy"]["by_device_class"].values()
        return sum(c["busy_j"] for c in classes if c["type"] == "target")

    assert busy_j(fused) == pytest.approx(busy_j(stepped), rel=1e-9)
    occupancy = [r.summary["resources"]["kv_occupancy_mean"] for r in (fused, stepped)]
    assert occupancy[0] == pytest.approx(occupancy[1], rel=1e-9)


def test_a_run_cut_by_until_counts_the_fused_iterations_before_the_cut(tmp_path):
    """``simulation.until_s`` cutting a fused decode run reports what stepping reports.

    Two requests of 200 output tokens decode in one fused run; the run is cut at 0.5 s.
    Before, the iterations of the run under way that had ended before the cut were
    neither committed nor accounted: each request reported 1 generated token instead of
    the 24 stepping gives, and the replica's busy time and energy left them out.
    """
    results = [
        _run(
            tmp_path,
            "none",
            synthetic(2, 1e6, 100, 200),
            extra={"simulation.fuse_iterations": fuse, "simulation.until_s": 0.5},
            name=f"{fuse}.yaml",
        )
        for fuse in (True, False)
    ]
    fused, stepped = (r.requests for r in results)
    assert (fused["outcome"] == "unfinished").all()
    assert (stepped["generated_tokens"] == 24).all()
    cols = ["generated_tokens", "target_energy_j", "kv_peak_mb"]
    pd.testing.assert_frame_equal(fused[cols], stepped[cols], rtol=1e-9)
    assert results[0].summary["resources"]["gpu_utilization"] == pytest.approx(
        results[1].summary["resources"]["gpu_utilization"], rel=1e-9
    )


def test_event_order_log_of_one_request(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(1, 1, 100, 6),
        link={"src": "laptops", "dst": "pool", "rtt_ms": 10, "bw_mbps": 100},
        alpha=0.0,
        k=2,
    )
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    kinds = [kind for _, kind, _, _ in tracer.events]
    assert kinds[:3] == ["arrival", "admit", "prefill_queued"]
    assert kinds.count("draft_burst") == kinds.count("verify_start") == 5
    assert kinds[-1] == "complete"
    times = [t for t, *_ in tracer.events]
    assert times == sorted(times)
    # alpha = 0: every round yields exactly one token; 6 tokens = prefill + 5 rounds.
    row = result.requests.iloc[0]
    assert row["verify_rounds"] == 5 and row["accepted_tokens"] == 0
    # Each round: draft 2 x 4 ms, upload 5 ms, verify, download 5 ms => TVT >= 10 ms + verify.
    assert row["tvt_ms"] >= 10 + 22


def test_summary_validates_against_its_schema(tmp_path):
    import jsonschema

    from simulator.loading import load_packaged_schema

    result = _run(
        tmp_path,
        "hybrid",
        synthetic(20, 5, 200, 30),
        link={"src": "laptops", "dst": "pool", "rtt_ms": 50, "bw_mbps": 10},
    )
    jsonschema.validate(
        json.loads(json.dumps(result.summary)), load_packaged_schema("summary.schema.json")
    )
    assert set(result.requests["mode"]) == {"fused"}  # RTT 50 ms > 30 ms threshold


def test_requests_beyond_the_context_window_are_rejected(tmp_path):
    """The fixture LUTs end at context 131072 tokens.

    131045 + 20 = 131065 tokens fit plain decoding; speculation also reserves
    k_max = 8 draft tokens (131073), which does not fit.
    """
    workload = synthetic(3, 1.0, 131045, 20)
    outcomes = {}
    for mode in ("none", "distributed"):
        path = write_scenario(tmp_path, mode=mode, workload=workload, name=f"{mode}.yaml")
        result = run(load_scenario(path))
        outcomes[mode] = result.requests["reason"].tolist()
        rejected = result.summary["requests"]["rejected_by_reason"]
        assert rejected == ({"context_window": 3} if mode == "distributed" else {})
    assert outcomes == {"none": ["", "", ""], "distributed": ["context_window"] * 3}


def test_hybrid_lanes_share_the_replica(tmp_path):
    """Fused iterations must not starve verify work on the same replica.

    Near clients (0 ms) go distributed, far ones (40 ms) fused; the verify
    rounds of the near ones must keep pace with the fused stream instead of
    waiting for it to drain.
    """
    workload = synthetic(60, 6.0, 200, 200)
    workload["origin"] = {"rule": "round_robin"}
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload=workload,
        clients=10,
        extra={"speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 20}}},
    )
    document = yaml.safe_load(path.read_text())
    far = dict(document["hardware_profiles"][0], id="far")
    document["hardware_profiles"].insert(1, far)
    document["network"]["links"].append({"src": "far", "dst": "pool", "rtt_ms": 40, "bw_mbps": 1e6})
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    frame = run(load_scenario(path)).requests
    by_mode = frame.groupby("mode")
    assert set(by_mode.groups) == {"distributed", "fused"}
    tpot = by_mode["tpot_ms"].mean()
    # A distributed round is 4 ms of drafting + one verify (22 ms + context terms);
    # starved behind the fused stream it took seconds.
    assert tpot["distributed"] < 3 * tpot["fused"]
    assert frame.loc[frame["mode"] == "distributed", "tvt_ms"].max() < 500


@pytest.mark.parametrize("mode", ["none", "distributed", "fused"])
def test_what_if_window_continues_from_a_snapshot(tmp_path, mode):
    """Stop a run at 2 s, then run a 3 s window from its state and the next arrivals."""
    path = write_scenario(tmp_path, mode=mode, workload=synthetic(80, 20, 300, 60), clients=5)
    scenario = load_scenario(path)
    table = build_requests(scenario)
    first = run(scenario, requests=table, until_s=2.0)
    state = first.output.in_flight
    assert state, "the snapshot should hold admitted, unfinished requests"
    assert {item.request_id for item in state} <= set(
        first.requests.loc[first.requests["outcome"] == "unfinished", "request_id"]
    )
    window = table.window(2.0, 5.0, rebase=False)
    assert window.request_id[0] == int((table.arrival_s < 2.0).sum())
    one = run(scenario, requests=window, in_flight=state, start_s=2.0, until_s=5.0)
    two = run(scenario, requests=window, in_flight=state, start_s=2.0, until_s=5.0)
    assert one.summary == two.summary
    frame = one.requests
    assert frame["request_id"].is_unique
    assert set(frame["request_id"]) == {i.request_id for i in state} | set(window.request_id)
    carried = frame[frame["request_id"].isin([i.request_id for i in state])]
    assert (carried["outcome"] != "rejected").all()
    # Tokens made before the window are not made again.
    before = {i.request_id: i.generated for i in state}
    for row in carried.itertuples():
        assert row.generated_tokens >= before[row.request_id]
        assert row.generated_tokens <= row.output_tokens


def test_per_request_slo_flags_add_up_to_the_summary(tmp_path):
    slo = {"ttft_ms": 60, "tpot_ms": 25, "tvt_ms": 40}
    result = _run(tmp_path, "distributed", synthetic(60, 10, 300, 30, slo=slo))
    frame = result.requests
    assert {"ttft_ok", "tpot_ok", "tvt_ok", "slo_met"} <= set(frame.columns)
    assert (frame["slo_met"] == (frame["ttft_ok"] & frame["tpot_ok"] & frame["tvt_ok"])).all()
    assert not frame.loc[frame["outcome"] != "completed", "slo_met"].any()
    attainment = result.summary["goodput"]["slo_attainment"]
    assert frame["slo_met"].mean() == pytest.approx(attainment)
    assert 0.0 < attainment < 1.0


@pytest.mark.parametrize("mode", ["none", "fused", "distributed"])
def test_preempt_and_recompute_under_memory_pressure_finishes_everything(tmp_path, mode):
    """40 requests of 500 tokens need 10 GB of KV; the replica has 3 GB.

    Prompts wait for free KV instead of evicting running requests, and growth
    evicts the newest request, so the oldest always progress: every request
    completes, some after recomputing their context.
    """
    profile = yaml.safe_load((PROFILES / "a100-tp1.yaml").read_text())
    profile["memory"]["kv_cache_limit_mb"] = 3000.0
    profile["sources"]["memory.kv_cache_limit_mb"] = "test configuration"
    (tmp_path / "a100-tp1.yaml").write_text(yaml.safe_dump(profile))
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(40, 20, 300, 200),
        clients=20,
        extra={"scheduler.kv": {"on_full": "preempt_recompute"}},
    )
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["profile"] = str(tmp_path / "a100-tp1.yaml")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    frame = run(load_scenario(path)).requests
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == frame["output_tokens"]).all()
    assert frame["preemptions"].sum() > 0
    assert frame["kv_peak_mb"].max() <= 3000.0
