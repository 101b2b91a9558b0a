"""The shipped device profiles: they load, carry the derived numbers, and are reproducible."""

from __future__ import annotations

import csv
import importlib.util
import statistics
from pathlib import Path
from types import ModuleType

import pytest

from simulator.devices import DeviceRegistry, load_device_profile
from simulator.devices.checks import numeric_leaves
from simulator.loading import read_document

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "device_profiles"
INPUTS = PROFILES / "inputs"

SHIPPED = {
    "iphone-16-pro",
    "galaxy-s25",
    "rtx-4050-laptop",
    "macbook-m3-max",
    "jetson-orin-nano-super",
    "a100-tp1",
    "a100-tp2",
    "a100-tp4",
    "h100-tp1",
    "h100-tp2",
    "h100-tp8",
}
KNOWN_HARDWARE = {
    "a100-sxm4-80gb",
    "h100-sxm5-80gb",
    "iphone-16-pro",
    "galaxy-s25",
    "rtx-4050-laptop",
    "macbook-m3-max",
    "jetson-orin-nano-super",
}


@pytest.fixture(scope="module")
def registry() -> DeviceRegistry:
    return DeviceRegistry.from_directory(PROFILES)


@pytest.fixture(scope="module")
def derive() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_profiles_derive", PROFILES / "derive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_input(name: str) -> list[dict[str, str]]:
    with (INPUTS / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_shipped_profile_loads(registry):
    assert set(registry.ids) == SHIPPED
    for profile in registry:
        assert profile.hardware in KNOWN_HARDWARE
        assert (profile.cost.usd_per_hour is None) == profile.is_draft
        if profile.hardware == "h100-sxm5-80gb":
            # measured: 121.7 W per GPU with a CUDA context resident (microbench_h100)
            gpus = profile.compute.gpus_per_replica
            assert profile.energy.idle_power_w == pytest.approx(121.7 * gpus)
            assert "microbench_h100" in (profile.source_of("energy.idle_power_w") or "")
        else:
            assert profile.energy.idle_power_w is None
            assert "idle_power_w is null" in profile.notes.replace("\n", " ")
        assert profile.availability.kind == "always"
    assert {p.id for p in registry.drafts()} == {
        "iphone-16-pro",
        "galaxy-s25",
        "rtx-4050-laptop",
        "macbook-m3-max",
        "jetson-orin-nano-super",
    }
    assert {p.id for p in registry.with_hardware("h100-sxm5-80gb")} == {
        "h100-tp1",
        "h100-tp2",
        "h100-tp8",
    }


def test_derive_reproduces_committed_profiles(derive):
    rendered = derive.rendered_files()
    committed = {p.name for p in PROFILES.glob("*.yaml")}
    assert {name for name in rendered if name.endswith(".yaml") and "/" not in name} == committed
    assert "README.md" in rendered
    for name, text in rendered.items():
        assert (PROFILES / name).read_text(encoding="utf-8") == text, name


def test_schema_copy_is_identical_to_packaged_schema():
    packaged = REPO / "simulator" / "schemas" / "device_profile.schema.json"
    assert (PROFILES / "device_profile.schema.json").read_bytes() == packaged.read_bytes()


def test_targets_have_consistent_parallelism_and_memory(registry):
    expected = {"a100-tp1": 1, "a100-tp4": 4, "h100-tp1": 1, "h100-tp2": 2, "h100-tp8": 8}
    for profile_id, tp in expected.items():
        profile = registry.get(profile_id)
        assert profile.is_target
        assert profile.compute.tensor_parallel == tp
        assert profile.compute.pipeline_parallel == 1
        assert profile.gpus_per_replica == tp
        assert profile.compute.max_concurrent_requests is None
        assert profile.memory.gpu_memory_gb == 80.0
        assert profile.memory.device_memory_gb == 80.0 * tp
        assert profile.memory.kv_cache_limit_mb is None
        limits = profile.compute.parallelism_limits
        assert limits is not None and limits.max_tensor_parallel == 8
        interconnect = profile.network.interconnect
        assert interconnect is not None
        assert [f.num_workers for f in interconnect.all_reduce] == [2, 4, 8]
        assert interconnect.send_recv_fit() is not None
    for profile in registry.drafts():
        assert profile.compute.max_concurrent_requests == 1
        assert profile.gpus_per_replica == 1
        assert profile.network.interconnect is None


def test_draft_numbers_match_curated_rows(registry):
    rows = {r["device"]: r for r in read_input("device_facts_rows.csv")}
    iphone = registry.get("iphone-16-pro")
    assert iphone.compute.thermal is not None
    assert iphone.compute.thermal.throttle_factor == pytest.approx(22.6 / 40)
    assert iphone.compute.thermal.throttle_after_s is None
    assert iphone.compute.thermal.latency_scale(0.0) == pytest.approx(40 / 22.6, rel=1e-3)
    assert [c.decode_tok_s for c in iphone.calibration] == [40.0, 22.6]
    laptop = registry.get("rtx-4050-laptop")
    assert laptop.energy.active_power_w == float(rows["RTX 4050 Laptop"]["power_W"]) == 34.1
    assert laptop.calibration[0].energy_per_token_j == pytest.approx(34.1 / 131.7, rel=1e-3)
    jetson = registry.get("jetson-orin-nano-super")
    assert jetson.memory.bandwidth_gb_per_s == 102.0
    assert jetson.memory.device_memory_gb == 8.0
    assert jetson.energy.active_power_w is None and jetson.energy.power_limit_w == 25.0
    assert {c.model: c.decode_tok_s for c in jetson.calibration}["SmolLM2"] == 64.5
    mac = registry.get("macbook-m3-max")
    assert mac.memory.device_memory_gb == 64.0
    assert mac.energy.active_power_w is None
    assert mac.calibration[0].decode_tok_s == 50.74
    phone = registry.get("galaxy-s25")
    assert phone.compute.thermal is None
    point = phone.calibration[0]
    assert (point.model_id, point.decode_tok_s, point.itl_ms, point.context_len) == (
        "llama-3.2-1b",
        48.8,
        20.5,
        128,
    )


def test_h100_power_is_median_of_saturated_dense_sweeps(registry):
    rows = [
        r
        for r in read_input("mlenergy_v3_h100_rows.csv")
        if r["arch"] == "Dense Transformer" and r["precision"] == "bfloat16"
    ]
    best: dict[tuple[str, ...], dict[str, str]] = {}
    for r in rows:
        key = (r["task"], r["model"], r["num_gpus"], r["tp"], r["ep"], r["dp"])
        if key not in best or float(r["output_tput_tok_s"]) > float(best[key]["output_tput_tok_s"]):
            best[key] = r
    expected = statistics.median(
        float(r["avg_power_W"]) / int(r["num_gpus"]) for r in best.values()
    )
    tp8 = registry.get("h100-tp8")
    assert tp8.energy.active_power_w_per_gpu == pytest.approx(expected, abs=0.05)
    assert tp8.energy.active_power_w == pytest.approx(8 * tp8.energy.active_power_w_per_gpu)
    assert tp8.memory.bandwidth_gb_per_s == 3350.0
    one = registry.get("h100-tp1")
    by_batch = {c.condition: c for c in one.calibration}
    point = by_batch["task lm-arena-chat, max_num_seqs 512, 1 GPU(s)"]
    assert (point.decode_tok_s, point.power_w, point.itl_ms) == (9805.6, 688.3, 47.408)
    # TP 2: the dense model ML.ENERGY v3 measures on two H100s in the chat task.
    two = registry.get("h100-tp2")
    assert two.energy.active_power_w == pytest.approx(2 * tp8.energy.active_power_w_per_gpu)
    assert {c.model for c in two.calibration} == {"Qwen/Qwen3-32B"}
    point = {c.condition: c for c in two.calibration}[
        "task lm-arena-chat, max_num_seqs 128, 2 GPU(s)"
    ]
    assert (point.decode_tok_s, point.power_w, point.itl_ms) == (3905.3, 1073.7, 29.656)


def test_a100_kv_reference_and_power(registry):
    tp4 = registry.get("a100-tp4")
    refs = {
        (r.model, r.tensor_parallel): r.max_num_tokens for r in tp4.memory.kv_capacity_reference
    }
    assert refs == {("facebook/opt-13b", 4): 356736, ("facebook/opt-66b", 4): 78496}
    tp1 = registry.get("a100-tp1")
    assert tp1.energy.active_power_w_per_gpu == tp4.energy.active_power_w_per_gpu
    assert tp4.energy.active_power_w == pytest.approx(4 * tp1.energy.active_power_w)
    assert 100.0 < (tp1.energy.active_power_w or 0.0) < 400.0
    llamacpp = tp1.calibration[0]
    assert (llamacpp.model_id, llamacpp.decode_tok_s, llamacpp.prefill_tok_s) == (
        "llama-3-8b",
        133.38,
        5863.92,
    )


def test_interconnect_fits_follow_the_measurements(registry):
    for gpu, profile_id in (("a100", "a100-tp4"), ("h100", "h100-tp8")):
        interconnect = registry.get(profile_id).network.interconnect
        assert interconnect is not None
        for op, fits in (
            ("all_reduce", interconnect.all_reduce),
            ("send_recv", interconnect.send_recv),
        ):
            rows = read_input(f"vidur_{gpu}_dgx_{op}_intranode.csv")
            for fit in fits:
                group = [r for r in rows if int(r["num_workers"]) == fit.num_workers]
                measured = [float(r[f"time_stats.{op}.median"]) for r in group]
                assert fit.latency_floor_ms == pytest.approx(min(measured), rel=1e-3)
                errors = [
                    abs(fit.time_ms(float(r["size"])) - t) / t
                    for r, t in zip(group, measured, strict=True)
                ]
                assert statistics.median(errors) < 0.1, (profile_id, op, fit.num_workers)
                largest = max(group, key=lambda r: float(r["size"]))
                t_big = float(largest[f"time_stats.{op}.median"])
                assert fit.time_ms(float(largest["size"])) == pytest.approx(t_big, rel=0.15)
        fit8 = interconnect.all_reduce_fit(8)
        assert fit8 is not None
        assert fit8.bus_bandwidth_gb_per_s == pytest.approx(
            fit8.bandwidth_gb_per_s * 7 / 4, rel=1e-3
        )
        assert interconnect.all_reduce_fit(3) is None


def test_every_number_is_cited_and_files_are_portable():
    for path in sorted(PROFILES.glob("*.yaml")):
        document = read_document(path)
        profile = load_device_profile(path)
        for leaf in numeric_leaves(document):
            citation = profile.source_of(leaf)
            assert citation, f"{path.name}: {leaf}"
        for item in document.get("calibration", []):
            assert item["source"].startswith("inputs/")
        text = path.read_text(encoding="utf-8")
        assert "/work" not in text and "/tmp" not in text


def test_sources_notes_name_existing_input_files():
    sources_md = (INPUTS / "SOURCES.md").read_text(encoding="utf-8")
    for data_file in INPUTS.glob("*.csv"):
        assert data_file.name in sources_md
    for licence in (INPUTS / "LICENSES").iterdir():
        assert licence.name in sources_md


def test_target_prices_are_a_gpu_share_of_a_dated_price_list(registry):
    rows = {row["gpu"]: row for row in read_input("cloud_prices.csv")}
    for row in rows.values():
        assert row["url"].startswith("https://") and row["date"] and row["source"]
    for profile in registry.targets():
        gpu = "A100 SXM 80GB" if profile.hardware.startswith("a100") else "H100 SXM 80GB"
        row = rows[gpu]
        expected = float(row["usd_per_hour"]) / int(row["gpus"]) * profile.gpus_per_replica
        assert profile.cost.usd_per_hour == pytest.approx(expected, rel=1e-6)
        source = profile.source_of("cost.usd_per_hour")
        assert row["url"] in source and row["date"] in source and row["instance"] in source
