"""Figures and reports from real (small) runs."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.ticker import LogLocator

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.console import cost_line, energy_line, headline_table
from simulator.errors import InputError
from simulator.labels import distinct_labels
from simulator.outputs import write_results
from simulator.report import figures, load_run, write_report
from simulator.report.document import figure_specs
from simulator.report.headline import METRICS, format_value, headline_rows, value_of
from simulator.report.results import with_distinct_labels
from simulator.report.scenario_diff import scenario_differences
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


def _png_dpi(path: Path) -> float:
    """Horizontal resolution from the PNG's pHYs chunk (pixels per metre), in dots per inch."""
    data = path.read_bytes()
    at = 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind = data[at + 4 : at + 8]
        if kind == b"pHYs":
            body = data[at + 8 : at + 8 + length]
            assert body[8] == 1  # unit: metre
            return int.from_bytes(body[0:4], "big") * 0.0254
        at += 12 + length
    raise AssertionError(f"{path.name} has no pHYs chunk")


@pytest.mark.slow
def test_every_figure_renders_as_300_dpi_png_beside_svg(runs, tmp_path):
    result = load_run(runs["distributed"])
    out = tmp_path / "report"
    write_report([result], out)
    specs = figure_specs([result])
    for spec in specs:
        png = out / f"{spec.stem}.png"
        figure = spec.draw().get_figure(root=True)
        width_in, height_in = figure.get_size_inches()
        assert _png_size(png) == (round(width_in * 300), round(height_in * 300)), spec.stem
        assert _png_dpi(png) == pytest.approx(300, abs=0.5), spec.stem
        ET.parse(out / f"{spec.stem}.svg")
    assert len(specs) == 15  # a distributed run has data for every figure


@pytest.mark.slow
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
    # Self-contained: nothing is fetched (base64 data may spell "http" by chance).
    assert re.search(r"(src|href)=['\"]?(https?:|//)", page) is None
    assert page.count("data:image/png;base64,") == 15
    for metric in METRICS:
        if metric.better is not None:
            assert f"{metric.better} is better" in metric.label


@pytest.mark.slow
def test_comparison_reports_ratios_to_the_first_run(runs, tmp_path):
    baseline, other = load_run(runs["none"]), load_run(runs["distributed"])
    _, md_path = write_report([baseline, other], tmp_path / "comparison")
    markdown = md_path.read_text()
    # Both runs are labelled "test" (their scenario id): the names gain the seed, then position.
    first, second = "test (test, seed 1) #1", "test (test, seed 1) #2"
    assert f"| metric | {first} | {second} | {second} / {first} (baseline) |" in markdown
    completed = re.search(
        r"^\| requests completed \(higher is better\) \| (.+?) \| (.+?) \| (.+?) \|$",
        markdown,
        re.M,
    )
    assert completed is not None
    assert completed.group(3) == "1.00x"
    tpot = re.search(
        r"^\| TPOT p50 \(ms, lower is better\) \| (.+?) \| (.+?) \| (.+?)x \((\w+)\) \|$",
        markdown,
        re.M,
    )
    assert tpot is not None
    ratio = value_of(other.summary, METRICS[4]) / value_of(baseline.summary, METRICS[4])
    assert float(tpot.group(3)) == pytest.approx(ratio, abs=0.005)
    assert tpot.group(4) == ("better" if ratio < 1 else "worse")


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


@pytest.mark.slow
def test_simulate_report_flag_writes_the_report(tmp_path):
    path = write_scenario(tmp_path, mode="fused", workload=synthetic(10, 5.0, 200, 20))
    out = tmp_path / "out"
    assert simulate_main([str(path), "-o", str(out), "-q", "--report"]) == 0
    assert (out / "report" / "report.html").is_file()
    assert (out / "report" / "cdf_ttft.png").is_file()


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _labelled_run(tmp_path: Path, mode: str, label: str | None, seed: int = 1) -> Path:
    scenario_dir = tmp_path / f"scenario_{mode}_{seed}"
    scenario_dir.mkdir()
    path = write_scenario(
        scenario_dir,
        mode=mode,
        workload={**synthetic(30, 8.0, 300, 30), "slo": {"ttft_ms": 800, "tpot_ms": 60}},
        clients=5,
        extra={"metadata": {"label": label}, "seed": seed},
    )
    out = tmp_path / f"results_{mode}_{seed}"
    argv = [str(path), "-o", str(out), "-q"]
    assert simulate_main(argv) == 0
    return out


@pytest.mark.slow
def test_report_shows_labels_slo_targets_and_per_slo_pass_rates(tmp_path):
    base = _labelled_run(tmp_path, "none", "plain decoding")
    spec = _labelled_run(tmp_path, "distributed", "phones draft")
    html_path, _md = write_report([load_run(base), load_run(spec)], tmp_path / "report")
    page = html.unescape(html_path.read_text())
    for label in ("plain decoding", "phones draft"):
        assert label in page
    for run_dir, label in ((base, "plain decoding"), (spec, "phones draft")):
        good = json.loads((run_dir / "summary.json").read_text())["goodput"]
        rates = good["slo_pass_rate"]
        cells = [
            format_value(100.0 * rates["ttft"]),
            format_value(100.0 * rates["tpot"]),
            "does not apply" if rates["tvt"] is None else format_value(100.0 * rates["tvt"]),
            format_value(100.0 * good["slo_attainment"]),
        ]
        row = (
            f"<tr><td>{label}</td><td>default: TTFT &lt;= 800 ms, TPOT &lt;= 60 ms</td><td>"
            + "</td><td>".join(cells)
        )
        assert row in html_path.read_text(), label
    assert "<th>TTFT pass (%)</th><th>TPOT pass (%)</th><th>TVT pass (%)</th>" in page


@pytest.mark.slow
def test_two_runs_with_one_label_never_share_a_legend_entry(tmp_path):
    first = _labelled_run(tmp_path, "fused", "same", seed=1)
    second = _labelled_run(tmp_path, "fused", "same", seed=2)
    runs = [load_run(first), load_run(second)]
    write_report(runs, tmp_path / "report")
    ax = figures.latency_cdf(with_distinct_labels(runs), "tpot")
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[:2] == ["same (test, seed 1)", "same (test, seed 2)"]
    assert len(set(legend)) == len(legend)


def test_distinct_labels_widen_only_repeated_names_deterministically():
    assert distinct_labels(["a", "b"], ["x", "y"], [1, 1]) == ["a", "b"]
    assert distinct_labels(["a", "a", "b"], ["x", "y", "z"], [1, 1, 1]) == ["a (x)", "a (y)", "b"]
    assert distinct_labels(["a", "a"], ["x", "x"], [1, 2]) == ["a (x, seed 1)", "a (x, seed 2)"]
    assert distinct_labels(["a", "a"], ["x", "x"], [3, 3]) == [
        "a (x, seed 3) #1",
        "a (x, seed 3) #2",
    ]


@pytest.mark.slow
def test_label_options_name_the_runs(tmp_path, runs):
    path = write_scenario(tmp_path, mode="fused", workload=synthetic(5, 5.0, 200, 5))
    out = tmp_path / "labelled"
    assert simulate_main([str(path), "-o", str(out), "-q", "--label", "1"]) == 0
    assert json.loads((out / "summary.json").read_text())["label"] == "1"
    report = tmp_path / "plots"
    done = run_python(
        "scripts/plot_metrics.py",
        str(runs["none"]),
        str(out),
        "--label",
        "baseline run",
        "--label",
        "1",
        "-o",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    assert (
        "| metric | baseline run | 1 | 1 / baseline run (baseline) |"
        in (report / "report.md").read_text()
    )
    too_many = run_python("scripts/plot_metrics.py", str(out), "--label", "a", "--label", "b")
    assert too_many.returncode == 2
    assert "Traceback" not in too_many.stderr and "--label" in too_many.stderr


@pytest.mark.slow
def test_no_figure_for_a_metric_a_run_lacks(runs, tmp_path):
    result = load_run(runs["none"])
    stems = {spec.stem for spec in figure_specs([result])}
    assert "cdf_tvt" not in stems
    assert not {"k", "acceptance_context", "acceptance_k"} & stems
    assert {"cdf_ttft", "cdf_tpot", "percentiles", "queues"} <= stems
    _, md_path = write_report([result], tmp_path / "report")
    text = md_path.read_text()
    assert "CDF of time to verify (worst round per request): no run has TVT values" in text
    assert "Draft length over time: no speculation" in text
    assert not (tmp_path / "report" / "cdf_tvt.png").exists()


def test_energy_figure_is_left_out_when_no_class_is_measured(runs):
    result = load_run(runs["none"])
    unmeasured = replace(
        result, summary={**result.summary, "energy": {**result.summary["energy"], "covers": []}}
    )
    assert "energy" not in {spec.stem for spec in figure_specs([unmeasured])}
    assert "energy" in {spec.stem for spec in figure_specs([result])}


def test_every_run_of_a_comparison_gets_its_diagnostics(runs):
    baseline, other = load_run(runs["none"]), load_run(runs["distributed"])
    stems = {spec.stem for spec in figure_specs([baseline, other])}
    for stem in ("percentiles", "throughput", "queues", "utilisation", "kv"):
        assert {f"{stem}_run1", f"{stem}_run2"} <= stems
    assert "k_run2" in stems and "k_run1" not in stems  # the baseline has no speculation
    assert "cdf_tvt" in stems  # one run has TVT


def test_log_axes_have_labelled_minor_ticks_and_no_bars(runs):
    result = load_run(runs["distributed"])
    for spec in figure_specs([result]):
        ax = spec.draw()
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            assert not ax.patches, f"{spec.stem}: bars on a log axis"
            assert isinstance(axis.get_minor_locator(), LogLocator), spec.stem
    ax = figures.latency_cdf([result], "tpot")
    ax.get_figure(root=True).canvas.draw()
    low, high = ax.get_xlim()
    minor = [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    if high / low <= 10**figures.MINOR_LABEL_DECADES:
        assert minor, "minor ticks of a short log axis carry labels"


def test_console_table_shows_slo_targets_and_pass_rates(tmp_path):
    out = _labelled_run(tmp_path, "distributed", "phones draft")
    summary = json.loads((out / "summary.json").read_text())
    table = headline_table(summary)
    rates = summary["goodput"]["slo_pass_rate"]
    assert table.splitlines()[0].startswith("phones draft (scenario test)")
    assert re.search(rf"^TTFT +<= 800 ms +{100 * rates['ttft']:.1f}%$", table, re.M)
    assert re.search(rf"^TPOT +<= 60 ms +{100 * rates['tpot']:.1f}%$", table, re.M)
    assert re.search(r"^TVT +no target +does not apply$", table, re.M)
    attainment = 100 * summary["goodput"]["slo_attainment"]
    assert re.search(rf"^all +{attainment:.1f}% +\(SLO attainment\)$", table, re.M)


def test_tvt_rows_only_for_runs_with_tvt_samples(runs):
    """A run without verify rounds over a network prints no TVT latency row."""
    for mode, has_tvt in (("none", False), ("distributed", True)):
        summary = json.loads((runs[mode] / "summary.json").read_text())
        assert (summary["latency_ms"]["tvt"]["mean"] is not None) == has_tvt
        table = headline_table(summary)
        assert bool(re.search(r"^TVT +[-\d.]+ ", table, re.M)) == has_tvt, mode
        titles = [row[0] for row in headline_rows([load_run(runs[mode])])]
        assert any(title.startswith("TVT p50") for title in titles) == has_tvt, mode
    both = headline_rows([load_run(runs["none"]), load_run(runs["distributed"])])
    assert any(row[0].startswith("TVT p99") for row in both)  # one run of the comparison has TVT


def test_console_says_energy_and_cost_are_not_measured():
    energy = {
        "j_per_output_token": None,
        "by_device_class": {},
        "covers": [],
        "not_measured": [],
        "idle_not_measured": [],
    }
    cost = {"usd_per_1k_tokens": None, "by_device_class": {}, "covers": [], "not_priced": []}
    assert energy_line(energy).startswith("energy not measured")
    assert cost_line(cost).startswith("cost: no price")


def test_slo_attainment_bars_carry_their_values(runs):
    result = load_run(runs["distributed"])
    ax = figures.slo_attainment(result)
    fairness = result.summary["fairness"]
    expected = {
        f"{100.0 * value:.1f} %"
        for key in ("slo_attainment_by_class", "slo_attainment_by_device")
        for value in fairness[key].values()
        if value is not None
    }
    values = {t.get_text() for t in ax.texts if t.get_text().endswith(" %")}
    assert expected and values == expected
    assert len([t for t in ax.texts if t.get_text().endswith(" %")]) == len(ax.patches)


def test_overlaid_cdfs_differ_in_line_style_and_marker_not_only_colour(runs):
    baseline, other = load_run(runs["none"]), load_run(runs["distributed"])
    ax = figures.latency_cdf(with_distinct_labels([baseline, other]), "tpot")
    drawn = [line for line in ax.lines if not str(line.get_label()).startswith("SLO")]
    assert len(drawn) == 2
    assert drawn[0].get_linestyle() != drawn[1].get_linestyle()
    assert drawn[0].get_marker() != drawn[1].get_marker()
    styles = [figures.run_style(i) for i in range(len(figures.RUN_LINESTYLES))]
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == len(styles)


def test_per_run_figure_titles_name_the_run(runs):
    baseline, other = with_distinct_labels(
        [replace(load_run(runs["none"]), label="plain"), load_run(runs["distributed"])]
    )
    per_run = [spec for spec in figure_specs([baseline, other]) if not spec.stem.startswith("cdf")]
    assert per_run
    for spec in per_run:
        name = baseline.name if spec.stem.endswith("_run1") else other.name
        assert f"({name})" in spec.draw().get_title(), spec.stem


def _queue_run(result, seconds: int):
    """``result`` with a fabricated time series: one sample a second, a burst every 7 s."""
    times = np.arange(1.0, seconds + 1.0)
    series = pd.DataFrame(
        {
            "time_s": times,
            "pool": "pool",
            "prefill_queue": 0,
            "decode_queue": 0,
            "verify_queue": np.where(times % 7 == 0, 80, 3),
            "fused_queue": 0,
        }
    )
    return replace(result, timeseries=series)


def test_queue_figure_bins_samples_into_mean_line_and_max_band(runs):
    queued = _queue_run(load_run(runs["distributed"]), 600)
    assert figures.queue_bin_s(queued.timeseries["time_s"]) == 6.0  # 600 samples -> 100 bins
    ax = figures.queues_over_time(queued)
    (line,) = ax.lines
    assert len(line.get_xdata()) == 100 < 600
    assert max(line.get_ydata()) < 80  # the mean of a bin, not its burst
    (band,) = ax.collections
    assert band.get_paths()[0].vertices[:, 1].max() == 80  # the band reaches each bin's maximum
    legend = ax.get_legend()
    assert "mean" in legend.get_title().get_text() and "maximum" in legend.get_title().get_text()
    assert figures.queue_bin_s(np.arange(1.0, 81.0)) == 1.0  # short runs: one sample per bin
    assert figures.queue_bin_s(np.arange(0.0, 101.0, 0.5)) == 1.5  # 201 samples -> 67 bins


@pytest.mark.slow
def test_comparison_lists_the_resolved_scenario_keys_that_differ(runs, tmp_path):
    baseline, other = load_run(runs["none"]), load_run(runs["distributed"])
    html_path, md_path = write_report([baseline, other], tmp_path / "comparison")
    markdown = md_path.read_text()
    section = markdown.split("## What differs between the runs")[1].split("## Headline")[0]
    first, second = "test (test, seed 1) #1", "test (test, seed 1) #2"
    assert f"| key | {first} | {second} |" in section
    assert "| speculation.mode | none | distributed |" in section
    assert "| seed |" not in section and "| scenario_id |" not in section  # equal in both
    assert "| metrics.output_dir |" not in section and "| metadata." not in section
    assert "What differs between the runs" in html.unescape(html_path.read_text())
    single = write_report([baseline], tmp_path / "single")[1].read_text()
    assert "What differs" not in single


def test_scenario_differences_key_named_lists_by_name_and_skip_noise():
    first = {
        "seed": 1,
        "metadata": {"label": "a"},
        "metrics": {"output_dir": "results/a", "warmup_s": 0},
        "hardware_profiles": [{"id": "gpu", "count": 2}, {"id": "phone", "count": 9}],
        "network": {"links": [{"src": "phone", "dst": "gpu", "rtt_ms": 40}]},
        "planner": {"candidates": {}},
    }
    second = {
        "seed": 1,
        "metadata": {"label": "b"},
        "metrics": {"output_dir": "results/b", "warmup_s": 5},
        "hardware_profiles": [{"id": "phone", "count": 9}, {"id": "gpu", "count": 4}],
        "network": {"links": [{"src": "phone", "dst": "gpu", "rtt_ms": 8}]},
        "planner": {"candidates": {"k": [2, 4]}},
    }
    assert scenario_differences([first, second]) == [
        ["metrics.warmup_s", "0", "5"],
        ["hardware_profiles[gpu].count", "2", "4"],
        ["network.links[0].rtt_ms", "40", "8"],
        ["planner.candidates.k", "(not set)", "[2, 4]"],
    ]


def test_category_rows_compare_each_task_against_the_baseline(runs):
    """Runs with task categories get rows per category; the TPOT ratio is the inverse speed-up."""
    base, spec = load_run(runs["none"]), load_run(runs["distributed"])
    assert headline_rows([base]) == headline_rows([base])  # no categories: no category rows
    assert not [row for row in headline_rows([base]) if ":" in row[0]]
    tasks = {
        "math": {"slo_attainment": 0.5, "tpot_ms_mean": 20.0, "mean_tokens_per_verify": None},
        "qa": {"slo_attainment": 1.0, "tpot_ms_mean": 30.0, "mean_tokens_per_verify": None},
    }
    fast = {name: {**row, "tpot_ms_mean": row["tpot_ms_mean"] / 2} for name, row in tasks.items()}
    base = dataclasses.replace(base, summary={**base.summary, "by_category": tasks})
    spec = dataclasses.replace(spec, summary={**spec.summary, "by_category": fast})
    rows = {row[0]: row[1:] for row in headline_rows([base, spec])}
    assert rows["math: TPOT mean (ms, lower is better)"] == ["20", "10", "0.50x (better)"]
    assert rows["qa: SLO attainment (%, higher is better)"] == ["100", "100", "1.00x"]
    assert not any(title.startswith("math: tokens per verify") for title in rows)


def _small_run(tmp_path: Path) -> Path:
    scenario_dir = tmp_path / "scenario"
    scenario_dir.mkdir()
    path = write_scenario(scenario_dir, mode="none", workload=synthetic(3, 8.0, 100, 5))
    out = tmp_path / "results"
    write_results(run(load_scenario(path)), out)
    return out


def test_a_summary_or_table_that_simulate_did_not_write_is_refused_before_drawing(tmp_path):
    """Each problem names the file, the key (or row and column) and the value; nothing is drawn."""
    out = _small_run(tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    del summary["mode"]
    summary["seed"] = "abc"
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(InputError) as caught:
        load_run(out)
    lines = [issue.format() for issue in caught.value.issues]
    assert lines == [
        f"{out / 'summary.json'}: mode: missing required key (got '(missing)'; "
        "allowed: a value is required here)",
        f"{out / 'summary.json'}: seed: wrong type (got 'abc'; allowed: integer >= 0)",
    ]
    (out / "summary.json").write_text(json.dumps({**summary, "mode": "none", "seed": 1}))
    requests = (out / "requests.csv").read_text().splitlines()
    cells = requests[2].split(",")
    cells[requests[0].split(",").index("ttft_ms")] = "fast"
    cells[requests[0].split(",").index("slo_met")] = "maybe"
    requests[2] = ",".join(cells)
    (out / "requests.csv").write_text("\n".join(requests) + "\n")
    series = pd.read_csv(out / "timeseries.csv").drop(columns=["mean_k"])
    series.to_csv(out / "timeseries.csv", index=False)
    with pytest.raises(InputError) as caught:
        load_run(out)
    assert [issue.format() for issue in caught.value.issues] == [
        f"{out / 'requests.csv'}: row 2, column ttft_ms: not a number "
        "(got 'fast'; allowed: a number (or an empty cell), as simulate writes)",
        f"{out / 'timeseries.csv'}: column mean_k: missing "
        "(got '(missing)'; allowed: the columns simulate writes)",
        f"{out / 'requests.csv'}: row 2, column slo_met: not a flag "
        "(got 'maybe'; allowed: True, False or an empty cell, as simulate writes)",
    ]


def test_a_resolved_scenario_that_is_no_scenario_is_refused_before_drawing(tmp_path):
    out = _small_run(tmp_path)
    resolved = out / "scenario.resolved.yaml"
    text = resolved.read_text()
    assert "\nmetadata:\n" in text
    resolved.write_text(text.replace("\nmetadata:\n", "\nmetadata: abc\nold_metadata:\n", 1))
    with pytest.raises(InputError) as caught:
        load_run(out)
    assert sorted((i.file, i.key_path, i.problem) for i in caught.value.issues) == [
        (str(resolved), "metadata", "wrong type"),
        (str(resolved), "old_metadata", "unknown key; did you mean 'metadata'?"),
    ]


def test_a_summary_nested_too_deeply_is_refused_not_a_recursion_error(tmp_path):
    out = _small_run(tmp_path)
    (out / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested deeper than 64"):
        load_run(out)
