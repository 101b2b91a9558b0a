"""The results directory: refused before a run when unusable, written whole or not at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from simulator.cli import main as simulate_main
from tests.commands import ROOT, run_python
from tests.engine_fixtures import synthetic, write_scenario


def _scenario(tmp_path: Path, requests: int = 5) -> Path:
    return write_scenario(tmp_path, mode="distributed", workload=synthetic(requests, 1.0, 100, 10))


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "taken"
    path.write_text("not a directory\n")
    return path


BAD_DIRS = {
    "a file": (lambda tmp: _file(tmp), "not a directory"),
    "under a file": (lambda tmp: _file(tmp) / "results", "which is not a directory"),
    "/dev/null": (lambda tmp: Path("/dev/null"), "not a directory"),
}


@pytest.mark.parametrize("name", list(BAD_DIRS))
def test_an_unusable_output_directory_is_refused_before_the_run(tmp_path, capsys, name):
    build, problem = BAD_DIRS[name]
    out = build(tmp_path)
    scenario = _scenario(tmp_path)
    assert simulate_main([str(scenario), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "command line: -o/--output: " in err
    assert problem in err
    assert f"(got '{out}'; allowed: a directory that exists or can be created" in err
    if out.name == "taken":
        assert out.read_text() == "not a directory\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not bind the superuser")
def test_a_directory_this_user_cannot_write_is_refused(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert simulate_main([str(_scenario(tmp_path)), "-o", str(locked / "r"), "-q"]) == 2
        assert "cannot create entries in" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_the_configured_output_directory_is_checked_and_named(tmp_path):
    taken = _file(tmp_path)
    scenario = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(3, 1.0, 100, 10),
        extra={"metrics.output_dir": str(taken)},
    )
    done = run_python("-m", "simulator.cli", str(scenario), "-q")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "scenario.yaml: metrics.output_dir: not a directory" in done.stderr


def test_a_read_only_file_system_is_refused(tmp_path, capsys):
    """``/sys`` refuses new entries even to the superuser."""
    out = Path("/sys/specdec-results")
    try:
        Path(tempfile.mkdtemp(dir="/sys")).rmdir()
    except OSError:
        pass
    else:
        pytest.skip("/sys accepts new entries here")
    assert simulate_main([str(_scenario(tmp_path)), "-o", str(out), "-q"]) == 2
    assert "cannot create entries in /sys" in capsys.readouterr().err


def test_sigint_during_a_run_prints_one_line_and_exits_130(tmp_path):
    """Ctrl-C in the middle of a long run: no traceback, earlier results kept."""
    scenario = _scenario(tmp_path, requests=50_000)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"earlier": true}\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "simulator.cli", str(scenario), "-o", str(out), "-q"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3.0)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert err.strip() == "interrupted: no new results were written"
    assert (out / "summary.json").read_text() == '{"earlier": true}\n'
