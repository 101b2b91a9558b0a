"""Command line: ``python -m lut_population prepare|build|check|diff|profile``.

Exit status: 0 success; 1 a check failed or the diff flagged rows; 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lut_population.paths import LUT_DIR, repo_relative
from lut_population.profile.arguments import add_parser as add_profile_parser
from simulator.errors import EXIT_INPUT_ERROR, InputError

EXIT_FAILED = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lut_population",
        description="Build, check and compare the LUT files in lut/ from lut_population/inputs, "
        "or measure LUT rows of a model on your own GPU (profile).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser(
        "prepare", help="copy the filtered subset of a staged data directory into inputs/"
    )
    prepare.add_argument("data_dir", type=Path, help="staged data directory (with MANIFEST.md)")
    build = commands.add_parser("build", help="regenerate every LUT file and lut/CATALOG.md")
    build.add_argument("--lut-dir", type=Path, default=LUT_DIR, help="output directory")
    check = commands.add_parser("check", help="sanity and spot checks of the LUT files")
    check.add_argument("--lut-dir", type=Path, default=LUT_DIR, help="directory to check")
    diff = commands.add_parser("diff", help="flag rows that moved between two LUT versions")
    diff.add_argument("old", type=Path, help="old LUT file or directory")
    diff.add_argument("new", type=Path, help="new LUT file or directory")
    diff.add_argument(
        "--threshold-pct",
        type=float,
        default=5.0,
        help="relative change (in %%) above which a row counts as moved (default 5)",
    )
    add_profile_parser(commands)
    return parser


def _prepare(data_dir: Path) -> int:
    from lut_population.prepare import prepare

    if not (data_dir / "MANIFEST.md").is_file():
        print(
            f"error: {data_dir} has no MANIFEST.md (not a staged data directory)", file=sys.stderr
        )
        return EXIT_INPUT_ERROR
    for line in prepare(data_dir):
        print(line)
    return 0


def _build(lut_dir: Path) -> int:
    from lut_population.build import build_tables, write_outputs
    from lut_population.catalog import render_catalog

    files = build_tables()
    written = write_outputs(files, render_catalog(files), lut_dir)
    rows = sum(f.rows for f in files)
    print(
        f"wrote {len(written) - 1} LUT files ({rows} rows) and the catalog to {repo_relative(lut_dir)}"
    )
    return 0


def _check(lut_dir: Path) -> int:
    from lut_population.checks import run_checks

    results = run_checks(lut_dir)
    for result in results:
        print(f"[{'ok' if result.ok else 'FAIL'}] {result.name}")
        for line in result.details:
            print(f"    {line}")
    return 0 if all(r.ok for r in results) else EXIT_FAILED


def _diff(old: Path, new: Path, threshold_pct: float) -> int:
    from lut_population.diff import diff_files, render_report

    if threshold_pct < 0:
        print(f"error: --threshold-pct must be >= 0 (got {threshold_pct})", file=sys.stderr)
        return EXIT_INPUT_ERROR
    threshold = threshold_pct / 100.0
    report = diff_files(old, new, threshold)
    print(render_report(report, threshold))
    return EXIT_FAILED if report.flagged else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "prepare":
            return _prepare(args.data_dir)
        if args.command == "build":
            return _build(args.lut_dir)
        if args.command == "check":
            return _check(args.lut_dir)
        if args.command == "profile":
            from lut_population.profile.cli import run as run_profile

            return run_profile(args)
        return _diff(args.old, args.new, args.threshold_pct)
    except InputError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR


if __name__ == "__main__":
    sys.exit(main())
