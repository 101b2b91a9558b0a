"""scripts/verify_pd_sweep.py: the Verify-PD sweep end to end and its two accountings."""

from __future__ import annotations

import importlib.util
import math
import sys

import pandas as pd
import pytest

from tests.golden.runs import ROOT

_SPEC = importlib.util.spec_from_file_location(
    "verify_pd_sweep", ROOT / "scripts" / "verify_pd_sweep.py"
)
assert _SPEC is not None and _SPEC.loader is not None
vpd = importlib.util.module_from_spec(_SPEC)
sys.modules["verify_pd_sweep"] = vpd  # its dataclasses look their module up
_SPEC.loader.exec_module(vpd)


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify_pd")
    assert vpd.main(["--reduced", "-o", str(out), "--workers", "2"]) == 0
    return out, pd.read_csv(out / "results.csv")


def test_reduced_sweep_writes_one_row_per_point_and_accounting(reduced):
    out, table = reduced
    assert tuple(table.columns) == vpd.COLUMNS
    keys = ["architecture", "concurrency", "host_overhead", "loop", "accounting"]
    assert not table.duplicated(keys).any()
    expected = {
        (arch, c, host, loop, accounting)
        for arch in vpd.REDUCED_ARCHITECTURES
        for c in vpd.REDUCED_CONCURRENCY
        for host in (0.0, vpd.DOCUMENTS_HOST_OVERHEAD_MS)
        for loop in ("open", "closed")
        for accounting in ("completed", "all")
    }
    assert set(table[keys].itertuples(index=False, name=None)) == expected
    for name in ("results.md", "throughput.png", "p95.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "results.md").read_text().count("\n") == len(table) + 2


def test_every_arrived_request_is_completed_or_unfinished(reduced):
    _, table = reduced
    every = table[table["accounting"] == "all"]
    assert (every["arrived"] == every["completed"] + every["unfinished"]).all()
    # Closed loop: the C users' requests in flight at the 60 s cut are unfinished.
    closed = every[every["loop"] == "closed"]
    assert (closed["unfinished"] == closed["concurrency"]).all()


def test_host_overhead_lengthens_every_run_at_batch_one(reduced):
    """At C = 1 one request runs at a time: host time per pass adds to its latency."""
    _, table = reduced
    one = table[(table["concurrency"] == 1) & (table["accounting"] == "completed")]
    by_host = one.pivot_table(
        index=["architecture", "loop"], columns="host_overhead", values="p95_ms"
    )
    assert (by_host[vpd.DOCUMENTS_HOST_OVERHEAD_MS] > by_host[0.0]).all()


def test_completed_accounting_counts_completed_requests_only():
    """Two requests complete, one is cut: hand-computed figures of both accountings."""
    requests = pd.DataFrame(
        {
            "arrival_s": [1.0, 2.0, 50.0],
            "outcome": ["completed", "completed", "unfinished"],
            "output_tokens": [20, 20, 20],
            "generated_tokens": [20, 20, 5],
            "e2e_ms": [1000.0, 3000.0, math.nan],
        }
    )
    figures = vpd.accountings(requests, run_s=60.0)
    completed_only, every = figures["completed"], figures["all"]
    # Completed: 40 tokens from the first arrival (1 s) to the last completion (5 s).
    assert completed_only["throughput_tok_s"] == pytest.approx(40 / 4.0)
    assert completed_only["p99_ms"] == pytest.approx(1000.0 + 0.99 * 2000.0)
    # Every request: 45 tokens over the 60 s run; the cut one counts its age, 10 s.
    assert every["throughput_tok_s"] == pytest.approx(45 / 60.0)
    assert every["p99_ms"] == pytest.approx(3000.0 + 0.98 * 7000.0)
    for figures_ in (completed_only, every):
        assert (figures_["arrived"], figures_["completed"], figures_["unfinished"]) == (3, 2, 1)


def test_plain_decoding_variant_drops_the_lanes_and_keeps_the_target():
    base = vpd.yaml.safe_load(vpd.DEFAULT_SCENARIO.read_text())
    variant = vpd.Variant("closed_none", "closed", "none")
    doc = vpd.variant_document(base, vpd.DEFAULT_SCENARIO.parent, variant, 10)
    assert doc["speculation"]["mode"] == "none"
    assert (
        doc["speculation"]["verifier_models"][0]["name"]
        == (base["scheduler"]["lanes"]["verifier"]["model"])
    )
    assert "lanes" not in doc["scheduler"]
    assert "arbitration" not in doc["scheduler"]  # the base's lane rule goes with the lanes
    assert "arrival" not in doc["workload"]["synthetic"]
    assert doc["workload"]["synthetic"]["num_requests"] == 10


def test_sweep001_runs_ten_requests_per_level_to_completion(tmp_path):
    """The smaller sweep: closed loop, ten requests of 100 tokens, no cut."""
    assert vpd.main(["--reduced", "--sweep001", "-o", str(tmp_path), "--workers", "2"]) == 0
    table = pd.read_csv(tmp_path / "results.csv")
    assert set(table["loop"]) == {"closed"}
    assert (table["arrived"] == 10).all() and (table["unfinished"] == 0).all()
    # Nothing is cut: both accountings count the same requests and tokens.
    completed_only = table[table["accounting"] == "completed"].reset_index(drop=True)
    every = table[table["accounting"] == "all"].reset_index(drop=True)
    for column in ("throughput_tok_s", "p95_ms", "p99_ms"):
        assert completed_only[column].to_numpy() == pytest.approx(every[column].to_numpy())


def test_an_architecture_maps_to_its_scenario_overrides():
    """Lane architectures are arbitration rules with a host overhead; the others set neither."""
    assert vpd.architecture_overrides("pdv", 5.0) == {
        "scheduler.arbitration.policy": "pdv",
        "scheduler.lanes.host_overhead_ms": 5.0,
    }
    assert vpd.architecture_overrides("engine", 5.0) == {}
    assert vpd.architecture_overrides("none", 0.0) == {}
