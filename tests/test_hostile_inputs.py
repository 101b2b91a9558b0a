"""Hostile inputs: odd file kinds, YAML bombs, huge cells and out-of-range lengths.

Each is refused quickly with one clear message naming the file, the key path,
the value and what is allowed (the same check as ``tests/test_bad_scenarios.py``),
or, for scientific notation, accepted as the number it reads as.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulator.cli import main as simulate_main
from simulator.devices import load_device_profile
from simulator.loading import MAX_NESTING_DEPTH, MAX_YAML_VALUES
from simulator.scenario import load_scenario
from simulator.validate import validate_file
from simulator.workload.distributions import LognormalLength
from simulator.workload.trace_table import MAX_REQUEST_TOKENS
from tests.commands import run_python
from tests.engine_fixtures import PROFILES
from tests.test_bad_scenarios import Case, _base, _edit, _set, _with_trace, assert_refused

SECONDS_ALLOWED = 5.0


def _alias_bomb(indent: str = "") -> str:
    """Nine levels of nine aliases: 9**9 values once expanded."""
    lines = [f"{indent}l0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{indent}l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def _append(text: str) -> Callable[[Path], Path]:
    """A case that appends raw YAML ``text`` to the fixture scenario."""

    def build(tmp_path: Path) -> Path:
        path = _base(tmp_path)
        path.write_text(path.read_text() + text)
        return path

    return build


def _point_at(key: str, make: Callable[[Path], None], name: str) -> Callable[[Path], Path]:
    """A case whose scenario names ``name`` (made by ``make``) at ``key``."""

    def build(tmp_path: Path) -> Path:
        path = _edit(_set(key, name))(tmp_path)
        make(tmp_path / name)
        return path

    return build


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _scenario_is(make: Callable[[Path], None]) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        path = tmp_path / "scenario.yaml"
        make(path)
        return path

    return build


def _no_room_for_kv_cache(tmp_path: Path) -> Path:
    """A target profile whose memory cannot hold the model: found when a run sets up."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    profile = yaml.safe_load((PROFILES / "a100-tp1.yaml").read_text())
    profile["memory"]["device_memory_gb"] = profile["memory"]["gpu_memory_gb"] = 0.001
    (tmp_path / "a100-tp1.yaml").write_text(yaml.safe_dump(profile))
    return _edit(_set("hardware_profiles.1.profile", "a100-tp1.yaml"))(tmp_path)


def _trace_workload(name: str) -> dict[str, object]:
    return {"source": f"trace://{name}", "format": "csv", "slo": {"ttft_ms": 100, "tpot_ms": 10}}


def _trace_is(make: Callable[[Path], None]) -> Callable[[Path], Path]:
    """A case whose workload replays ``loop.csv``, made by ``make``."""

    def build(tmp_path: Path) -> Path:
        path = _edit(_set("workload", _trace_workload("loop.csv")))(tmp_path)
        make(tmp_path / "loop.csv")
        return path

    return build


CASES: dict[str, Case] = {
    "profile is a symlink loop": Case(
        _point_at("hardware_profiles.0.profile", _loop, "p.yaml"),
        "scenario.yaml",
        "hardware_profiles[0].profile",
        "'p.yaml'",
        "an existing device profile file",
    ),
    "LUT is a symlink loop": Case(
        _point_at("speculation.verifier_models.0.lut", _loop, "loop.csv"),
        "scenario.yaml",
        "speculation.verifier_models[0].lut",
        "'loop.csv'",
        "symlink loop",
    ),
    "trace is a symlink loop": Case(
        _trace_is(_loop),
        "scenario.yaml",
        "workload.source",
        "'loop.csv'",
        "an existing trace file",
    ),
    "acceptance file is a FIFO": Case(
        _point_at("speculation.acceptance_models.0.file", _fifo, "fifo.yaml"),
        "scenario.yaml",
        "speculation.acceptance_models[0].file",
        "'fifo.yaml'",
        "is not a regular file (FIFO)",
    ),
    "profile is /dev/zero": Case(
        _point_at("hardware_profiles.0.profile", _dev_zero, "zero.yaml"),
        "scenario.yaml",
        "hardware_profiles[0].profile",
        "'zero.yaml'",
        "is not a regular file (character device)",
    ),
    "LUT is a directory": Case(
        _point_at("speculation.verifier_models.0.lut", _directory, "dir.csv"),
        "scenario.yaml",
        "speculation.verifier_models[0].lut",
        "'dir.csv'",
        "is a directory",
    ),
    "scenario is a directory": Case(
        _scenario_is(_directory), "scenario.yaml", "", "scenario.yaml'", "is a directory"
    ),
    "scenario is a FIFO": Case(
        _scenario_is(_fifo), "scenario.yaml", "", "scenario.yaml'", "(FIFO)"
    ),
    "scenario is a symlink loop": Case(
        _scenario_is(_loop), "scenario.yaml", "", "scenario.yaml'", "symlink loop"
    ),
    "deeply nested flow sequences": Case(
        _append("deep: " + "[" * 50_000 + "]" * 50_000 + "\n"),
        "scenario.yaml",
        "column 70",
        "(100006 characters)",
        f"nested at most {MAX_NESTING_DEPTH} levels",
    ),
    "sequence as a mapping key": Case(
        _append("? [a, b]\n: 1\n"),
        "scenario.yaml",
        "list used as a mapping key",
        "'? [a, b]'",
        "valid YAML",
    ),
    "alias bomb in metadata": Case(
        _append("metadata:\n" + _alias_bomb("  ")),
        "scenario.yaml",
        f"aliases expand to more than {MAX_YAML_VALUES} values",
        "l6: &a6",
        "values once aliases are expanded",
    ),
    "alias bomb as a value": Case(
        _append(_alias_bomb() + "notes: *a9\n"),
        "scenario.yaml",
        f"aliases expand to more than {MAX_YAML_VALUES} values",
        "l6: &a6",
        "valid YAML",
    ),
    "huge cell in a trace": Case(
        _with_trace("prompt_tokens,output_tokens\n100,10\n" + "1" * 50 * 2**20 + ",10\n"),
        "trace.csv",
        "line 3: line of 52428804 bytes is too long",
        "'" + "1" * 60 + "...'",
        "lines of at most 1048576 bytes",
    ),
    "prompt length of 1e30 in a trace": Case(
        _with_trace("arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,1e30,10\n"),
        "trace.csv",
        "row 2, column prompt_tokens: too large",
        "'1e30'",
        "a whole number >= 1 and <= 10000000",
    ),
    "output length of int64 max in a trace": Case(
        _with_trace("arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,100,9223372036854775807\n"),
        "trace.csv",
        "row 2, column output_tokens: too large",
        "'9223372036854775807'",
        "a whole number >= 1 and <= 10000000",
    ),
    "undeclared origin in a trace": Case(
        _with_trace(
            "arrival_s,prompt_tokens,output_tokens,origin\n0,100,10,\n1,100,10,ghost\n2,100,10,ghost\n"
        ),
        "trace.csv",
        "row 2, column origin: origin names an undeclared client device class (2 row(s)",
        "'ghost'",
        "declared under hardware_profiles in ",
    ),
    "no room for a KV cache": Case(
        _no_room_for_kv_cache,
        "a100-tp1.yaml",
        "memory.device_memory_gb: no room for a KV cache",
        "0.001",
        "enough memory for the model",
    ),
    "lognormal sigma of 1e6": Case(
        _edit(
            _set(
                "workload.synthetic.prompt_tokens",
                {"dist": "lognormal", "median": 100, "sigma": 1e6},
            )
        ),
        "scenario.yaml",
        "workload.synthetic.prompt_tokens.sigma",
        "1000000.0",
        "<= 10",
    ),
    "fixed length above the hard bound": Case(
        _edit(_set("workload.synthetic.output_tokens.value", 10**12)),
        "scenario.yaml",
        "workload.synthetic.output_tokens.value",
        "1000000000000",
        "<= 10000000",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_refused_quickly_with_a_clear_message(tmp_path, name):
    case = CASES[name]
    path = case.build(tmp_path)
    started = time.perf_counter()
    verdict = validate_file(path, "scenario")
    assert time.perf_counter() - started < SECONDS_ALLOWED
    assert_refused(case, verdict)


@pytest.mark.parametrize(
    "name", ["profile is a symlink loop", "LUT is a symlink loop", "scenario is a FIFO"]
)
def test_simulate_refuses_odd_files_with_exit_2(tmp_path, capsys, name):
    path = CASES[name].build(tmp_path)
    assert simulate_main([str(path), "-o", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert CASES[name].allowed in err
    assert "Traceback" not in err


def test_validate_script_names_odd_files(tmp_path):
    loop = tmp_path / "loop.yaml"
    _loop(loop)
    fifo = tmp_path / "fifo.yaml"
    _fifo(fifo)
    done = run_python("scripts/validate_scenario.py", str(loop), str(fifo))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"{loop}: is a symlink loop" in done.stderr
    assert f"{fifo}: is not a regular file (FIFO)" in done.stderr


def test_validate_script_follows_a_scenario_to_a_lut_loop(tmp_path):
    path = CASES["LUT is a symlink loop"].build(tmp_path)
    done = run_python("scripts/validate_scenario.py", str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "speculation.verifier_models[0].lut: is a symlink loop" in done.stderr


def test_a_too_large_document_is_refused_before_parsing(tmp_path):
    path = _append("# " + "x" * (16 * 2**20) + "\n")(tmp_path)
    verdict = validate_file(path, "scenario")
    assert verdict.error is not None
    assert "file too large" in str(verdict.error)
    assert "at most 16777216 bytes (16 MiB)" in str(verdict.error)


def test_scientific_notation_reads_as_numbers(tmp_path):
    path = _base(tmp_path)
    text = path.read_text()
    document = yaml.safe_load(text)
    rtt = document["network"]["links"][0]["rtt_ms"]
    path.write_text(text.replace(f"rtt_ms: {rtt}", "rtt_ms: 1.0e1", 1))
    scenario = load_scenario(path, overrides=["network.links.0.bw_mbps=1e3", "seed=1e0"])
    link = scenario.network.links[0]
    assert link.rtt_ms == 10.0
    assert link.bw_mbps == 1000.0


def test_scientific_notation_in_profiles_and_acceptance_files(tmp_path):
    profile = (PROFILES / "rtx-4050-laptop.yaml").read_text()
    power = yaml.safe_load(profile)["energy"]["active_power_w"]
    edited = profile.replace(f"active_power_w: {power}", "active_power_w: 3.5e1", 1)
    assert edited != profile
    (tmp_path / "rtx-4050-laptop.yaml").write_text(edited)
    assert load_device_profile(tmp_path / "rtx-4050-laptop.yaml").energy.active_power_w == 35.0
    (tmp_path / "a.yaml").write_text(
        "method: test\nkind: iid\ntopology: {kind: chain}\nsource: test\nbins:\n  - alpha: 7.5e-1\n"
    )
    verdict = validate_file(tmp_path / "a.yaml")
    assert verdict.ok, verdict.error


def test_the_widest_lognormal_stays_within_the_hard_bound():
    length = LognormalLength(median_tokens=MAX_REQUEST_TOKENS, sigma=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drawn = length.sample(10_000, np.random.default_rng(1))
        mean = length.mean_tokens()
    assert drawn.min() >= 1 and drawn.max() <= MAX_REQUEST_TOKENS
    assert 1 <= mean <= MAX_REQUEST_TOKENS


def _flow_alias_bomb() -> str:
    """Nine levels of nine aliases in one flow mapping, as a ``--set`` value."""
    levels = ["l0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "{" + ", ".join(levels) + "}"


def test_an_alias_bomb_in_an_override_is_refused_quickly(tmp_path, capsys):
    path = _base(tmp_path)
    started = time.perf_counter()
    code = simulate_main(
        [str(path), "-o", str(tmp_path / "out"), "-q", "--set", f"metadata.x={_flow_alias_bomb()}"]
    )
    assert time.perf_counter() - started < SECONDS_ALLOWED
    assert code == 2
    assert f"aliases expand to more than {MAX_YAML_VALUES} values" in capsys.readouterr().err


def test_deeply_nested_json_is_refused(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text("[" * 50_000 + "]" * 50_000)
    verdict = validate_file(path, "scenario")
    assert verdict.error is not None
    assert f"nested deeper than {MAX_NESTING_DEPTH}" in str(verdict.error)
