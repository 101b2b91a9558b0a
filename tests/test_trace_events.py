"""Timelines: the Chrome trace-event JSON of ``simulate SCENARIO --trace-events FILE``."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from simulator import load_scenario
from simulator.cli import main as simulate_main
from simulator.engine.tracing import Span
from simulator.runner import run
from simulator.trace_events import CATEGORY, ChromeTraceTracer
from tests.engine_fixtures import synthetic, write_scenario

LINK = {"src": "laptops", "dst": "pool", "rtt_ms": 10, "bw_mbps": 50}


def _scenario(tmp_path: Path, **kwargs: Any) -> Path:
    defaults: dict[str, Any] = {
        "mode": "distributed",
        "workload": synthetic(12, 40.0, 200, 24),
        "replicas": 2,
        "clients": 3,
        "link": LINK,
    }
    defaults.update(kwargs)
    return write_scenario(tmp_path, **defaults)


def _trace(tmp_path: Path, tracer: ChromeTraceTracer, **kwargs: Any) -> dict[str, Any]:
    run(load_scenario(_scenario(tmp_path, **kwargs)), tracer=tracer)
    path = tmp_path / "trace.json"
    tracer.write(path)
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _by_phase(events: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ph"] == phase]


def _assert_tracks_nest_or_follow(events: list[dict[str, Any]]) -> None:
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in _by_phase(events, "X"):
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for track, slices in tracks.items():
        open_ends: list[int] = []
        for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            # Still open: the new slice must lie inside it.
            assert not open_ends or end <= open_ends[-1], (track, start, end, open_ends)
            open_ends.append(end)


def _flow_chains(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    chains: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] in ("s", "t", "f"):
            chains[e["id"]].append(e)
    return chains


def test_distributed_timeline_is_well_formed(tmp_path):
    document = _trace(tmp_path, ChromeTraceTracer())
    events = document["traceEvents"]
    assert document["displayTimeUnit"] == "ms"
    assert document["metadata"]["capped"] is False
    complete = _by_phase(events, "X")
    assert {e["name"] for e in complete} >= {
        "prompt",
        "prefill",
        "first_token",
        "draft_prefill",
        "draft",
        "bundle",
        "verify",
        "result",
    }
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["cat"] == CATEGORY for e in complete)
    for e in complete:
        assert {"phase", "batch", "tokens", "k", "requests"} <= set(e["args"])
        assert e["args"]["batch"] >= len(e["args"]["requests"]) > 0
    verify = [e for e in complete if e["name"] == "verify"]
    assert all(e["args"]["k"] >= 1 for e in verify)
    assert all(e["args"]["tokens"] >= e["args"]["batch"] * 2 for e in verify)
    _assert_tracks_nest_or_follow(events)

    # Every pid and tid used is named.
    names = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    processes = {e["pid"] for e in events if e["name"] == "process_name"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "s", "t", "f")}
    assert used <= names
    assert {pid for pid, _ in used} <= processes
    process_names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert process_names == {
        "pool pool / replica 0",
        "pool pool / replica 1",
        "drafters laptops",
        "link laptops->pool",
    }


def test_replica_processes_name_their_pool(tmp_path):
    tracer = ChromeTraceTracer()
    for owner in ("h100-tp2/2", "a100-tp4/0", "a100-tp4/1"):
        tracer.span(Span("replica", owner, "decode", "decode", 0.0, 0.001, (0,), 1))
    path = tmp_path / "trace.json"
    tracer.write(path)
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert [names[pid] for pid in sorted(names)] == [
        "pool a100-tp4 / replica 0",
        "pool a100-tp4 / replica 1",
        "pool h100-tp2 / replica 2",
    ]


def test_each_request_flows_prompt_prefill_then_rounds(tmp_path):
    document = _trace(tmp_path, ChromeTraceTracer())
    events = document["traceEvents"]
    slices = {(e["pid"], e["tid"], e["ts"]): e for e in _by_phase(events, "X")}
    chains = _flow_chains(events)
    assert sorted(chains) == list(range(12))
    for rid, chain in chains.items():
        phases = [e["ph"] for e in chain]
        assert phases[0] == "s" and phases[-1] == "f"
        assert set(phases[1:-1]) <= {"t"}
        assert all(e.get("bp") == "e" for e in chain[1:])
        times = [e["ts"] for e in chain]
        assert times == sorted(times), rid
        # Each flow event binds to the slice that starts where it is, on its track.
        bound = [slices[(e["pid"], e["tid"], e["ts"])] for e in chain]
        assert all(rid in s["args"]["requests"] for s in bound)
        names = " ".join(s["name"] for s in bound)
        assert re.fullmatch(r"prompt prefill first_token( draft bundle verify result)+", names), (
            names
        )


def test_tracing_changes_no_result(tmp_path):
    scenario = load_scenario(_scenario(tmp_path))
    plain = run(scenario)
    traced = run(scenario, tracer=ChromeTraceTracer(follow_requests=3, max_events=100))
    assert traced.summary == plain.summary
    assert traced.requests.equals(plain.requests)


def test_without_a_tracer_no_event_or_span_is_built(tmp_path, monkeypatch):
    """The engine formats events only for a tracer: a run without one never calls the null one."""
    from simulator.engine.tracing import NullTracer

    def refuse(*_args: object) -> None:
        raise AssertionError("an event was built for the null tracer")

    monkeypatch.setattr(NullTracer, "event", refuse)
    monkeypatch.setattr(NullTracer, "span", refuse)
    for mode in ("distributed", "none"):
        scenario = write_scenario(
            tmp_path, mode=mode, workload=synthetic(6, 4.0, 100, 12), name=f"{mode}.yaml"
        )
        result = run(load_scenario(scenario))
        assert result.summary["requests"]["completed"] == 6


def test_cap_limits_the_events_and_says_so(tmp_path):
    full = _trace(tmp_path, ChromeTraceTracer())
    counted = [e for e in full["traceEvents"] if e["ph"] != "M"]
    cap = len(counted) // 3
    capped = _trace(tmp_path, ChromeTraceTracer(max_events=cap))
    events = [e for e in capped["traceEvents"] if e["ph"] != "M"]
    assert 0 < len(events) <= cap
    assert capped["metadata"]["capped"] is True
    assert capped["metadata"]["max_events"] == cap
    assert capped["metadata"]["spans_left_out"] > 0
    _assert_tracks_nest_or_follow(capped["traceEvents"])
    for chain in _flow_chains(capped["traceEvents"]).values():
        assert chain[0]["ph"] == "s" and chain[-1]["ph"] == "f"


def test_following_a_sample_keeps_replicas_and_only_its_requests(tmp_path):
    full = _trace(tmp_path, ChromeTraceTracer())
    sampled = _trace(tmp_path, ChromeTraceTracer(follow_requests=2))
    assert sampled["metadata"]["followed_requests"] == [0, 1]
    assert sorted(_flow_chains(sampled["traceEvents"])) == [0, 1]
    replica_names = {"prefill", "verify", "mixed"}

    def of(document: dict[str, Any], names: set[str] | None) -> list[dict[str, Any]]:
        return [
            e
            for e in _by_phase(document["traceEvents"], "X")
            if names is None or e["name"] in names
        ]

    assert of(sampled, replica_names) == of(full, replica_names)
    others = [e for e in of(sampled, None) if e["name"] not in replica_names]
    assert others and all(set(e["args"]["requests"]) & {0, 1} for e in others)
    assert len(of(sampled, None)) < len(of(full, None))


def test_plain_decoding_without_links_draws_replica_lanes(tmp_path):
    document = _trace(
        tmp_path,
        ChromeTraceTracer(),
        mode="none",
        workload=synthetic(6, 20.0, 100, 12),
        link={"src": "laptops", "dst": "pool", "rtt_ms": 0, "bw_mbps": 1e6},
    )
    events = document["traceEvents"]
    _assert_tracks_nest_or_follow(events)
    decode = [e for e in _by_phase(events, "X") if e["name"] == "decode"]
    assert decode and sum(e["args"]["iterations"] for e in decode if "iterations" in e["args"])
    for chain in _flow_chains(events).values():
        assert [e["ts"] for e in chain] == sorted(e["ts"] for e in chain)


def test_cli_writes_the_trace_only_when_asked(tmp_path, monkeypatch):
    scenario = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    assert simulate_main([str(scenario), "-o", "out", "-q"]) == 0
    assert set(tmp_path.iterdir()) - before == {tmp_path / "out"}
    assert not list(tmp_path.rglob("*trace*"))

    code = simulate_main(
        [str(scenario), "-o", "out", "-q", "--trace-events", "t.json", "--trace-max-events", "40"]
    )
    assert code == 0
    document = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert len([e for e in document["traceEvents"] if e["ph"] != "M"]) <= 40
    assert document["metadata"]["capped"] is True
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".t.json")]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--trace-events", "t.json", "--trace-requests", "0"], "--trace-requests"),
        (["--trace-max-events", "10"], "only with --trace-events"),
        (["--trace-events", "missing/t.json"], "not an existing directory"),
        (["--trace-events", "out/t.json"], "inside the results directory"),
    ],
)
def test_cli_refuses_bad_trace_options(tmp_path, monkeypatch, capsys, options, message):
    scenario = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert simulate_main([str(scenario), "-o", "out", "-q", *options]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: os.mkfifo(tmp / "t.json"), "exists and is a FIFO, not a regular file"),
        (lambda tmp: (tmp / "t.json").symlink_to(tmp / "elsewhere.json"), "is a symbolic link"),
        (lambda tmp: (tmp / "t.json").mkdir(), "exists and is a directory"),
    ],
    ids=["fifo", "symlink", "directory"],
)
def test_cli_refuses_a_trace_target_that_is_not_a_regular_file(
    tmp_path, monkeypatch, capsys, make, message
):
    """A device node, FIFO or link would be replaced by the trace: refused before the run."""
    scenario = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    make(tmp_path)
    before = (tmp_path / "t.json").lstat()
    assert simulate_main([str(scenario), "-o", "out", "-q", "--trace-events", "t.json"]) == 2
    err = capsys.readouterr().err
    assert "command line: --trace-events: " in err and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    after = (tmp_path / "t.json").lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not bind the superuser")
def test_cli_refuses_a_trace_in_a_directory_it_cannot_write(tmp_path, monkeypatch, capsys):
    scenario = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = simulate_main([str(scenario), "-o", "out", "-q", "--trace-events", "locked/t.json"])
    finally:
        locked.chmod(0o700)
    assert code == 2
    err = capsys.readouterr().err
    assert f"cannot create files in {locked}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_trace_on_a_read_only_file_system(tmp_path, monkeypatch, capsys):
    """``/sys`` refuses new entries even to the superuser: refused before the run."""
    try:
        Path(tempfile.mkdtemp(dir="/sys")).rmdir()
    except OSError:
        pass
    else:
        pytest.skip("/sys accepts new entries here")
    scenario = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = simulate_main([str(scenario), "-o", "out", "-q", "--trace-events", "/sys/t.json"])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot create files in /sys" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
