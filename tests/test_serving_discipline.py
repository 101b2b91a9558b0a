"""A replica's serving discipline: running-set cap, continuous batching, microbatches,
thermal throttling and availability windows of target replicas."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from simulator import load_scenario, run
from simulator.engine.step_timing import measured
from simulator.engine.tracing import ListTracer
from simulator.errors import InputError
from tests.engine_fixtures import KV_MB_PER_TOKEN, PROFILES, constant, synthetic, write_scenario

MODES = ("none", "fused", "distributed", "hybrid")


def _requests(path, **kwargs):
    return run(load_scenario(path), **kwargs).requests


def _overloaded(tmp_path, mode, fuse, extra=None, name="s.yaml"):
    """60 requests at 200/s on one replica whose decode lane takes at most 4 at a time."""
    settings = {
        "simulation.fuse_iterations": fuse,
        "scheduler.verify": {"batching": {"max_batch": 4}},
        "scheduler.prefill": {"batching": {"max_batch": 2}},
        **(extra or {}),
    }
    if mode == "hybrid":
        settings["speculation.hybrid"] = {"policy": "rtt_threshold", "params": {"threshold_ms": 1}}
    return write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(60, 200.0, 200, 50),
        link={"src": "laptops", "dst": "pool", "rtt_ms": 2, "bw_mbps": 1e6},
        clients=60,
        extra=settings,
        name=name,
    )


CASES = {
    "plain": {},
    "running_cap": {"scheduler.max_running_requests": 6},
    "prefill_wait": {"scheduler.prefill": {"batching": {"max_batch": 3, "max_wait_ms": 7}}},
    "preempt": {"scheduler.kv": {"on_full": "preempt_recompute"}},
    "chunked": {
        "scheduler.arbitration": {"policy": "chunked_prefill", "params": {"token_budget": 96}}
    },
    "chunked_preempt": {
        "scheduler.arbitration": {"policy": "chunked_prefill", "params": {"token_budget": 300}},
        "scheduler.kv": {"on_full": "preempt_recompute"},
    },
    "microbatch": {
        "scheduler.verify": {
            "batching": {"max_batch": 8},
            "microbatch": {"max_microbatch": 3, "fallback": "per_request"},
        }
    },
    "step_noise": {"simulation.step_noise": "measured"},
    "step_noise_preempt": {
        "simulation.step_noise": "measured",
        "scheduler.kv": {"on_full": "preempt_recompute"},
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", MODES)
def test_fused_iterations_equal_stepped_ones_when_overloaded(tmp_path, mode, case):
    fused = _overloaded(tmp_path, mode, True, CASES[case], "fused.yaml")
    stepped = _overloaded(tmp_path, mode, False, CASES[case], "stepped.yaml")
    if case in ("preempt", "chunked_preempt", "step_noise_preempt"):
        # A KV budget far below what 60 requests need, so the replica evicts.
        profile = _target_profile(tmp_path, memory={"kv_cache_limit_mb": 600})
        fused = _with_target_profile(fused, profile)
        stepped = _with_target_profile(stepped, profile)
    a, b = _requests(fused), _requests(stepped)
    assert (a["outcome"] == "completed").all()
    for column in ("ttft_ms", "tpot_ms", "e2e_ms", "target_energy_j"):
        np.testing.assert_allclose(a[column], b[column], rtol=1e-9, atol=1e-9, err_msg=column)
    assert (a["preemptions"] == b["preemptions"]).all()
    if case in ("preempt", "step_noise_preempt"):
        assert a["preemptions"].sum() > 0


def test_running_cap_makes_prompts_wait_before_prefill(tmp_path):
    """One running slot: each request is prefilled only after the previous one finished."""
    phases = {"prefill": constant(10.0), "draft_decode": constant(20.0), "verify": constant(20.0)}
    workload = _at_once(tmp_path, [100] * 3, 5)
    capped = write_scenario(
        tmp_path,
        mode="none",
        workload=workload,
        target_phases=phases,
        extra={"scheduler.max_running_requests": 1},
        name="capped.yaml",
    )
    free = write_scenario(
        tmp_path, mode="none", workload=workload, target_phases=phases, name="free.yaml"
    )
    ttft = _requests(capped)["ttft_server_ms"].to_numpy()
    # Request i waits for i requests of 10 ms prefill + 4 x 20 ms decode.
    # (The prompts' upload over the fixture's link adds nanoseconds.)
    np.testing.assert_allclose(ttft, [10.0, 100.0, 190.0], atol=1e-3)
    np.testing.assert_allclose(_requests(free)["ttft_server_ms"], [10.0, 20.0, 30.0], atol=1e-3)


def _at_once(tmp_path, prompts, output):
    """A trace workload: every request arrives at t = 0."""
    trace = tmp_path / f"trace_{len(prompts)}_{output}.csv"
    trace.write_text(
        "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"0.0,{p},{output}\n" for p in prompts)
    )
    return {"source": f"trace://{trace.name}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}}


def test_running_set_never_exceeds_the_cap(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(80, 500.0, 200, 30),
        extra={
            "scheduler.max_running_requests": 5,
            "scheduler.prefill": {"batching": {"max_batch": 8}},
            "metrics.timeseries_interval_s": 0.005,
        },
    )
    result = run(load_scenario(path))
    assert result.timeseries["running"].max() == 5
    assert (result.requests["outcome"] == "completed").all()


def test_more_ready_than_max_batch_take_turns(tmp_path):
    """Four decoding requests, a decode batch of two: iterations alternate between pairs."""
    phases = {"prefill": constant(10.0), "draft_decode": constant(20.0), "verify": constant(20.0)}
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=_at_once(tmp_path, [100] * 4, 3),
        target_phases=phases,
        extra={
            # The four prompts reach the replica nanoseconds apart: wait 1 µs for all of them.
            "scheduler.prefill": {"batching": {"max_batch": 4, "max_wait_ms": 0.001}},
            "scheduler.verify": {"batching": {"max_batch": 2}},
        },
    )
    tracer = ListTracer()
    run(load_scenario(path), tracer=tracer)
    decodes = [(t, d) for t, kind, _s, d in tracer.events if kind == "decode"]
    # Prefill of all four ends at 10 ms; then pairs alternate, 20 ms per iteration.
    assert [round(t * 1000) for t, _ in decodes] == [30, 50, 70, 90]
    finished = _requests(path)["e2e_ms"].to_numpy()
    np.testing.assert_allclose(finished, [70.0, 70.0, 90.0, 90.0], atol=2e-3)


def test_decode_lane_wait_is_refused_where_nothing_arrives_over_the_network(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(3, 10.0, 100, 5),
        extra={"scheduler.verify": {"batching": {"max_batch": 8, "max_wait_ms": 5}}},
    )
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    text = str(caught.value)
    assert "scheduler.verify.batching.max_wait_ms" in text
    assert "got 5" in text


def _microbatch_latency_ms(tmp_path, micro, prompts):
    """Duration of the first fused iteration of requests with the given prompt lengths."""
    fused = {
        "prefill": constant(10.0),
        "fused_decode": lambda c, b, k: 30.0 + 0.01 * c + 2.0 * b,
    }
    trace = tmp_path / f"trace_{len(prompts)}.csv"
    trace.write_text(
        "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"0.0,{p},40\n" for p in prompts)
    )
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload={"source": f"trace://{trace.name}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}},
        fused_phases=fused,
        extra={
            "scheduler.prefill": {"batching": {"max_batch": 8}},
            "scheduler.verify": {"batching": {"max_batch": 8}, "microbatch": micro},
        },
        name=f"micro_{micro.get('max_microbatch', 0)}_{micro.get('fallback', '')}.yaml",
    )
    tracer = ListTracer()
    run(load_scenario(path), tracer=tracer)
    starts = [t for t, kind, _s, _d in tracer.events if kind == "fused_start"]
    details = [d for _t, kind, _s, d in tracer.events if kind == "fused_start"]
    return (starts[1] - starts[0]) * 1000.0, details[0]


def test_microbatches_are_priced_per_group_and_summed(tmp_path):
    prompts = [100, 200, 300, 400]
    w = measured().round_weight  # each group at mean + w * (longest - mean)
    one, detail = _microbatch_latency_ms(tmp_path, {"max_microbatch": 8}, prompts)
    # One group: mean context 251 (prompt + first token), longest 401, batch 4.
    assert one == pytest.approx(30.0 + 0.01 * (251 + w * 150) + 2.0 * 4)
    assert "microbatches" not in detail
    two, detail = _microbatch_latency_ms(tmp_path, {"max_microbatch": 2}, prompts)
    # Shortest first: (101, 201) and (301, 401).
    assert two == pytest.approx(2 * 30.0 + 0.01 * (151 + 351 + 2 * w * 50) + 2.0 * 4)
    assert "microbatches=2" in detail


def test_per_request_fallback_runs_a_diverging_request_alone(tmp_path):
    prompts = [100, 110, 1000]
    w = measured().round_weight
    micro = {"max_microbatch": 8, "fallback": "per_request", "max_context_ratio": 2.0}
    latency, detail = _microbatch_latency_ms(tmp_path, micro, prompts)
    assert "microbatches=2" in detail
    assert latency == pytest.approx(2 * 30.0 + 0.01 * (106 + w * 5 + 1001) + 2.0 * 3)
    grouped, _ = _microbatch_latency_ms(tmp_path, {"max_microbatch": 8}, prompts)
    mean = (101 + 111 + 1001) / 3
    assert grouped == pytest.approx(30.0 + 0.01 * (mean + w * (1001 - mean)) + 2.0 * 3)


def _target_profile(tmp_path, **blocks):
    """A copy of the shipped A100 TP1 profile with extra compute/availability blocks."""
    profile = yaml.safe_load((PROFILES / "a100-tp1.yaml").read_text())
    sources = profile.setdefault("sources", {})
    if "memory" in blocks:
        profile["memory"].update(blocks["memory"])
        for key in blocks["memory"]:
            sources[f"memory.{key}"] = "test configuration"
    if "thermal" in blocks:
        profile["compute"]["thermal"] = blocks["thermal"]
        for key in blocks["thermal"]:
            sources[f"compute.thermal.{key}"] = "test configuration"
    if "availability" in blocks:
        profile["availability"] = blocks["availability"]
        sources["availability.period_s"] = "test configuration"
        for i in range(len(blocks["availability"]["windows"])):
            sources[f"availability.windows[{i}].start_s"] = "test configuration"
            sources[f"availability.windows[{i}].end_s"] = "test configuration"
    path = tmp_path / "a100-tp1.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


def _with_target_profile(path, profile):
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["profile"] = str(profile)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _one_request_both_ways(tmp_path, profile, decode_ms, output):
    """One request on a replica of ``profile``, with fused and with stepped iterations."""
    phases = {
        "prefill": constant(10.0),
        "draft_decode": constant(decode_ms),
        "verify": constant(20.0),
    }
    frames = {}
    for fuse in (True, False):
        path = write_scenario(
            tmp_path,
            mode="none",
            workload=synthetic(1, 1.0, 100, output),
            target_phases=phases,
            extra={"simulation.fuse_iterations": fuse},
            name=f"one_{fuse}.yaml",
        )
        frames[fuse] = _requests(_with_target_profile(path, profile))
    return frames[True].iloc[0], frames[False].iloc[0]


def test_a_throttled_replica_slows_after_its_onset(tmp_path):
    """20 ms decode iterations; after 100 ms of work the replica runs at half speed."""
    profile = _target_profile(tmp_path, thermal={"throttle_factor": 0.5, "throttle_after_s": 0.1})
    fused, stepped = _one_request_both_ways(tmp_path, profile, 20.0, 11)
    # Prefill 10 ms, then decodes start at 10, 30, 50, 70, 90 ms cool; the one starting
    # at 110 ms (100 ms of work done) and the four after it take 40 ms: 10 + 5 x 20 + 5 x 40.
    assert fused["e2e_ms"] == pytest.approx(310.0)
    assert stepped["e2e_ms"] == pytest.approx(310.0)
    assert fused["target_energy_j"] == pytest.approx(stepped["target_energy_j"])


def test_an_unavailable_replica_starts_nothing_until_its_window(tmp_path):
    """Available in [0.5, 1.0) of every second: work waits, iterations stop at the close."""
    profile = _target_profile(
        tmp_path,
        availability={
            "kind": "windows",
            "period_s": 1.0,
            "windows": [{"start_s": 0.5, "end_s": 1.0}],
        },
    )
    for record in _one_request_both_ways(tmp_path, profile, 100.0, 7):
        assert record["ttft_server_ms"] == pytest.approx(510.0)
        # Decodes start at 0.51, 0.61, 0.71, 0.81, 0.91 (the last ends at 1.01), then at 1.5.
        assert record["e2e_ms"] == pytest.approx(1600.0)


def test_routing_prefers_available_replicas(tmp_path):
    profile = _target_profile(
        tmp_path,
        availability={
            "kind": "windows",
            "period_s": 10.0,
            "windows": [{"start_s": 5.0, "end_s": 10.0}],
        },
    )
    path = write_scenario(tmp_path, mode="none", workload=synthetic(4, 100.0, 100, 3))
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"].append(
        {"id": "night", "type": "target", "profile": str(profile), "count": 1}
    )
    document["scheduler"]["routing"] = {"policy": "round_robin"}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    frame = _requests(path)
    assert set(frame["replica"]) == {0}
    assert frame["ttft_server_ms"].max() < 1000.0


def _laptop_profile(tmp_path, kv_limit_mb):
    profile = yaml.safe_load((PROFILES / "rtx-4050-laptop.yaml").read_text())
    profile["compute"]["max_concurrent_requests"] = 4
    profile.setdefault("memory", {})["kv_cache_limit_mb"] = kv_limit_mb
    profile["sources"]["memory.kv_cache_limit_mb"] = "test configuration"
    folder = tmp_path / f"kv_{kv_limit_mb}"
    folder.mkdir()
    path = folder / "rtx-4050-laptop.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


def test_a_draft_devices_kv_budget_limits_the_requests_it_serves(tmp_path):
    """Four slots, but KV for one request (prompt 100 + output 20 + k_max 8 tokens x 0.5 MB)."""
    ends = {}
    for limit_mb in (100, 1000):
        path = write_scenario(
            tmp_path,
            mode="distributed",
            workload=_at_once(tmp_path, [100, 100, 100, 300], 20),
            name=f"device_kv_{limit_mb}.yaml",
        )
        document = yaml.safe_load(path.read_text())
        document["hardware_profiles"][0]["profile"] = str(_laptop_profile(tmp_path, limit_mb))
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        frame = _requests(path)
        ends[limit_mb] = frame
    tight, roomy = ends[100], ends[1000]
    # The 300-token prompt needs 164 MB: more than the tight budget ever holds.
    assert tight["reason"].iloc[3] == "device_kv_capacity"
    assert roomy["outcome"].iloc[3] == "completed"
    # One at a time: each request's drafting starts after the previous one finished.
    done = tight["e2e_ms"].iloc[:3].to_numpy()
    assert done[1] - done[0] > 0.5 * done[0]
    assert done[2] - done[1] > 0.5 * done[0]
    assert roomy["e2e_ms"].iloc[:3].max() < 1.5 * roomy["e2e_ms"].iloc[:3].min()


LINEAR = {
    "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
    "draft_decode": lambda c, b, _k: 20.0 + 0.001 * c * b,
    "verify": lambda c, b, k: 22.0 + 0.001 * c * b * (k + 1),
}


def _chunked(tmp_path, prompts, output, budget, name):
    return write_scenario(
        tmp_path,
        mode="none",
        workload=_at_once(tmp_path, prompts, output),
        target_phases=LINEAR,
        extra={
            "scheduler.arbitration": {
                "policy": "chunked_prefill",
                "params": {"token_budget": budget},
            },
            "scheduler.prefill": {"batching": {"max_batch": 8}},
            # Prompts of one instant reach the replica together.
            "network.payload": {"bytes_per_prompt_token": 0},
        },
        name=name,
    )


def test_a_lone_prompt_prefilled_in_chunks_costs_its_whole_prefill(tmp_path):
    """Chunks of 256, 256 and 88 tokens: F(256) + F(512) - F(256) + F(600) - F(512) = F(600)."""
    path = _chunked(tmp_path, [600], 2, 256, "lone.yaml")
    tracer = ListTracer()
    frame = run(load_scenario(path), tracer=tracer).requests
    mixed = [d for _t, kind, _s, d in tracer.events if kind == "mixed_start"]
    assert [d.split("chunk_tokens=")[1] for d in mixed] == ["256", "256", "88"]
    assert frame["ttft_server_ms"].iloc[0] == pytest.approx(10.0 + 0.01 * 600, abs=1e-3)


def test_chunked_prefill_schedule_by_hand(tmp_path):
    """A (100 tokens, 4 out) and B (600 tokens, 4 out) at t = 0, budget 256 tokens.

    A pass costs at least its decode-lane work alone (the weights are read
    either way); chunks add F(p + c) - F(p) beyond a batch-1 decode pass.

    1: chunks A 100 (whole) + B 156: F(100) + F(156) = 11 + 11.56 ms.
    2: decode A + chunk B 255: max(F(411) - F(156) + D(1, 101) - D(1, 1), D(1, 101)) = 20.101.
    3: decode A + chunk B 189: max(1.89 + 0.101, D(1, 102)) = 20.102 ms; B's first token.
    """
    path = _chunked(tmp_path, [100, 600], 4, 256, "hand.yaml")
    tracer = ListTracer()
    frame = run(load_scenario(path), tracer=tracer).requests
    starts = [
        (round(t * 1000, 3), d)
        for t, kind, _s, d in tracer.events
        if kind in ("mixed_start", "decode")
    ]
    assert starts[:3] == [
        (0.0, "prefill n=0 chunks=2 chunk_tokens=256"),
        (22.56, "decode n=1 chunks=1 chunk_tokens=255"),
        (42.661, "decode n=1 chunks=1 chunk_tokens=189"),
    ]
    ttft = frame["ttft_server_ms"].to_numpy()
    np.testing.assert_allclose(ttft, [22.56, 62.763], atol=2e-3)


def test_chunked_prefill_keeps_decodes_going_while_long_prompts_arrive(tmp_path):
    """A decodes 5 tokens; three 8,000-token prompts arrive 50 ms in.

    Prefill-first stops A for their whole prefill batch (F(8000) x 3 = 250 ms);
    with a 512-token budget A gets a token every iteration.
    """
    trace = tmp_path / "stall.csv"
    trace.write_text(
        "arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n"
        + "".join("0.05,8000,5\n" for _ in range(3))
    )
    workload = {"source": f"trace://{trace.name}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}}
    tpot = {}
    for policy, params in (("prefill_first", {}), ("chunked_prefill", {"token_budget": 512})):
        path = write_scenario(
            tmp_path,
            mode="none",
            workload=workload,
            target_phases=LINEAR,
            extra={
                "scheduler.arbitration": {"policy": policy, "params": params},
                "scheduler.prefill": {"batching": {"max_batch": 8}},
                "network.payload": {"bytes_per_prompt_token": 0},
            },
            name=f"{policy}.yaml",
        )
        tpot[policy] = _requests(path)["tpot_ms"].iloc[0]
    assert tpot["prefill_first"] > 60.0
    assert tpot["chunked_prefill"] < 25.0


def test_chunked_prefill_refuses_prefill_limits_it_does_not_use(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(3, 10.0, 100, 5),
        extra={
            "scheduler.arbitration": {"policy": "chunked_prefill"},
            "scheduler.prefill": {"batching": {"max_batch": 4, "max_wait_ms": 5}},
        },
    )
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert "scheduler.prefill.batching.max_wait_ms" in str(caught.value)


def test_scenario_availability_on_a_target_class_replaces_its_profiles(tmp_path):
    """hardware_profiles[].availability on a pool: its replica waits for the window."""
    path = write_scenario(tmp_path, mode="none", workload=synthetic(1, 1.0, 100, 3))
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["availability"] = {
        "kind": "windows",
        "period_s": 10.0,
        "windows": [{"start_s": 2.0, "end_s": 10.0}],
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert _requests(path)["ttft_server_ms"].iloc[0] > 2000.0


def _near_far_chunked_hybrid(tmp_path, rows, clients=None, profile=None):
    """Hybrid mode with near (RTT 1 ms: distributed) and far (50 ms: fused) clients, chunked prefill.

    ``rows``: trace lines ``arrival_s,prompt_tokens,output_tokens,origin``; ``profile``: the
    target's device profile (default the shipped A100's).
    """
    trace = tmp_path / "mixed.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens,origin\n" + rows)
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload={"source": f"trace://{trace.name}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}},
        **({"clients": clients} if clients is not None else {}),
        extra={
            "speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 10}},
            "scheduler.arbitration": {"policy": "chunked_prefill", "params": {"token_budget": 64}},
            "scheduler.prefill": {"batching": {"max_batch": 8}},
        },
    )
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][0]["id"] = "near"
    document["hardware_profiles"].insert(1, {**document["hardware_profiles"][0], "id": "far"})
    document["network"]["links"] = [
        {"src": "near", "dst": "pool", "rtt_ms": 1, "bw_mbps": 1e6},
        {"src": "far", "dst": "pool", "rtt_ms": 50, "bw_mbps": 1e6},
    ]
    if profile is not None:
        document["hardware_profiles"][2]["profile"] = str(profile)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_chunked_prefill_on_a_hybrid_replica_lets_a_verifier_prompt_start(tmp_path):
    """A stream of fused rounds does not keep a distributed request's prompt waiting.

    Far clients (RTT above the threshold) are served fused, near ones distributed;
    one pass runs one model, so the near prompt's chunks need passes of the verifier.
    """
    rows = "".join("0.0,100,300,far\n" for _ in range(8)) + "0.05,600,5,near\n"
    path = _near_far_chunked_hybrid(tmp_path, rows)
    frame = _requests(path)
    near = frame[frame["origin"] == "near"].iloc[0]
    far = frame[frame["origin"] == "far"]
    assert near["mode"] == "distributed" and set(far["mode"]) == {"fused"}
    # The fused requests are still decoding when the near prompt is done.
    assert near["ttft_server_ms"] < far["e2e_ms"].min() - 50.0


def test_a_request_drafting_on_its_device_is_evicted_when_it_is_the_newest(tmp_path):
    """Three distributed requests at once, each on its own laptop, KV for about two of them.

    When a verify round cannot grow, the most recently admitted request is evicted even while
    its device drafts its next round (it recomputes when that bundle arrives), and a request
    recomputes only when its first round's tokens fit too. Before, the request asking for
    room evicted itself whenever the newer ones were away, and the three evicted each other
    for ever (thousands of preemptions, two never finished).
    """
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(3, 1e6, 100, 60),
        clients=3,
        extra={"scheduler.kv": {"on_full": "preempt_recompute"}},
    )
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": 110.0}))
    frame = _requests(path, until_s=10.0)  # done in under 3 s; the old loop never ended
    assert (frame["outcome"] == "completed").all()
    assert frame["e2e_ms"].max() < 3000.0
    assert (frame["generated_tokens"] == 60).all()
    assert frame["preemptions"].sum() <= 3
    assert frame["kv_peak_mb"].max() <= 110.0


@pytest.mark.parametrize("mode", ["none", "fused", "distributed"])
def test_growing_kv_refuses_a_request_whose_end_could_never_fit(tmp_path, mode):
    """KV for 220 tokens: a 100-token prompt fits, but not with its 400-token output.

    Under preempt_recompute such a request is rejected on admission (``kv_capacity``), as
    vLLM refuses a request longer than its KV cache holds. Before, it grew until it had the
    replica to itself and then evicted itself and recomputed for ever (over 2,000
    preemptions in 30 s in mode none) or stalled (fused, distributed). Two that fit alone
    but not together both complete.
    """
    profile = _target_profile(tmp_path, memory={"kv_cache_limit_mb": 110.0})
    extra = {"scheduler.kv": {"on_full": "preempt_recompute"}}
    too_long = write_scenario(
        tmp_path, mode=mode, workload=synthetic(2, 1e6, 100, 400), clients=2, extra=extra
    )
    frame = _requests(_with_target_profile(too_long, profile), until_s=30.0)
    assert list(frame["outcome"]) == ["rejected", "rejected"]
    assert list(frame["reason"]) == ["kv_capacity", "kv_capacity"]
    assert frame["preemptions"].sum() == 0
    fitting = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(2, 1e6, 100, 60),
        clients=2,
        extra=extra,
        name="fits.yaml",
    )
    frame = _requests(_with_target_profile(fitting, profile), until_s=30.0)
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == 60).all()
    assert frame["kv_peak_mb"].max() <= 110.0


def test_a_request_rejected_while_it_waits_for_its_device_frees_the_device(tmp_path):
    """One laptop serving one request at a time; KV for 120 tokens on the replica (queue).

    The second request (40 + 100 tokens) is rejected (``kv_capacity``) while it still waits
    for the laptop, busy with the first. Before, it stayed in the laptop's queue, took the
    laptop when the first finished and held it for ever: the third request got its first
    token and nothing more (unfinished however long the run).
    """
    trace = tmp_path / "three.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,40,10\n0.01,40,100\n0.02,40,10\n")
    workload = {"source": f"trace://{trace.name}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}}
    path = write_scenario(tmp_path, mode="distributed", workload=workload, clients=1)
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": 60.0}))
    frame = _requests(path, until_s=30.0)
    assert list(frame["outcome"]) == ["completed", "rejected", "completed"]
    assert frame.loc[1, "reason"] == "kv_capacity"
    assert list(frame["generated_tokens"]) == [10, 0, 10]


@pytest.mark.parametrize("policy", ["edf", "least_slack"])
def test_a_recomputed_decode_request_waits_until_its_step_fits(tmp_path, policy):
    """Three requests of 50 + 100 tokens, KV for 220 tokens, one decode step at a time.

    A deadline policy picks the request furthest behind: the one just recomputed, the
    newest. Its recomputation reserves its context, and its step needs one token
    more, so it recomputes only when that token is free too. Before, it was
    recomputed as soon as its context fit, could not take its step,
    evicted itself and recomputed again, for ever (1,413 preemptions in 20 s, two
    requests unfinished).
    """
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(3, 1e6, 50, 100),
        extra={
            "scheduler.kv": {"on_full": "preempt_recompute"},
            "scheduler.verify": {"policy": policy, "batching": {"max_batch": 1}},
        },
    )
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": 110.0}))
    frame = _requests(path, until_s=20.0)
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == 100).all()
    assert frame["preemptions"].sum() <= 3
    assert frame["kv_peak_mb"].max() <= 110.0


@pytest.mark.parametrize("prompt", [10, 50])
def test_a_recomputed_request_holds_its_context_not_one_token_more(tmp_path, prompt):
    """Two requests of ``prompt`` + 100 tokens at once, KV for exactly one request's lifetime.

    The newer is evicted, then recomputes when the older has finished. A recomputation
    makes no token, so it takes the request's context, what it held before. Before, it
    took the context and one token more, as a prefill does for its first token, so the
    request held one token more than it would ever need: at its last steps the room did
    not fit beside it, it could not recompute, and the run ran out of events with it
    unfinished (``requests.stalled_at_s`` 4.0 s).
    """
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(2, 1e6, prompt, 100),
        extra={"scheduler.kv": {"on_full": "preempt_recompute"}},
    )
    lifetime_mb = (prompt + 100) * KV_MB_PER_TOKEN
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": lifetime_mb}))
    result = run(load_scenario(path))
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert result.summary["requests"].get("stalled_at_s") is None
    assert list(frame["preemptions"]) == [0, 1]
    assert frame["kv_peak_mb"].max() == lifetime_mb


def test_chunked_prefill_recomputes_only_when_the_first_round_fits(tmp_path):
    """Three fused requests of 100 + 200 tokens at once, k = 8, KV for 320 tokens, chunks of 32.

    Under chunked prefill a request evicted from fused rounds starts recomputing, in
    chunks, only when its context and its first round's k_max + 1 tokens are free, as a
    whole-prompt recomputation does. Before, a recomputation started as soon as its
    context and one token fitted, its first round could not grow, and the requests
    evicted each other for ever (1,652 preemptions in 20 s, none finished).
    """
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(3, 1e6, 100, 200),
        k=8,
        extra={
            "scheduler.kv": {"on_full": "preempt_recompute"},
            "scheduler.arbitration": {
                "policy": "chunked_prefill",
                "params": {"token_budget": 32},
            },
        },
    )
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": 160.0}))
    frame = _requests(path, until_s=20.0)
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == 200).all()
    assert frame["preemptions"].sum() <= 3
    assert frame["kv_peak_mb"].max() <= 160.0


def test_chunked_prefill_on_a_hybrid_replica_runs_the_work_that_frees_kv(tmp_path):
    """Two distributed requests hold the KV a fused prompt arriving later needs (queue).

    The fused prompt heads the prefill lane but cannot start before the distributed
    requests finish, so their verify rounds are not held back for it. Before, the
    replica held them back so that the prompt could start, and stopped for good: the
    three requests were still unfinished however long the run.
    """
    rows = "0.0,100,40,near\n0.0,100,40,near\n0.05,150,10,far\n"
    # KV for 400 tokens: each distributed request reserves 100 + 40 + 5 = 145.
    profile = _target_profile(tmp_path, memory={"kv_cache_limit_mb": 200.0})
    path = _near_far_chunked_hybrid(tmp_path, rows, clients=2, profile=profile)
    frame = _requests(path, until_s=30.0)
    assert list(frame["mode"]) == ["distributed", "distributed", "fused"]
    assert (frame["outcome"] == "completed").all()
    assert list(frame["generated_tokens"]) == [40, 40, 10]


@pytest.mark.parametrize("arbitration", ["prefill_first", "chunked_prefill"])
def test_a_prompt_holding_its_device_frees_kv_held_by_requests_waiting_for_that_device(
    tmp_path, arbitration
):
    """One laptop drafting one request at a time, KV for about two requests, recompute preemption.

    A recomputation reorders the requests: the one at the head of the prefill lane holds the
    laptop, and a newer one holds the KV it needs while it waits for that laptop. Before,
    neither ever moved (3 of 4 requests unfinished however long the run); now the waiting
    one is parked and recomputes when it has drafted its first round.
    """
    extra: dict = {"scheduler.kv": {"on_full": "preempt_recompute"}}
    if arbitration == "chunked_prefill":
        extra["scheduler.arbitration"] = {"policy": arbitration, "params": {"token_budget": 64}}
    path = write_scenario(
        tmp_path, mode="distributed", workload=synthetic(4, 1e6, 100, 30), clients=1, extra=extra
    )
    _with_target_profile(path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": 110.0}))
    frame = _requests(path, until_s=60.0)
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == 30).all()
    assert frame["e2e_ms"].max() < 2000.0
    assert frame["preemptions"].sum() <= 4
    assert frame["kv_peak_mb"].max() <= 110.0
