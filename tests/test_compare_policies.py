"""scripts/compare_policies.py: its cases come from the registries and its table is current."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from policies.registry import PolicyRegistry, registry
from simulator.executors import default_workers
from tests.golden.runs import ROOT
from tests.script_modules import load_script

# Registered by name, so its functions pickle to the workers of a process pool.
compare = load_script(ROOT / "scripts" / "compare_policies.py", "compare_policies")


@dataclass(frozen=True)
class _NeedsLimitParams:
    limit_ms: float
    spare: int = 1


class _NeedsLimit:
    name: ClassVar[str] = "needs_limit"
    Params: ClassVar[type[Any]] = _NeedsLimitParams
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["limit_ms"],
        "properties": {"limit_ms": {"type": "number"}, "spare": {"type": "integer"}},
    }


def _with_extra(family: str, extra: type[Any]) -> PolicyRegistry[Any]:
    """A copy of ``family``'s registry with one more class (the real one is left alone)."""
    real = registry(family)
    copy: PolicyRegistry[Any] = PolicyRegistry(family, real.description)
    for name in real.names():
        copy.register(real.get(name))
    copy.register(extra)
    return copy


def _cases(k_controls: PolicyRegistry[Any], verify: PolicyRegistry[Any], **kwargs: Any) -> Any:
    return compare.policy_cases(
        k_controls, verify, static_k="static", default_verify="fcfs", **kwargs
    )


def test_every_registered_k_controller_and_verify_policy_has_a_case():
    cases = _cases(registry("k_control"), registry("verify_batching"))
    pairs = {(case.k_control, case.verify) for case in cases}
    assert {(name, "fcfs") for name in registry("k_control").names()} <= pairs
    assert {("static", name) for name in registry("verify_batching").names()} <= pairs
    assert len(pairs) == len(cases)  # static with fcfs runs once
    static = next(case for case in cases if case.k_control == "static" and case.verify == "fcfs")
    assert static.overrides == ()
    edf = next(case for case in cases if case.verify == "edf")
    assert edf.overrides == ("scheduler.verify.policy=edf",)


def test_a_policy_added_later_appears_and_a_missing_required_param_fails_loudly():
    verify = _with_extra("verify_batching", _NeedsLimit)
    with pytest.raises(compare.MissingParamsError, match=r"'needs_limit' requires limit_ms"):
        _cases(registry("k_control"), verify)
    given = {("verify_batching", "needs_limit"): {"limit_ms": 5.0}}
    cases = _cases(registry("k_control"), verify, required=given)
    (case,) = [case for case in cases if case.verify == "needs_limit"]
    assert case.overrides == (
        "scheduler.verify.policy=needs_limit",
        "scheduler.verify.params=" + json.dumps({"limit_ms": 5.0}),
    )


def test_a_k_controller_with_a_required_param_gets_it_from_the_script():
    k_controls = _with_extra("k_control", _NeedsLimit)
    with pytest.raises(compare.MissingParamsError, match="k_control policy 'needs_limit'"):
        _cases(k_controls, registry("verify_batching"))
    given = {("k_control", "needs_limit"): {"limit_ms": 2}}
    (case,) = [
        case
        for case in _cases(k_controls, registry("verify_batching"), required=given)
        if case.k_control == "needs_limit"
    ]
    assert case.overrides == (
        "speculation.adaptive_k.enabled=true",
        "speculation.adaptive_k.controller=needs_limit",
        'speculation.adaptive_k.params={"limit_ms": 2}',
    )


def test_markers_must_be_present():
    with pytest.raises(ValueError, match="markers"):
        compare.with_block("no markers here", "table")


@pytest.mark.slow
def test_policies_readme_comparison_table_is_current():
    stale = compare.check(jobs=default_workers())  # the same table whatever the jobs
    assert stale is None, f"{stale} (then review and commit policies/README.md)"


def test_check_reports_a_stale_table_with_the_command_and_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(compare, "current_block", lambda jobs=1: "a table from another run")
    assert compare.main(["--check"]) == 1
    assert "python scripts/compare_policies.py" in capsys.readouterr().err


def test_a_missing_required_param_stops_the_script_with_exit_2(monkeypatch, capsys):
    def refuse(jobs=1):
        raise compare.MissingParamsError("k_control policy 'x' requires y")

    monkeypatch.setattr(compare, "current_block", refuse)
    assert compare.main(["--check"]) == 2
    assert "requires y" in capsys.readouterr().err
