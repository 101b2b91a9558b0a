"""Measurement windows: warm-up, the until_s cut, censored latencies and SLO denominators."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from simulator import load_scenario, run
from simulator.loading import load_packaged_schema
from simulator.runner import build_requests
from tests.engine_fixtures import synthetic, write_scenario

CUT_S = 1.5
WARMUP_S = 0.5


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory):
    """A run stopped at CUT_S with a warm-up: some requests unfinished, some never arrive."""
    tmp = tmp_path_factory.mktemp("cut")
    path = write_scenario(
        tmp,
        mode="none",
        workload=synthetic(60, 20, 500, 10),
        extra={"simulation.until_s": CUT_S, "metrics.warmup_s": WARMUP_S},
    )
    return run(load_scenario(path))


def test_summary_with_cut_and_warmup_validates(cut_run):
    schema = load_packaged_schema("summary.schema.json")
    jsonschema.validate(json.loads(json.dumps(cut_run.summary)), schema)


def test_every_count_uses_the_measured_set(cut_run):
    frame = cut_run.requests
    summary = cut_run.summary
    req = summary["requests"]
    measured = frame[frame["arrival_s"] >= WARMUP_S]
    assert 0 < len(measured) < len(frame)  # the warm-up left some out
    assert req["arrived"] == len(frame)
    assert req["measured"] == len(measured)
    for outcome in ("completed", "rejected", "unfinished"):
        assert req[outcome] == int((measured["outcome"] == outcome).sum()), outcome
    assert req["completed"] + req["rejected"] + req["unfinished"] == req["measured"]
    window = summary["measurement"]
    assert window["warmup_requests"] == len(frame) - len(measured)
    assert window["end_s"] == CUT_S
    due = build_requests(cut_run.scenario).arrival_s
    assert window["not_arrived"] == int((due >= CUT_S).sum()) > 0
    assert set(window["sections"]) >= {"requests", "latency_ms", "goodput", "latency_ms_censored"}


def test_latency_uses_completed_and_the_censored_view_adds_the_unfinished(cut_run):
    frame = cut_run.requests
    measured = frame[frame["arrival_s"] >= WARMUP_S]
    done = measured[measured["outcome"] == "completed"]
    open_ = measured[measured["outcome"] == "unfinished"]
    assert len(open_) > 0 and open_["ttft_ms"].isna().any()
    assert cut_run.summary["latency_ms"]["e2e"]["mean"] == pytest.approx(done["e2e_ms"].mean())
    age_ms = (CUT_S - open_["arrival_s"]) * 1000.0
    e2e = np.concatenate([done["e2e_ms"], age_ms])
    ttft = np.concatenate([done["ttft_ms"], open_["ttft_ms"].fillna(age_ms)])
    censored = cut_run.summary["latency_ms_censored"]
    assert censored["e2e"]["mean"] == pytest.approx(e2e.mean())
    assert censored["e2e"]["p99"] == pytest.approx(np.percentile(e2e, 99))
    assert censored["ttft"]["p50"] == pytest.approx(np.percentile(ttft, 50))
    assert censored["requests"] == len(done) + len(open_)
    assert censored["unfinished"] == len(open_)
    assert censored["ttft_lower_bounds"] == int(open_["ttft_ms"].isna().sum())


def test_slo_attainment_states_its_denominator(cut_run):
    goodput = cut_run.summary["goodput"]
    measured = cut_run.requests[cut_run.requests["arrival_s"] >= WARMUP_S]
    assert goodput["measured_requests"] == len(measured)
    assert goodput["slo_met_requests"] == int(measured["slo_met"].sum())
    assert goodput["slo_attainment"] == pytest.approx(
        goodput["slo_met_requests"] / goodput["measured_requests"]
    )
    assert "unfinished" in goodput["slo_attainment_denominator"]


def test_censored_view_equals_the_plain_one_when_everything_ends(tmp_path):
    path = write_scenario(tmp_path, mode="none", workload=synthetic(20, 5, 300, 20))
    summary = run(load_scenario(path)).summary
    assert summary["latency_ms_censored"]["ttft"] == summary["latency_ms"]["ttft"]
    assert summary["latency_ms_censored"]["e2e"] == summary["latency_ms"]["e2e"]
    assert summary["measurement"]["not_arrived"] == 0


def test_energy_per_token_divides_whole_run_energy_by_whole_run_tokens(cut_run):
    """Energy covers the whole run, warm-up included, so its tokens do too."""
    energy = cut_run.summary["energy"]
    tokens = int(cut_run.requests["generated_tokens"].sum())
    completed_measured = cut_run.requests[
        (cut_run.requests["outcome"] == "completed") & (cut_run.requests["arrival_s"] >= WARMUP_S)
    ]["generated_tokens"].sum()
    assert tokens > completed_measured  # warm-up and unfinished requests produced tokens
    assert energy["j_per_output_token"] == pytest.approx(energy["total_j"] / tokens)
