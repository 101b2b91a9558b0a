"""Objects built from files are kept by the file's name and content, never past an edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.built_files import BuiltFromFiles
from simulator.devices import load_device_profile, load_engine_profile
from simulator.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def test_kept_by_name_and_content_least_recently_used_dropped() -> None:
    kept: BuiltFromFiles[list[str]] = BuiltFromFiles(2)
    built: list[str] = []

    def build(label: str) -> list[str]:
        built.append(label)
        return [label]

    one = kept.load("a", b"1", lambda: build("a1"))
    assert kept.load("a", b"1", lambda: build("again")) is one
    assert kept.load("a", b"2", lambda: build("a2")) == ["a2"]  # new content
    assert kept.load("b", b"1", lambda: build("b1")) == ["b1"]  # same content, other name
    assert len(kept) == 2  # ("a", 1) was the least recently used
    assert kept.load("a", b"1", lambda: build("a1 again")) == ["a1 again"]
    assert built == ["a1", "a2", "b1", "a1 again"]
    kept.clear()
    assert len(kept) == 0
    with pytest.raises(ValueError, match="size must be >= 1"):
        BuiltFromFiles(0)


def test_a_device_profile_is_built_again_when_its_file_changes(tmp_path: Path) -> None:
    shipped = (REPO / "device_profiles" / "a100-tp1.yaml").read_text(encoding="utf-8")
    path = tmp_path / "a100-tp1.yaml"
    path.write_text(shipped, encoding="utf-8")
    first = load_device_profile(path)
    assert load_device_profile(path) is first  # unchanged: not parsed or checked again
    path.write_text(shipped.replace(f"name: {first.name}", "name: Edited A100"), encoding="utf-8")
    assert load_device_profile(path).name == "Edited A100"
    path.write_text(shipped.replace("role: target", "role: neither"), encoding="utf-8")
    for _ in range(2):  # a bad file is reported at every load, never kept
        with pytest.raises(InputError, match="role"):
            load_device_profile(path)
    path.write_text(shipped, encoding="utf-8")
    assert load_device_profile(path) is first


def test_an_engine_profile_is_built_again_when_its_file_changes(tmp_path: Path) -> None:
    shipped = (REPO / "device_profiles" / "engines" / "cuda-graph.yaml").read_text(encoding="utf-8")
    path = tmp_path / "cuda-graph.yaml"
    path.write_text(shipped, encoding="utf-8")
    first = load_engine_profile(path)
    assert load_engine_profile(path) is first
    edited = shipped.replace(f"name: {first.name}", "name: Edited engine", 1)
    assert edited != shipped
    path.write_text(edited, encoding="utf-8")
    assert load_engine_profile(path).name == "Edited engine"
