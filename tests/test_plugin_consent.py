"""A scenario file runs no code without the user's consent (``--allow-plugins``).

A policy named by import path (``module.path:ClassName``) is imported only
when its module was allowed outside the scenario: by ``--allow-plugins`` or
the ``SPECDEC_ALLOW_PLUGINS`` environment variable. Whatever a plug-in raises
while imported or constructed is one input error (exit 2).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from policies.plugins import ALLOW_PLUGINS_ENV, PluginConsent
from simulator import load_scenario
from simulator.cli import main
from simulator.engine.policy_build import instantiate
from simulator.errors import InputError
from simulator.executors import ray_task_options
from simulator.scenario.model import PolicyChoice
from simulator.sweeps.execute import Task, run_task
from tests.commands import ROOT
from tests.engine_fixtures import synthetic, write_scenario
from tests.test_policy_plugins import PLUGIN_MODULE, _distribution, _simulate

KEY = "scheduler.admission_control.policy"


@pytest.fixture
def site(tmp_path, monkeypatch, request):
    """A folder on ``sys.path`` for this test's modules (named after the test: modules are
    cached per process); yields a function writing ``<prefix>_<test>`` with a source."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv(ALLOW_PLUGINS_ENV, raising=False)
    suffix = "".join(c if c.isalnum() else "_" for c in request.node.name)
    written: list[str] = []

    def write(prefix: str, source: str) -> str:
        name = f"{prefix}_{suffix}"
        (root / f"{name}.py").write_text(source)
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _marker_module(marker: Path) -> str:
    """A valid plug-in module that writes ``marker`` when imported."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n" + (
        PLUGIN_MODULE
    )


def _scenario(tmp_path: Path, policy: str, params: dict | None = None) -> Path:
    return write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(4, 50.0, 100, 3),
        extra={"scheduler.admission_control": {"policy": policy, "params": params or {"limit": 2}}},
    )


def test_validate_refuses_an_unallowed_module_and_imports_nothing(tmp_path, site, capsys):
    marker = tmp_path / "marker"
    module = site("marks", _marker_module(marker))
    path = _scenario(tmp_path, f"{module}:FirstN")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert module not in sys.modules
    assert KEY in err
    assert f"module {module!r} is not allowed" in err
    assert f"--allow-plugins {module}" in err
    assert "Traceback" not in err


def test_run_refuses_an_unallowed_module_set_from_the_command_line(tmp_path, site, capsys):
    marker = tmp_path / "marker"
    module = site("marks", _marker_module(marker))
    path = _scenario(tmp_path, "admit_all", {})
    out = tmp_path / "out"
    words = [str(path), "-q", "-o", str(out), "--set", f"{KEY}={module}:FirstN"]
    assert main(words) == 2
    assert not marker.exists()
    assert f"--allow-plugins {module}" in capsys.readouterr().err
    assert not out.exists()


def test_allowed_module_is_imported_and_runs(tmp_path, site, capsys):
    marker = tmp_path / "marker"
    module = site("marks", _marker_module(marker))
    path = _scenario(tmp_path, f"{module}:FirstN")
    assert main(["validate", str(path), "--allow-plugins", module]) == 0
    assert marker.exists()
    assert ALLOW_PLUGINS_ENV not in os.environ  # the consent ends with the command
    out = tmp_path / "out"
    assert main([str(path), "-q", "-o", str(out), "--allow-plugins", f"other,{module}"]) == 0
    assert (out / "summary.json").exists()


def test_consent_is_per_module_and_covers_what_is_inside(site):
    consent = PluginConsent(frozenset({"mypkg"}))
    assert consent.allows("mypkg")
    assert consent.allows("mypkg.routing")
    assert not consent.allows("mypkg_other")
    assert not consent.allows("other.mypkg")
    assert not PluginConsent().allows("mypkg")


def test_python_api_consent_and_environment(tmp_path, site, monkeypatch):
    module = site("plug", PLUGIN_MODULE)
    path = _scenario(tmp_path, f"{module}:FirstN")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.issues[0].key_path == KEY
    assert module not in sys.modules
    scenario = load_scenario(path, allow_plugins=[module])
    assert scenario.scheduler.admission.name == f"{module}:FirstN"
    monkeypatch.setenv(ALLOW_PLUGINS_ENV, f" {module} ,")
    assert load_scenario(path).scheduler.admission.name == f"{module}:FirstN"


@pytest.mark.parametrize(
    ("raised", "shown"),
    [
        ("SystemExit(0)", "SystemExit: 0"),
        ("KeyboardInterrupt()", "KeyboardInterrupt"),
        ("RuntimeError('first line\\nsecond line')", "RuntimeError: first line"),
    ],
)
def test_whatever_an_import_raises_is_one_input_error(tmp_path, site, capsys, raised, shown):
    module = site("raises", f"raise {raised}\n")
    path = _scenario(tmp_path, f"{module}:FirstN")
    out = tmp_path / "out"
    assert main([str(path), "-q", "-o", str(out), "--allow-plugins", module]) == 2
    err = capsys.readouterr().err
    assert f"{KEY}: importing module {module!r} failed: {shown}" in err
    assert "second line" not in err
    assert "Traceback" not in err
    assert not out.exists()


CONSTRUCTOR_FAILS = PLUGIN_MODULE + textwrap.dedent(
    """
    class Quits(FirstN):
        def __init__(self, params):
            raise SystemExit(3)
    """
)


def test_a_constructor_that_raises_is_one_input_error(tmp_path, site, capsys):
    module = site("quits", CONSTRUCTOR_FAILS)
    path = _scenario(tmp_path, f"{module}:Quits")
    assert main([str(path), "-q", "-o", str(tmp_path / "out"), "--allow-plugins", module]) == 2
    err = capsys.readouterr().err
    assert f"{KEY}: constructing {module}.Quits (module {module!r}) failed: SystemExit: 3" in err
    assert "Traceback" not in err


def test_missing_attribute_lists_the_family_classes_with_a_suggestion(tmp_path, site):
    module = site("plug", PLUGIN_MODULE)
    path = _scenario(tmp_path, f"{module}:FirstM")
    with pytest.raises(InputError) as caught:
        load_scenario(path, allow_plugins=[module])
    [issue] = caught.value.issues
    assert issue.problem == f"module {module!r} has no attribute 'FirstM'; did you mean 'FirstN'?"
    assert issue.allowed == "a admission policy class of that module: FirstN, RejectAll"


@pytest.mark.parametrize("value", ["not a module", ",", "pkg.:x"])
def test_a_bad_allow_plugins_value_names_the_option(tmp_path, capsys, value):
    path = _scenario(tmp_path, "admit_all", {})
    assert main(["validate", str(path), "--allow-plugins", value]) == 2
    err = capsys.readouterr().err
    assert "command line: --allow-plugins: not a module name" in err


def test_a_bad_environment_value_names_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ALLOW_PLUGINS_ENV, "good, bad value")
    path = _scenario(tmp_path, "admit_all", {})
    assert main(["validate", str(path)]) == 2
    assert f"environment: {ALLOW_PLUGINS_ENV}: not a module name (got 'bad value'" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
def test_python_m_does_not_search_the_working_folder(tmp_path):
    marker = tmp_path / "marker"
    work = tmp_path / "work"
    work.mkdir()
    (work / "helper.py").write_text(_marker_module(marker))
    path = _scenario(work, "helper:FirstN")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(ALLOW_PLUGINS_ENV, None)
    for command in (["-m", "simulator"], ["-m", "simulator.cli"]):
        done = subprocess.run(
            [sys.executable, *command, "validate", str(path), "--allow-plugins", "helper"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "module 'helper' not found" in done.stderr
        assert not marker.exists()


def test_a_worker_that_did_not_load_the_scenario_imports_under_the_environment(
    tmp_path, site, monkeypatch
):
    module = site("plug", PLUGIN_MODULE)
    scenario = load_scenario(_scenario(tmp_path, f"{module}:FirstN"), allow_plugins=[module])
    choice = scenario.scheduler.admission
    fresh = site("fresh", PLUGIN_MODULE)  # a path no registry of this process remembers
    unseen = PolicyChoice("admission", f"{fresh}:FirstN", choice.params, "s.yaml", KEY)
    with pytest.raises(InputError) as caught:
        instantiate(unseen)
    assert caught.value.issues[0].key_path == KEY
    assert fresh not in sys.modules
    monkeypatch.setenv(ALLOW_PLUGINS_ENV, fresh)
    assert type(instantiate(unseen)).__name__ == "FirstN"


def test_sweep_with_an_allowed_plugin_runs_in_worker_processes(tmp_path, site, capsys):
    module = site("plug", PLUGIN_MODULE)
    _scenario(tmp_path, "admit_all", {})
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "scenario": "scenario.yaml",
                "set": {KEY: f"{module}:FirstN"},
                "grid": {"scheduler.admission_control.params.limit": [1, 3]},
            }
        )
    )
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out), "-q", "--workers", "2"]) == 2
    assert f"--allow-plugins {module}" in capsys.readouterr().err
    words = ["sweep", str(sweep), "-o", str(out), "-q", "--workers", "2"]
    assert main([*words, "--allow-plugins", module]) == 0, capsys.readouterr().err


def _spawned_run(task_bytes: bytes) -> str | None:
    """Run a pickled sweep task in a fresh (spawned) process: its error, if any."""
    return run_task(pickle.loads(task_bytes)).error


def test_a_spawned_worker_inherits_the_consent(tmp_path, site, monkeypatch):
    module = site("plug", PLUGIN_MODULE)
    scenario = load_scenario(_scenario(tmp_path, f"{module}:FirstN"), allow_plugins=[module])
    task = pickle.dumps(Task(0, scenario, tmp_path / "out"))
    context = multiprocessing.get_context("spawn")
    monkeypatch.setenv(ALLOW_PLUGINS_ENV, module)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    with context.Pool(1) as pool:
        assert pool.apply(_spawned_run, (task,)) is None
    assert (tmp_path / "out" / "summary.json").exists()


@pytest.mark.parametrize("policy", ["venv.__main__:X", "antigravity:X", "this:X"])
def test_standard_library_modules_with_side_effects_are_not_imported(
    tmp_path, monkeypatch, capsys, policy
):
    monkeypatch.delenv(ALLOW_PLUGINS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s").mkdir()
    path = _scenario(tmp_path / "s", policy)
    before = set(sys.modules)
    assert main(["validate", str(path)]) == 2
    module = policy.partition(":")[0]
    assert f"--allow-plugins {module}" in capsys.readouterr().err
    assert module not in set(sys.modules) - before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_an_entry_point_that_exits_while_loading_is_reported(tmp_path):
    site = _distribution(tmp_path / "site", "admission.quits = demo_plugin.quits:Quits\n")
    (site / "demo_plugin" / "quits.py").write_text("raise SystemExit(0)\n")
    listed = _simulate(site, "policies")
    assert listed.returncode == 2
    assert "entry point admission.quits" in listed.stderr
    assert "loading failed: SystemExit: 0" in listed.stderr


def test_ray_tasks_carry_the_consent(monkeypatch):
    monkeypatch.delenv(ALLOW_PLUGINS_ENV, raising=False)
    assert ray_task_options() == {"num_cpus": 1, "max_retries": 0}
    monkeypatch.setenv(ALLOW_PLUGINS_ENV, "mypkg")
    assert ray_task_options()["runtime_env"] == {"env_vars": {ALLOW_PLUGINS_ENV: "mypkg"}}


def test_the_validate_script_imports_no_unallowed_module(tmp_path):
    marker = tmp_path / "marker"
    site = tmp_path / "site"
    site.mkdir()
    (site / "scriptplug.py").write_text(_marker_module(marker))
    path = _scenario(tmp_path, "scriptplug:FirstN")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop(ALLOW_PLUGINS_ENV, None)
    done = subprocess.run(
        [sys.executable, "scripts/validate_scenario.py", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--allow-plugins scriptplug" in done.stderr
    assert not marker.exists()
