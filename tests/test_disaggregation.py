"""Disaggregated prefill and decode pools (``hardware_profiles[].role``), end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator import load_scenario, run
from simulator.engine.kv_transfer import BYTES_PER_MB
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import ListTracer
from simulator.metrics.disaggregation import KV_COLUMNS
from simulator.outputs import write_results
from simulator.validate import validate_file
from tests.engine_fixtures import PROFILES, LatencyFn, constant, synthetic, write_scenario

SLO = {"ttft_ms": 60000, "tpot_ms": 1000}
RTT_MS = 2.0
BW_MBPS = 8000.0


def _disaggregated(
    tmp_path: Path,
    *,
    mode: str = "none",
    workload: dict[str, Any] | None = None,
    decode_kv_limit_mb: float | None = None,
    edit: dict[str, Any] | None = None,
    target_phases: dict[str, LatencyFn] | None = None,
) -> Path:
    """The fixtures' scenario with its pool split into a prefill and a decode class."""
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=workload or synthetic(1, 1.0, 100, 10, slo=SLO),
        target_phases=target_phases,
    )
    doc = yaml.safe_load(path.read_text())
    pool = doc["hardware_profiles"][1]
    pool["role"] = "prefill"
    decode = dict(pool, id="dpool", role="decode")
    if decode_kv_limit_mb is not None:
        profile = yaml.safe_load(Path(pool["profile"]).read_text())
        profile["memory"]["kv_cache_limit_mb"] = decode_kv_limit_mb
        profile["sources"]["memory.kv_cache_limit_mb"] = "configuration: a small decode replica"
        (tmp_path / "a100-tp1.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
        decode["profile"] = "a100-tp1.yaml"
    doc["hardware_profiles"].append(decode)
    client = doc["network"]["links"][0]
    doc["network"]["links"] += [
        dict(client, dst="dpool"),
        {"src": "pool", "dst": "dpool", "rtt_ms": RTT_MS, "bw_mbps": BW_MBPS},
    ]
    for dotted, value in (edit or {}).items():
        node = doc
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(parts[-1])] = value
        else:
            node[parts[-1]] = value
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_ttft_is_the_colocated_ttft_plus_the_transfer(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    colocated = run(
        load_scenario(
            write_scenario(
                tmp_path / "c", mode="none", workload=synthetic(1, 1.0, 100, 10, slo=SLO)
            )
        )
    )
    (tmp_path / "d").mkdir()
    scenario = load_scenario(_disaggregated(tmp_path / "d"))
    result = run(scenario)
    per_token_mb = build_runtime(scenario).replicas[0].kv_mb_per_token["decode"]
    nbytes = 101 * per_token_mb * BYTES_PER_MB
    transfer_ms = nbytes * 8 / (BW_MBPS * 1e6) * 1000 + RTT_MS / 2
    section = result.summary["disaggregation"]
    assert section["transfers"] == 1
    assert section["kv_bytes_moved"] == pytest.approx(nbytes, rel=1e-12)
    assert section["transfer_ms"]["p50"] == pytest.approx(transfer_ms, rel=1e-9)
    d, c = result.requests.iloc[0], colocated.requests.iloc[0]
    assert d["ttft_ms"] == pytest.approx(c["ttft_ms"] + transfer_ms, rel=1e-9)
    assert d["tpot_ms"] == pytest.approx(c["tpot_ms"], rel=1e-9)
    assert (d["prefill_replica"], d["replica"]) == (0, 1)
    assert d["kv_transfer_ms"] == pytest.approx(transfer_ms, rel=1e-9)
    # The same iterations, split between the roles.
    busy = result.output.replica_busy_s
    assert busy[0] > 0 and busy[1] > 0
    assert sum(busy) == pytest.approx(colocated.output.replica_busy_s[0], rel=1e-9)
    roles = section["by_role"]
    held_s = result.output.simulated_s
    assert roles["prefill"]["gpu_utilization"] == pytest.approx(busy[0] / held_s, rel=1e-9)
    assert roles["decode"]["gpu_utilization"] == pytest.approx(busy[1] / held_s, rel=1e-9)
    assert roles["prefill"]["gpu_hours"] == pytest.approx(held_s / 3600, rel=1e-9)


@pytest.mark.parametrize("decode_kv_limit_mb", [10.0, 52.0])
@pytest.mark.parametrize("on_full", ["queue", "preempt_recompute"])
def test_a_request_no_decode_replica_could_ever_hold_is_rejected(
    tmp_path: Path, on_full: str, decode_kv_limit_mb: float
) -> None:
    # 10 MiB of decode KV: less than the 101 tokens the transfer carries; 52 MiB holds
    # those but not the 110 (prompt, output and a round) the request holds at its end,
    # so under preempt_recompute it would evict itself and recompute for ever.
    scenario = load_scenario(
        _disaggregated(
            tmp_path,
            workload=synthetic(2, 1.0, 100, 10, slo=SLO),
            decode_kv_limit_mb=decode_kv_limit_mb,
            edit={"scheduler.kv": {"on_full": on_full}},
        )
    )
    per_token_mb = build_runtime(scenario).replicas[0].kv_mb_per_token["decode"]
    assert 110 * per_token_mb > decode_kv_limit_mb
    result = run(scenario)
    frame = result.requests
    assert list(frame["outcome"]) == ["rejected", "rejected"]
    assert list(frame["reason"]) == ["kv_capacity", "kv_capacity"]
    section = result.summary["disaggregation"]
    assert section["transfers"] == 0 and section["waiting_at_end"] == 0
    # Each was prefilled (its prefill replica freed the KV): the second prefilled after the first.
    assert result.output.replica_busy_s[0] > 0


@pytest.mark.parametrize("on_full", ["queue", "preempt_recompute"])
def test_a_request_waits_for_decode_kv_until_the_running_one_finishes(
    tmp_path: Path, on_full: str
) -> None:
    # Two requests at once; the decode replica has KV for one of them only:
    # reserved whole (110 tokens) under queue; under preempt_recompute the
    # first's 101 tokens, growing to 110, leave less than the second's 101 + 1.
    scenario = load_scenario(
        _disaggregated(
            tmp_path,
            workload=synthetic(2, 1e6, 100, 10, slo=SLO),
            decode_kv_limit_mb=80.0,
            edit={"scheduler.kv": {"on_full": on_full}},
        )
    )
    per_token_mb = build_runtime(scenario).replicas[0].kv_mb_per_token["decode"]
    need_mb = 110 * per_token_mb
    assert need_mb <= 80.0 < 101 * per_token_mb + 102 * per_token_mb
    result = run(scenario)
    first, second = result.requests.iloc[0], result.requests.iloc[1]
    assert first["kv_wait_ms"] == 0.0
    assert second["kv_wait_ms"] > 0.0
    # The second transfer starts when the first request's last token is committed.
    first_done_s = first["arrival_s"] + first["e2e_ms"] / 1000
    second_sent_s = (
        second["arrival_s"] + (second["ttft_server_ms"] - second["kv_transfer_ms"]) / 1000
    )
    assert second_sent_s == pytest.approx(first_done_s, abs=1e-6)
    assert result.summary["disaggregation"]["waiting_at_end"] == 0


def _preempting(
    tmp_path: Path, kv_mb: float = 104.0, rows: tuple[str, ...] = ("0.0,100,11", "0.0,100,11")
) -> Path:
    """Requests of 100 + 11 tokens (two at t = 0) and a decode replica of ``kv_mb`` of KV.

    Prefill 10 ms and decode steps 20 ms whatever the batch; 0.5 MB of KV per
    token; a link from the prefill to the decode pool of 2 ms RTT and 1 Tb/s.
    """
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return _disaggregated(
        tmp_path,
        workload={"source": f"trace://{trace}", "slo": SLO},
        decode_kv_limit_mb=kv_mb,
        target_phases={"prefill": constant(10.0), "draft_decode": constant(20.0)},
        edit={
            "scheduler.kv": {"on_full": "preempt_recompute"},
            "network.links.2.bw_mbps": 1e6,
        },
    )


def test_a_full_decode_replica_preempts_the_newest_request_which_recomputes_there(
    tmp_path: Path,
) -> None:
    """Hand-computed (times from the first prefill's start t0; T: one transfer).

    Request 0 is prefilled at t0-t0+10 (the prefill replica reserves its 100
    prompt tokens and its first token: 50.5 MB), request 1 at t0+10-t0+20.
    The decode replica reserves each one's context (101 tokens, 50.5 MB)
    before its transfer, having checked that 102 tokens (51 MB) are free; each
    transfer takes T = bytes x 8 / bandwidth + RTT / 2. Request 0 decodes
    alone from t0+10+T (step 1); request 1 arrives during that step and joins
    at t0+30+T. After the steps starting at t0+30+T and t0+50+T request 0 holds
    50.5 + 3 x 0.5 = 52 MB and request 1 51.5 MB: 0.5 MB free, short of the
    1 MB the next step of both needs. At t0+70+T request 1, the newest, is
    evicted (51.5 MB freed) and goes first in line in the decode replica's
    prefill lane; request 0 steps on alone, growing 0.5 MB per step. Request
    1's recomputation takes its context (103 tokens, 51.5 MB: what it held; it
    makes no token) and waits for its first step's token too: 52 MB; when
    request 0's step ends at t0+90+T it holds 52.5 MB, leaving 51.5 MB, so
    request 1 waits until request 0's tenth and last step ends at t0+210+T. It
    recomputes in 10 ms (t0+210+T-t0+220+T) and its 8 remaining tokens take 8
    steps: it ends at t0+380+T. Its KV peaks at 51.5 + 8 x 0.5 = 55.5 MB, as
    request 0's at 101 + 10 tokens.
    """
    scenario = load_scenario(_preempting(tmp_path))
    per_token_mb = build_runtime(scenario).replicas[0].kv_mb_per_token["decode"]
    assert per_token_mb == 0.5
    transfer_ms = 101 * per_token_mb * BYTES_PER_MB * 8 / (1e6 * 1e6) * 1000 + RTT_MS / 2
    tracer = ListTracer()
    result = run(scenario, tracer=tracer)
    events = [(t * 1000.0, kind, subject, detail) for t, kind, subject, detail in tracer.events]
    t0 = next(t for t, kind, _s, _d in events if kind == "prefill_start")
    seen = [
        (t - t0, kind, subject, detail)
        for t, kind, subject, detail in events
        if kind in ("prefill_start", "preempt", "complete")
    ]
    expected = [
        (0.0, "prefill_start", "replica 0", "n=1 context=100.0"),
        (10.0, "prefill_start", "replica 0", "n=1 context=100.0"),
        (70.0 + transfer_ms, "preempt", "request 1", "replica 1"),
        (210.0 + transfer_ms, "prefill_start", "replica 1", "n=1 context=103.0"),
        (210.0 + transfer_ms, "complete", "request 0", "tokens=11"),
        (380.0 + transfer_ms, "complete", "request 1", "tokens=11"),
    ]
    assert [e[1:] for e in seen] == [e[1:] for e in expected]
    # (a last token's download to the client takes some 1e-8 ms)
    assert [e[0] for e in seen] == pytest.approx([e[0] for e in expected], abs=1e-6)
    frame = result.requests
    assert list(frame["replica"]) == [1, 1]
    assert list(frame["prefill_replica"]) == [0, 0]
    assert list(frame["preemptions"]) == [0, 1]
    assert list(frame["generated_tokens"]) == [11, 11]
    assert list(frame["kv_peak_mb"]) == [55.5, 55.5]
    assert list(frame["kv_wait_ms"]) == [0.0, 0.0]
    assert frame["kv_transfer_ms"].tolist() == pytest.approx([transfer_ms] * 2, rel=1e-9)
    # The first token leaves the decode replica when the KV is there.
    assert frame["ttft_server_ms"].tolist() == pytest.approx(
        [t0 + 10.0 + transfer_ms, t0 + 20.0 + transfer_ms], rel=1e-9
    )
    # Ten decode steps after the first token; request 1's include its wait and recomputation.
    assert frame["tpot_ms"].tolist() == pytest.approx([20.0, (380.0 - 20.0) / 10], rel=1e-9)
    assert result.summary["disaggregation"]["transfers"] == 2


def test_a_hand_over_leaves_the_kv_the_iteration_under_way_will_add(tmp_path: Path) -> None:
    """Hand-computed: a third request's hand-over during a decode step of the first two.

    As in the test above (times from t0, T one transfer), requests 0 and 1
    decode together from t0+30+T. Request 2 arrives at 45 ms and is prefilled
    at t0+45-t0+55, inside the step t0+50+T-t0+70+T, when requests 0 and 1
    hold 51.5 + 51 = 102.5 MB and the step will add 1 MB. 102.5 + 51 (its
    context and one token) fits 153.5 MB, but not beside the step's 1 MB: it
    waits on the prefill replica (reserving would leave the step's tokens
    without room) until request 0 finishes at t0+210+T, then moves: a wait of
    155 + T ms. Request 1 ends at t0+230+T; request 2 arrives at t0+210+2T,
    joins the next step at t0+230+T and ends ten steps later, at t0+430+T.
    """
    rows = ("0.0,100,11", "0.0,100,11", "0.045,100,11")
    scenario = load_scenario(_preempting(tmp_path, kv_mb=153.5, rows=rows))
    transfer_ms = 101 * 0.5 * BYTES_PER_MB * 8 / (1e6 * 1e6) * 1000 + RTT_MS / 2
    tracer = ListTracer()
    result = run(scenario, tracer=tracer)
    events = [(t * 1000.0, kind, subject, detail) for t, kind, subject, detail in tracer.events]
    t0 = next(t for t, kind, _s, _d in events if kind == "prefill_start")
    completes = [(t - t0, subject) for t, kind, subject, _d in events if kind == "complete"]
    assert [who for _t, who in completes] == ["request 0", "request 1", "request 2"]
    assert [t for t, _who in completes] == pytest.approx(
        [210.0 + transfer_ms, 230.0 + transfer_ms, 430.0 + transfer_ms], abs=1e-6
    )
    frame = result.requests
    assert frame["kv_wait_ms"].tolist() == pytest.approx([0.0, 0.0, 155.0 + transfer_ms], abs=1e-6)
    assert list(frame["preemptions"]) == [0, 0, 0]
    assert frame["kv_peak_mb"].max() <= 153.5


@pytest.mark.parametrize("mode", ["none", "fused"])
def test_a_preempting_disaggregated_run_repeats_byte_for_byte(tmp_path: Path, mode: str) -> None:
    path = _disaggregated(
        tmp_path,
        mode=mode,
        workload=synthetic(30, 40.0, 100, 40, slo=SLO),
        decode_kv_limit_mb=120.0,
        edit={"scheduler.kv": {"on_full": "preempt_recompute"}},
    )
    first = write_results(run(load_scenario(path)), tmp_path / "a")
    second = write_results(run(load_scenario(path)), tmp_path / "b")
    frame = pd.read_csv(first[1])
    assert frame["preemptions"].sum() > 0
    assert (frame["outcome"] == "completed").all()
    for one, two in zip(first, second, strict=True):
        if one.name != "run.json":
            assert one.read_bytes() == two.read_bytes(), one.name


def test_fused_speculation_runs_on_the_decode_replica(tmp_path: Path) -> None:
    result = run(load_scenario(_disaggregated(tmp_path, mode="fused")))
    row = result.requests.iloc[0]
    assert row["replica"] == 1
    assert row["verify_rounds"] > 0
    assert row["generated_tokens"] == 10


def test_a_colocated_run_has_no_disaggregation_outputs(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, mode="none", workload=synthetic(1, 1.0, 100, 10, slo=SLO))
    result = run(load_scenario(path))
    assert "disaggregation" not in result.summary
    assert not set(KV_COLUMNS) & set(result.requests.columns)


def test_the_documented_transfer_columns_are_written(tmp_path: Path) -> None:
    result = run(load_scenario(_disaggregated(tmp_path)))
    columns = list(result.requests.columns)
    start = columns.index("prefill_replica")
    assert tuple(columns[start : start + 3]) == KV_COLUMNS
    reference = (Path(__file__).resolve().parent.parent / "docs" / "outputs.md").read_text()
    section = reference.split("## requests.csv")[1].split("\n## ")[0]
    documented = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    assert [c for c in documented if c != "cached_tokens"] == columns


def _issues(path: Path) -> list[str]:
    verdict = validate_file(path)
    assert verdict.error is not None
    return [issue.format() for issue in verdict.error.issues]


@pytest.mark.parametrize(
    ("edit", "key", "value", "allowed"),
    [
        (
            {"hardware_profiles.0.role": "decode"},
            "hardware_profiles[0].role",
            "decode",
            "client devices neither prefill nor decode",
        ),
        (
            {"hardware_profiles.2.role": "colocated"},
            "hardware_profiles[2].role",
            "colocated",
            "a disaggregated fleet has no colocated pool",
        ),
        (
            {"hardware_profiles.2.role": "prefill"},
            "hardware_profiles",
            "prefill",
            "at least one target class of role decode",
        ),
        (
            {"network.links.2.src": "laptops"},
            "hardware_profiles[1].id",
            "pool",
            "a network.links entry joining it to a decode class: dpool",
        ),
        (
            {
                "planner": {
                    "enabled": True,
                    "model_load_s": 1.0,
                    "candidates": {"verify_replicas": [1, 2]},
                }
            },
            "planner.candidates.verify_replicas",
            "[1, 2]",
            "prefill_replicas and decode_replicas with prefill and decode pools",
        ),
        (
            {"scheduler.kv.prefix_cache": {"enabled": True}},
            "scheduler.kv.prefix_cache.enabled",
            "True",
            "false with prefill and decode pools",
        ),
    ],
)
def test_what_a_disaggregated_fleet_cannot_be_is_refused(
    tmp_path: Path, edit: dict[str, Any], key: str, value: str, allowed: str
) -> None:
    lines = _issues(_disaggregated(tmp_path, edit=edit))
    matching = [line for line in lines if "scenario.yaml" in line and key in line and value in line]
    assert matching, "\n".join(lines)
    assert any(allowed in line for line in matching), "\n".join(lines)


def test_two_target_classes_are_linked_only_as_prefill_and_decode(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, mode="none", workload=synthetic(1, 1.0, 100, 10, slo=SLO))
    doc = yaml.safe_load(path.read_text())
    doc["hardware_profiles"].append(dict(doc["hardware_profiles"][1], id="other"))
    doc["network"]["links"].append({"src": "pool", "dst": "other", "rtt_ms": 1, "bw_mbps": 1})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    lines = _issues(path)
    assert any(
        "network.links[1].dst" in line and "or a prefill class to a decode class" in line
        for line in lines
    ), "\n".join(lines)


def test_the_shipped_profiles_give_the_example_link() -> None:
    profile = yaml.safe_load((PROFILES / "h100-tp1.yaml").read_text())
    fit = profile["network"]["interconnect"]["send_recv"][0]
    example = yaml.safe_load(
        (
            Path(__file__).resolve().parent.parent
            / "scenarios"
            / "disaggregation"
            / "disaggregated.yaml"
        ).read_text()
    )
    link = example["network"]["links"][0]
    assert link["rtt_ms"] == pytest.approx(2 * fit["latency_ms"], rel=1e-12)
    assert link["bw_mbps"] == pytest.approx(fit["bandwidth_gb_per_s"] * 8000, rel=1e-12)


def test_fused_decode_runs_give_what_stepping_gives(tmp_path: Path) -> None:
    # Requests arrive on a decode replica while it runs a fused run of decode
    # iterations: the run ends at its next boundary and they join, as stepping does.
    workload = synthetic(12, 20.0, 100, 40, slo=SLO)
    results = []
    for fuse in (True, False):
        folder = tmp_path / str(fuse)
        folder.mkdir()
        path = _disaggregated(folder, workload=workload, edit={"simulation.fuse_iterations": fuse})
        results.append(run(load_scenario(path)).requests)
    fused, stepped = results
    assert fused["tpot_ms"].tolist() == pytest.approx(stepped["tpot_ms"].tolist(), rel=1e-9)
    assert fused["e2e_ms"].tolist() == pytest.approx(stepped["e2e_ms"].tolist(), rel=1e-9)


EXAMPLE = Path(__file__).resolve().parent.parent / "scenarios" / "disaggregation"


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLE.glob("*.yaml")))
def test_the_example_scenarios_validate(name: str) -> None:
    assert validate_file(EXAMPLE / f"{name}.yaml").error is None


@pytest.mark.slow
def test_the_example_script_prints_a_row_per_run(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.script_modules import load_script

    root = Path(__file__).resolve().parent.parent
    script = load_script(root / "scripts" / "disaggregation_example.py", "disaggregation_example")
    assert script.main([]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + len(script.SCENARIOS)
    assert rows[3].split("|")[9].strip() != "-"  # the disaggregated run moved KV
    assert rows[-1].split("|")[9].strip() != "-"  # and so did its distributed variant
    assert rows[-1].split("|")[12].strip() != "-"  # whose rounds have a TVT
