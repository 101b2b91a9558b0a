"""Disaggregated prefill and decode pools (``hardware_profiles[].role``), end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.engine.kv_transfer import BYTES_PER_MB
from simulator.engine.runtime import build_runtime
from simulator.metrics.disaggregation import KV_COLUMNS
from simulator.validate import validate_file
from tests.engine_fixtures import PROFILES, synthetic, write_scenario

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
) -> Path:
    """The fixtures' scenario with its pool split into a prefill and a decode class."""
    path = write_scenario(
        tmp_path, mode=mode, workload=workload or synthetic(1, 1.0, 100, 10, slo=SLO)
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


def test_a_request_waits_for_decode_kv_until_the_running_one_finishes(tmp_path: Path) -> None:
    # Two requests at once; the decode replica has KV for one of them only.
    scenario = load_scenario(
        _disaggregated(
            tmp_path,
            workload=synthetic(2, 1e6, 100, 10, slo=SLO),
            decode_kv_limit_mb=80.0,
        )
    )
    need_mb = 110 * build_runtime(scenario).replicas[0].kv_mb_per_token["decode"]
    assert need_mb <= 80.0 < 2 * need_mb
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
        (
            {"scheduler.kv.on_full": "preempt_recompute"},
            "scheduler.kv.on_full",
            "preempt_recompute",
            "queue with prefill and decode pools",
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


@pytest.mark.parametrize(
    "name",
    [
        "colocated",
        "disaggregated",
        "colocated_fused",
        "disaggregated_fused",
        "colocated_distributed",
        "disaggregated_distributed",
    ],
)
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
