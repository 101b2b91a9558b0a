"""Policies from outside the package: by import path and by entry point, and ``simulate policies``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from policies import policy_enums
from simulator import load_scenario, run
from simulator.cli import main
from simulator.errors import InputError
from simulator.scenario import scenario_schema
from tests.commands import ROOT
from tests.engine_fixtures import synthetic, write_scenario

PLUGIN_MODULE = textwrap.dedent(
    '''
    from dataclasses import dataclass
    from typing import Any, ClassVar, Mapping

    from policies import admission, k_control
    from policies.views import AdmissionDecision, AdmissionQuery


    class RejectAll(admission.AdmitAll):
        """Built on admit_all, but its own decide rejects every request: it must be asked."""

        name: ClassVar[str] = "reject_all"

        def decide(self, query: AdmissionQuery) -> AdmissionDecision:
            return AdmissionDecision(False, "reject_all")


    @dataclass(frozen=True)
    class FirstNParams:
        limit: int


    class FirstN:
        """Admit the first `limit` requests to arrive, reject the others."""

        name: ClassVar[str] = "first_n"
        Params: ClassVar[type] = FirstNParams
        params_schema: ClassVar[Mapping[str, Any]] = {
            "type": "object",
            "additionalProperties": False,
            "required": ["limit"],
            "properties": {
                "limit": {"type": "integer", "minimum": 0, "description": "Requests admitted."}
            },
        }

        def __init__(self, params: FirstNParams) -> None:
            self.params = params
            self.seen = 0

        def decide(self, query: AdmissionQuery) -> AdmissionDecision:
            self.seen += 1
            if self.seen <= self.params.limit:
                return AdmissionDecision(True)
            return AdmissionDecision(False, "first_n")


    class NotAdmission:
        name: ClassVar[str] = "not_admission"
        Params: ClassVar[type] = FirstNParams
        params_schema: ClassVar[Mapping[str, Any]] = {"type": "object"}

        def __init__(self, params: FirstNParams) -> None:
            self.params = params

        def route(self, query: Any, replicas: Any) -> int:
            return 0


    class RoundRobinAgain(NotAdmission):
        name: ClassVar[str] = "round_robin"


    class Alternating(k_control.StaticK):
        """Built on static (asked once), but its own next_k alternates 1 and 3: asked every round."""

        name: ClassVar[str] = "alternating"

        def __init__(self, k: int, params: Any = None) -> None:
            super().__init__(k, params)
            self.asked = 0

        def next_k(self, signals: Any) -> int:
            self.asked += 1
            return 1 if self.asked % 2 else 3


    @dataclass(frozen=True)
    class NoParams:
        pass


    class AlwaysTwo:
        """A k controller without signal_window: k = 2 every round."""

        name: ClassVar[str] = "always_two"
        Params: ClassVar[type] = NoParams
        params_schema: ClassVar[Mapping[str, Any]] = {"type": "object"}

        def __init__(self, k: int, params: NoParams) -> None:
            self.params = params

        def next_k(self, signals: Any) -> int:
            return 2

        def observe(self, outcome: Any) -> None:
            raise AssertionError("observe is called only with a positive signal_window")
    '''
)


def _package(root: Path, name: str) -> str:
    """Write package ``name`` with the plug-in module ``mod``; return its module path."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(PLUGIN_MODULE)
    return f"{name}.mod"


@pytest.fixture
def plugin_module(tmp_path, monkeypatch, request) -> str:
    """An importable package made for this test (unique name: modules are cached per process),
    allowed as a plug-in through the environment."""
    name = "plugpkg_" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    root = tmp_path / "site"
    module = _package(root, name)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("SPECDEC_ALLOW_PLUGINS", name)
    yield module
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]


def _scenario(tmp_path: Path, policy: str, params: dict) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(10, 50.0, 100, 3),
        extra={"scheduler.admission_control": {"policy": policy, "params": params}},
    )


# -- import path ---------------------------------------------------------------------------------
def test_import_path_policy_decides(tmp_path, plugin_module):
    path = _scenario(tmp_path, f"{plugin_module}:FirstN", {"limit": 4})
    scenario = load_scenario(path)
    assert scenario.scheduler.admission.name == f"{plugin_module}:FirstN"
    requests = run(scenario).requests.sort_values("arrival_s")
    assert list(requests["outcome"]) == ["completed"] * 4 + ["rejected"] * 6
    assert set(requests["reason"].iloc[4:]) == {"first_n"}


def test_a_subclass_overriding_decide_is_asked_whatever_its_base_promised(tmp_path, plugin_module):
    """admit_all promises its decide admits all; a subclass with its own decide is asked."""
    path = _scenario(tmp_path, f"{plugin_module}:RejectAll", {})
    requests = run(load_scenario(path)).requests
    assert list(requests["outcome"]) == ["rejected"] * 10
    assert set(requests["reason"]) == {"reject_all"}


def test_import_path_is_not_listed_and_docs_schema_has_builtins_only(plugin_module):
    policy_node = scenario_schema(plugins=False)["properties"]["scheduler"]["properties"][
        "admission_control"
    ]["properties"]["policy"]
    names, pattern = policy_node["anyOf"]
    assert names["enum"] == policy_enums(plugins=False)["admission"]
    assert pattern["pattern"].startswith("^")
    assert not any(":" in n for n in policy_enums()["admission"])


@pytest.mark.parametrize(
    ("policy", "params", "key", "message"),
    [
        ("{mod}.nowhere:FirstN", {"limit": 1}, "policy", "nowhere' not found"),
        ("{mod}:Missing", {"limit": 1}, "policy", "has no attribute 'Missing'"),
        (
            "{mod}:NotAdmission",
            {"limit": 1},
            "policy",
            "is not a policy of family admission: it lacks decide()",
        ),
        ("{mod}:FirstN", {"limit": "many"}, "params.limit", "wrong type"),
        ("{mod}:FirstN", {}, "params.limit", "missing required key"),
    ],
)
def test_import_path_errors_name_the_key_and_exit_2(
    tmp_path, plugin_module, capsys, policy, params, key, message
):
    path = _scenario(tmp_path, policy.format(mod=plugin_module), params)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    [issue] = caught.value.issues
    assert issue.key_path == f"scheduler.admission_control.{key}"
    assert message in issue.problem
    assert main([str(path), "-q", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"scheduler.admission_control.{key}" in err
    assert "Traceback" not in err


def test_malformed_import_path_is_refused_by_the_schema(tmp_path):
    path = _scenario(tmp_path, "not a path:", {})
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    [issue] = caught.value.issues
    assert issue.key_path == "scheduler.admission_control.policy"
    assert "admit_all" in issue.allowed


def test_unknown_name_still_suggests_the_closest(tmp_path):
    path = _scenario(tmp_path, "admit_al", {})
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert "did you mean 'admit_all'" in caught.value.issues[0].problem


def test_k_controller_import_path_error_names_the_controller_key(tmp_path, plugin_module):
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(5, 50.0, 100, 3),
        extra={
            "speculation.adaptive_k": {"enabled": True, "controller": f"{plugin_module}:FirstN"}
        },
    )
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    keys = {i.key_path: i for i in caught.value.issues}
    assert "lacks next_k(), observe()" in keys["speculation.adaptive_k.controller"].problem


def _k_scenario(tmp_path: Path, controller: str) -> Path:
    """Five fused requests of 40 tokens under the k controller ``controller`` (k from 1 to 4)."""
    adaptive = {"enabled": True, "k_min": 1, "k_max": 4, "controller": controller}
    return write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(5, 50.0, 100, 40),
        extra={"speculation.adaptive_k": adaptive},
    )


def test_k_controller_without_signal_window_runs_with_no_windowed_signals(tmp_path, plugin_module):
    result = run(load_scenario(_k_scenario(tmp_path, f"{plugin_module}:AlwaysTwo")))
    assert (result.requests["outcome"] == "completed").all()
    # k = 2 each round, less only where the output has fewer tokens left.
    per_round = result.requests["drafted_tokens"] / result.requests["verify_rounds"]
    assert per_round.max() == 2.0
    assert (per_round <= 2.0).all()


def test_a_subclass_overriding_next_k_is_asked_every_round(tmp_path, plugin_module):
    """static promises its next_k is fixed; a subclass with its own next_k is asked each round."""
    requests = run(load_scenario(_k_scenario(tmp_path, f"{plugin_module}:Alternating"))).requests
    # k alternates 1, 3, 1, ... across the run's rounds: drafts per round lie strictly between.
    per_round = requests["drafted_tokens"] / requests["verify_rounds"]
    assert (per_round > 1.0).all()
    assert (per_round < 3.0).all()


# -- entry points (fresh processes: the registries load entry points once per process) -----------
def _distribution(root: Path, entry_points: str) -> Path:
    _package(root, "demo_plugin")
    info = root / "demo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[specdec_sim.policies]\n" + entry_points)
    return root


def _simulate(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "simulator.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_entry_point_policy_is_listed_and_runs(tmp_path):
    site = _distribution(tmp_path / "site", "admission.first_n = demo_plugin.mod:FirstN\n")
    listed = _simulate(site, "policies")
    assert listed.returncode == 0, listed.stderr
    assert "  first_n  (entry point admission.first_n of distribution demo-plugin 1.0)" in (
        listed.stdout
    )
    assert "    limit: integer >= 0, required. Requests admitted." in listed.stdout
    as_json = json.loads(_simulate(site, "policies", "--json").stdout)
    admission = next(f for f in as_json if f["family"] == "admission")
    assert [p["name"] for p in admission["policies"]] == [
        "admit_all",
        "first_n",
        "max_in_flight",
        "slo_guard",
        "token_bucket",
    ]
    path = _scenario(tmp_path / "run", "first_n", {"limit": 2})
    done = _simulate(site, str(path), "-q", "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    requests = pd.read_csv(tmp_path / "out" / "requests.csv").sort_values("arrival_s")
    assert list(requests["outcome"]) == ["completed"] * 2 + ["rejected"] * 8


def test_without_the_plugin_its_name_is_unknown(tmp_path):
    path = _scenario(tmp_path, "first_n", {"limit": 2})
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.issues[0].key_path == "scheduler.admission_control.policy"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("entry_points", "message"),
    [
        (
            "routing.round_robin = demo_plugin.mod:RoundRobinAgain\n",
            "routing policy 'round_robin' of entry point routing.round_robin of distribution "
            "demo-plugin 1.0 clashes with the built-in policies.routing.RoundRobin",
        ),
        ("admission.first_n = demo_plugin.nowhere:FirstN\n", "loading failed: ModuleNotFoundError"),
        ("admission.not_admission = demo_plugin.mod:NotAdmission\n", "lacks decide()"),
        ("admission.other = demo_plugin.mod:FirstN\n", "not the entry point's 'other'"),
        ("nofamily.first_n = demo_plugin.mod:FirstN\n", "not <family>.<policy name>"),
    ],
)
def test_broken_entry_point_stops_with_exit_2(tmp_path, entry_points, message):
    site = _distribution(tmp_path / "site", entry_points)
    listed = _simulate(site, "policies")
    assert listed.returncode == 2
    assert "distribution demo-plugin 1.0: entry point " in listed.stderr
    assert message in listed.stderr
    assert "Traceback" not in listed.stderr
    path = _scenario(tmp_path / "run", "admit_all", {})
    done = _simulate(site, str(path), "-q", "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.slow
def test_two_plugins_with_one_name_name_both(tmp_path):
    site = _distribution(
        tmp_path / "site",
        "admission.first_n = demo_plugin.mod:FirstN\n",
    )
    other = site / "other_plugin-2.0.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other-plugin\nVersion: 2.0\n")
    (other / "entry_points.txt").write_text(
        "[specdec_sim.policies]\nadmission.first_n = demo_plugin.mod:FirstN\n"
    )
    listed = _simulate(site, "policies")
    assert listed.returncode == 2
    assert (
        "admission policy 'first_n' of entry point admission.first_n of distribution "
        "other-plugin 2.0 clashes with entry point admission.first_n of distribution "
        "demo-plugin 1.0 demo_plugin.mod.FirstN"
    ) in listed.stderr


def test_policies_lists_every_builtin_family_and_parameter(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for family, names in policy_enums(plugins=False).items():
        assert f"\n{family}: " in "\n" + out
        for name in names:
            assert f"  {name}  (built-in)" in out
    assert "    threshold_ms: number >= 0, required." in out
    assert "    burst: integer >= 1, default 1" in out
