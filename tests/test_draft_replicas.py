"""The planner's draft/verify split of target pools (hybrid mode, ``draft_replicas``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from policies.lanes import FUSED
from simulator import load_scenario, run
from simulator.engine.runtime import build_runtime
from tests.engine_fixtures import synthetic, write_scenario

SLO = {"ttft_ms": 2000, "tpot_ms": 200}
ROOT = Path(__file__).resolve().parents[1]


def _trace(path: Path, rate: float, duration_s: float) -> None:
    """Evenly spaced arrivals of 100-token prompts asking for 50 tokens."""
    rows = "".join(f"{i / rate:.6f},100,50\n" for i in range(int(rate * duration_s)))
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)


def _hybrid(
    tmp_path: Path, fraction: float, replicas: int, planner: dict[str, Any], rate: float
) -> pd.DataFrame:
    """A hybrid run whose fused and verify steps cost 30 ms per request in the batch."""
    _trace(tmp_path / "trace.csv", rate, 40.0)
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        target_phases={
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "verify": lambda c, b, _k: 30.0 * b,
        },
        fused_phases={
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "fused_decode": lambda c, b, _k: 30.0 * b,
        },
        draft_phases={"prefill": lambda c, b, _k: 1.0, "draft_decode": lambda c, b, _k: 1.0},
        clients=400,
        replicas=replicas,
        extra={
            "speculation.hybrid": {"policy": "fused_fraction", "params": {"fraction": fraction}},
            "planner": {
                "enabled": True,
                "interval_s": 10,
                "window_s": 10,
                "model_load_s": 0,
                "objectives": ["goodput", "p95_tpot"],
                **planner,
            },
        },
    )
    result = run(load_scenario(path))
    return result.requests, result.planner_log


def test_a_split_routes_fused_requests_to_draft_replicas_and_bundles_to_verify_ones(tmp_path):
    """Started on one overloaded replica, the first round gives each pool 2 verify replicas
    (0, 1) and 2 draft replicas (2, 3) (a change the planner makes: goodput more than
    doubles); every fused request then goes to 2 or 3 and every distributed one to 0 or 1;
    before it, the one replica served both; requests it had when its role changed finish."""
    requests, log = _hybrid(
        tmp_path,
        0.5,
        1,
        {"candidates": {"draft_replicas": [2], "verify_replicas": [2]}},
        rate=3.0,
    )
    rounds = log.drop_duplicates("time_s").set_index("time_s")
    assert rounds.loc[10.0, "decision"] == "changed"
    assert set(log[log["chosen"]]["candidate"]) == {"draft_replicas=2 verify_replicas=2"}
    before = requests[requests["arrival_s"] < 10.0]
    after = requests[requests["arrival_s"] >= 10.0]
    assert set(before["mode"]) == {"distributed", "fused"}
    assert set(before["replica"]) == {0}
    fused = after[after["mode"] == "fused"]
    distributed = after[after["mode"] == "distributed"]
    assert len(fused) > 10 and len(distributed) > 10
    assert set(fused["replica"]) <= {2, 3}
    assert set(distributed["replica"]) <= {0, 1}
    assert (requests["outcome"] == "completed").all()


def test_the_planner_finds_the_known_best_split_when_all_work_is_fused(tmp_path):
    """Every request fused at 4 requests/s (each replica serves about 2): one draft
    replica is overloaded, four suffice, and verify replicas only add idle GPU-seconds,
    so (4 draft, 0 verify) has the best goodput per GPU-second by construction once the
    backlog of the first ten seconds (on the one replica the run starts with) is gone. At
    the first round two verify replicas may pay for themselves: the overloaded replica
    becomes one of them, finishing its backlog without taking new fused work. Once the
    backlog has drained (by 30 s: the re-plan trigger sees the unfinished requests fall)
    the planner weighs the split again and drops them."""
    requests, log = _hybrid(
        tmp_path,
        1.0,
        1,
        {"candidates": {"draft_replicas": [1, 4], "verify_replicas": [0, 2]}},
        rate=4.0,
    )
    chosen = log[log["chosen"]].set_index("time_s")["candidate"]
    assert chosen[10.0].startswith("draft_replicas=4 "), chosen.to_dict()
    later = chosen[chosen.index > 20.0]
    assert len(later) >= 2
    assert set(later) == {"draft_replicas=4 verify_replicas=0"}, chosen.to_dict()
    assert (requests["mode"] == "fused").all()


def test_hybrid_at_fused_share_zero_gives_the_distributed_results(tmp_path):
    """A hybrid run whose fused_fraction share is 0 serves every request distributed,
    with exactly the per-request results of mode distributed."""
    out: dict[str, pd.DataFrame] = {}
    for mode in ("distributed", "hybrid"):
        extra = (
            {"speculation.hybrid": {"policy": "fused_fraction", "params": {"fraction": 0.0}}}
            if mode == "hybrid"
            else {}
        )
        (tmp_path / mode).mkdir()
        path = write_scenario(
            tmp_path / mode,
            mode=mode,
            workload=synthetic(60, 4.0, 200, 40, slo=SLO),
            replicas=2,
            clients=50,
            link={"src": "laptops", "dst": "pool", "rtt_ms": 20, "bw_mbps": 50},
            extra={
                "network.jitter": {"enabled": True, "rtt_sigma_ms": 2, "bw_sigma_pct": 10},
                **extra,
            },
        )
        out[mode] = run(load_scenario(path)).requests
    assert (out["hybrid"]["mode"] == "distributed").all()
    pd.testing.assert_frame_equal(out["distributed"], out["hybrid"])


def test_each_design_example_pool_serves_its_own_fused_model():
    """fused_model names the fused LUT each pool uses: the A100 and H100 fused steps differ."""
    scenario = load_scenario(ROOT / "scenarios" / "examples" / "design_example.yaml")
    fused = {c.id: c.fused_model for c in scenario.devices if c.type == "target"}
    assert fused == {"target_cluster_1": "fused-70b-a100", "target_cluster_2": "fused-70b-h100"}
    runtime = build_runtime(scenario)
    steps = {}
    for plan in runtime.replicas:
        step = plan.costs.step[FUSED]
        assert step is not None
        steps[plan.pool] = step.at(1024, 1, 4)[0]
    assert steps["target_cluster_1"] != pytest.approx(steps["target_cluster_2"])
