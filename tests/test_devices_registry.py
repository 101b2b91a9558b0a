"""Looking device profiles up by id."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simulator.devices import DeviceRegistry, UnknownDeviceError, load_device_profile
from simulator.errors import InputError

PROFILES = Path(__file__).resolve().parents[1] / "device_profiles"


def test_unknown_id_lists_known_ids_and_suggests():
    registry = DeviceRegistry([load_device_profile(PROFILES / "h100-tp1.yaml")])
    assert "h100-tp1" in registry and len(registry) == 1
    with pytest.raises(UnknownDeviceError) as caught:
        registry.get("h100-tp2")
    message = str(caught.value)
    assert "'h100-tp2'" in message
    assert "known ids: h100-tp1" in message
    assert "did you mean 'h100-tp1'" in message
    assert caught.value.known == ("h100-tp1",)
    assert isinstance(caught.value, LookupError)


def test_empty_registry_says_so():
    with pytest.raises(UnknownDeviceError, match=r"\(none loaded\)"):
        DeviceRegistry([]).get("anything")


def test_duplicate_ids(tmp_path):
    profile = load_device_profile(PROFILES / "galaxy-s25.yaml")
    with pytest.raises(ValueError, match="duplicate"):
        DeviceRegistry([profile, profile])
    other = tmp_path / "copy"
    other.mkdir()
    shutil.copy(PROFILES / "galaxy-s25.yaml", other / "galaxy-s25.yaml")
    with pytest.raises(InputError) as caught:
        DeviceRegistry.from_files([PROFILES / "galaxy-s25.yaml", other / "galaxy-s25.yaml"])
    (issue,) = caught.value.issues
    assert issue.key_path == "id" and issue.file == str(other / "galaxy-s25.yaml")
    assert "already used" in issue.problem


def test_from_files_reports_every_bad_file(tmp_path):
    bad_one = tmp_path / "one.yaml"
    bad_one.write_text("id: one\n", encoding="utf-8")
    missing = tmp_path / "two.yaml"
    with pytest.raises(InputError) as caught:
        DeviceRegistry.from_files([bad_one, missing, PROFILES / "a100-tp1.yaml"])
    files = {issue.file for issue in caught.value.issues}
    assert files == {str(bad_one), str(missing)}


def test_missing_directory(tmp_path):
    with pytest.raises(InputError, match="not found"):
        DeviceRegistry.from_directory(tmp_path / "nope")


def test_directory_skips_schema_files(tmp_path):
    shutil.copy(PROFILES / "device_profile.schema.json", tmp_path)
    shutil.copy(PROFILES / "a100-tp4.yaml", tmp_path)
    registry = DeviceRegistry.from_directory(tmp_path)
    assert registry.ids == ("a100-tp4",)
    assert registry.targets()[0].gpus_per_replica == 4
    assert registry.drafts() == ()
