from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.lut import LutKey, LutManager, load_lut
from tests.lut_factory import analytic_latency_ms, write_lut

A100 = "a100-sxm4-80gb"
H100 = "h100-sxm5-80gb"


def _key(
    phase: str = "verify", model: str = "llama-2-7b", hardware: str = A100, tp: int = 1
) -> LutKey:
    return LutKey(phase, model, hardware, tp, 1, "fp16")


def test_lookup_routes_to_the_table_with_the_key(tmp_path: Path) -> None:
    a100 = load_lut(write_lut(tmp_path / "a.csv", phases=("prefill", "verify")))
    h100 = load_lut(
        write_lut(tmp_path / "h.csv", hardware=H100, tensor_parallel=2, context_lens=(64, 256))
    )
    manager = LutManager([a100, h100])
    assert manager.keys() == a100.keys() | h100.keys()
    assert manager.has(_key(hardware=H100, tp=2))
    assert not manager.has(_key(hardware=H100))
    assert manager.table_for(_key(hardware=H100, tp=2)) is h100
    assert manager.grid(_key(hardware=H100, tp=2)).context_len == (64, 256)
    result = manager.lookup(_key(hardware=H100, tp=2), 100, 2, 3)
    assert result.latency_ms == pytest.approx(analytic_latency_ms(100, 2, 3))
    with pytest.raises(InputError, match="64 to 256"):
        manager.lookup(_key(hardware=H100, tp=2), 300, 2, 3)
    assert manager.lookup(_key(hardware=H100, tp=2), 300, 2, 3, out_of_range="clamp") == (
        manager.lookup(_key(hardware=H100, tp=2), 256, 2, 3)
    )


def test_key_in_two_files_is_rejected_naming_both(tmp_path: Path) -> None:
    first = load_lut(write_lut(tmp_path / "first.csv", phases=("prefill", "verify")))
    second = load_lut(write_lut(tmp_path / "second.csv", phases=("verify", "fused_decode")))
    manager = LutManager([first])
    with pytest.raises(InputError) as info:
        manager.add(second)
    (issue,) = info.value.issues
    assert issue.file == str(second.path)
    assert "phase=verify" in issue.key_path
    assert str(first.path) in issue.problem and str(second.path) in issue.problem
    # Nothing of the rejected file was added.
    assert manager.tables() == (first,)
    assert not manager.has(_key("fused_decode"))


def test_adding_the_same_file_twice_is_harmless(tmp_path: Path) -> None:
    path = write_lut(tmp_path / "same.csv")
    manager = LutManager([load_lut(path, use_cache=False)])
    manager.add(load_lut(path, use_cache=False))
    assert len(manager.tables()) == 1


def test_unknown_key_lists_keys_of_that_model_and_hardware(tmp_path: Path) -> None:
    manager = LutManager([load_lut(write_lut(tmp_path / "a.csv", phases=("prefill", "verify")))])
    with pytest.raises(InputError) as info:
        manager.lookup(_key(tp=4), 512, 1, 1)
    (issue,) = info.value.issues
    assert "tp=4" in issue.key_path
    assert issue.allowed == (
        "a key present for llama-2-7b on a100-sxm4-80gb: prefill/tp1/pp1/fp16, verify/tp1/pp1/fp16"
    )
    with pytest.raises(InputError) as info:
        manager.grid(_key(model="llama-2-70b"))
    assert "present: llama-2-7b on a100-sxm4-80gb" in info.value.issues[0].allowed


def test_empty_manager_says_so() -> None:
    with pytest.raises(InputError, match="no LUT keys are loaded"):
        LutManager().lookup(_key(), 512, 1, 1)


def test_keys_compare_by_value() -> None:
    import dataclasses

    first = _key()
    second = LutKey("verify", "llama-2-7b", A100, 1, 1, "fp16")
    assert first == second and hash(first) == hash(second) and first is not second
    assert first != _key(tp=2) and first != _key("prefill")
    assert {first: 1}[second] == 1
    moved = dataclasses.replace(first, phase="prefill")
    assert moved == _key("prefill") and hash(moved) == hash(_key("prefill"))
    assert "_hash" not in repr(first)
    assert first != ("verify", "llama-2-7b", A100, 1, 1, "fp16")
