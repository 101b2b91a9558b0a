"""The trace file formats the workload manager reads, and how ``auto`` picks one.

Five formats are known. Three are the published formats of real traces, read
as they are distributed; two are generic formats for users' own traces:

============  ==========================================================  ===========
format        columns (or JSON keys) used                                 arrivals
============  ==========================================================  ===========
``azure``     ``TIMESTAMP`` (date-time), ``ContextTokens``,               yes
              ``GeneratedTokens`` (Azure LLM inference traces)
``mooncake``  ``timestamp_ms``, ``input_length``, ``output_length`` (CSV  yes
              with the hash list reduced to counts) or ``timestamp``
              (ms), ``input_length``, ``output_length`` (original JSONL);
              optional ``hash_ids`` (block ids, see :data:`PREFIX_COLUMN`)
``vidur``     ``num_prefill_tokens``, ``num_decode_tokens`` (Vidur's      no
              processed length traces)
``csv``       ``arrival_s``, ``prompt_tokens``, ``output_tokens`` and     optional
              optional ``slo_class``, ``origin``, ``category``, ``hash_ids``
``jsonl``     the same keys, one JSON object per line                     optional
============  ==========================================================  ===========

Real formats ignore columns they do not use; generic formats reject unknown
columns (a misspelt optional column would otherwise be silently lost).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

TRACE_FORMATS: tuple[str, ...] = ("azure", "mooncake", "vidur", "csv", "jsonl")
"""Format names accepted by the readers (besides ``auto``)."""

FORMAT_CHOICES: tuple[str, ...] = ("auto", *TRACE_FORMATS)
"""Values of the ``format`` keys of the workload section."""

JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json"})


@dataclass(frozen=True)
class Layout:
    """Which columns of a format hold what.

    Attributes:
        name: The format name.
        container: ``csv`` or ``jsonl``: how rows are stored.
        time_column: Column of arrival times; None when the format has none.
        time_units_per_s: Units of ``time_column`` per second (1000 for ms); 0.0 for
            date-time text.
        prompt_column: Column of prompt lengths (tokens).
        output_column: Column of output lengths (tokens).
        generic: True for the user formats (csv, jsonl): zero lengths are
            errors, the time column is optional, unknown columns are rejected
            and the optional ``slo_class`` and ``origin`` columns are read.
    """

    name: str
    container: str
    time_column: str | None
    time_units_per_s: float
    prompt_column: str
    output_column: str
    generic: bool

    def known_columns(self) -> tuple[str, ...]:
        """Return every column this layout reads."""
        columns = [self.prompt_column, self.output_column]
        if self.time_column is not None:
            columns.insert(0, self.time_column)
        if self.generic:
            columns.extend(GENERIC_NAME_COLUMNS)
            columns.append(PREFIX_COLUMN)
        return tuple(columns)


GENERIC_NAME_COLUMNS: tuple[str, ...] = ("slo_class", "origin", "category")
"""Optional text columns of the generic formats."""

PREFIX_COLUMN = "hash_ids"
"""Optional column of every format but ``azure`` and ``vidur``: the prompt's block ids
(space-separated whole numbers in CSV, a list of them in JSONL; Mooncake's
``hash_ids``, one per 512-token block; equal ids mean equal prompt content up to
that block). Read for ``scheduler.kv.prefix_cache``."""

AZURE = Layout("azure", "csv", "TIMESTAMP", 0.0, "ContextTokens", "GeneratedTokens", False)
MOONCAKE_CSV = Layout(
    "mooncake", "csv", "timestamp_ms", 1000.0, "input_length", "output_length", False
)
MOONCAKE_JSONL = Layout(
    "mooncake", "jsonl", "timestamp", 1000.0, "input_length", "output_length", False
)
VIDUR = Layout("vidur", "csv", None, 0.0, "num_prefill_tokens", "num_decode_tokens", False)
GENERIC_CSV = Layout("csv", "csv", "arrival_s", 1.0, "prompt_tokens", "output_tokens", True)
GENERIC_JSONL = Layout("jsonl", "jsonl", "arrival_s", 1.0, "prompt_tokens", "output_tokens", True)


def first_line(path: Path) -> str:
    """Return the first non-blank line of a text file ("" if there is none).

    Raises:
        OSError: The file cannot be read.
        UnicodeDecodeError: The file is not UTF-8 text.
    """
    with path.open(encoding="utf-8-sig") as handle:
        for line in handle:
            if line.strip():
                return line.strip()
    return ""


def repeated_columns(path: Path) -> list[tuple[str, int, int]]:
    """Columns a CSV file's header names more than once: ``(name, first field, repeat field)``.

    Read from the header line as written (fields count from 1, names
    stripped): pandas renames a repeated ``x`` to ``x.1``, hiding the repeat.
    A file that cannot be read gives none (reading it reports the problem).
    """
    try:
        line = first_line(path)
    except (OSError, UnicodeDecodeError):
        return []
    header = next(csv.reader([line], skipinitialspace=True), [])
    first: dict[str, int] = {}
    repeated = []
    for position, name in enumerate((cell.strip() for cell in header), start=1):
        if name in first:
            repeated.append((name, first[name], position))
        else:
            first[name] = position
    return repeated


def _is_jsonl(path: Path, line: str) -> bool:
    return path.suffix.lower() in JSONL_SUFFIXES or line.startswith("{")


def _header(line: str) -> set[str]:
    return {name.strip().strip('"') for name in line.split(",")}


def json_record(text: str) -> object:
    """Parse one JSONL line; nesting too deep for the parser is a :class:`json.JSONDecodeError`.

    The standard parser recurses once per level, so a line of thousands of
    ``[`` ended in a ``RecursionError``; it is reported like any malformed line.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read", text, 0) from None


def _jsonl_keys(line: str) -> set[str]:
    try:
        record = json_record(line)
    except json.JSONDecodeError:
        return set()
    return set(record) if isinstance(record, dict) else set()


def detect_format(path: Path) -> str:
    """Pick the format of a trace file from its extension and first line (``auto``).

    JSONL (by extension ``.jsonl``/``.ndjson``/``.json`` or a first line
    starting with ``{``) is ``mooncake`` when its first record has an
    ``input_length`` key, else ``jsonl``. Other files are CSV: ``azure``,
    ``mooncake`` or ``vidur`` when the header holds that format's columns,
    else ``csv``.

    Raises:
        OSError: The file cannot be read.
        UnicodeDecodeError: The file is not UTF-8 text.
    """
    line = first_line(path)
    if _is_jsonl(path, line):
        return "mooncake" if MOONCAKE_JSONL.prompt_column in _jsonl_keys(line) else "jsonl"
    names = _header(line)
    for layout in (AZURE, MOONCAKE_CSV, VIDUR):
        if set(layout.known_columns()) <= names:
            return layout.name
    return "csv"


def layout_for(path: Path, fmt: str) -> Layout:
    """Return the column layout of ``path`` read as format ``fmt`` (not ``auto``).

    ``mooncake`` means the CSV or the JSONL layout depending on the file.

    Raises:
        ValueError: ``fmt`` is not one of :data:`TRACE_FORMATS`.
        OSError: The file cannot be read (only for ``mooncake``).
        UnicodeDecodeError: The file is not UTF-8 text (only for ``mooncake``).
    """
    if fmt == "mooncake":
        return MOONCAKE_JSONL if _is_jsonl(path, first_line(path)) else MOONCAKE_CSV
    layouts = {"azure": AZURE, "vidur": VIDUR, "csv": GENERIC_CSV, "jsonl": GENERIC_JSONL}
    if fmt not in layouts:
        raise ValueError(f"unknown trace format {fmt!r}; known: {', '.join(TRACE_FORMATS)}")
    return layouts[fmt]
