"""Regression detection between two LUT versions (``python -m lut_population diff OLD NEW``).

OLD and NEW are LUT files or directories of them (files are matched by name).
Rows are matched on (phase, model, hardware, tensor_parallel,
pipeline_parallel, dtype, context_len, microbatch, fanout_k). A matched row
*moved* when latency_ms, energy_mj, peak_mem_mb or kv_delta_mb changed by more
than the threshold (default 5 %) relative to the old value. Rows only in OLD
are *missing*; rows only in NEW are *added* (reported, not flagged: a refined
grid adds points). The command exits non-zero when any row moved or went
missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import InputError, make_issue

ROW_KEY = [
    "phase",
    "model",
    "hardware",
    "tensor_parallel",
    "pipeline_parallel",
    "dtype",
    "context_len",
    "microbatch",
    "fanout_k",
]
VALUES = ["latency_ms", "energy_mj", "peak_mem_mb", "kv_delta_mb"]
DEFAULT_THRESHOLD = 0.05
"""Relative change above which a row counts as moved."""


@dataclass(frozen=True)
class Moved:
    """One row whose value changed by more than the threshold.

    Attributes:
        file: File name.
        row: The row's key values.
        column: The value column.
        old: Old value.
        new: New value.
    """

    file: str
    row: tuple[object, ...]
    column: str
    old: float
    new: float

    @property
    def change(self) -> float:
        """Relative change (new / old - 1; infinite when old is 0 and new is not)."""
        if self.old == 0:
            return 0.0 if self.new == 0 else float("inf")
        return self.new / self.old - 1.0


@dataclass(frozen=True)
class DiffReport:
    """Everything that differs between two LUT versions.

    Attributes:
        moved: Rows that moved beyond the threshold.
        missing: (file, row) only in the old version.
        added: (file, row) only in the new version.
        files_missing: Files only in the old version.
        files_added: Files only in the new version.
        compared: Number of matched rows.
    """

    moved: tuple[Moved, ...]
    missing: tuple[tuple[str, tuple[object, ...]], ...]
    added: tuple[tuple[str, tuple[object, ...]], ...]
    files_missing: tuple[str, ...]
    files_added: tuple[str, ...]
    compared: int

    @property
    def flagged(self) -> bool:
        """Whether anything moved or went missing."""
        return bool(self.moved or self.missing or self.files_missing)


def _files(path: Path) -> dict[str, Path]:
    if path.is_dir():
        return {p.name: p for p in sorted(path.glob("*.csv"))}
    if path.is_file():
        return {path.name: path}
    raise InputError([make_issue(path, "", str(path), "an existing LUT file or directory")])


def _read(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype=dict.fromkeys(ROW_KEY, str))
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InputError(
            [make_issue(path, "", str(path), "a readable LUT CSV file", str(error))]
        ) from None
    missing = [c for c in [*ROW_KEY, *VALUES] if c not in frame.columns]
    if missing:
        raise InputError(
            [make_issue(path, "header", ", ".join(missing), "the LUT columns", "missing columns")]
        )
    for column in VALUES:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        bad = numbers.isna()
        if bad.any():
            row = int(np.argmax(bad.to_numpy()))
            raise InputError(
                [
                    make_issue(
                        path,
                        f"row {row + 2}, column {column}",
                        frame[column].iloc[row],
                        "a number",
                        "not numeric",
                    )
                ]
            )
        frame[column] = numbers
    return frame


def diff_files(old: Path, new: Path, threshold: float = DEFAULT_THRESHOLD) -> DiffReport:
    """Compare two LUT versions.

    Args:
        old: The old file or directory.
        new: The new file or directory.
        threshold: Relative change that counts as a move (0.05 = 5 %).

    Raises:
        InputError: A path is missing or a file is not a readable LUT.
    """
    old_files = _files(old)
    new_files = _files(new)
    if old.is_file() and new.is_file():
        old_files = {old.name: old}
        new_files = {old.name: new}
    moved: list[Moved] = []
    missing: list[tuple[str, tuple[object, ...]]] = []
    added: list[tuple[str, tuple[object, ...]]] = []
    compared = 0
    for name in sorted(set(old_files) & set(new_files)):
        a = _read(old_files[name])
        b = _read(new_files[name])
        merged = a.merge(b, on=ROW_KEY, how="outer", suffixes=("_old", "_new"), indicator=True)
        for _, row in merged[merged["_merge"] == "left_only"].iterrows():
            missing.append((name, tuple(row[c] for c in ROW_KEY)))
        for _, row in merged[merged["_merge"] == "right_only"].iterrows():
            added.append((name, tuple(row[c] for c in ROW_KEY)))
        both = merged[merged["_merge"] == "both"]
        compared += len(both)
        for column in VALUES:
            old_v = both[f"{column}_old"].to_numpy(dtype=float)
            new_v = both[f"{column}_new"].to_numpy(dtype=float)
            scale = np.where(np.abs(old_v) > 0, np.abs(old_v), 1.0)
            change = np.abs(new_v - old_v) / scale
            changed = np.where((np.abs(old_v) == 0) & (new_v != 0), np.inf, change)
            for index in np.flatnonzero(changed > threshold):
                row = both.iloc[int(index)]
                moved.append(
                    Moved(
                        name,
                        tuple(row[c] for c in ROW_KEY),
                        column,
                        float(old_v[index]),
                        float(new_v[index]),
                    )
                )
    return DiffReport(
        moved=tuple(moved),
        missing=tuple(missing),
        added=tuple(added),
        files_missing=tuple(sorted(set(old_files) - set(new_files))),
        files_added=tuple(sorted(set(new_files) - set(old_files))),
        compared=compared,
    )


def render_report(report: DiffReport, threshold: float, limit: int = 20) -> str:
    """Human-readable summary of a :class:`DiffReport`."""
    lines = [
        f"compared {report.compared} rows; {len(report.moved)} values moved by more than "
        f"{threshold:.1%}; {len(report.missing)} rows missing; {len(report.added)} rows added"
    ]
    lines += [f"file missing: {name}" for name in report.files_missing]
    lines += [f"file added: {name}" for name in report.files_added]
    for item in report.moved[:limit]:
        where = ", ".join(f"{k}={v}" for k, v in zip(ROW_KEY, item.row, strict=True))
        lines.append(
            f"moved: {item.file}: {where}: {item.column} {item.old:g} -> {item.new:g} "
            f"({item.change:+.1%})"
        )
    if len(report.moved) > limit:
        lines.append(f"... and {len(report.moved) - limit} more moved values")
    for name, row in report.missing[:limit]:
        where = ", ".join(f"{k}={v}" for k, v in zip(ROW_KEY, row, strict=True))
        lines.append(f"missing: {name}: {where}")
    if len(report.missing) > limit:
        lines.append(f"... and {len(report.missing) - limit} more missing rows")
    return "\n".join(lines)
