from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.rng import RandomStreams
from simulator.workload import (
    RequestTable,
    SloTargets,
    WorkloadSpec,
    check_workload_section,
    generate_requests,
)

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "workload_test.yaml"  # only its folder is used
SLO = {"ttft_ms": 300, "tpot_ms": 35}
CONV = "trace://traces/azure_conv_10k.csv"


def spec_of(section: dict[str, Any], scenario: Path = SCENARIO) -> WorkloadSpec:
    spec, issues = check_workload_section(section, scenario)
    assert issues == []
    assert spec is not None
    return spec


def run(
    section: dict[str, Any], clients=(), seed: int = 1, scenario: Path = SCENARIO
) -> RequestTable:
    return generate_requests(spec_of(section, scenario), list(clients), RandomStreams(seed))


def synthetic(**extra: Any) -> dict[str, Any]:
    block = {
        "num_requests": 2_000,
        "arrival": {"process": "poisson", "rate_per_s": 4.0},
        "prompt_tokens": {"dist": "lognormal", "median": 512, "sigma": 1.0, "max": 8192},
        "output_tokens": {"dist": "uniform", "low": 16, "high": 256},
    }
    block.update(extra)
    return {"source": "synthetic", "slo": SLO, "synthetic": block}


def conv_frame() -> pd.DataFrame:
    """The conversation slice read independently of the readers under test."""
    frame = pd.read_csv(REPO / "scenarios" / "traces" / "azure_conv_10k.csv")
    stamps = pd.to_datetime(frame["TIMESTAMP"], format="ISO8601")
    frame["t_s"] = (stamps - stamps.iloc[0]).dt.total_seconds()
    return frame


# -- trace replay ---------------------------------------------------------------


def test_trace_replay_matches_the_file():
    table = run({"source": CONV, "slo": SLO})
    frame = conv_frame()
    assert len(table) == 10_000
    assert np.array_equal(table.request_id, np.arange(10_000))
    assert np.allclose(table.arrival_s, frame["t_s"].to_numpy(), atol=1e-6)
    assert np.array_equal(table.prompt_tokens, frame["ContextTokens"].to_numpy())
    assert np.array_equal(table.output_tokens, frame["GeneratedTokens"].to_numpy())
    assert set(table.slo_class_names()) == {"default"}
    assert table.origin_names() == [""] * 10_000  # no client classes given
    assert table.slo_of("default") == SloTargets(300.0, 35.0, None)


def test_slice_by_start_duration_and_max_requests():
    frame = conv_frame()
    inside = frame[(frame["t_s"] >= 600.0) & (frame["t_s"] < 900.0)]
    table = run({"source": CONV, "slo": SLO, "start_s": 600, "duration_s": 300})
    assert len(table) == len(inside) > 0
    assert table.arrival_s[0] == 0.0
    expected = inside["t_s"].to_numpy() - inside["t_s"].iloc[0]
    assert np.allclose(table.arrival_s, expected, atol=1e-6)
    assert np.array_equal(table.prompt_tokens, inside["ContextTokens"].to_numpy())
    capped = run(
        {"source": CONV, "slo": SLO, "start_s": 600, "duration_s": 300, "max_requests": 25}
    )
    assert len(capped) == 25
    assert np.array_equal(capped.prompt_tokens, inside["ContextTokens"].to_numpy()[:25])


def test_arrival_scale_two_halves_inter_arrival_times():
    base = run({"source": CONV, "slo": SLO, "max_requests": 1_000})
    fast = run({"source": CONV, "slo": SLO, "max_requests": 1_000, "arrival_scale": 2.0})
    assert np.allclose(fast.arrival_s, base.arrival_s / 2.0)
    assert np.mean(np.diff(fast.arrival_s)) == pytest.approx(np.mean(np.diff(base.arrival_s)) / 2)
    assert np.array_equal(fast.prompt_tokens, base.prompt_tokens)


def test_prompt_override_replaces_only_prompts():
    base = run({"source": CONV, "slo": SLO, "max_requests": 500})
    fixed = run(
        {
            "source": CONV,
            "slo": SLO,
            "max_requests": 500,
            "prompt_length_override": {"dist": "fixed", "value": 100},
        }
    )
    assert np.all(fixed.prompt_tokens == 100)
    assert np.array_equal(fixed.output_tokens, base.output_tokens)
    assert np.array_equal(fixed.arrival_s, base.arrival_s)


def test_both_overrides_from_one_lengths_file_keep_real_pairs():
    lengths = "traces/arxiv_summarization_lengths_2k.csv"
    table = run(
        {
            "source": CONV,
            "slo": SLO,
            "max_requests": 2_000,
            "prompt_length_override": {"dist": "empirical", "trace": lengths},
            "output_length_override": {"dist": "empirical", "trace": lengths},
        }
    )
    arxiv = pd.read_csv(REPO / "scenarios" / "traces" / "arxiv_summarization_lengths_2k.csv")
    pairs = set(zip(arxiv["num_prefill_tokens"], arxiv["num_decode_tokens"], strict=True))
    got = zip(table.prompt_tokens.tolist(), table.output_tokens.tolist(), strict=True)
    assert all(pair in pairs for pair in got)
    assert table.prompt_tokens.mean() == pytest.approx(arxiv["num_prefill_tokens"].mean(), rel=0.05)


def test_trace_classes_and_origins(tmp_path):
    (tmp_path / "t.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens,slo_class,origin\n"
        "0,10,2,gold,phone\n1,11,3,,\n2,12,4,default,\n3,13,5,gold,laptop\n",
        encoding="utf-8",
    )
    section = {
        "source": "trace://t.csv",
        "slo": SLO,
        "slo_classes": {"gold": {"ttft_ms": 100, "tpot_ms": 10, "tvt_ms": 5}},
        "origin": {"rule": "round_robin"},
    }
    spec = spec_of(section, tmp_path / "s.yaml")
    assert spec.origin_names() == frozenset({"phone", "laptop"})
    table = generate_requests(spec, [("laptop", 1), ("phone", 9)], RandomStreams(0))
    assert table.slo_class_names() == ["gold", "default", "default", "gold"]
    # Rows 2 and 3 have no origin: round robin over the clients in order.
    assert table.origin_names() == ["phone", "laptop", "phone", "laptop"]
    assert table.slo_of("gold") == SloTargets(100.0, 10.0, 5.0)
    frame = table.to_frame()
    assert list(frame.columns) == [
        "request_id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "slo_class",
        "origin",
        "category",
    ]
    assert frame["origin"].tolist() == table.origin_names()
    assert table.category_names() == ["", "", "", ""]


# -- synthetic generation -------------------------------------------------------


def test_synthetic_counts_rates_and_lengths():
    table = run(synthetic(num_requests=20_000))
    assert len(table) == 20_000
    assert table.arrival_s[0] == 0.0 and np.all(np.diff(table.arrival_s) >= 0)
    assert (len(table) - 1) / table.arrival_s[-1] == pytest.approx(4.0, rel=0.03)
    assert np.median(table.prompt_tokens) == pytest.approx(512, rel=0.03)
    assert table.prompt_tokens.max() <= 8192
    assert table.output_tokens.min() >= 16 and table.output_tokens.max() <= 256


def test_synthetic_duration_and_max_requests():
    table = run(synthetic(num_requests=None, duration_s=50.0))
    assert table.arrival_s[-1] < 50.0
    assert len(table) == pytest.approx(200, rel=0.25)
    capped = run({**synthetic(num_requests=None, duration_s=50.0), "max_requests": 10})
    assert len(capped) == 10
    assert np.array_equal(capped.arrival_s, table.arrival_s[:10])


def test_synthetic_arrival_scale():
    base = run(synthetic(num_requests=300))
    fast = run({**synthetic(num_requests=300), "arrival_scale": 2.0})
    assert np.allclose(fast.arrival_s, base.arrival_s / 2.0)


def test_slo_class_mix_proportions():
    section = synthetic(num_requests=20_000, slo_class_mix={"default": 3.0, "gold": 1.0})
    section["slo_classes"] = {"gold": {"ttft_ms": 100, "tpot_ms": 10}}
    table = run(section)
    share = np.mean(table.slo_class == "gold")
    assert share == pytest.approx(0.25, abs=0.015)


# -- origins --------------------------------------------------------------------


def test_origin_by_count_proportions():
    table = run(synthetic(num_requests=20_000), clients=[("phone", 3), ("laptop", 1)])
    assert set(table.origin_names()) == {"phone", "laptop"}
    assert np.mean(table.origin == "phone") == pytest.approx(0.75, abs=0.015)


def test_origin_round_robin_is_exact():
    section = {**synthetic(num_requests=7), "origin": {"rule": "round_robin"}}
    table = run(section, clients=[("a", 5), ("b", 1), ("c", 1)])
    assert table.origin_names() == ["a", "b", "c", "a", "b", "c", "a"]


def test_origin_weights():
    section = {
        **synthetic(num_requests=20_000),
        "origin": {"rule": "weights", "weights": {"b": 1.0, "c": 3.0}},
    }
    spec = spec_of(section)
    assert spec.origin_names() == frozenset({"b", "c"})
    table = generate_requests(spec, [("a", 10), ("b", 1), ("c", 1)], RandomStreams(3))
    assert set(table.origin_names()) == {"b", "c"}
    assert np.mean(table.origin == "c") == pytest.approx(0.75, abs=0.015)


# -- determinism ----------------------------------------------------------------


def columns(table: RequestTable) -> list[np.ndarray]:
    return [
        table.arrival_s,
        table.prompt_tokens,
        table.output_tokens,
        table.slo_class,
        table.origin,
    ]


def test_same_seed_same_table_different_seed_different_table():
    clients = [("phone", 2), ("laptop", 1)]
    a = run(synthetic(), clients=clients, seed=11)
    b = run(synthetic(), clients=clients, seed=11)
    c = run(synthetic(), clients=clients, seed=12)
    assert all(np.array_equal(x, y) for x, y in zip(columns(a), columns(b), strict=True))
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert not np.array_equal(a.prompt_tokens, c.prompt_tokens)
    assert not np.array_equal(a.origin, c.origin)


def test_streams_are_independent_per_concern():
    a = run(synthetic(), clients=[("phone", 1), ("laptop", 1)], seed=5)
    other = synthetic(output_tokens={"dist": "fixed", "value": 64})
    b = run(other, clients=[("phone", 1), ("laptop", 1)], seed=5)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert np.array_equal(a.origin, b.origin)
    assert np.all(b.output_tokens == 64)


# -- the request table ----------------------------------------------------------


def test_request_table_checks_and_is_read_only():
    slos = {"default": SloTargets(1.0, 1.0)}
    table = RequestTable.from_columns([0.0, 1.0], [5, 6], [7, 8], slos=slos)
    assert len(table) == 2 and table.slo_class_names() == ["default", "default"]
    with pytest.raises(ValueError):
        table.arrival_s[0] = 3.0
    with pytest.raises(ValueError, match="non-decreasing"):
        RequestTable.from_columns([1.0, 0.0], [5, 6], [7, 8], slos=slos)
    with pytest.raises(ValueError, match=">= 1"):
        RequestTable.from_columns([0.0, 1.0], [0, 6], [7, 8], slos=slos)
    with pytest.raises(ValueError, match="without targets"):
        RequestTable.from_columns([0.0], [5], [7], slos=slos, slo_class=["gold"])
    with pytest.raises(KeyError, match="unknown SLO class"):
        table.slo_of("gold")
