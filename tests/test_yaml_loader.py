"""libyaml speeds up reading YAML without changing a document or a message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import loading
from simulator.loading import MAX_NESTING_DEPTH, YamlBoundError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(
    path
    for folder in ("scenarios", "device_profiles", "acceptance")
    for path in (ROOT / folder).rglob("*.yaml")
)


def _slow(text: str) -> object:
    loader = loading._UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML was built without libyaml")
def test_every_shipped_document_reads_the_same_with_libyaml():
    assert len(SHIPPED) > 50
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        parsed, document = loading._load_fast(text)
        assert parsed, path
        assert document == _slow(text), path


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # duplicate key
        "a: [1, 2\n",  # unclosed flow sequence
        "? [1]\n: x\n",  # unhashable key
        "a: b: c\n",  # mapping value where none is allowed
    ],
)
def test_errors_are_the_pure_python_loaders(text):
    assert loading._load_fast(text) == (False, None)
    with pytest.raises(yaml.YAMLError) as fast:
        load_yaml(text)
    with pytest.raises(yaml.YAMLError) as slow:
        _slow(text)
    assert str(fast.value) == str(slow.value)


def test_nesting_beyond_the_bound_is_refused_before_libyaml_composes_it():
    deep = "[" * (MAX_NESTING_DEPTH + 1) + "]" * (MAX_NESTING_DEPTH + 1)
    assert loading._load_fast(deep) == (False, None)
    with pytest.raises(YamlBoundError):
        load_yaml(deep)
    very_deep = "[" * 200_000  # would overflow a recursive composer's stack
    with pytest.raises(yaml.YAMLError):
        load_yaml(very_deep)


def test_scientific_notation_is_a_float_on_both_paths():
    assert load_yaml("x: 1e3\n") == _slow("x: 1e3\n") == {"x": 1000.0}
