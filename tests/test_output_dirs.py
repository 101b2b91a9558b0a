"""The results directory: refused before a run when unusable, written whole or not at all."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

import simulator.outputs as outputs
from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.outputs import OUTPUT_FILES, write_results
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _old_set(out: Path) -> dict[str, str]:
    out.mkdir()
    old = {name: f"old {name}\n" for name in OUTPUT_FILES}
    for name, text in old.items():
        (out / name).write_text(text)
    return old


def _texts(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir()}


def test_a_write_failing_half_way_leaves_the_old_set(tmp_path, monkeypatch):
    result = run(load_scenario(_scenario(tmp_path)))
    out = tmp_path / "out"
    old = _old_set(out)
    written: list[str] = []
    write = outputs._write_text

    def fail_third(path: Path, content: outputs.Content) -> None:
        written.append(path.name)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        write(path, content)

    monkeypatch.setattr("simulator.outputs._write_text", fail_third)
    with pytest.raises(OSError, match="No space left"):
        write_results(result, out)
    assert _texts(out) == old
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


KILL_IN_WRITE = """
import os, signal, sys
from pathlib import Path
import simulator.outputs as outputs
from simulator import load_scenario, run
result = run(load_scenario(Path(sys.argv[1])))
calls = []
real_write = outputs._write_text
def write(path, content):
    calls.append(path)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(path, content)
outputs._write_text = write
outputs.write_results(result, Path(sys.argv[2]))
"""


def test_a_kill_while_writing_leaves_the_old_set(tmp_path):
    out = tmp_path / "out"
    old = _old_set(out)
    done = run_python("-c", KILL_IN_WRITE, str(_scenario(tmp_path)), str(out))
    assert done.returncode == -signal.SIGKILL
    assert _texts(out) == old


CONCURRENT_WRITER = """
import sys
from pathlib import Path
from simulator import load_scenario, run
from simulator.outputs import write_results
result = run(load_scenario(Path(sys.argv[1]), seed=int(sys.argv[3])))
for _ in range(15):
    write_results(result, Path(sys.argv[2]))
"""


def test_the_resolved_scenario_reads_back_as_the_run_s_whatever_its_characters(tmp_path):
    """``scenario.resolved.yaml`` (written with libyaml where PyYAML has it) is the scenario."""
    label = "Café – 8 µs × 3 “quoted”: #1 \x7f \U000f0000 \u2028 end"
    scenario = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(3, 1.0, 100, 10),
        extra={"metadata.label": label, "metadata.description": "a: b\n- c\n" * 40},
    )
    result = run(load_scenario(scenario))
    write_results(result, tmp_path / "out")
    written = yaml.safe_load(
        (tmp_path / "out" / "scenario.resolved.yaml").read_text(encoding="utf-8")
    )
    assert written == result.scenario.resolved()
    assert written["metadata"]["label"] == label


@pytest.mark.slow
def test_two_runs_writing_one_directory_leave_one_whole_set(tmp_path):
    scenario = _scenario(tmp_path, requests=20)
    out = tmp_path / "out"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, str(scenario), str(out), str(seed)],
            cwd=ROOT,
        )
        for seed in (1, 2)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    summary = json.loads((out / "summary.json").read_text())
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    assert summary["seed"] == resolved["seed"]
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize(
    ("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)]
)
def test_results_are_readable_as_the_umask_says(tmp_path, umask, file_mode, dir_mode):
    result = run(load_scenario(_scenario(tmp_path)))
    previous = os.umask(umask)
    try:
        paths = write_results(result, tmp_path / "out")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == dir_mode
    assert {stat.S_IMODE(p.stat().st_mode) for p in paths} == {file_mode}


def test_a_directory_holding_other_files_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert simulate_main([str(_scenario(tmp_path)), "-o", str(out), "-q"]) == 2
    assert "holds notes.txt, which are not results" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("kind", ["to a directory", "looping"])
def test_a_symbolic_link_output_directory_is_refused_before_the_run(tmp_path, capsys, kind):
    """The swap would replace the link, not the directory: refused, the link left alone."""
    scenario = _scenario(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real if kind == "to a directory" else link)
    assert simulate_main([str(scenario), "-o", str(link), "-q"]) == 2
    err = capsys.readouterr().err
    assert "command line: -o/--output: is a symbolic link to " in err
    assert "Traceback" not in err
    assert link.is_symlink() and list(real.iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".link.")]


def test_an_interrupt_after_the_swap_says_the_new_set_was_written(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the old set is being deleted: the new set is in place, and the message says so."""
    from simulator import outputs

    scenario = _scenario(tmp_path)
    out = tmp_path / "out"
    old = _old_set(out)
    real_rmtree = outputs.shutil.rmtree

    def interrupted(path, *args, **kwargs):
        real_rmtree(path, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs.shutil, "rmtree", interrupted)
    assert simulate_main([str(scenario), "-o", str(out), "-q"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == f"interrupted: new results were written to {out} before the interrupt"
    assert _texts(out) != old
    assert json.loads((out / "summary.json").read_text())["requests"]["measured"] == 5


def test_an_interrupt_while_the_timeline_is_written_names_the_new_results(
    tmp_path, monkeypatch, capsys
):
    from simulator import trace_events

    scenario = _scenario(tmp_path)

    def interrupted(self, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(trace_events.ChromeTraceTracer, "write", interrupted)
    monkeypatch.chdir(tmp_path)
    code = simulate_main([str(scenario), "-o", "out", "-q", "--trace-events", "t.json"])
    assert code == 130
    err = capsys.readouterr().err
    assert "interrupted: new results were written to" in err and "no new results" not in err
    assert (tmp_path / "out/summary.json").is_file()
