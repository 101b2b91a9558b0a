"""The columns of requests.csv and timeseries.csv: per-replica values and their reference."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.engine.timeseries import PLANNER_COLUMNS
from simulator.metrics.disaggregation import KV_COLUMNS
from simulator.outputs import write_results
from tests.engine_fixtures import synthetic, write_scenario

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "outputs.md"


def documented_columns(table: str) -> list[str]:
    """The first cell of each row of the column table under ``## <table>`` in docs/outputs.md."""
    text = REFERENCE.read_text(encoding="utf-8")
    section = text.split(f"\n## {table}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)


def two_replica_run(tmp_path: Path, mode: str) -> Path:
    scenario_dir = tmp_path / f"scenario_{mode}"
    scenario_dir.mkdir()
    path = write_scenario(
        scenario_dir, mode=mode, workload=synthetic(40, 20.0, 200, 30), replicas=2, clients=8
    )
    out = tmp_path / f"results_{mode}"
    write_results(run(load_scenario(path)), out)
    return out


def header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return next(csv.reader(handle))


@pytest.fixture(scope="module")
def distributed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_replica_run(tmp_path_factory.mktemp("columns"), "distributed")


def test_reference_lists_exactly_the_columns_written(distributed: Path) -> None:
    # ``cached_tokens`` is written only with a prefix cache (tests/test_prefix_cache.py), the
    # KV transfer columns only with prefill and decode pools (tests/test_disaggregation.py).
    requests = [
        c for c in documented_columns("requests.csv") if c not in ("cached_tokens", *KV_COLUMNS)
    ]
    assert requests == header(distributed / "requests.csv")
    timeseries = documented_columns("timeseries.csv")
    assert timeseries == [*header(distributed / "timeseries.csv"), *PLANNER_COLUMNS]


def test_readme_results_table_links_the_reference() -> None:
    readme = (REFERENCE.parent.parent / "README.md").read_text(encoding="utf-8")
    for name in ("requests.csv", "timeseries.csv"):
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert "docs/outputs.md" in row, name


@pytest.mark.parametrize("mode", ["distributed", "none"])
def test_timeseries_tokens_and_rounds_are_per_replica(
    tmp_path: Path, distributed: Path, mode: str
) -> None:
    out = distributed if mode == "distributed" else two_replica_run(tmp_path, mode)
    series = pd.read_csv(out / "timeseries.csv")
    requests = pd.read_csv(out / "requests.csv")
    assert set(requests["outcome"]) == {"completed"}  # every token was committed and sampled
    per_replica = series.groupby("replica")[["output_tokens", "k_rounds"]].sum()
    served = requests.groupby("replica")[["generated_tokens", "verify_rounds"]].sum()
    assert list(per_replica.index) == [0, 1]
    assert list(per_replica["output_tokens"]) == list(served["generated_tokens"])
    assert list(per_replica["k_rounds"]) == list(served["verify_rounds"])
    if mode == "distributed":
        # The two replicas' rows of one sample no longer repeat one pool-wide value.
        both = series.pivot_table(index="time_s", columns="replica", values="k_rounds")
        assert (both[0] != both[1]).any()
        started = series[series["k_rounds"] > 0]
        assert started["mean_k"].notna().all() and started["mean_k"].between(1, 4).all()
        assert series[series["k_rounds"] == 0]["mean_k"].isna().all()
