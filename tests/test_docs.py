"""The documents say what the code does: README set-up commands, SCENARIO.md freshness."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator import load_scenario, run
from simulator.console import headline_table
from tests.commands import run_python

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_readme_has_exactly_two_setup_commands_that_point_at_real_things():
    install, tests = _setup_commands()
    assert 'pip install -e ".[test]"' in install
    example = install.split("simulate ", 1)[1].split()[0]
    assert (ROOT / example).is_file()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = tests.split("&&", 1)[1].strip()
    assert test_command.startswith("python -m pytest")
    assert test_command in ci


def test_scenario_reference_and_example_are_up_to_date():
    done = run_python("scripts/update_docs.py", "--check")
    assert done.returncode == 0, done.stderr


def test_readme_images_and_links_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)\)", readme)
    local = [t for t in targets if not t.startswith("http")]
    assert "docs/figures/readme_tpot_cdf.png" in local
    for target in local:
        assert (ROOT / target).exists(), target


STORY = ("none_baseline", "datacenter_fused", "mobile_cloud_distributed")
"""The three examples of the README's table, in its order."""


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


@pytest.mark.slow
def test_readme_story_table_matches_full_runs_of_the_examples():
    """Each row of the README's table is what ``simulate`` gives for the example at full size."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in STORY:
        summary = run(load_scenario(ROOT / "scenarios" / "examples" / f"{name}.yaml")).summary
        if name == "mobile_cloud_distributed":  # the set-up section's sample of what it prints
            sample = readme.split("```text\n", 1)[1].split("\n...\n```", 1)[0].splitlines()
            printed = headline_table(summary).splitlines()
            assert sample == printed[: len(sample)], (sample, printed)
        lat, good = summary["latency_ms"], summary["goodput"]
        rates = good["slo_pass_rate"]
        tvt = "does not apply" if rates["tvt"] is None else _pct(rates["tvt"])
        cells = [
            summary["label"],
            f"{lat['ttft']['p50']:.0f} / {lat['ttft']['p99']:.0f}",
            f"{lat['tpot']['p50']:.1f} / {lat['tpot']['p99']:.1f}",
            f"{good['requests_per_s']:.2f}",
            f"{_pct(good['slo_attainment'])} %",
            f"{_pct(rates['ttft'])} / {_pct(rates['tpot'])} / {tvt} %",
        ]
        row = "| " + " | ".join(cells) + " | " + f"{summary['energy']['j_per_output_token']:.3f}"
        assert row in readme, row


def test_readme_names_every_subcommand():
    from simulator.cli import COMMANDS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("**The command.**", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`(\w+)`", paragraph.split("subcommands", 1)[1].split("(", 1)[0])
    assert named == list(COMMANDS)


def test_reports_doc_lists_every_figure_and_why_one_is_left_out():
    from simulator.report import figures
    from simulator.report.document import PER_RUN

    doc = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    section = doc.split("## The figures", 1)[1].split("\n## ", 1)[0]
    table = section.split("\n\n", 2)[1]
    listed = [
        name
        for row in table.splitlines()[2:]
        for name in re.findall(r"`(\w+)`", row.split(" | ")[0])
    ]
    expected = [f"cdf_{metric}" for metric in figures.LATENCY_COLUMNS]
    assert listed == expected + [figure.stem for figure in PER_RUN]
    for figure in PER_RUN:
        assert f'"{figure.lacking}"' in section, figure.stem
    assert "no planner-decisions figure" not in doc
