"""Energy and cost per device class: unknowns are null and flagged, totals name what they cover."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import load_scenario, run
from simulator.console import headline_table
from simulator.devices import load_device_profile
from simulator.engine.usage import ClassUsage
from simulator.errors import InputError
from simulator.lut import load_lut
from simulator.metrics.energy_cost import (
    class_cost,
    class_energy,
    cost_section,
    energy_section,
)
from simulator.report.figures import energy_label
from simulator.report.headline import device_class_rows

ROOT = Path(__file__).resolve().parents[1]
MOBILE = ROOT / "scenarios" / "examples" / "mobile_cloud_distributed.yaml"
SHORT = ["workload.duration_s=10"]


def usage(**changes: object) -> ClassUsage:
    fields: dict[str, object] = {
        "id": "c",
        "type": "draft",
        "units": 2,
        "gpus": 0,
        "busy_s": 4.0,
        "held": ((2, 10.0),),  # both units for a 10 s run
        "busy_energy_j": 100.0,
        "lut_energy": True,
        "idle_power_w": None,
        "active_power_w": None,
        "usd_per_hour": None,
    }
    fields.update(changes)
    return ClassUsage(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def mobile() -> dict:
    return run(load_scenario(MOBILE, overrides=SHORT)).summary


def test_lut_without_energy_is_detected_from_its_rows():
    phone = load_lut(ROOT / "lut" / "llama-68m__iphone-16-pro.csv")
    laptop = load_lut(ROOT / "lut" / "llama-68m__rtx-4050-laptop.csv")
    assert not any(map(phone.has_energy, phone.keys()))
    assert all(map(laptop.has_energy, laptop.keys()))


def test_class_without_energy_data_is_null_and_flagged(mobile):
    phones = mobile["energy"]["by_device_class"]["phones"]
    assert phones["measured"] is False
    assert phones["busy_j"] is None and phones["total_j"] is None
    assert "energy_mj" in phones["missing"]
    assert phones["busy_s"] > 0


def test_every_device_class_has_an_entry(mobile):
    ids = ["phones", "laptops", "a100_pool"]
    assert list(mobile["energy"]["by_device_class"]) == ids
    assert list(mobile["cost"]["by_device_class"]) == ids


def test_totals_name_the_classes_they_cover(mobile):
    energy = mobile["energy"]
    assert energy["covers"] == ["laptops", "a100_pool"]
    assert energy["not_measured"] == ["phones"]
    by_class = energy["by_device_class"]
    assert energy["total_j"] == pytest.approx(
        by_class["laptops"]["total_j"] + by_class["a100_pool"]["total_j"]
    )
    cost = mobile["cost"]
    assert "phones" in cost["not_priced"] and "phones" not in cost["covers"]
    assert cost["usd_total"] == pytest.approx(
        sum(cost["by_device_class"][name]["usd"] for name in cost["covers"])
    )


def test_idle_energy_is_included_where_idle_power_is_known():
    entry = class_energy(usage(idle_power_w=50.0))
    # two devices for 10 s, busy 4 s in total: 16 idle seconds at 50 W
    assert entry["idle_j"] == pytest.approx(800.0)
    assert entry["total_j"] == pytest.approx(900.0)
    assert entry["idle_measured"] and entry["missing"] is None
    section = energy_section([usage(idle_power_w=50.0)], out_tokens=9, record=True)
    assert section["j_per_output_token"] == pytest.approx(100.0)
    assert section["idle_not_measured"] == []


def test_idle_energy_and_price_follow_the_time_each_unit_held_its_hardware():
    """A planner's pool: one replica for the whole 100 s run, one added for its last 25 s."""
    held = ((1, 100.0), (1, 25.0))
    planned = usage(type="target", held=held, idle_power_w=50.0, usd_per_hour=36.0)
    assert planned.held_unit_s == 125.0
    # 125 unit-seconds held, 4 busy: 121 idle seconds at 50 W
    assert class_energy(planned)["idle_j"] == pytest.approx(50.0 * 121.0)
    cost = class_cost(planned, None, electricity_usd_per_kwh=None)
    assert cost["usd_hourly"] == pytest.approx(36.0 * 125.0 / 3600.0)
    # The added replica is exactly a quarter of a whole-run replica's price.
    whole = usage(type="target", held=((1, 100.0),), usd_per_hour=36.0)
    alone = class_cost(whole, None, electricity_usd_per_kwh=None)["usd_hourly"]
    assert cost["usd_hourly"] - alone == pytest.approx(0.25 * alone)


def test_idle_power_of_a_profile_reaches_the_summary(tmp_path):
    profile = yaml.safe_load((ROOT / "device_profiles" / "a100-tp4.yaml").read_text())
    profile["energy"]["idle_power_w"] = 200.0
    profile["sources"]["energy.idle_power_w"] = "test value"
    (tmp_path / "a100-tp4.yaml").write_text(yaml.safe_dump(profile), encoding="utf-8")
    override = f"hardware_profiles.2.profile={tmp_path / 'a100-tp4.yaml'}"
    base = run(load_scenario(MOBILE, overrides=SHORT)).summary["energy"]
    idle = run(load_scenario(MOBILE, overrides=[*SHORT, override])).summary["energy"]
    pool = idle["by_device_class"]["a100_pool"]
    before = base["by_device_class"]["a100_pool"]
    assert pool["idle_measured"] and pool["idle_j"] > 0
    # the engine's host time inside each step also draws the idle power
    host_j = pool["busy_j"] - before["busy_j"]
    assert 0 < host_j < 0.01 * pool["busy_j"]
    assert idle["total_j"] == pytest.approx(base["total_j"] + pool["idle_j"] + host_j)
    assert "a100_pool" not in idle["idle_not_measured"]


def test_active_power_prices_busy_time_where_the_lut_has_no_energy():
    entry = class_energy(usage(lut_energy=False, active_power_w=30.0))
    assert entry["busy_j"] == pytest.approx(30.0 * 4.0)
    assert entry["busy_source"] == "active_power"
    assert entry["measured"] is True
    without = class_energy(usage(lut_energy=False))
    assert without["busy_j"] is None and without["busy_source"] is None
    from_lut = class_energy(usage(active_power_w=30.0))
    assert from_lut["busy_j"] == 100.0 and from_lut["busy_source"] == "lut"


def test_draft_device_price_per_hour_is_used():
    # two devices for a 100 s run
    priced = usage(usd_per_hour=0.36, held=((2, 100.0),))
    cost = class_cost(priced, None, electricity_usd_per_kwh=None)
    assert cost["usd_hourly"] == pytest.approx(2 * 0.36 * 100.0 / 3600.0)
    assert cost["priced"] and cost["usd"] == pytest.approx(cost["usd_hourly"])
    summary = run(
        load_scenario(MOBILE, overrides=[*SHORT, "hardware_profiles.0.usd_per_hour=0.36"])
    )
    phones = summary.summary["cost"]["by_device_class"]["phones"]
    assert phones["priced"] and phones["usd_hourly"] > 0
    assert "phones" in summary.summary["cost"]["covers"]


def test_electricity_price_prices_draft_energy():
    energy = class_energy(usage(busy_energy_j=3.6e6))
    cost = class_cost(usage(busy_energy_j=3.6e6), energy, electricity_usd_per_kwh=0.2)
    assert cost["usd_electricity"] == pytest.approx(0.2)
    target = class_cost(usage(type="target"), energy, electricity_usd_per_kwh=0.2)
    assert target["usd_electricity"] is None and not target["priced"]


def test_electricity_price_key_changes_the_cost():
    priced = run(load_scenario(MOBILE, overrides=SHORT)).summary["cost"]
    unpriced = run(
        load_scenario(MOBILE, overrides=[*SHORT, "metrics.electricity_usd_per_kwh=null"])
    ).summary["cost"]
    laptops = priced["by_device_class"]["laptops"]
    assert priced["electricity_usd_per_kwh"] == pytest.approx(0.1545)
    assert laptops["usd_electricity"] > 0
    assert unpriced["by_device_class"]["laptops"]["usd_electricity"] is None


def test_recording_off_leaves_sections_empty():
    classes = [usage()]
    energy = energy_section(classes, 5, record=False)
    assert energy["total_j"] is None and energy["by_device_class"] == {}
    cost = cost_section(classes, energy, 5, 0.1, record=False)
    assert cost["usd_total"] is None and cost["by_device_class"] == {}


def test_console_says_not_measured_and_no_price(mobile):
    table = headline_table(mobile)
    assert "not measured: phones" in table
    assert "no price: phones" in table


def test_report_says_not_measured_and_no_price(mobile):
    rows = {row[0]: row for row in device_class_rows(mobile)}
    assert rows["phones"][2] == "not measured"
    assert rows["phones"][4] == "no price"
    assert rows["laptops"][2] != "not measured"
    energy = mobile["energy"]["by_device_class"]["phones"]
    cost = mobile["cost"]["by_device_class"]["phones"]
    assert "not measured" in energy_label("phones", energy, cost)
    assert "no price" in energy_label("phones", energy, cost)


def test_profile_energy_per_token_key_is_rejected(tmp_path):
    profile = yaml.safe_load((ROOT / "device_profiles" / "rtx-4050-laptop.yaml").read_text())
    profile["energy"]["joules_per_token"] = 0.5
    path = tmp_path / "rtx-4050-laptop.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_device_profile(path)
    assert any("joules_per_token" in str(issue) for issue in caught.value.issues)
