"""Reading a replay log: measured accepted lengths per verify step, as a CSV file.

The file (named by ``replay.file`` of a curve of kind ``replay``) has a header
line and one row per verify step:

``sequence``
    The id of the logged sequence (any non-empty text).
``accepted``
    Accepted draft tokens of the step, bonus token excluded: a whole number
    from 0 to the curve's ``replay.draft_length``.
``category`` (optional)
    The sequence's task category: lower-case letters, digits and underscores,
    starting with a letter, the same on every row of a sequence.

Rows of one sequence are in step order; rows of other sequences may come in
between. Sequences are numbered in the order they first appear.

Every problem is reported with the file, ``row N, column C`` (data rows count
from 1: the line after the header is row 1), the value and what is allowed; at
most :data:`~simulator.workload.issue_collector.ISSUES_PER_KIND` of one kind
are listed, the rest counted. The file is read whole, at most
:data:`~simulator.input_files.MAX_DOCUMENT_BYTES` bytes (about 25 bytes per
row: a million steps).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import InputError
from simulator.input_files import MAX_DOCUMENT_BYTES, read_bounded
from simulator.suggest import did_you_mean
from simulator.workload.issue_collector import RowIssues

SEQUENCE = "sequence"
ACCEPTED = "accepted"
CATEGORY = "category"
COLUMNS: tuple[str, ...] = (SEQUENCE, ACCEPTED, CATEGORY)
"""The columns a replay log may have (``category`` is optional)."""
REQUIRED: tuple[str, ...] = (SEQUENCE, ACCEPTED)

CATEGORY_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
"""A task category name, as in the curve schema's ``categories`` keys."""
CATEGORY_ALLOWED = (
    "a task category: lower-case letters, digits and underscores, starting with a letter"
)

WHAT = "acceptance replay log"


@dataclass(frozen=True)
class ReplayLog:
    """The steps of a replay log, grouped by sequence.

    Attributes:
        file: The file the log was read from (for messages).
        draft_length: The draft length the steps were measured at.
        sequence_ids: Each sequence's id, in order of first appearance.
        steps: Each sequence's accepted lengths in step order (each 0..draft_length).
        categories: Each sequence's task category ("" when the file has no
            ``category`` column).
        has_categories: Whether the file has a ``category`` column.
    """

    file: str
    draft_length: int
    sequence_ids: tuple[str, ...]
    steps: tuple[tuple[int, ...], ...]
    categories: tuple[str, ...]
    has_categories: bool

    def __post_init__(self) -> None:
        if not self.steps or any(not sequence for sequence in self.steps):
            raise ValueError("a replay log needs at least one sequence, each with a step")
        if not len(self.sequence_ids) == len(self.steps) == len(self.categories):
            raise ValueError("sequence_ids, steps and categories must have one entry per sequence")
        if any(not 0 <= a <= self.draft_length for sequence in self.steps for a in sequence):
            raise ValueError(f"accepted lengths must lie in 0..{self.draft_length}")

    @property
    def step_count(self) -> int:
        """The number of logged steps, all sequences together."""
        return sum(len(sequence) for sequence in self.steps)


def _accepted_value(text: str) -> float | None:
    """Return the number a cell holds (None when it is not a number)."""
    try:
        return float(text)
    except ValueError:
        return None


def _decode(path: Path, data: bytes, issues: RowIssues) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        issues.add_file_issue(
            f"byte {exc.start}", data[exc.start : exc.start + 8], "UTF-8 text", "not UTF-8"
        )
        return None


def _header_positions(header: list[str], issues: RowIssues) -> dict[str, int] | None:
    """Return each known column's position; record header problems (None when fatal)."""
    allowed = "columns " + ", ".join(COLUMNS) + f" ({CATEGORY} optional)"
    positions: dict[str, int] = {}
    for position, raw in enumerate(header, start=1):
        name = raw.strip()
        where = f"header, column {position}"
        if not name:
            issues.add_file_issue(where, "", allowed, "column has no name")
        elif name in positions:
            issues.add_file_issue(where, name, allowed, "repeated column")
        elif name not in COLUMNS:
            issues.add_file_issue(
                where, name, allowed, f"unknown column{did_you_mean(name, COLUMNS)}"
            )
        else:
            positions[name] = position - 1
    missing = [name for name in REQUIRED if name not in positions]
    for name in missing:
        issues.add_file_issue(
            "header", "(missing)", f"a column named {name!r}", f"missing required column {name!r}"
        )
    return None if missing or issues else positions


class _Builder:
    """Steps grouped by sequence while the rows are read."""

    def __init__(self, has_categories: bool) -> None:
        self.has_categories = has_categories
        self.index: dict[str, int] = {}
        self.steps: list[list[int]] = []
        self.categories: list[str] = []
        self.category_rows: list[int] = []

    def sequence(self, sequence_id: str, category: str, row: int) -> tuple[int, bool]:
        """Return the sequence's index and whether it is new."""
        found = self.index.get(sequence_id)
        if found is not None:
            return found, False
        self.index[sequence_id] = len(self.steps)
        self.steps.append([])
        self.categories.append(category)
        self.category_rows.append(row)
        return len(self.steps) - 1, True


def _read_rows(
    text: str, positions: dict[str, int], width: int, draft_length: int, issues: RowIssues
) -> _Builder:
    has_categories = CATEGORY in positions
    builder = _Builder(has_categories)
    accepted_allowed = f"a whole number from 0 to {draft_length} (replay.draft_length)"
    reader = csv.reader(io.StringIO(text))
    next(reader)  # the header, already checked
    for fields in reader:
        row = reader.line_num - 1
        if not any(field.strip() for field in fields):
            continue  # a blank line
        if len(fields) != width:
            issues.add(
                row,
                "(all)",
                f"{len(fields)} fields",
                f"{width} comma-separated fields, as in the header",
                "wrong number of fields",
            )
            continue
        sequence_id = fields[positions[SEQUENCE]].strip()
        accepted_text = fields[positions[ACCEPTED]].strip()
        category = fields[positions[CATEGORY]].strip() if has_categories else ""
        good = True
        if not sequence_id:
            issues.add(row, SEQUENCE, "(empty)", "the id of the logged sequence", "missing value")
            good = False
        value = _accepted_value(accepted_text)
        if not accepted_text:
            issues.add(row, ACCEPTED, "(empty)", accepted_allowed, "missing value")
            good = False
        elif value is None or not math.isfinite(value):
            issues.add(row, ACCEPTED, accepted_text, accepted_allowed, "not a number")
            good = False
        elif value != math.floor(value):
            issues.add(row, ACCEPTED, accepted_text, accepted_allowed, "not a whole number")
            good = False
        elif value < 0:
            issues.add(row, ACCEPTED, accepted_text, accepted_allowed, "too small")
            good = False
        elif value > draft_length:
            issues.add(row, ACCEPTED, accepted_text, accepted_allowed, "too large")
            good = False
        if has_categories:
            if not category:
                issues.add(row, CATEGORY, "(empty)", CATEGORY_ALLOWED, "missing value")
                good = False
            elif not CATEGORY_PATTERN.match(category):
                issues.add(row, CATEGORY, category, CATEGORY_ALLOWED, "not a category name")
                good = False
        if not sequence_id or (has_categories and not CATEGORY_PATTERN.match(category)):
            continue
        index, new = builder.sequence(sequence_id, category, row)
        if not new and builder.categories[index] != category:
            first = builder.categories[index]
            issues.add(
                row,
                CATEGORY,
                category,
                f"{first!r}, the category of sequence {sequence_id!r} on row "
                f"{builder.category_rows[index]} (one category per sequence)",
                "category changes within a sequence",
            )
            continue
        if good and value is not None:
            builder.steps[index].append(int(value))
    return builder


def parse_replay_log(path: Path, data: bytes, draft_length: int) -> ReplayLog:
    """Parse and check the bytes of a replay log.

    Args:
        path: The file (for messages).
        data: Its content.
        draft_length: The curve's ``replay.draft_length``: the largest accepted length.

    Raises:
        InputError: With every problem found (see the module docstring).
    """
    issues = RowIssues(path)
    text = _decode(path, data, issues)
    if text is None:
        raise InputError(issues.issues())
    try:
        header = next(csv.reader(io.StringIO(text)), [])
    except csv.Error as exc:
        issues.add_file_issue("line 1", str(exc), "a CSV header line", "not a readable CSV line")
        raise InputError(issues.issues()) from None
    if not any(name.strip() for name in header):
        issues.add_file_issue(
            "",
            "(empty)",
            "a header line naming the columns sequence, accepted (and optionally category) "
            "and at least one data row",
            f"empty {WHAT}",
        )
        raise InputError(issues.issues())
    positions = _header_positions(header, issues)
    if positions is None:
        raise InputError(issues.issues())
    try:
        builder = _read_rows(text, positions, len(header), draft_length, issues)
    except csv.Error as exc:
        issues.add_file_issue("", str(exc), "comma-separated values", "not a readable CSV table")
        raise InputError(issues.issues()) from None
    if not issues and not builder.steps:
        issues.add_file_issue(
            "", "header only", "at least one data row below the header", f"{WHAT} has no data rows"
        )
    if issues:
        raise InputError(issues.issues())
    return ReplayLog(
        file=str(path),
        draft_length=draft_length,
        sequence_ids=tuple(builder.index),
        steps=tuple(tuple(sequence) for sequence in builder.steps),
        categories=tuple(builder.categories),
        has_categories=builder.has_categories,
    )


def read_replay_log(path: Path, draft_length: int) -> ReplayLog:
    """Read and check a replay log file (at most ``MAX_DOCUMENT_BYTES``).

    Raises:
        InputError: The file is missing, unreadable or too large, or with
            every problem found in it.
    """
    return parse_replay_log(path, read_bounded(path, WHAT, MAX_DOCUMENT_BYTES), draft_length)
