"""Lane rules of a fused replica (``scheduler.arbitration``, ``scheduler.lanes``), on event logs.

The fixture LUTs have constant latencies, so every schedule below is computed
by hand: a fused prefill takes 10 ms, a draft step of the draft model 2 ms
(a draft iteration of k = 4 steps: 8 ms), a verify 20 ms (an atomic round:
28 ms). Acceptance is 1, so a round of k = 4 commits 5 tokens, and an output
of 11 tokens (1 at prefill) takes two rounds.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import simpy
import yaml

from policies import policy_enums, registry
from policies.arbitration import PdvHybridParams, UnifiedWorker
from policies.base import promised_by_method
from simulator import load_scenario, run
from simulator.engine.core import Engine
from simulator.engine.gpu_share import COMPUTE, HOST, MEMORY, SharedGpu
from simulator.engine.runtime import build_runtime
from simulator.engine.sharing import SymmetricSharing
from simulator.engine.tracing import ListTracer
from simulator.errors import InputError
from simulator.rng import RandomStreams
from simulator.runner import build_requests
from tests.commands import run_python
from tests.engine_fixtures import constant, write_lut, write_scenario
from tests.test_serving_discipline import _target_profile, _with_target_profile

ARCHITECTURES = ("baseline", "pd", "pdv", "pdv_hybrid", "pdv_unified")
RULE_PARAMS = ("verify_first_margin", "hybrid_threshold", "unified_admit_factor")


def _scenario(
    tmp_path: Path,
    architecture: str,
    rows: list[str],
    *,
    prefill_batch: int = 1,
    lane_batch: int = 64,
    mode: str = "fused",
    **lanes: Any,
) -> Path:
    """A fused scenario under the lane rule ``architecture``; rule params go to its params."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_lut(
        tmp_path / "drafter.csv", "draft-model", "a100-sxm4-80gb", {"draft_decode": constant(2.0)}
    )
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    params = {k: lanes.pop(k) for k in RULE_PARAMS if k in lanes}
    section: dict[str, Any] = {
        "drafter": {"model": "draft-model", "lut": "drafter.csv"},
        "verifier": {"model": "target-model", "lut": "target.csv"},
        **lanes,
    }
    return write_scenario(
        tmp_path,
        mode=mode,
        clients=1000,  # one device per request: prompts of an instant arrive together
        alpha=1.0,
        k=4,
        workload={
            "source": f"trace://{trace}",
            "slo": {"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 200},
        },
        target_phases={
            "prefill": constant(10.0),
            "verify": constant(20.0),
            "draft_decode": constant(15.0),
        },
        fused_phases={"prefill": constant(10.0), "fused_decode": lambda c, b, k: 20.0 + 2.0 * k},
        extra={
            "scheduler.arbitration": {"policy": architecture, "params": params},
            "scheduler.lanes": section,
            "scheduler.prefill": {"batching": {"max_batch": prefill_batch, "max_wait_ms": 0}},
            "scheduler.verify": {"batching": {"max_batch": lane_batch, "max_wait_ms": 0}},
        },
    )


def _log(path: Path) -> tuple[list[tuple[float, str, str]], Any]:
    """Run the scenario; return its lane events ``(ms, event, requests)`` and the result."""
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    events = [
        (round(t * 1000.0, 3), kind[len("lane_") :], detail[len("requests=") :])
        for t, kind, _subject, detail in tracer.events
        if kind.startswith("lane_")
    ]
    return events, result


def _starts(events: list[tuple[float, str, str]]) -> list[tuple[float, str, str]]:
    return [(t, kind[: -len("_start")], who) for t, kind, who in events if kind.endswith("_start")]


THREE = ["0.0,100,11", "0.0,100,11", "0.0,100,11"]


# -- priorities and preemption at iteration boundaries --------------------------
def test_pdv_runs_decode_before_verify_before_prefill(tmp_path):
    """Lane batches of 1: after a draft, the decode lane still has work and goes first."""
    events, _ = _log(_scenario(tmp_path, "pdv", THREE, prefill_batch=3, lane_batch=1))
    assert _starts(events)[:8] == [
        (0.0, "prefill", "0,1,2"),
        (10.0, "draft", "0"),
        (18.0, "draft", "1"),
        (26.0, "draft", "2"),
        (34.0, "verify", "0"),
        # Request 0 is ready to draft again: decode preempts the verify lane's queue.
        (54.0, "draft", "0"),
        (62.0, "verify", "1"),
        (82.0, "draft", "1"),
    ]


def test_pdv_prefill_waits_for_both_higher_lanes(tmp_path):
    """A prompt arriving while a request runs waits until decode and verify are empty."""
    events, _ = _log(_scenario(tmp_path, "pdv", ["0.0,100,11", "0.001,100,11"]))
    assert _starts(events) == [
        (0.0, "prefill", "0"),
        (10.0, "draft", "0"),
        (18.0, "verify", "0"),
        (38.0, "draft", "0"),
        (46.0, "verify", "0"),
        (66.0, "prefill", "1"),
        (76.0, "draft", "1"),
        (84.0, "verify", "1"),
        (104.0, "draft", "1"),
        (112.0, "verify", "1"),
    ]


def test_verify_first_when_its_queue_exceeds_decode_by_the_margin(tmp_path):
    """Margin 0: verify goes first as soon as its queue is longer than the decode queue."""
    events, _ = _log(
        _scenario(tmp_path, "pdv", THREE, prefill_batch=3, lane_batch=1, verify_first_margin=0)
    )
    assert _starts(events)[:8] == [
        (0.0, "prefill", "0,1,2"),
        (10.0, "draft", "0"),  # verify 0 > decode 3? no
        (18.0, "draft", "1"),  # 1 > 2? no
        (26.0, "verify", "0"),  # 2 > 1
        (46.0, "draft", "2"),  # verify 1 > decode 2 (requests 2, 0)? no
        (54.0, "verify", "1"),  # 2 > 1
        (74.0, "draft", "0"),  # 1 > 2? no
        (82.0, "verify", "2"),  # 2 > 1
    ]


# -- pd and baseline: atomic rounds ------------------------------------------------
def test_pd_round_robins_atomic_rounds(tmp_path):
    events, _ = _log(_scenario(tmp_path, "pd", THREE, prefill_batch=3))
    assert _starts(events) == [
        (0.0, "prefill", "0,1,2"),
        (10.0, "round", "0"),
        (38.0, "round", "1"),
        (66.0, "round", "2"),
        (94.0, "round", "0"),
        (122.0, "round", "1"),
        (150.0, "round", "2"),
    ]


def test_pd_runs_the_item_waiting_longest_first(tmp_path):
    """A prompt queued before a round became ready goes before it."""
    events, _ = _log(_scenario(tmp_path, "pd", ["0.0,100,11", "0.005,100,11"]))
    assert _starts(events)[:4] == [
        (0.0, "prefill", "0"),
        (10.0, "prefill", "1"),  # queued at 5 ms, request 0 ready at 10 ms
        (20.0, "round", "0"),
        (48.0, "round", "1"),
    ]


def test_baseline_prefills_one_request_at_a_time(tmp_path):
    events, _ = _log(_scenario(tmp_path, "baseline", THREE, prefill_batch=3))
    assert _starts(events)[:4] == [
        (0.0, "prefill", "0"),
        (10.0, "prefill", "1"),
        (20.0, "prefill", "2"),
        (30.0, "round", "0"),
    ]


# -- pdv_hybrid: the concurrency threshold -----------------------------------------
def test_hybrid_switches_to_atomic_rounds_at_the_threshold(tmp_path):
    """Three running > threshold 2: split lanes; once one finishes, atomic rounds."""
    rows = ["0.0,100,6", "0.0,100,11", "0.0,100,11"]
    events, _ = _log(
        _scenario(tmp_path, "pdv_hybrid", rows, prefill_batch=3, lane_batch=1, hybrid_threshold=2)
    )
    assert _starts(events) == [
        (0.0, "prefill", "0,1,2"),
        (10.0, "draft", "0"),
        (18.0, "draft", "1"),
        (26.0, "draft", "2"),
        (34.0, "verify", "0"),  # request 0 finishes: two run, at the threshold
        (54.0, "verify", "1"),  # drafts already made are verified first
        (74.0, "round", "1"),
        (102.0, "verify", "2"),
        (122.0, "round", "2"),
    ]


# -- pdv_unified: the admission rule -----------------------------------------------
def test_unified_admits_a_prompt_only_below_the_decode_queue_limit(tmp_path):
    """Batch 1, factor 1: a second prompt waits until the decode queue empties."""
    rows = ["0.0,100,11", "0.0,100,11"]
    events, _ = _log(
        _scenario(tmp_path, "pdv_unified", rows, lane_batch=1, unified_admit_factor=1.0)
    )
    assert _starts(events) == [
        (0.0, "prefill", "0"),
        (10.0, "round", "0"),  # the queue holds request 0 again: 1 < 1 is false
        (38.0, "round", "0"),  # request 0 finishes, the queue is empty
        (66.0, "prefill", "1"),
        (76.0, "round", "1"),
        (104.0, "round", "1"),
    ]


def test_unified_admits_each_pass_under_a_larger_factor(tmp_path):
    rows = ["0.0,100,11", "0.0,100,11"]
    events, _ = _log(
        _scenario(tmp_path, "pdv_unified", rows, lane_batch=1, unified_admit_factor=2.0)
    )
    assert _starts(events) == [
        (0.0, "prefill", "0"),
        (10.0, "round", "0"),
        (38.0, "prefill", "1"),  # the queue holds 1 < 2 batches
        (48.0, "round", "0"),
        (76.0, "round", "1"),  # the queue holds 1 < 2, but no prompt waits
        (104.0, "round", "1"),
    ]


def test_unified_starts_a_new_pass_after_an_empty_one(tmp_path):
    """One-token requests end at their prefill, so their pass has no rounds.

    The next pass starts at once and admits the next prompt. Before, the worker
    stopped after the first prefill: the other two requests were never served.
    """
    events, result = _log(_scenario(tmp_path, "pdv_unified", ["0.0,100,1"] * 3))
    assert _starts(events) == [
        (0.0, "prefill", "0"),
        (10.0, "prefill", "1"),
        (20.0, "prefill", "2"),
    ]
    assert (result.requests["outcome"] == "completed").all()


# -- GPU sharing: serialized and overlapped timing --------------------------------
def test_overlap_shares_the_gpu_by_bound_class(tmp_path):
    """Efficiency 0.75, hand-computed.

    10 ms: draft 0 (8 ms memory) and prefill 1 (10 ms compute) overlap at rate
    0.75: draft 0 ends at 10 + 8 / 0.75 = 20.667; prefill 1 has 2 ms left. Then
    verify 0 (compute) joins prefill 1: two compute passes at 0.5 each, so
    prefill 1 ends 4 ms later, at 24.667, verify 0 having done 2 of its 20 ms.
    Draft 1 (memory) and prefill 2 (compute) start: draft 1 runs at 0.75 and
    ends at 24.667 + 8 / 0.75 = 35.333.
    """
    events, _ = _log(
        _scenario(tmp_path, "pdv", THREE, gpu_sharing="overlap", overlap_efficiency=0.75)
    )
    assert events[:9] == [
        (0.0, "prefill_start", "0"),
        (10.0, "prefill_end", "0"),
        (10.0, "draft_start", "0"),
        (10.0, "prefill_start", "1"),
        (20.667, "draft_end", "0"),
        (20.667, "verify_start", "0"),
        (24.667, "prefill_end", "1"),
        (24.667, "draft_start", "1"),
        (24.667, "prefill_start", "2"),
    ]
    assert (35.333, "draft_end", "1") in events


def test_serialized_runs_one_iteration_at_a_time(tmp_path):
    events, result = _log(_scenario(tmp_path, "pdv", THREE, prefill_batch=3))
    running = 0
    for _t, kind, _who in events:
        running += 1 if kind.endswith("_start") else -1
        assert running <= 1
    # prefill 10 + per request 2 rounds of draft 8 + verify 20, batched: 10 + 2 * 28.
    assert result.summary["simulated_s"] == pytest.approx(0.066, abs=1e-5)
    assert result.summary["energy"]["by_device_class"]["pool"]["busy_s"] == pytest.approx(0.066)


def test_perfect_overlap_runs_lanes_as_if_alone(tmp_path):
    """Efficiency 1: a draft beside a prefill runs as if alone.

    10 ms: prefill 1 and round 0 start; round 0's draft (8 ms, memory) ends at
    18 with prefill 1 at 8 of its 10 ms; then round 0's verify (compute)
    shares the compute class with prefill 1: both at 0.5, so prefill 1 ends at
    22 ms.
    """
    events, _ = _log(
        _scenario(tmp_path, "pd", THREE, gpu_sharing="overlap", overlap_efficiency=1.0)
    )
    assert events[:5] == [
        (0.0, "prefill_start", "0"),
        (10.0, "prefill_end", "0"),
        (10.0, "prefill_start", "1"),  # queued at 0 ms, before request 0 was ready
        (10.0, "round_start", "0"),
        (22.0, "prefill_end", "1"),
    ]


def test_shared_gpu_rates_by_hand():
    """Two memory passes time-slice; a compute pass beside them runs at e."""
    env = simpy.Environment()
    gpu = SharedGpu(env, SymmetricSharing(0.5))
    ends: dict[str, float] = {}
    gpu.start([(0.004, MEMORY)], lambda: ends.__setitem__("a", env.now))
    gpu.start([(0.002, HOST), (0.004, MEMORY)], lambda: ends.__setitem__("b", env.now))
    gpu.start([(0.006, COMPUTE)], lambda: ends.__setitem__("c", env.now))
    env.run()
    # 0-2 ms: a (memory, alone in its class, compute beside) 0.5, c 0.5, b host.
    # 2-?: a and b memory at 0.25 each, c at 0.5. a has 3 ms left -> 12 ms more;
    # c has 5 ms left -> 10 ms: c ends at 12 ms. Then a, b at 0.5 each (no compute):
    # a has 3 - 2.5 = 0.5 ms left -> 1 ms: ends at 13 ms; b the same (4 - 2.5 = 1.5
    # left at 12 ms: 1 ms at 0.5 gives 0.5 -> 1.0 left at 13 ms, then alone: 14 ms).
    assert ends["c"] == pytest.approx(0.012)
    assert ends["a"] == pytest.approx(0.013)
    assert ends["b"] == pytest.approx(0.014)
    assert gpu.busy_s == pytest.approx(0.014)


# -- host overhead ---------------------------------------------------------------
def test_host_overhead_is_charged_per_forward_pass(tmp_path):
    """1 ms per pass: prefill 2 + 10, a round 4 (draft steps) + 8 + 1 + 20 = 33."""
    events, _ = _log(_scenario(tmp_path, "pd", ["0.0,100,11"], host_overhead_ms=1.0))
    assert _starts(events) == [(0.0, "prefill", "0"), (12.0, "round", "0"), (45.0, "round", "0")]
    assert events[-1] == (78.0, "round_end", "0")


# -- token conservation ------------------------------------------------------------
@pytest.mark.parametrize(
    ("architecture", "sharing"),
    [
        (arch, sharing)
        for arch in ARCHITECTURES
        for sharing in ("serialized", "overlap")
        if (arch, sharing) != ("pdv_unified", "overlap")  # refused: one worker
    ],
)
def test_every_token_is_delivered_once(tmp_path, architecture, sharing):
    rows = [f"{0.003 * i:.3f},{50 + 10 * i},{5 + 7 * i}" for i in range(12)]
    lanes: dict[str, Any] = {"gpu_sharing": sharing}
    if sharing == "overlap":
        lanes["overlap_efficiency"] = 0.8
    _events, result = _log(
        _scenario(tmp_path, architecture, rows, prefill_batch=4, lane_batch=3, **lanes)
    )
    requests = result.requests
    assert result.summary["requests"]["completed"] == 12
    assert list(requests["generated_tokens"]) == [5 + 7 * i for i in range(12)]


# -- recompute preemption ------------------------------------------------------------
def _tight_kv(path: Path, tmp_path: Path, kv_mb: float) -> Path:
    """The scenario with ``preempt_recompute`` on a replica holding ``kv_mb`` of KV."""
    _edit(path, "scheduler.kv", {"on_full": "preempt_recompute"})
    return _with_target_profile(
        path, _target_profile(tmp_path, memory={"kv_cache_limit_mb": kv_mb})
    )


def test_a_lane_rule_evicts_the_newest_request_when_a_round_would_not_fit(tmp_path):
    """0.5 MB of KV per token, 104 MB: two prompts of 100 tokens fit (50.5 MB each at prefill).

    Request 0's first round (20-48 ms) commits 5 tokens (2.5 MB); request 1's
    round then needs 2.5 MB with 0.5 MB free: request 1, the newest, is evicted
    (its 50.5 MB freed) and goes first in the prefill lane. Its recomputation
    waits until its 101 tokens of context (50.5 MB, what it held) and its first
    round's k + 1 = 5 tokens (2.5 MB) are free: 51 MB are, so it does not recompute into KV its
    round could not grow in (which would evict it again at once). Request 0
    runs its second round (48-76 ms) and finishes; request 1 then recomputes
    (76-86 ms) and runs its two rounds (86-114, 114-142 ms).
    """
    path = _tight_kv(_scenario(tmp_path, "pd", ["0.0,100,11", "0.0,100,11"]), tmp_path, 104.0)
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    starts = [
        (round(t * 1000.0, 3), kind[len("lane_") : -len("_start")], detail[len("requests=") :])
        for t, kind, _subject, detail in tracer.events
        if kind.startswith("lane_") and kind.endswith("_start")
    ]
    assert starts == [
        (0.0, "prefill", "0"),
        (10.0, "prefill", "1"),
        (20.0, "round", "0"),
        (48.0, "round", "0"),
        (76.0, "prefill", "1"),
        (86.0, "round", "1"),
        (114.0, "round", "1"),
    ]
    preempts = [
        (round(t * 1000.0, 3), who) for t, kind, who, _ in tracer.events if kind == "preempt"
    ]
    assert preempts == [(48.0, "request 1")]
    frame = result.requests
    assert list(frame["preemptions"]) == [0, 1]
    assert list(frame["kv_peak_mb"]) == [55.5, 55.5]  # a request of 111 tokens each
    assert list(frame["generated_tokens"]) == [11, 11]
    assert frame["kv_peak_mb"].max() <= 104.0


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_lane_rule_finishes_everything_under_memory_pressure(tmp_path, architecture):
    """Growth evicts the newest requests; the oldest always progress, every token once."""
    rows = [f"{0.002 * i:.3f},{100 + 10 * i},{20 + 3 * i}" for i in range(12)]
    path = _scenario(tmp_path, architecture, rows, prefill_batch=4, lane_batch=3)
    result = run(load_scenario(_tight_kv(path, tmp_path, 200.0)))
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert list(frame["generated_tokens"]) == [20 + 3 * i for i in range(12)]
    assert frame["preemptions"].sum() > 0
    assert frame["kv_peak_mb"].max() <= 200.0


# -- refusals ------------------------------------------------------------------------
def _refused(path: Path) -> str:
    with pytest.raises(InputError) as err:
        load_scenario(path)
    return str(err.value)


def _edit(path: Path, dotted: str, value: Any) -> Path:
    document = yaml.safe_load(path.read_text())
    node = document
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


ONE = ["0.0,100,11"]


@pytest.mark.parametrize(
    ("architecture", "lanes", "edits", "key", "allowed"),
    [
        (
            "pdv",
            {},
            {},
            "scheduler.arbitration.policy",
            "prefill_first or chunked_prefill in mode 'distributed'",
        ),
        (
            "pd",
            {"gpu_sharing": "overlap", "overlap_efficiency": 0.8},
            {"scheduler.kv": {"on_full": "preempt_recompute"}},
            "scheduler.kv.on_full",
            "queue with scheduler.arbitration.policy pd and scheduler.lanes.gpu_sharing overlap",
        ),
        ("pd", {"verify_first_margin": 2}, {}, "scheduler.arbitration.params", "no keys"),
        (
            "pdv",
            {"hybrid_threshold": 5},
            {},
            "scheduler.arbitration.params.hybrid_threshold",
            "keys verify_first_margin",
        ),
        (
            "pdv",
            {"unified_admit_factor": 1.0},
            {},
            "scheduler.arbitration.params.unified_admit_factor",
            "keys verify_first_margin",
        ),
        ("pdv", {"overlap_efficiency": 0.8}, {}, "scheduler.lanes.overlap_efficiency", "null"),
        (
            "pdv_unified",
            {"gpu_sharing": "overlap", "overlap_efficiency": 0.8},
            {},
            "scheduler.lanes.gpu_sharing",
            "serialized with pdv_unified",
        ),
        ("pdv", {"drafter": None}, {}, "scheduler.lanes.drafter", "draft_decode rows"),
        (
            "pdv",
            {"verifier": {"model": "draft-model", "lut": "drafter.csv"}},
            {},
            "scheduler.lanes.verifier",
            "verify rows of model draft-model on a100-sxm4-80gb",
        ),
        (
            "pdv",
            {},
            {"scheduler.verify.microbatch": {"max_microbatch": 4}},
            "scheduler.verify.microbatch",
            "the defaults with scheduler.arbitration.policy pdv",
        ),
    ],
)
def test_contradictory_lane_settings_are_refused(
    tmp_path, architecture, lanes, edits, key, allowed
):
    mode = "distributed" if key == "scheduler.arbitration.policy" else "fused"
    path = _scenario(tmp_path, architecture, ONE, mode=mode, **lanes)
    for dotted, value in edits.items():
        _edit(path, dotted, value)
    text = _refused(path)
    assert key in text
    assert allowed in text


@pytest.mark.parametrize("rule", ["prefill_first", "chunked_prefill"])
def test_a_whole_round_rule_refuses_the_lane_keys_it_does_not_use(tmp_path, rule):
    """Every scheduler.lanes key is refused under a rule that runs whole rounds."""
    path = _scenario(tmp_path, "pdv", ONE, host_overhead_ms=5.0)
    _edit(path, "scheduler.arbitration", {"policy": rule, "params": {}})
    text = _refused(path)
    for key in ("drafter", "verifier", "host_overhead_ms"):
        assert f"scheduler.lanes.{key}" in text
    assert f"scheduler.arbitration.policy {rule} runs whole rounds" in text


@pytest.mark.parametrize(
    ("old_key", "value", "new_key"),
    [
        ("architecture", "pdv", "scheduler.arbitration.policy"),
        ("verify_first_margin", 2, "scheduler.arbitration.params.verify_first_margin"),
        ("hybrid_threshold", 3, "scheduler.arbitration.params.hybrid_threshold"),
        ("unified_admit_factor", 1.2, "scheduler.arbitration.params.unified_admit_factor"),
    ],
)
def test_the_former_architecture_keys_are_refused_naming_their_new_place(
    tmp_path, old_key, value, new_key
):
    """scheduler.lanes.architecture and its parameters moved to scheduler.arbitration."""
    path = _edit(_scenario(tmp_path, "pdv", ONE), f"scheduler.lanes.{old_key}", value)
    text = _refused(path)
    assert f"scheduler.lanes.{old_key}: key that has moved" in text
    assert f"the key {new_key}" in text


def test_the_cli_refuses_scheduler_lanes_architecture_with_exit_2(tmp_path):
    path = _edit(_scenario(tmp_path, "pdv", ONE), "scheduler.lanes.architecture", "pdv")
    done = run_python("-m", "simulator", "run", str(path), "-o", str(tmp_path / "out"), "-q")
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert "scheduler.lanes.architecture" in output
    assert "scheduler.arbitration.policy" in output
    assert not (tmp_path / "out" / "requests.csv").exists()


def test_the_arbitration_registry_lists_the_lane_rules():
    assert policy_enums()["arbitration"] == sorted(
        ["chunked_prefill", "prefill_first", *ARCHITECTURES]
    )
    family = registry("arbitration")
    for name in ARCHITECTURES:
        assert family.get(name).splits_rounds is True
    for name in ("prefill_first", "chunked_prefill"):
        assert not getattr(family.get(name), "splits_rounds", False)
    assert family.get("pdv_hybrid").Params() == PdvHybridParams(None, 3)
    assert family.get("pdv_unified").Params().unified_admit_factor == 1.2


@pytest.mark.parametrize("mode", ["none", "distributed", "fused"])
def test_rules_idle_when_empty_choose_nothing_on_empty_lanes(tmp_path, mode):
    """A rule declaring idle_when_empty is skipped on empty lanes: it must choose nothing there.

    Asked on a replica with no prompt, chunk or decode-lane item, each such
    rule returns no work and no wake time (what the replica assumes when it
    does not ask it); the lane rules do not declare it.
    """
    family = registry("arbitration")
    declaring = [
        name
        for name in family.names()
        if promised_by_method(family.get(name), "idle_when_empty", "choose")
    ]
    assert sorted(declaring) == ["chunked_prefill", "prefill_first"]
    for name in declaring:
        folder = tmp_path / name
        folder.mkdir()
        trace = folder / "trace.csv"
        trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,64,8\n")
        path = write_scenario(
            folder,
            mode=mode,
            workload={"source": f"trace://{trace}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}},
            extra={"scheduler.arbitration": {"policy": name, "params": {}}},
        )
        scenario = load_scenario(path)
        engine = Engine(
            build_runtime(scenario), build_requests(scenario), RandomStreams(scenario.seed)
        )
        replica = engine.replicas[0]
        assert type(replica.arbiter) is family.get(name)
        assert replica.arbiter.choose(replica) == (None, math.inf)
    for name in ARCHITECTURES:
        assert not promised_by_method(family.get(name), "idle_when_empty", "choose")


def test_every_replica_builds_its_own_rule(tmp_path):
    """Rules may keep per-replica state (pdv_unified's pass): one instance per replica."""
    scenario = load_scenario(_scenario(tmp_path, "pdv_unified", ONE))
    runtime = build_runtime(scenario)
    two = replace(runtime, replicas=(runtime.replicas[0], runtime.replicas[0]))
    engine = Engine(two, build_requests(scenario), RandomStreams(scenario.seed))
    first, second = engine.replicas
    assert isinstance(first.arbiter, UnifiedWorker)
    assert first.arbiter is not second.arbiter


def test_the_default_rule_runs_whole_rounds(tmp_path):
    """Left out, scheduler.arbitration is prefill_first: no lane events, fused rounds."""
    path = _scenario(tmp_path, "pdv", THREE)
    document = yaml.safe_load(path.read_text())
    del document["scheduler"]["lanes"]
    del document["scheduler"]["arbitration"]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    scenario = load_scenario(path)
    assert scenario.scheduler.arbitration.name == "prefill_first"
    assert scenario.scheduler.lanes.split_rounds is False
    events, result = _log(path)
    assert events == []
    assert result.summary["requests"]["completed"] == 3


# -- throttling, availability and the resolved scenario -----------------------------
def test_a_throttled_replica_slows_its_lane_iterations(tmp_path):
    """Onset after 10 ms of work at half speed: the round after the prefill takes 56 ms."""
    path = _scenario(tmp_path, "pd", ONE)
    profile = _target_profile(tmp_path, thermal={"throttle_factor": 0.5, "throttle_after_s": 0.01})
    events, _ = _log(_with_target_profile(path, profile))
    assert events[:4] == [
        (0.0, "prefill_start", "0"),
        (10.0, "prefill_end", "0"),
        (10.0, "round_start", "0"),
        (66.0, "round_end", "0"),
    ]


def test_overlap_on_a_throttling_replica_is_refused(tmp_path):
    path = _scenario(tmp_path, "pd", ONE, gpu_sharing="overlap", overlap_efficiency=0.8)
    profile = _target_profile(tmp_path, thermal={"throttle_factor": 0.5, "throttle_after_s": 0.01})
    text = _refused(_with_target_profile(path, profile))
    assert "scheduler.lanes.gpu_sharing" in text
    assert "throttling is modelled for one iteration at a time" in text


def test_no_lane_iteration_starts_outside_an_availability_window(tmp_path):
    """Available 0-5 ms of every 125 ms: prefill at 0, the draft at 125 ms, the verify at 250."""
    profile = _target_profile(
        tmp_path,
        availability={
            "kind": "windows",
            "period_s": 0.125,
            "windows": [{"start_s": 0.0, "end_s": 0.005}],
        },
    )
    events, _ = _log(_with_target_profile(_scenario(tmp_path, "pdv", ONE), profile))
    assert _starts(events)[:3] == [
        (0.0, "prefill", "0"),
        (125.0, "draft", "0"),
        (250.0, "verify", "0"),
    ]


def test_the_resolved_scenario_names_the_lane_luts_absolutely(tmp_path):
    scenario = load_scenario(_scenario(tmp_path, "pdv", ONE))
    lanes = json.loads(scenario.resolved_json)["scheduler"]["lanes"]
    for role in ("drafter", "verifier"):
        lut = Path(lanes[role]["lut"])
        assert lut.is_absolute()
        assert lut.is_file()


# -- what-if windows ----------------------------------------------------------------
@pytest.mark.parametrize(("architecture", "sharing"), [("pdv", "overlap"), ("pd", "serialized")])
def test_a_window_of_a_lane_replica_reproduces_the_full_run(tmp_path, architecture, sharing):
    """Forking a stopped lane replica (GPU sharing included) continues it exactly."""
    from dataclasses import astuple

    from simulator import load_scenario, run
    from simulator.runner import run_window, snapshot

    rows = [f"{0.004 * i:.3f},{50 + 10 * i},{20 + 3 * i}" for i in range(40)]
    lanes: dict[str, Any] = {"gpu_sharing": sharing}
    if sharing == "overlap":
        lanes["overlap_efficiency"] = 0.8
    path = _scenario(tmp_path, architecture, rows, prefill_batch=4, lane_batch=3, **lanes)
    scenario = load_scenario(path)
    full = {r.request_id: astuple(r) for r in run(scenario).output.records}
    start_s = 0.25
    state = snapshot(scenario, start_s)
    carried = {item.request_id for item in state.in_flight}
    ended = [r for r in run_window(state, 10.0).output.records if r.outcome != "unfinished"]
    assert len([r for r in ended if r.request_id in carried]) >= 3
    for record in ended:
        got, expected = astuple(record), full[record.request_id]
        # Equal field by field, a nan equal to a nan (a fused request has no TVT).
        assert all(a == b or (a != a and b != b) for a, b in zip(got, expected, strict=True))
