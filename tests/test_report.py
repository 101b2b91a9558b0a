"""Figures and reports from real (small) runs."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.outputs import write_results
from simulator.report import figures, load_run, write_report
from simulator.report.document import figure_specs
from simulator.report.headline import METRICS, format_value, value_of
from tests.commands import run_python
from tests.engine_fixtures import synthetic, write_scenario


def _run_dir(tmp_path: Path, mode: str) -> Path:
    scenario_dir = tmp_path / f"scenario_{mode}"
    scenario_dir.mkdir()
    path = write_scenario(scenario_dir, mode=mode, workload=synthetic(40, 8.0, 300, 40), clients=5)
    out = tmp_path / f"results_{mode}"
    write_results(run(load_scenario(path)), out)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return {mode: _run_dir(tmp, mode) for mode in ("distributed", "none")}


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_every_figure_renders_as_png_and_svg(runs, tmp_path):
    result = load_run(runs["distributed"])
    out = tmp_path / "report"
    write_report([result], out)
    for spec in figure_specs([result]):
        width, height = _png_size(out / f"{spec.stem}.png")
        assert 400 <= width <= 2000 and 300 <= height <= 1500, spec.stem
        ET.parse(out / f"{spec.stem}.svg")
    assert len(figure_specs([result])) == 15


def test_report_numbers_come_from_the_summary(runs, tmp_path):
    result = load_run(runs["distributed"])
    html_path, md_path = write_report([result], tmp_path / "report")
    summary = json.loads((runs["distributed"] / "summary.json").read_text())
    markdown = md_path.read_text()
    page = html_path.read_text()
    for metric in METRICS:
        expected = format_value(value_of(summary, metric))
        row = re.search(rf"^\| {re.escape(metric.label)} \| (.+?) \|$", markdown, flags=re.M)
        assert row is not None, metric.label
        assert row.group(1) == expected, metric.label
        assert f"<td>{metric.label}</td><td>{expected}</td>" in page.replace("&#x27;", "'")
    assert "http" not in page  # self-contained: no external resources
    assert page.count("data:image/png;base64,") == 15


def test_comparison_reports_ratios_to_the_first_run(runs, tmp_path):
    baseline, other = load_run(runs["none"]), load_run(runs["distributed"])
    _, md_path = write_report([baseline, other], tmp_path / "comparison")
    markdown = md_path.read_text()
    assert "| metric | test | test | test / test |" in markdown
    completed = re.search(r"^\| requests completed \| (.+?) \| (.+?) \| (.+?) \|$", markdown, re.M)
    assert completed is not None
    assert completed.group(3) == "1.00x"
    tpot = re.search(r"^\| TPOT p50 \(ms\) \| (.+?) \| (.+?) \| (.+?)x \|$", markdown, re.M)
    assert tpot is not None
    ratio = value_of(other.summary, METRICS[4]) / value_of(baseline.summary, METRICS[4])
    assert float(tpot.group(3)) == pytest.approx(ratio, abs=0.005)


def test_plot_functions_draw_on_a_given_axes(runs):
    result = load_run(runs["distributed"])
    ax = figures.new_axes()
    assert figures.latency_cdf([result], "tpot", ax=ax) is ax
    assert ax.get_xlabel().startswith("TPOT")
    for draw in (figures.queues_over_time, figures.energy_breakdown, figures.acceptance_vs_k):
        other = figures.new_axes()
        assert draw(result, ax=other) is other


def test_none_mode_figures_say_there_is_no_speculation(runs):
    ax = figures.acceptance_vs_context(load_run(runs["none"]))
    assert "no verify rounds" in ax.texts[0].get_text()


def test_simulate_report_flag_writes_the_report(tmp_path):
    path = write_scenario(tmp_path, mode="fused", workload=synthetic(10, 5.0, 200, 20))
    out = tmp_path / "out"
    assert simulate_main([str(path), "-o", str(out), "-q", "--report"]) == 0
    assert (out / "report" / "report.html").is_file()
    assert (out / "report" / "cdf_ttft.png").is_file()


def test_plot_metrics_refuses_a_missing_or_broken_directory(tmp_path, runs):
    missing = run_python("scripts/plot_metrics.py", str(tmp_path / "nothing"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
    assert "nothing" in missing.stderr and "a results directory" in missing.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    for name in ("requests.csv", "timeseries.csv", "scenario.resolved.yaml"):
        (broken / name).write_text((runs["none"] / name).read_text())
    done = run_python("scripts/plot_metrics.py", str(broken))
    assert done.returncode == 2
    assert "summary.json" in done.stderr and "valid JSON" in done.stderr


def test_plot_metrics_names_a_broken_resolved_scenario(tmp_path, runs):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("summary.json", "requests.csv", "timeseries.csv"):
        (broken / name).write_text((runs["none"] / name).read_text())
    (broken / "scenario.resolved.yaml").write_text("workload: [unclosed\n")
    done = run_python("scripts/plot_metrics.py", str(broken))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "scenario.resolved.yaml" in done.stderr and "line" in done.stderr


def test_report_names_the_scenarios_description_and_references(tmp_path):
    scenario_dir = tmp_path / "scenario"
    scenario_dir.mkdir()
    path = write_scenario(
        scenario_dir,
        mode="none",
        workload=synthetic(5, 8.0, 300, 5),
        extra={
            "metadata": {
                "description": "A described run.",
                "references": ["Leviathan et al. 2023", "Sarathi-Serve 2024"],
            }
        },
    )
    out = tmp_path / "results"
    write_results(run(load_scenario(path)), out)
    _html, md_path = write_report([load_run(out)], tmp_path / "report")
    text = md_path.read_text()
    assert "A described run." in text
    assert "References: Leviathan et al. 2023; Sarathi-Serve 2024." in text
