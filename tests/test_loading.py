from pathlib import Path

import pytest

from simulator import load_scenario
from simulator.errors import InputError, Issue, key_path
from simulator.loading import fill_defaults, read_document, schema_issues
from simulator.scenario.overrides import apply_overrides

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "rate_per_s": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
        "mode": {"enum": ["fast", "slow"], "default": "fast"},
        "inner": {
            "type": "object",
            "default": {},
            "additionalProperties": False,
            "properties": {"k": {"type": "integer", "default": 4}},
        },
        "items": {
            "type": "array",
            "default": [],
            "items": {
                "type": "object",
                "properties": {"w": {"type": "number", "default": 2}},
            },
        },
    },
}


def test_issue_format_names_file_key_value_and_allowed():
    issue = Issue("s.yaml", "a.b", "3", ">= 4", "too small")
    assert issue.format() == "s.yaml: a.b: too small (got 3; allowed: >= 4)"
    assert key_path(["a", 0, "b"]) == "a[0].b"


def test_input_error_needs_issues_and_renders_all():
    with pytest.raises(ValueError):
        InputError([])
    err = InputError([Issue("f", "a", "1", "x"), Issue("f", "b", "2", "y")])
    assert "2 problems" in str(err)
    assert "f: a" in str(err) and "f: b" in str(err)


def test_read_document_missing_and_bad_syntax(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_document(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(InputError, match="valid YAML"):
        read_document(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("a: 1\na: 2\n")
    with pytest.raises(InputError, match="duplicate key"):
        read_document(dup)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"a": }')
    with pytest.raises(InputError, match="valid JSON"):
        read_document(bad_json)


def test_schema_issues_unknown_key_did_you_mean(tmp_path):
    issues = schema_issues({"name": "x", "rate_per_sec": 2}, SCHEMA, tmp_path / "f.yaml")
    assert len(issues) == 1
    assert issues[0].key_path == "rate_per_sec"
    assert "did you mean 'rate_per_s'" in issues[0].problem


def test_schema_issues_collects_every_problem(tmp_path):
    doc = {"rate_per_s": -1, "mode": "fsat", "inner": {"k": "four"}, "extra": 1}
    issues = schema_issues(doc, SCHEMA, tmp_path / "f.yaml")
    paths = {i.key_path for i in issues}
    assert paths == {"name", "rate_per_s", "mode", "inner.k", "extra"}
    mode = next(i for i in issues if i.key_path == "mode")
    assert "did you mean 'fast'" in mode.problem
    assert "'fast', 'slow'" in mode.allowed


def test_schema_issues_rejects_nan(tmp_path):
    issues = schema_issues({"name": "x", "rate_per_s": float("nan")}, SCHEMA, tmp_path / "f")
    assert any(i.value == "NaN" and i.key_path == "rate_per_s" for i in issues)


def test_fill_defaults_recurses_and_does_not_mutate():
    doc = {"name": "x", "items": [{}, {"w": 5}]}
    filled = fill_defaults(doc, SCHEMA)
    assert filled == {
        "name": "x",
        "rate_per_s": 1.0,
        "mode": "fast",
        "inner": {"k": 4},
        "items": [{"w": 2}, {"w": 5}],
    }
    assert doc == {"name": "x", "items": [{}, {"w": 5}]}


def test_a_whole_float_where_only_integers_go_becomes_the_integer():
    """``k: 4.0`` fills (and resolves) as ``k: 4``; numbers and fractions stay as written."""
    schema = {
        "type": "object",
        "properties": {
            "k": {"type": "integer"},
            "maybe": {"type": ["integer", "null"]},
            "rate": {"type": "number"},
            "sizes": {"type": "array", "items": {"type": "integer"}},
        },
    }
    filled = fill_defaults({"k": 4.0, "maybe": 2.0, "rate": 3.0, "sizes": [1.0, 8]}, schema)
    assert filled == {"k": 4, "maybe": 2, "rate": 3.0, "sizes": [1, 8]}
    assert [type(v) for v in (filled["k"], filled["maybe"], filled["rate"])] == [int, int, float]
    assert [type(v) for v in filled["sizes"]] == [int, int]


def test_a_scenario_with_whole_floats_resolves_as_with_integers():
    path = (
        Path(__file__).resolve().parent.parent / "scenarios" / "bench" / "distributed_rounds.yaml"
    )
    as_int = load_scenario(path, ["speculation.k=4", "workload.synthetic.num_requests=100"])
    as_float = load_scenario(path, ["speculation.k=4.0", "workload.synthetic.num_requests=100.0"])
    assert as_float.resolved_json == as_int.resolved_json
    assert isinstance(as_float.speculation.k, int)


def test_overrides_set_nested_values_and_report_bad_ones():
    doc = {"a": {"b": 1}, "lst": [{"x": 1}]}
    out = apply_overrides(doc, ["a.b=2", "a.c.d=[1, 2]", "lst.0.x=3.5", "lst[0].y=true"])
    assert out == {"a": {"b": 2, "c": {"d": [1, 2]}}, "lst": [{"x": 3.5, "y": True}]}
    assert doc["a"]["b"] == 1
    with pytest.raises(InputError) as info:
        apply_overrides(doc, ["noequals", "lst.4.x=1", "a.b.c=1"])
    assert len(info.value.issues) == 3
    assert [i.file for i in info.value.issues] == [
        "--set noequals",
        "--set lst.4.x=1",
        "--set a.b.c=1",
    ]


BAD_SETS = {
    "a bad value": (
        "workload.arrival_scale=x",
        "--set workload.arrival_scale=x: wrong type (got 'x'; allowed: number > 0)",
    ),
    "an unknown key": ("workload.nokey=3", "--set workload.nokey=3: unknown key (got 'nokey'"),
    "a key below": (
        "workload.synthetic.arrival={process: nope}",
        "--set workload.synthetic.arrival={process: nope}: workload.synthetic.arrival.process: ",
    ),
    "a malformed option": ("workload", "--set workload: expected KEY=VALUE (got 'workload'"),
}


@pytest.mark.parametrize("name", list(BAD_SETS))
def test_a_bad_set_option_is_blamed_on_the_command_line(tmp_path, capsys, name):
    from simulator.cli import main as simulate_main
    from tests.engine_fixtures import synthetic, write_scenario

    option, message = BAD_SETS[name]
    scenario = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    args = [str(scenario), "-q", "-o", str(tmp_path / "out"), "--set", option]
    assert simulate_main(args) == 2
    err = capsys.readouterr().err
    assert f"  - {message}" in err
    assert "scenario.yaml" not in err and "Traceback" not in err


def test_blame_overrides_readdresses_only_the_keys_an_override_set():
    from simulator.errors import make_issue
    from simulator.scenario.overrides import blame_overrides

    issues = [
        make_issue("s.yaml", "a.b", "x", "a number", "wrong type"),
        make_issue("s.yaml", "lst[0].x.y", 1, "a string", "wrong type"),
        make_issue("s.yaml", "a.bc", 1, "a string", "wrong type"),
        make_issue("other.yaml", "a.b", 1, "a string", "wrong type"),
    ]
    blamed = blame_overrides(issues, "s.yaml", ["a.b=1", "a.b=x", "lst[0].x={y: 1}", "bad"])
    assert [(i.file, i.key_path) for i in blamed] == [
        ("--set a.b=x", ""),
        ("--set lst[0].x={y: 1}", "lst[0].x.y"),
        ("s.yaml", "a.bc"),
        ("other.yaml", "a.b"),
    ]


def test_input_error_survives_being_rebuilt_from_its_args():
    """SimPy re-raises a process failure as ``type(exc)(*exc.args)``."""
    from simulator.errors import InputError, make_issue

    original = InputError([make_issue("f.csv", "row 3", float("nan"), "a number")])
    rebuilt = type(original)(*original.args)
    assert rebuilt.issues == original.issues
    assert str(rebuilt) == original.render()


def test_capacity_blames_a_bad_set_option_on_the_command_line(tmp_path, capsys):
    from simulator.cli import main as simulate_main
    from tests.engine_fixtures import synthetic, write_scenario

    scenario = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    args = ["capacity", str(scenario), "--slo-attainment", "0.5", "--set", "workload.nokey=3"]
    assert simulate_main(args) == 2
    assert "  - --set workload.nokey=3: unknown key (got 'nokey'" in capsys.readouterr().err


NULL_OR_OBJECT = {
    "type": "object",
    "properties": {
        "launch": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["fixed_ms", "per_layer_ms"],
                    "properties": {
                        "fixed_ms": {"type": "number"},
                        "per_layer_ms": {"type": "number"},
                    },
                },
            ]
        },
        "name": {"type": "string", "minLength": 1},
        "tags": {"type": "object", "minProperties": 1},
    },
}


def test_a_value_of_one_forms_type_gets_that_forms_problems(tmp_path):
    """A mapping where null or a mapping is allowed: the mapping's missing key is named."""
    issues = schema_issues({"launch": {"fixed_ms": 1}}, NULL_OR_OBJECT, tmp_path / "f.yaml")
    assert [i.format() for i in issues] == [
        f"{tmp_path / 'f.yaml'}: launch.per_layer_ms: missing required key "
        "(got '(missing)'; allowed: a value is required here)"
    ]
    issues = schema_issues({"launch": 3}, NULL_OR_OBJECT, tmp_path / "f.yaml")
    assert [i.problem for i in issues] == ["matches no allowed form"]


def test_too_short_and_too_few_entries_say_the_least_allowed(tmp_path):
    issues = schema_issues({"name": "", "tags": {}}, NULL_OR_OBJECT, tmp_path / "f.yaml")
    assert [(i.key_path, i.allowed) for i in issues] == [
        ("name", "string with at least 1 character(s)"),
        ("tags", "object with at least 1 entry"),
    ]
