"""Bad acceptance curve files are rejected with every problem named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simulator.acceptance import (
    build_acceptance_model,
    builder_for,
    kinds,
    load_acceptance_model,
    register_kind,
    registry,
)
from simulator.errors import InputError, Issue
from simulator.loading import load_packaged_schema


def write(tmp_path: Path, text: str, name: str = "curve.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def issues_of(tmp_path: Path, text: str) -> tuple[Issue, ...]:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_acceptance_model(path)
    for issue in caught.value.issues:
        assert issue.file == str(path)
    return caught.value.issues


def by_path(issues: tuple[Issue, ...]) -> dict[str, Issue]:
    return {issue.key_path: issue for issue in issues}


HEAD = "method: sps\nsource: test\ntopology: {kind: chain}\n"


def test_valid_yaml_loads(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "kind: iid\nbins:\n  - {context_len: 64, alpha: 0.5}\n")
    model = load_acceptance_model(path)
    assert model.expected_tokens_per_verify(2, 64) == pytest.approx(1.75)


def test_valid_json_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"method": "m", "kind": "positional", "topology": {"kind": "chain"}, "source": "s", '
        '"bins": [{"rates": [0.5]}]}',
        "c.json",
    )
    assert load_acceptance_model(path).expected_accepted(2, 0) == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("alpha", "problem"),
    [("1.2", "too large"), ("-0.1", "too small"), (".nan", "not finite"), ('"high"', "wrong type")],
)
def test_bad_alpha(tmp_path: Path, alpha: str, problem: str) -> None:
    issues = issues_of(tmp_path, HEAD + f"kind: iid\nbins:\n  - {{alpha: {alpha}}}\n")
    issue = by_path(issues)["bins[0].alpha"]
    assert problem in issue.problem
    if alpha == ".nan":
        assert issue.value == "NaN"
        assert issue.allowed == "a finite number"
    else:
        assert issue.allowed == "number >= 0 and <= 1"


def test_unsorted_and_duplicate_bins_reported_together(tmp_path: Path) -> None:
    text = HEAD + (
        "kind: iid\nbins:\n"
        "  - {context_len: 512, alpha: 0.5}\n"
        "  - {context_len: 128, alpha: 0.6}\n"
        "  - {context_len: 128, alpha: 0.7}\n"
        "  - {context_len: 900, alpha: 1.5}\n"
    )
    found = by_path(issues_of(tmp_path, text))
    assert found["bins[1].context_len"].problem == "bins out of order"
    assert found["bins[1].context_len"].value == "128"
    assert "bins[0]" in found["bins[1].context_len"].allowed
    assert found["bins[2]"].problem == "duplicate of bins[1]"
    assert found["bins[3].alpha"].problem == "too large"  # schema and cross-field at once


def test_temperature_order(tmp_path: Path) -> None:
    text = HEAD + "kind: iid\nbins:\n  - {temperature: 1.0, alpha: 0.5}\n  - {alpha: 0.6}\n"
    found = by_path(issues_of(tmp_path, text))
    assert found["bins[1].temperature"].problem == "bins out of order"


def test_two_context_free_bins_are_duplicates(tmp_path: Path) -> None:
    text = HEAD + "kind: iid\nbins:\n  - {alpha: 0.5}\n  - {alpha: 0.6}\n"
    assert by_path(issues_of(tmp_path, text))["bins[1]"].problem == "duplicate of bins[0]"


def test_unknown_kind_lists_valid_kinds(tmp_path: Path) -> None:
    issues = issues_of(tmp_path, HEAD + "kind: per-k\nbins:\n  - {alpha: 0.5}\n")
    issue = by_path(issues)["kind"]
    assert issue.problem == "unknown kind; did you mean 'per_k'?"
    assert issue.allowed == "one of 'iid', 'per_k', 'positional', 'replay'"
    assert issue.value == "'per-k'"
    with pytest.raises(InputError, match="one of 'iid', 'per_k', 'positional', 'replay'"):
        builder_for("geometric", Path("x.yaml"))


def test_unknown_key_with_suggestion(tmp_path: Path) -> None:
    text = HEAD + "kind: iid\nintrpolation: linear\nbins:\n  - {alpha: 0.5, contxt_len: 3}\n"
    found = by_path(issues_of(tmp_path, text))
    assert found["intrpolation"].problem == "unknown key; did you mean 'interpolation'?"
    assert found["bins[0].contxt_len"].problem == "unknown key; did you mean 'context_len'?"
    assert "context_len" in found["bins[0].contxt_len"].allowed


def test_missing_required_keys(tmp_path: Path) -> None:
    found = by_path(issues_of(tmp_path, "kind: iid\nbins: []\n"))
    assert found["method"].problem == "missing required key"
    assert found["source"].problem == "missing required key"
    assert found["topology"].problem == "missing required key"
    assert found["bins"].problem == "too few items"


def test_kind_specific_bin_keys(tmp_path: Path) -> None:
    text = HEAD + "kind: positional\nbins:\n  - {alpha: 0.5}\n"
    found = by_path(issues_of(tmp_path, text))
    assert found["bins[0].rates"].problem == "missing required key"
    assert found["bins[0].alpha"].problem.startswith("unknown key")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_acceptance_model(tmp_path / "absent.yaml")
    (issue,) = caught.value.issues
    assert issue.problem == "not found"
    assert "acceptance curve" in issue.allowed


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    (issue,) = issues_of(tmp_path, "method: [unclosed\n")
    assert issue.allowed == "valid YAML"
    (issue,) = issues_of(tmp_path, "- 1\n- 2\n")
    assert issue.problem == "not a mapping"


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    (issue,) = issues_of(tmp_path, HEAD + "kind: iid\nkind: iid\nbins: [{alpha: 0.5}]\n")
    assert "duplicate key" in issue.problem


def test_per_k_problems(tmp_path: Path) -> None:
    text = HEAD + (
        "kind: per_k\nbins:\n"
        "  - {acceptance: {k=1: 0.9, 1: 0.8, k=2: 0.3}}\n"
        "  - {context_len: 10, acceptance: {k1: 0.5, k=2: 1.5}}\n"
        "  - {context_len: 20, acceptance: {}}\n"
    )
    issues = issues_of(tmp_path, text)
    found = by_path(issues)
    assert found["bins[0].acceptance.1"].problem == "same k as key 'k=1'"
    decreasing = found["bins[0].acceptance.k=2"]
    assert decreasing.problem == "expected accepted tokens decrease as k grows"
    assert decreasing.value == "0.3"
    assert ">= 0.45" in decreasing.allowed
    assert found["bins[1].acceptance"].value == "'k1'"
    assert found["bins[1].acceptance"].problem == "wrong format"
    assert found["bins[1].acceptance.k=2"].problem == "too large"
    assert found["bins[2].acceptance"].problem == "too few entries"


def test_per_k_fraction_may_fall_while_mean_rises(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "kind: per_k\nbins:\n  - {acceptance: {1: 0.9, 2: 0.5}}\n")
    assert load_acceptance_model(path).expected_accepted(2, 0) == pytest.approx(1.0)


def test_positional_rates_need_not_be_monotone(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "kind: positional\nbins:\n  - {rates: [0.5, 0.9, 1.0]}\n")
    assert load_acceptance_model(path).expected_accepted(3, 0) == pytest.approx(0.5 + 0.45 + 0.45)
    found = by_path(issues_of(tmp_path, HEAD + "kind: positional\nbins:\n  - {rates: [0.5, 2]}\n"))
    assert found["bins[0].rates[1]"].problem == "too large"


def test_schema_covers_every_builtin_kind() -> None:
    schema = load_packaged_schema("acceptance.schema.json")
    binned = set(kinds()) - {"replay"}  # a replayed curve has no bins: its data is its CSV
    assert "replay" in kinds()
    assert {name.removesuffix("_bin") for name in schema["$defs"]} == binned
    branches = {
        branch["if"]["properties"]["kind"]["const"]
        for branch in schema["allOf"]
        if "else" not in branch  # the replay-or-bins branch
    }
    assert branches == binned
    (replay_branch,) = (branch for branch in schema["allOf"] if "else" in branch)
    assert replay_branch["if"]["properties"]["kind"]["const"] == "replay"
    assert replay_branch["then"]["required"] == ["replay"]
    assert set(schema["properties"]["replay"]["properties"]) == {
        "file",
        "draft_length",
        "assign",
        "temperature",
    }


def test_register_kind_rejects_duplicates_and_adds_kind() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_kind("iid", builder_for("iid", Path("x")))


def test_custom_kind_builder_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_BUILDERS", dict(registry._BUILDERS))
    monkeypatch.setattr(registry, "_CHECKERS", dict(registry._CHECKERS))

    def build_constant(document: Any, file: Path) -> Any:
        return builder_for("iid", file)({**document, "kind": "iid"}, file)

    register_kind("constant_for_test", build_constant)
    assert "constant_for_test" in kinds()
    document = {
        "method": "m",
        "kind": "constant_for_test",
        "topology": {"kind": "chain"},
        "source": "s",
        "bins": [{"alpha": 0.5, "context_len": 0, "temperature": 0.0}],
    }
    model = build_acceptance_model(document, Path("c.yaml"))
    assert model.expected_accepted(1, 0) == pytest.approx(0.5)
