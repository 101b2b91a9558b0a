"""``simulate plot -o DIR``: an earlier report's files are replaced, anything else is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.outputs import write_results
from simulator.report.folder import is_report_file
from tests.engine_fixtures import synthetic, write_scenario


def _run_dir(tmp_path: Path, name: str, mode: str) -> Path:
    scenario_dir = tmp_path / f"scenario_{name}"
    scenario_dir.mkdir()
    path = write_scenario(scenario_dir, mode=mode, workload=synthetic(6, 8.0, 100, 8))
    out = tmp_path / name
    write_results(run(load_scenario(path)), out)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plot_folder")
    return [_run_dir(tmp, "a", "none"), _run_dir(tmp, "b", "fused")]


def _written(report_md: Path) -> set[str]:
    """The files a report.md names (each PNG with its SVG) and the two documents."""
    pngs = re.findall(r"\]\(([^)]+\.png)\)", report_md.read_text(encoding="utf-8"))
    return {"report.md", "report.html", *pngs, *(p.replace(".png", ".svg") for p in pngs)}


def _touch(figure: object, path: str | Path, **_: object) -> None:
    Path(path).write_bytes(b"figure")


@pytest.mark.slow
def test_a_reused_folder_keeps_only_the_new_reports_files(runs, tmp_path, monkeypatch):
    monkeypatch.setattr("simulator.report.document.Figure.savefig", _touch)  # names, not pixels
    out = tmp_path / "out"
    assert simulate_main(["plot", *map(str, runs), "-o", str(out)]) == 0
    compared = {p.name for p in out.iterdir()}
    assert any(name.endswith("_run2.png") for name in compared)
    assert compared == _written(out / "report.md")
    assert all(is_report_file(p) for p in out.iterdir())  # every file it writes is its own

    assert simulate_main(["plot", str(runs[0]), "-o", str(out)]) == 0
    single = {p.name for p in out.iterdir()}
    assert single == _written(out / "report.md")
    assert not any("_run" in name for name in single)


def test_a_folder_holding_other_files_is_refused_and_left_alone(runs, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "cdf_ttft.png").write_bytes(b"earlier")
    (out / "notes.txt").write_text("mine\n")
    assert simulate_main(["plot", str(runs[0]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "command line: -o/--output: holds notes.txt, which no report writes" in err
    assert f"(got '{out}'; allowed: a folder that does not exist yet" in err
    assert sorted(p.name for p in out.iterdir()) == ["cdf_ttft.png", "notes.txt"]
    assert (out / "cdf_ttft.png").read_bytes() == b"earlier"


def test_the_results_directory_itself_is_refused_as_output(runs, capsys):
    assert simulate_main(["plot", str(runs[0]), "-o", str(runs[0])]) == 2
    assert "holds requests.csv, run.json, scenario.resolved.yaml, ..." in capsys.readouterr().err


@pytest.mark.parametrize("labels", [["x"], ["x", "y", "z"]])
def test_label_options_must_be_one_per_run(runs, tmp_path, capsys, labels):
    options = [word for label in labels for word in ("--label", label)]
    out = tmp_path / "out"
    assert simulate_main(["plot", *map(str, runs), "-o", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert f"command line: --label: {len(labels)} --label options for 2 results directories" in err
    assert "allowed: no --label, or one per results directory (2), in their order" in err
    assert not out.exists()
