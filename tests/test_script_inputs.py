"""The repository's scripts refuse bad options and inputs with one message and exit code 2."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cli_support import integer_at_least
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_integer_at_least_takes_whole_numbers_from_the_minimum():
    parse = integer_at_least(1)
    assert parse("1") == 1
    assert parse("200000") == 200_000
    for text in ("0", "-5", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=r"allowed: an integer >= 1"):
            parse(text)


@pytest.mark.parametrize(
    ("script", "argv", "message"),
    [
        (
            "bench_lut",
            ["--lookups", "-5"],
            "argument --lookups: got '-5'; allowed: an integer >= 1",
        ),
        ("skeleton_rounds", ["--runs", "0"], "--runs 0: allowed an integer >= 1"),
        ("planner_vs_fixed", ["x.yaml", "--bin-s", "0"], "--bin-s 0.0: allowed a number"),
        (
            "planner_vs_fixed",
            ["x.yaml", "--workers", "0"],
            "argument --workers: got '0'; allowed: an integer >= 1",
        ),
        ("bench", ["--baseline", "no-such-baseline.json"], "no-such-baseline.json: no such file"),
        ("bench", ["--planner", "--baseline", "b.json"], "--planner compares with no baseline"),
    ],
)
def test_a_bad_option_is_refused_before_anything_runs(script, argv, message, capsys):
    module = load_script(ROOT / "scripts" / f"{script}.py", script)
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_a_figure_script_refuses_a_folder_for_its_figure_before_computing(tmp_path, capsys):
    module = load_script(ROOT / "scripts" / "speculation_speedup.py", "speculation_speedup")
    with pytest.raises(SystemExit) as stopped:
        module.main(["-o", str(tmp_path)])
    assert stopped.value.code == 2
    assert f"-o {tmp_path}: a folder; allowed: a PNG file path" in capsys.readouterr().err


def test_a_missing_original_trace_folder_is_one_message(tmp_path, capsys):
    module = load_script(ROOT / "scripts" / "slice_traces.py", "slice_traces")
    assert module.main([str(tmp_path / "nowhere"), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: original_dir: ")
    assert "allowed: the folder of the original traces" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["disaggregation_example.py", "--set", "bogus.key=1"], "bogus: unknown key"),
        (["prefix_cache_example.py", "--set", "workload.arrival_scale=-1"], "too small"),
        (["verify_pd_sweep.py", "--scenario", "nowhere.yaml"], "nowhere.yaml: not found"),
        (["distserve_check.py", "--only", "nope"], "no configuration named ['nope']"),
    ],
)
def test_a_scripts_input_error_is_one_message_without_a_traceback(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / argv[0]), *argv[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
