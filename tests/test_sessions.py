"""Multi-turn synthetic sessions (``workload.synthetic.sessions``) and the prefix cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simulator import load_scenario, run
from simulator.rng import RandomStreams
from simulator.validate import validate_file
from simulator.workload.arrivals import PoissonArrivals
from simulator.workload.closed_loop import FixedThinkTime
from simulator.workload.distributions import FixedLength
from simulator.workload.generate import generate_requests
from simulator.workload.slo import DEFAULT_CLASS, SloTargets
from simulator.workload.spec import Sessions, SyntheticSource, WorkloadSpec
from tests.engine_fixtures import synthetic, write_scenario
from tests.script_modules import load_script

SLO = {"ttft_ms": 60000, "tpot_ms": 1000}


def _table(sessions: Sessions | None, num_requests: int = 2, max_requests: int | None = None):
    source = SyntheticSource(
        arrival=PoissonArrivals(0.05),
        prompt_tokens=FixedLength(300),
        output_tokens=FixedLength(50),
        num_requests=num_requests,
        sessions=sessions,
    )
    spec = WorkloadSpec(
        source=source,
        slo_classes={DEFAULT_CLASS: SloTargets(1000.0, 100.0)},
        max_requests=max_requests,
    )
    return generate_requests(spec, (), RandomStreams(7))


def test_turns_arrive_a_think_time_apart_with_growing_prompts():
    plain = _table(None)
    starts = plain.arrival_s.tolist()  # the same draws give the sessions' first turns
    table = _table(Sessions(FixedLength(3), FixedThinkTime(10.0)))
    # Turn i + 1: turn i's prompt (300, 650) + its output (50) + a new message (300).
    rows = sorted(
        (start + 10.0 * turn, session, 300 + 350 * turn)
        for session, start in enumerate(starts)
        for turn in range(3)
    )
    assert table.arrival_s.tolist() == pytest.approx([t for t, _, _ in rows], abs=1e-12)
    assert table.session is not None
    assert table.session.tolist() == [s for _, s, _ in rows]
    assert table.prompt_tokens.tolist() == [p for _, _, p in rows]
    assert set(table.output_tokens.tolist()) == {50}
    # Blocks of 100 tokens: session 0's conversation is ids 0..9, session 1's 10..19
    # (its longest prompt has 10 full blocks); partial last blocks get ids from 20 on.
    ids = table.prefixes(100)
    by_turn = {(s, p): ids[i] for i, (_, s, p) in enumerate(rows)}
    assert by_turn[(0, 300)] == (0, 1, 2)
    assert by_turn[(0, 650)][:6] == (0, 1, 2, 3, 4, 5)
    assert by_turn[(0, 1000)] == tuple(range(10))
    assert by_turn[(1, 300)] == (10, 11, 12)
    assert by_turn[(1, 1000)] == tuple(range(10, 20))
    partial = sorted(by_turn[(s, 650)][6] for s in (0, 1))
    assert partial == [20, 21]
    assert all(len(by_turn[(s, 650)]) == 7 for s in (0, 1))


def test_max_requests_keeps_the_earliest_turns():
    whole = _table(Sessions(FixedLength(3), FixedThinkTime(10.0)))
    capped = _table(Sessions(FixedLength(3), FixedThinkTime(10.0)), max_requests=4)
    assert capped.arrival_s.tolist() == whole.arrival_s.tolist()[:4]


def _scenario(tmp_path: Path, sessions: dict[str, Any] | None, **extra: Any) -> Path:
    workload = synthetic(2, 0.05, 300, 50, slo=SLO)
    workload["synthetic"]["sessions"] = sessions
    for key, value in extra.pop("workload", {}).items():
        workload[key] = value
    return write_scenario(tmp_path, mode="none", workload=workload, extra=extra)


def test_a_session_finds_its_previous_turns_prompt_cached(tmp_path):
    """Two sessions of three turns, 100-token blocks, think time 100 s (each turn done first).

    Turn 1 (300 tokens): 2 blocks may hit, none does; its 3 full blocks are
    cached. Turn 2 (650): 6 may hit, the 3 of turn 1's prompt do; 6 cached.
    Turn 3 (1,000): 9 may hit, 6 do. Sessions share no block.
    """
    cache = {"scheduler.kv.prefix_cache": {"enabled": True, "block_tokens": 100}}
    path = _scenario(tmp_path, {"turns": 3, "think_time_s": 100.0}, **cache)
    result = run(load_scenario(path))
    requests = result.requests
    by_session: dict[int, list[int]] = {}
    for prompt, cached in zip(requests["prompt_tokens"], requests["cached_tokens"], strict=True):
        by_session.setdefault(int(prompt), []).append(int(cached))
    assert by_session == {300: [0, 0], 650: [300, 300], 1000: [600, 600]}
    section = result.summary["prefix_cache"]
    assert section["block_hit_rate"] == pytest.approx(18 / 34)
    assert section["token_hit_rate"] == pytest.approx(1800 / 3900)
    off = run(load_scenario(_scenario(tmp_path, {"turns": 3, "think_time_s": 100.0})))
    assert list(off.requests["prompt_tokens"]) == list(requests["prompt_tokens"])
    assert (off.requests["ttft_ms"] > requests["ttft_ms"]).sum() == 4  # the later turns


def _issues(path: Path) -> list[str]:
    verdict = validate_file(path)
    assert verdict.error is not None
    return [issue.format() for issue in verdict.error.issues]


def test_sessions_with_a_closed_loop_are_refused(tmp_path):
    workload = synthetic(2, 0.05, 300, 50, slo=SLO)
    del workload["synthetic"]["arrival"]
    workload["synthetic"]["sessions"] = {"turns": 3, "think_time_s": 1.0}
    workload["closed_loop"] = {"users": 2}
    path = write_scenario(tmp_path, mode="none", workload=workload)
    lines = _issues(path)
    assert any("workload.synthetic.sessions" in line and "closed_loop" in line for line in lines)


@pytest.mark.parametrize(
    ("sessions", "shared", "key", "allowed"),
    [
        (
            {"turns": 3, "think_time_s": 1.0},
            {"tokens": 100, "fraction": 1.0},
            "workload.synthetic.sessions",
            "null with shared_prefix",
        ),
        (
            {"turns": {"dist": "uniform", "low": 4, "high": 2}, "think_time_s": 1.0},
            None,
            "workload.synthetic.sessions.turns.high",
            ">= low (4)",
        ),
        (
            {"turns": 10000, "think_time_s": 1.0},
            None,
            "workload.synthetic.sessions.turns",
            "at most 1,000,000 requests",
        ),
    ],
)
def test_sessions_it_cannot_generate_are_refused(tmp_path, sessions, shared, key, allowed):
    workload = synthetic(200, 0.05, 300, 50, slo=SLO)
    workload["synthetic"]["sessions"] = sessions
    workload["synthetic"]["shared_prefix"] = shared
    path = write_scenario(tmp_path, mode="none", workload=workload)
    lines = _issues(path)
    assert any(key in line and allowed in line for line in lines), "\n".join(lines)


@pytest.mark.slow
def test_the_example_script_runs_the_sessions_scenario(capsys):
    """The README's table: cache-aware routing finds more than routing by load."""
    root = Path(__file__).resolve().parent.parent
    script = load_script(root / "scripts" / "prefix_cache_example.py", "prefix_cache_example")
    assert script.main(["--scenario", "sessions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:5]}
    assert set(rows) == set(script.VARIANTS)
    on, aware = rows["cache on, least_outstanding"], rows["cache on, cache_aware"]
    assert float(on[6].rstrip("%")) < float(aware[6].rstrip("%"))
    assert "would find" in lines[-1]
