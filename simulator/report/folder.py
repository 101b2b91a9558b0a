"""The folder a report is written to: what in it belongs to the report.

``simulate plot`` may write a report into a folder that holds an earlier one
(of other runs, with other figures). Before writing it removes every file an
earlier report wrote there (:func:`clear_report_dir`), so no figure of the
earlier comparison stays behind under a name the new report does not use;
a folder holding anything else is refused before anything is read or
removed (:func:`check_report_dir`).

A report's files are ``report.md``, ``report.html`` and the PNG and SVG of
each figure, named by the figure's stem (``cdf_ttft``) and, in a comparison,
the run's position (``percentiles_run2``).
"""

from __future__ import annotations

import re
from pathlib import Path

from simulator.errors import InputError, make_issue
from simulator.report import figures
from simulator.report.document import PER_RUN

REPORT_FILES = frozenset({"report.md", "report.html"})
"""The report documents."""
FIGURE_SUFFIXES = frozenset({".png", ".svg"})
"""The formats every figure is written in."""
_RUN_SUFFIX = re.compile(r"_run[1-9][0-9]*$")

ALLOWED = "a folder that does not exist yet, or holds nothing but an earlier report's files"


def figure_stems() -> frozenset[str]:
    """The stems of every figure a report may draw (before a comparison's ``_runN``)."""
    return frozenset(
        {f"cdf_{metric}" for metric in figures.LATENCY_COLUMNS} | {f.stem for f in PER_RUN}
    )


def is_report_file(path: Path) -> bool:
    """Whether ``path`` is a file a report writes (a document, or a figure's PNG or SVG)."""
    if path.is_dir() or not (path.is_file() or path.is_symlink()):
        return False
    if path.name in REPORT_FILES:
        return True
    stem = _RUN_SUFFIX.sub("", path.stem)
    return path.suffix in FIGURE_SUFFIXES and stem in figure_stems()


def check_report_dir(out_dir: Path, file: str, key: str) -> None:
    """Refuse ``out_dir`` unless it is missing or holds only report files.

    Args:
        out_dir: The folder the report goes to.
        file: Where the folder was named (``command line``).
        key: The option or default that named it.

    Raises:
        InputError: Naming the folder and what it holds that is no report's.
    """

    def refuse(problem: str) -> InputError:
        return InputError([make_issue(file, key, str(out_dir), ALLOWED, problem)])

    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if not out_dir.is_dir():
        raise refuse("not a folder")
    foreign = sorted(p.name for p in out_dir.iterdir() if not is_report_file(p))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise refuse(
            f"holds {shown}, which no report writes: earlier report files are replaced, "
            "anything else is left alone, so choose an empty or new folder"
        )


def clear_report_dir(out_dir: Path) -> list[Path]:
    """Remove the files an earlier report wrote in ``out_dir``; return them, sorted."""
    if not out_dir.is_dir():
        return []
    removed = sorted(p for p in out_dir.iterdir() if is_report_file(p))
    for path in removed:
        path.unlink()
    return removed
