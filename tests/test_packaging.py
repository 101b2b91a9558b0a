"""The package behaves like one: subcommands, version, shipped data, start-up, logging, progress."""

from __future__ import annotations

import io
import os
import runpy
import subprocess
import sys
import sysconfig
import venv
from importlib import metadata
from pathlib import Path

import pytest
import yaml

import simulator
from simulator import builtin_data
from simulator.cli import COMMANDS, command_words, main
from simulator.log_setup import level_of
from simulator.progress import TerminalProgress, progress_line
from tests.commands import run_python
from tests.engine_fixtures import synthetic, write_scenario

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scenarios" / "examples" / "none_baseline.yaml"


def test_one_version_everywhere(capsys):
    assert metadata.version("specdec-sim") == simulator.__version__
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"specdec-sim {simulator.__version__}"


def test_python_dash_m_simulator_is_the_command():
    done = run_python("-m", "simulator", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"specdec-sim {simulator.__version__}"


def test_a_first_word_that_names_no_subcommand_is_a_scenario():
    assert command_words(["x.yaml", "-q"]) == ["run", "x.yaml", "-q"]
    assert command_words(["-v", "x.yaml"]) == ["run", "-v", "x.yaml"]
    assert command_words(["./validate"]) == ["run", "./validate"]
    for name in COMMANDS:
        assert command_words([name, "a"]) == [name, "a"]
    assert command_words(["--version"]) == ["--version"]
    assert command_words([]) == []


@pytest.mark.parametrize(("word", "meant"), [("valdate", "validate"), ("polices", "policies")])
def test_a_mistyped_subcommand_is_named_with_the_one_meant(
    tmp_path, monkeypatch, capsys, word, meant
):
    monkeypatch.chdir(tmp_path)
    assert main([word, "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert f"command line: COMMAND: unknown command '{word}'; did you mean '{meant}'?" in err
    assert "unrecognized arguments" not in err and "Traceback" not in err


def test_a_scenario_file_named_like_a_mistyped_subcommand_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10)).rename("valdate")
    assert main(["valdate", "-q", "-o", "out"]) == 0
    assert (tmp_path / "out" / "summary.json").is_file()
    assert main(["runs.yaml"]) == 2  # a path: the scenario that is missing, not a command
    assert "runs.yaml: not found" in capsys.readouterr().err


def test_help_and_version_import_no_heavy_library():
    code = (
        "import sys; from simulator.cli import parser; parser().format_help(); "
        "print(sorted(m for m in ('pandas', 'numpy', 'scipy', 'simpy', 'matplotlib', "
        "'jsonschema', 'yaml') if m in sys.modules))"
    )
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_validate_and_plot_subcommands_match_the_scripts(tmp_path, capsys):
    assert main(["validate", str(EXAMPLE)]) == 0
    assert capsys.readouterr().out.startswith(f"OK {EXAMPLE}: scenario none_baseline")
    run_dir = tmp_path / "run"
    assert main([str(EXAMPLE), "-q", "-o", str(run_dir)]) == 0
    assert main(["plot", str(run_dir)]) == 0
    assert (run_dir / "report" / "report.html").is_file()
    script = run_python("scripts/validate_scenario.py", str(EXAMPLE))
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith(f"OK {EXAMPLE}: scenario none_baseline")


def test_validate_takes_builtin_folders_and_files_as_it_takes_local_ones(capsys):
    root = builtin_data.data_root()
    assert main(["validate", str(root / "acceptance")]) == 0
    local = capsys.readouterr().out.replace(f"{root}/", "builtin:")
    assert main(["validate", "builtin:acceptance/"]) == 0
    shipped = capsys.readouterr().out
    assert shipped == local
    assert shipped.startswith("OK builtin:acceptance/") and shipped.count("OK ") >= 5
    assert main(["validate", "builtin:scenarios/exmples"]) == 2
    err = capsys.readouterr().err
    assert "command line: PATH: no shipped file or folder 'scenarios/exmples'" in err
    assert "close matches: builtin:scenarios/examples" in err
    script = run_python("scripts/validate_scenario.py", "builtin:device_profiles/a100-tp4.yaml")
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith("OK builtin:device_profiles/a100-tp4.yaml: device profile")


def test_verbose_logs_through_logging(tmp_path, capsys):
    assert level_of(0, None) == 30 and level_of(1, None) == 20 and level_of(5, None) == 10
    assert level_of(2, "ERROR") == 40
    assert main(["run", str(EXAMPLE), "-q", "-v", "-o", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "INFO simulator.commands.run: running scenario none_baseline" in err
    assert "INFO simulator.outputs: wrote 5 result files" in err
    assert main(["run", str(EXAMPLE), "-q", "-o", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().err == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_with_completions_and_eta(monkeypatch):
    line = progress_line(500, 120, 2000, 61.5, 10.0)
    assert line == (
        "500/2000 arrived (25%), 120 completed, t = 61.5 s simulated, 0:10 elapsed, ETA 0:30"
    )
    monkeypatch.setattr("simulator.progress.PROGRESS_AFTER_S", 0.0)
    pipe = io.StringIO()
    TerminalProgress(stream=pipe)(500, 120, 2000, 61.5)
    assert pipe.getvalue() == ""
    terminal = _Terminal()
    progress = TerminalProgress(stream=terminal)
    progress(500, 120, 2000, 61.5)
    assert "500/2000 arrived (25%), 120 completed" in terminal.getvalue()
    assert "ETA" in terminal.getvalue()
    progress.close()
    assert terminal.getvalue().endswith("\r")
    quiet = _Terminal()
    TerminalProgress(enabled=False, stream=quiet)(500, 120, 2000, 61.5)
    assert quiet.getvalue() == ""


def test_builtin_references_name_the_shipped_files(tmp_path):
    document = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    for entry in document["hardware_profiles"]:
        entry["profile"] = "builtin:device_profiles/" + Path(entry["profile"]).name
    for models in ("drafter_models", "verifier_models", "fused_models"):
        for entry in document["speculation"].get(models, []):
            entry["lut"] = "builtin:lut/" + Path(entry["lut"]).name
    for entry in document["speculation"].get("acceptance_models", []):
        entry["file"] = "builtin:acceptance/" + Path(entry["file"]).name
    source = document["workload"]["source"]
    document["workload"]["source"] = "trace://builtin:scenarios/traces/" + Path(source).name
    elsewhere = tmp_path / "elsewhere" / "scenario.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(yaml.safe_dump(document), encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(elsewhere), "-q", "-o", str(out)]) == 0
    baseline = tmp_path / "baseline"
    assert main([str(EXAMPLE), "-q", "-o", str(baseline)]) == 0
    assert (out / "summary.json").read_bytes() == (baseline / "summary.json").read_bytes()
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["workload"]["source"].startswith("trace://builtin:scenarios/traces/")


def test_an_unknown_builtin_name_is_refused_with_close_matches(tmp_path, capsys):
    document = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document["hardware_profiles"][0]["profile"] = "builtin:device_profiles/a100-tp5.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main([str(bad), "-q", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "hardware_profiles[0].profile" in err
    assert "no shipped file 'device_profiles/a100-tp5.yaml'" in err
    assert "builtin:device_profiles/a100-tp4.yaml" in err
    assert main(["builtin:scenarios/examples/none_baselin.yaml"]) == 2
    assert "close matches: builtin:scenarios/examples/none_baseline.yaml" in capsys.readouterr().err
    assert builtin_data.unknown_builtin("builtin:../pyproject.toml") is not None


def test_the_wheel_ships_the_folders_builtin_references_read():
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="setup_under_test")
    assert namespace["DATA_DIRS"] == builtin_data.DATA_DIRS
    shipped = {p.as_posix() for p in namespace["data_files"]()}
    assert "scenarios/examples/none_baseline.yaml" in shipped
    assert "lut/llama-2-70b__a100-sxm4-80gb.csv" in shipped
    assert not any(name.endswith(".py") for name in shipped)


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_runs_a_shipped_example_from_another_directory(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(wheels)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("specdec_sim-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies come from this environment (no network); the project from the wheel.
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "_test_dependencies.pth").write_text("\n".join(sorted(paths)) + "\n")
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [env_dir / "bin" / "simulate", "builtin:scenarios/examples/none_baseline.yaml", "-q"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    summary = work / "results" / "none_baseline" / "summary.json"
    assert summary.is_file()
    where = subprocess.run(
        [python, "-c", "import simulator.builtin_data as b; print(b.data_root())"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    assert Path(where).is_relative_to(env_dir), where
