"""The offline placement search (``simulate plan``): ranking, determinism, errors, CLI."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator.cli import main
from simulator.commands import plan as plan_command
from simulator.errors import InputError
from simulator.sweeps import plan as plan_module
from simulator.sweeps.plan import plan
from simulator.sweeps.plan_plot import plot_plan
from simulator.sweeps.plan_space import load_plan_space
from simulator.validate import detect_kind, validate_file
from tests.engine_fixtures import synthetic, write_scenario

RATE_PER_S = 18.0
"""Offered rate of the verify-bound scenario: above what one or two replicas verify."""


def verify_bound(tmp_path: Path) -> Path:
    """A verify-bound load: 64 clients draft for one pool verifying one request at a time.

    Verify batches hold one request (``max_batch: 1``), so a replica's
    throughput is fixed and only more replicas raise the rate the pool
    sustains. A request of 20 output tokens needs about seven 22 ms verify
    rounds plus a 10 ms prefill, about 0.16 s of a replica: one replica
    serves about 6 requests/s, two about 12, four about 25; at 18
    requests/s only four meet the SLOs.
    """
    return write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(
            150, RATE_PER_S, 32, 20, slo={"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 300}
        ),
        clients=64,
        extra={"scheduler.verify.batching.max_batch": 1},
    )


def write_space(tmp_path: Path, document: dict[str, Any], name: str = "space.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"scenario": "scenario.yaml", **document}, sort_keys=False))
    return path


REPLICAS = {"pools": {"pool": {"replicas": [1, 2, 4]}}}


@pytest.mark.slow
def test_the_known_best_configuration_ranks_first(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    frame = plan(write_space(tmp_path, REPLICAS), tmp_path / "out", workers=1, figures=False)
    assert list(frame["pools.pool.replicas"]) == [4, 2, 1]
    assert list(frame["rank"]) == [1, 2, 3]
    assert list(frame["gpus"]) == [4, 2, 1]
    assert list(frame["meets_slo_at_rate"]) == [True, False, False]
    assert frame["feasible"].all()  # each meets the target at some rate
    assert (frame["status"] == "ok").all()
    # only more verify replicas help: the sustainable rate grows with them
    rates = frame.set_index("pools.pool.replicas")["max_requests_per_s"]
    assert rates[1] < RATE_PER_S < rates[4]
    assert rates[1] < rates[2] < rates[4]
    best = frame.iloc[0]
    assert best["max_requests_per_gpu_s"] == pytest.approx(best["max_requests_per_s"] / 4)
    assert best["goodput_requests_per_gpu_s"] == pytest.approx(best["goodput_requests_per_s"] / 4)


def _ranked_row(index: int, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(plan_module.RESULT_COLUMNS)
    row.update(
        configuration=index,
        label=f"pool.replicas={index}",
        status="ok",
        error="",
        meets_slo_at_rate=False,
        feasible=False,
        capacity_capped=False,
        gpus=1,
    )
    row.update(values)
    return row


def test_feasible_configurations_rank_above_infeasible_ones() -> None:
    """No rate meets the target for configuration 0, however high its goodput at the rate."""
    infeasible = _ranked_row(0, slo_attainment=0.85, goodput_requests_per_gpu_s=9.0)
    feasible = _ranked_row(
        1,
        slo_attainment=0.5,
        goodput_requests_per_gpu_s=2.0,
        feasible=True,
        max_requests_per_s=4.0,
        max_requests_per_gpu_s=4.0,
    )
    meets = _ranked_row(
        2,
        slo_attainment=0.95,
        goodput_requests_per_gpu_s=1.0,
        meets_slo_at_rate=True,
        feasible=True,
        max_requests_per_s=3.0,
        max_requests_per_gpu_s=3.0,
    )
    frame = plan_module.rank([infeasible, feasible, meets], ["pool.replicas"])
    assert list(frame["configuration"]) == [2, 1, 0]
    assert list(frame["feasible"]) == [True, True, False]
    printed = plan_module.render_top(frame, 3).splitlines()
    assert printed[3].endswith("(infeasible: no rate tried meets the attainment target)")
    assert "infeasible" not in "\n".join(printed[:3])


@pytest.mark.slow
def test_table_is_the_same_run_twice_and_with_two_workers(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = write_space(tmp_path, {"pools": {"pool": {"replicas": [1, 2]}}})
    plan(space, tmp_path / "a", workers=1, figures=False)
    plan(space, tmp_path / "b", workers=1, figures=False)
    plan(space, tmp_path / "c", workers=2, figures=False)
    first = (tmp_path / "a" / "plan.csv").read_bytes()
    assert first == (tmp_path / "b" / "plan.csv").read_bytes()
    assert first == (tmp_path / "c" / "plan.csv").read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed: the test extra installs it where PyPI has a Ray wheel for "
    "this platform and Python (pip install 'specdec-sim[ray]')",
)
def test_ray_gives_the_same_table(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = write_space(tmp_path, {"pools": {"pool": {"replicas": [1, 2]}}})
    plan(space, tmp_path / "local", workers=1, figures=False)
    plan(space, tmp_path / "ray", executor="ray", workers=2, figures=False)
    local = (tmp_path / "local" / "plan.csv").read_bytes()
    assert local == (tmp_path / "ray" / "plan.csv").read_bytes()


def test_mode_none_takes_no_k_and_mode_overrides_apply(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = load_plan_space(
        write_space(
            tmp_path,
            {
                "speculation": {
                    "mode": {
                        "none": {
                            "speculation.drafter_models": [],
                            "speculation.acceptance_models": [],
                            "hardware_profiles.0.model": None,
                        },
                        "distributed": {},
                    },
                    "k": [2, 4],
                }
            },
        )
    )
    values = [dict(p.values) for p in space.sweep.points]
    assert values == [
        {"speculation.mode": "none"},
        {"speculation.mode": "distributed", "speculation.k": 2},
        {"speculation.mode": "distributed", "speculation.k": 4},
    ]
    assert [p.scenario.speculation.mode for p in space.sweep.points] == [
        "none",
        "distributed",
        "distributed",
    ]
    assert [p.scenario.speculation.k for p in space.sweep.points[1:]] == [2, 4]


def test_controller_axis_enables_adaptive_k_except_for_static(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = load_plan_space(
        write_space(tmp_path, {"speculation": {"controller": ["static", "backpressure"]}})
    )
    assert [p.scenario.speculation.k_control.name for p in space.sweep.points] == [
        "static",
        "backpressure",
    ]


def _problems(tmp_path: Path, document: dict[str, Any]) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_plan_space(write_space(tmp_path, document, "bad.yaml"))
    return [f"{i.key_path}|{i.value}|{i.allowed}|{i.problem}" for i in caught.value.issues]


def test_bad_spaces_are_refused_with_key_value_and_allowed(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    (unknown,) = _problems(tmp_path, {"pools": {"nope": {"replicas": [1]}}})
    assert unknown.startswith("pools.nope|") and "a target pool of the scenario: pool" in unknown
    # the fixture LUT has rows at TP 1 only, so the shipped a100-tp4 profile is not usable
    (tp,) = _problems(tmp_path, {"pools": {"pool": {"tensor_parallel": [1, 4]}}})
    assert tp.startswith("pools.pool.tensor_parallel|[4]|")
    assert "1 (a100-tp1.yaml)" in tp and "a100-tp4" not in tp
    (zero,) = _problems(tmp_path, {"pools": {"pool": {"replicas": [0]}}})
    assert zero.startswith("pools.pool.replicas[0]|0|")
    (mode,) = _problems(tmp_path, {"speculation": {"mode": ["warp"]}})
    assert mode.startswith("speculation.mode[0]|'warp'|one of 'none'")
    (none,) = _problems(tmp_path, {"set": {"seed": 2}})
    assert "no axis to search" in none
    # a configuration whose scenario does not load names the configuration
    issues = _problems(tmp_path, {"speculation": {"mode": ["fused"]}})
    assert issues and all(i.startswith("points[0] (speculation.mode=") for i in issues)


def test_tensor_parallel_axis_swaps_the_pool_profile(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = load_plan_space(write_space(tmp_path, {"pools": {"pool": {"tensor_parallel": [1]}}}))
    (point,) = space.sweep.points
    (pool,) = point.scenario.targets()
    assert pool.tensor_parallel == 1 and pool.profile_path.name == "a100-tp1.yaml"


@pytest.mark.slow
def test_cli_writes_the_table_and_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_bound(tmp_path)
    out = tmp_path / "out"
    space = write_space(tmp_path, {"pools": {"pool": {"replicas": [1, 4]}}})
    assert main(["plan", str(space), "-o", str(out), "--workers", "1", "--top", "1"]) == 0
    for name in ("plan.csv", "plan.png", "plan.svg"):
        assert (out / name).stat().st_size > 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:2] == ["rank", "GPUs"]
    assert len(printed) == 3 and printed[1].endswith("pool.replicas=4")
    assert printed[2] == "2 points run, 0 resumed, 0 failed"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_cli_bad_space_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_bound(tmp_path)
    space = write_space(tmp_path, {"pools": {"pool": {"replicas": ["x"]}}})
    assert main(["plan", str(space), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pools.pool.replicas[0]" in err and "Traceback" not in err
    assert main(["plan", str(space), "--slo-attainment", "1.5"]) == 2


@pytest.mark.slow
def test_validate_recognises_plan_spaces(tmp_path: Path) -> None:
    verify_bound(tmp_path)
    space = write_space(tmp_path, REPLICAS)
    assert detect_kind(space) == "plan"
    verdict = validate_file(space)
    assert verdict.ok and "3 configurations" in verdict.summary
    shipped = Path(__file__).resolve().parent.parent / "scenarios/plans/hybrid_mix_placement.yaml"
    assert validate_file(shipped).ok


def test_default_attainment_is_the_same_in_the_command_and_the_search() -> None:
    assert (
        plan_command.DEFAULT_SLO_ATTAINMENT == plan_module.DEFAULT_SLO_ATTAINMENT == 0.9
    )  # one constant


def _ranked_frame() -> pd.DataFrame:
    """A ranked plan table of two configurations (the second with no sustainable rate)."""
    rows = [
        {"rank": 1, "k": 4, "max": 0.95, "goodput": 0.40},
        {"rank": 2, "k": 2, "max": None, "goodput": 2.5},
    ]
    records = []
    for row in rows:
        values = {
            "pools.a100_pool.replicas": 2,
            "pools.a100_pool.tensor_parallel": 4,
            "speculation.mode": "hybrid",
            "speculation.k": row["k"],
        }
        records.append(
            {
                "rank": row["rank"],
                "configuration": row["rank"] - 1,
                "label": plan_module.configuration_label(values),
                **values,
                **dict.fromkeys(plan_module.RESULT_COLUMNS),
                "max_requests_per_gpu_s": row["max"],
                "goodput_requests_per_gpu_s": row["goodput"],
            }
        )
    return pd.DataFrame.from_records(records)


def test_plan_figure_has_compact_labels_values_and_a_legend_off_the_bars() -> None:
    frame = _ranked_frame()
    ax = plot_plan(frame)
    figure = ax.get_figure(root=True)
    figure.tight_layout()
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["#1 replicas=2 tp=4 mode=hybrid k=4", "#2 replicas=2 tp=4 mode=hybrid k=2"]
    values = {t.get_text() for t in ax.texts}
    assert {"0.95", "0.4", "none", "2.5"} <= values
    box = ax.get_window_extent(renderer)
    assert ax.get_legend().get_window_extent(renderer).y1 < box.y0  # below the axes
    label_width = max(t.get_window_extent(renderer).width for t in ax.get_yticklabels())
    assert label_width < 0.5 * figure.bbox.width  # the labels leave most of the width to the bars


def _exit_with_four_replicas(scenario: Any) -> Any:
    if scenario.targets()[0].count == 4:
        os._exit(5)
    return _REAL_RUN(scenario)


_REAL_RUN = plan_module.run


@pytest.mark.slow
def test_a_dying_worker_fails_its_configuration_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_bound(tmp_path)
    space = write_space(tmp_path, {"pools": {"pool": {"replicas": [1, 4]}}})
    monkeypatch.setattr(plan_module, "run", _exit_with_four_replicas)
    assert main(["plan", str(space), "-o", str(tmp_path / "out"), "--workers", "2"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "1 point run, 0 resumed, 1 failed"
    frame = plan_module.pd.read_csv(tmp_path / "out/plan.csv")
    assert list(frame["status"]) == ["ok", "failed"]
    assert "exited with status 5" in frame.loc[1, "error"]
