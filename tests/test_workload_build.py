import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from simulator.errors import Issue
from simulator.loading import fill_defaults, load_packaged_schema, schema_issues
from simulator.workload import build_workload_spec, check_workload_section

REPO = Path(__file__).resolve().parent.parent
SLO = {"ttft_ms": 300, "tpot_ms": 35, "tvt_ms": 25}
GENERIC_HEADER = "arrival_s,prompt_tokens,output_tokens\n"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return tmp_path / "scenario.yaml"


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text, encoding="utf-8")
    return name


def trace_section(name: str, **extra: Any) -> dict[str, Any]:
    return {"source": f"trace://{name}", "slo": SLO, **extra}


def synthetic_block(**extra: Any) -> dict[str, Any]:
    block: dict[str, Any] = {
        "num_requests": 10,
        "arrival": {"process": "poisson", "rate_per_s": 1.0},
        "prompt_tokens": {"dist": "fixed", "value": 8},
        "output_tokens": {"dist": "fixed", "value": 8},
    }
    block.update(extra)
    return block


def problems(section: Any, scenario: Path) -> list[Issue]:
    spec, issues = check_workload_section(section, scenario)
    assert spec is None
    assert issues
    return issues


def keys(section: Any, scenario: Path) -> set[str]:
    return {issue.key_path for issue in problems(section, scenario)}


# -- referenced files -----------------------------------------------------------


def test_missing_trace(scenario):
    issues = problems(trace_section("traces/nope.csv"), scenario)
    assert [(i.file, i.key_path) for i in issues] == [(str(scenario), "workload.source")]
    assert "not found" in issues[0].problem and issues[0].value == "'traces/nope.csv'"


def test_empty_and_header_only_traces(scenario):
    empty = write(scenario.parent, "empty.csv", "")
    header = write(scenario.parent, "header.csv", GENERIC_HEADER)
    for name in (empty, header):
        issues = problems(trace_section(name), scenario)
        assert [(i.file, i.key_path) for i in issues] == [(str(scenario), "workload.source")]
        assert "empty trace" in issues[0].problem


def test_bad_column_is_reported_in_the_trace(scenario):
    name = write(scenario.parent, "t.csv", "arrival_s,prompt_tokens,output_tokns\n0,1,1\n")
    issues = problems(trace_section(name), scenario)
    trace = str(scenario.parent / name)
    assert {(i.file, i.key_path) for i in issues} == {
        (trace, "column output_tokens"),
        (trace, "column output_tokns"),
    }


def test_zero_length_nan_and_unsorted_rows_in_generic_csv(scenario):
    name = write(
        scenario.parent,
        "t.csv",
        GENERIC_HEADER + "0,10,5\n1,0,5\n2,nan,5\n1.5,10,5\n",
    )
    issues = problems(trace_section(name), scenario)
    assert {i.key_path for i in issues} == {
        "row 2, column prompt_tokens",
        "row 3, column prompt_tokens",
        "row 4, column arrival_s",
    }
    assert all(i.file == str(scenario.parent / name) for i in issues)


def test_unknown_slo_class_in_trace(scenario):
    name = write(
        scenario.parent,
        "t.csv",
        "arrival_s,prompt_tokens,output_tokens,slo_class\n0,1,1,gold\n1,1,1,silver\n2,1,1,silver\n",
    )
    section = trace_section(name, slo_classes={"gold": {"ttft_ms": 100, "tpot_ms": 10}})
    issues = problems(section, scenario)
    assert [(i.key_path, i.value) for i in issues] == [("row 2, column slo_class", "'silver'")]
    assert "default, gold" in issues[0].allowed


def test_lengths_only_trace_cannot_be_replayed(scenario):
    section = trace_section("traces/arxiv_summarization_lengths_2k.csv")
    issues = problems(section, REPO / "scenarios" / "s.yaml")
    assert [i.key_path for i in issues] == ["workload.source"]
    assert "no arrival times" in issues[0].problem


def test_missing_empirical_trace(scenario):
    block = synthetic_block(prompt_tokens={"dist": "empirical", "trace": "gone.csv"})
    section = {"source": "synthetic", "slo": SLO, "synthetic": block}
    assert keys(section, scenario) == {"workload.synthetic.prompt_tokens.trace"}


# -- cross-field checks ---------------------------------------------------------


def test_synthetic_block_with_a_trace_source(scenario):
    name = write(scenario.parent, "t.csv", GENERIC_HEADER + "0,1,1\n")
    section = trace_section(name, synthetic=synthetic_block())
    assert keys(section, scenario) == {"workload.synthetic"}


def test_synthetic_source_without_block(scenario):
    assert keys({"source": "synthetic", "slo": SLO}, scenario) == {"workload.synthetic"}


@pytest.mark.parametrize(
    ("count", "duration", "problem"), [(10, 5.0, "both given"), (None, None, "neither given")]
)
def test_num_requests_xor_duration(scenario, count, duration, problem):
    block = synthetic_block(num_requests=count, duration_s=duration)
    issues = problems({"source": "synthetic", "slo": SLO, "synthetic": block}, scenario)
    assert [(i.key_path, i.problem) for i in issues] == [("workload.synthetic", problem)]


def test_trace_only_keys_with_synthetic_source(scenario):
    section = {
        "source": "synthetic",
        "slo": SLO,
        "synthetic": synthetic_block(),
        "start_s": 5.0,
        "format": "azure",
        "prompt_length_override": {"dist": "fixed", "value": 3},
    }
    assert keys(section, scenario) == {
        "workload.start_s",
        "workload.format",
        "workload.prompt_length_override",
    }


def test_undeclared_class_in_mix_and_redefined_default(scenario):
    section = {
        "source": "synthetic",
        "slo": SLO,
        "synthetic": synthetic_block(slo_class_mix={"default": 1.0, "gold": 1.0}),
        "slo_classes": {"default": {"ttft_ms": 1, "tpot_ms": 1}},
    }
    assert keys(section, scenario) == {
        "workload.synthetic.slo_class_mix.gold",
        "workload.slo_classes.default",
    }


@pytest.mark.parametrize(
    ("origin", "key"),
    [
        ({"rule": "weights"}, "workload.origin.weights"),
        ({"rule": "weights", "weights": {}}, "workload.origin.weights"),
        ({"rule": "by_count", "weights": {"phone": 1.0}}, "workload.origin.weights"),
        ({"rule": "weights", "weights": {"phone": 0}}, "workload.origin.weights.phone"),
        ({"rule": "weights", "weights": {"phone": -2.0}}, "workload.origin.weights.phone"),
        ({"rule": "by_cnt"}, "workload.origin.rule"),
    ],
)
def test_bad_origin_rules_and_weights(scenario, origin, key):
    section = {"source": "synthetic", "slo": SLO, "synthetic": synthetic_block(), "origin": origin}
    assert keys(section, scenario) == {key}


def test_start_after_the_trace_and_empty_slice(scenario):
    name = write(scenario.parent, "t.csv", GENERIC_HEADER + "0,1,1\n10,1,1\n20,1,1\n")
    assert keys(trace_section(name, start_s=25.0), scenario) == {"workload.start_s"}
    assert keys(trace_section(name, start_s=11.0, duration_s=5.0), scenario) == {
        "workload.duration_s"
    }
    spec, issues = check_workload_section(trace_section(name, start_s=20.0), scenario)
    assert issues == [] and spec is not None


def test_uniform_and_lognormal_bounds(scenario):
    block = synthetic_block(
        prompt_tokens={"dist": "uniform", "low": 10, "high": 5},
        output_tokens={"dist": "lognormal", "median": 100, "sigma": 1, "min": 50, "max": 20},
    )
    section = {"source": "synthetic", "slo": SLO, "synthetic": block}
    assert keys(section, scenario) == {
        "workload.synthetic.prompt_tokens.high",
        "workload.synthetic.output_tokens.max",
    }


def test_lognormal_range_with_no_probability(scenario):
    block = synthetic_block(
        prompt_tokens={"dist": "lognormal", "median": 10, "sigma": 0.1, "min": 100000}
    )
    section = {"source": "synthetic", "slo": SLO, "synthetic": block}
    assert keys(section, scenario) == {"workload.synthetic.prompt_tokens"}


# -- schema-level problems (through check_workload_section) --------------------


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"source": "synthetic", "slo": {"ttft_ms": 300}}, "workload.slo.tpot_ms"),
        ({"source": "ftp://x", "slo": SLO}, "workload.source"),
        ({"source": "synthetic", "slo": {"ttft_ms": 0, "tpot_ms": 1}}, "workload.slo.ttft_ms"),
        ({"source": "synthetic", "slo": SLO, "arival_scale": 2}, "workload.arival_scale"),
        ({"source": "synthetic", "slo": SLO, "arrival_scale": 0}, "workload.arrival_scale"),
        ({"source": "synthetic", "slo": SLO, "max_requests": 0}, "workload.max_requests"),
        (
            {
                "source": "synthetic",
                "slo": SLO,
                "synthetic": synthetic_block(
                    prompt_tokens={"dist": "lognormal", "median": 5, "sigma": -1}
                ),
            },
            "workload.synthetic.prompt_tokens.sigma",
        ),
        (
            {
                "source": "synthetic",
                "slo": SLO,
                "synthetic": synthetic_block(
                    arrival={"process": "gamma", "rate_per_s": 1, "cv": 0}
                ),
            },
            "workload.synthetic.arrival.cv",
        ),
    ],
)
def test_schema_problems_have_workload_key_paths(scenario, section, key):
    assert key in keys(section, scenario)


def test_misspelt_key_gets_a_hint(scenario):
    issues = problems({"source": "synthetic", "slo": SLO, "arival_scale": 2}, scenario)
    assert "did you mean 'arrival_scale'" in issues[0].problem


def test_builder_never_raises_and_returns_all_problems(scenario):
    name = write(scenario.parent, "t.csv", GENERIC_HEADER + "0,0,1\n")
    section = trace_section(
        name,
        origin={"rule": "weights", "weights": {}},
        slo_classes={"default": {"ttft_ms": 1, "tpot_ms": 1}},
        output_length_override={"dist": "empirical", "trace": "missing.csv"},
    )
    spec, issues = build_workload_spec(section, scenario)
    assert spec is None
    assert {i.key_path for i in issues} == {
        "workload.origin.weights",
        "workload.slo_classes.default",
        "row 1, column prompt_tokens",
        "workload.output_length_override.trace",
    }


# -- the schema file ------------------------------------------------------------


def walk_properties(node: Any, path: str = ""):
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            yield f"{path}.{name}".lstrip("."), sub
        for key, value in node.items():
            if key == "not":
                continue  # the form discriminators, not documented keys
            if key != "properties":
                yield from walk_properties(value, path)
            else:
                for name, sub in value.items():
                    yield from walk_properties(sub, f"{path}.{name}".lstrip("."))
    elif isinstance(node, list):
        for item in node:
            yield from walk_properties(item, path)


def test_schema_is_valid_and_every_property_is_described():
    schema = load_packaged_schema("workload.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    for path, sub in walk_properties(schema):
        assert sub.get("description"), f"{path} has no description"
    required = set(schema["required"])
    for name, sub in schema["properties"].items():
        assert name in required or "default" in sub or name == "synthetic", name


def test_defaults_fill_a_minimal_section():
    schema = load_packaged_schema("workload.schema.json")
    section = {"source": "trace://x.csv", "slo": {"ttft_ms": 1, "tpot_ms": 2}}
    assert schema_issues(section, schema, Path("s.yaml")) == []
    filled = fill_defaults(section, schema)
    assert filled == {
        "source": "trace://x.csv",
        "slo": {"ttft_ms": 1, "tpot_ms": 2, "tvt_ms": None},
        "format": "auto",
        "start_s": 0.0,
        "duration_s": None,
        "max_requests": None,
        "arrival_scale": 1.0,
        "prompt_length_override": None,
        "output_length_override": None,
        "slo_classes": {},
        "origin": {"rule": "by_count", "weights": {}},
        "closed_loop": None,
    }


def test_distribution_forms_are_identical_in_all_four_places():
    schema = load_packaged_schema("workload.schema.json")
    props = schema["properties"]
    synthetic = props["synthetic"]["properties"]

    def forms(node: dict[str, Any]) -> str:
        branches = [b for b in node["oneOf"] if b.get("title") != "none"]
        for branch in branches:
            branch["properties"].pop("trace", None)
        return json.dumps(branches, sort_keys=True)

    reference = forms(synthetic["prompt_tokens"])
    for node in (
        synthetic["output_tokens"],
        props["prompt_length_override"],
        props["output_length_override"],
    ):
        assert forms(node) == reference


def test_docs_mention_every_key():
    text = (REPO / "docs" / "workload.md").read_text(encoding="utf-8")
    schema = load_packaged_schema("workload.schema.json")
    for path, _ in walk_properties(schema):
        assert re.search(rf"\b{path.split('.')[-1]}\b", text), path
    for name in schema["properties"]:
        assert f"| `{name}` |" in text, name
