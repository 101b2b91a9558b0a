"""Re-create the trace slices shipped in ``scenarios/traces/`` from the original files.

Usage::

    python scripts/slice_traces.py ORIGINAL_DIR [--out scenarios/traces] [--check]

``ORIGINAL_DIR`` holds the original files under the names in :data:`SLICES`
(searched for recursively, so the data folder as distributed works). Each
slice is the original's header line followed by its first N data lines,
copied byte for byte (line endings included); nothing else is changed:

======================================  ===========================================================  ======
slice                                   original file                                                rows
======================================  ===========================================================  ======
azure_conv_10k.csv                      AzureLLMInferenceTrace_conv_2023.csv                         1-10000
azure_code_2k.csv                       AzureLLMInferenceTrace_code_2023.csv                         1-2000
azure_code_1h.csv                       AzureLLMInferenceTrace_code_2023.csv                         1-8819
azure_conv_1h.csv                       AzureLLMInferenceTrace_conv_2023.csv                         1-19366
mooncake_conv_2k.csv                    mooncake_conversation_trace.csv                              1-2000
arxiv_summarization_lengths_2k.csv      arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv   1-2000
======================================  ===========================================================  ======

(rows count data lines from 1; the header is always kept).

One slice keeps the Mooncake traces' per-block ids, which the CSV above has
reduced to counts; it is converted from the original JSON lines instead
(:data:`PREFIX_SLICES`): its first N records become CSV rows
``timestamp_ms,input_length,output_length,hash_ids`` with ``timestamp_ms`` =
``timestamp``, the lengths as they are and ``hash_ids`` the record's list of
block ids written space-separated (Mooncake's ids, one per 512-token block).

With ``--check`` nothing is written: the script exits 1 when a shipped slice
differs from what it would write. ``--only NAME`` makes (or checks) one slice.
The SHA-256 of every slice is printed so ``SOURCES.md`` can record it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import NamedTuple


class Slice(NamedTuple):
    """One shipped slice: its name, the original's file name and the data rows kept."""

    name: str
    original: str
    rows: int


SLICES: tuple[Slice, ...] = (
    Slice("azure_conv_10k.csv", "AzureLLMInferenceTrace_conv_2023.csv", 10_000),
    Slice("azure_code_2k.csv", "AzureLLMInferenceTrace_code_2023.csv", 2_000),
    Slice("azure_code_1h.csv", "AzureLLMInferenceTrace_code_2023.csv", 8_819),
    Slice("azure_conv_1h.csv", "AzureLLMInferenceTrace_conv_2023.csv", 19_366),
    Slice("mooncake_conv_2k.csv", "mooncake_conversation_trace.csv", 2_000),
    Slice(
        "arxiv_summarization_lengths_2k.csv",
        "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        2_000,
    ),
)

PREFIX_SLICES: tuple[Slice, ...] = (
    Slice("mooncake_conv_prefix_600.csv", "conversation_trace.jsonl", 600),
)
"""Slices converted from Mooncake's JSON lines, keeping ``hash_ids`` (see the module docstring)."""

PREFIX_HEADER = b"timestamp_ms,input_length,output_length,hash_ids\n"

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "scenarios" / "traces"


def slice_bytes(original: bytes, rows: int) -> bytes:
    """Return the header line and the first ``rows`` data lines of ``original``.

    Raises:
        ValueError: The original has fewer than ``rows`` data lines.
    """
    lines = original.splitlines(keepends=True)
    if len(lines) < rows + 1:
        raise ValueError(f"the original has only {len(lines) - 1} data lines, {rows} needed")
    return b"".join(lines[: rows + 1])


def prefix_slice_bytes(original: bytes, rows: int) -> bytes:
    """Return the CSV of the first ``rows`` records of a Mooncake JSON-lines trace, ids kept.

    Raises:
        ValueError: The original has fewer than ``rows`` records.
    """
    records = [line for line in original.splitlines() if line.strip()]
    if len(records) < rows:
        raise ValueError(f"the original has only {len(records)} records, {rows} needed")
    out = [PREFIX_HEADER]
    for line in records[:rows]:
        record = json.loads(line)
        ids = " ".join(str(int(i)) for i in record["hash_ids"])
        out.append(
            f"{int(record['timestamp'])},{int(record['input_length'])},"
            f"{int(record['output_length'])},{ids}\n".encode()
        )
    return b"".join(out)


def find_original(root: Path, name: str) -> Path:
    """Return the file called ``name`` under ``root`` (searched recursively).

    Raises:
        FileNotFoundError: No such file.
    """
    direct = root / name
    if direct.is_file():
        return direct
    for candidate in sorted(root.rglob(name)):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name} not found under {root}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original_dir", type=Path, help="folder holding the original trace files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the slices go")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--only", help="make (or check) only the slice of this name")
    args = parser.parse_args(argv)
    stale = False
    jobs = [(item, slice_bytes) for item in SLICES]
    jobs += [(item, prefix_slice_bytes) for item in PREFIX_SLICES]
    for item, make in jobs:
        if args.only is not None and item.name != args.only:
            continue
        try:
            original = find_original(args.original_dir, item.original)
        except FileNotFoundError as exc:
            print(
                f"error: original_dir: {exc} (allowed: the folder of the original traces)",
                file=sys.stderr,
            )
            return 2
        data = make(original.read_bytes(), item.rows)
        target = args.out / item.name
        digest = hashlib.sha256(data).hexdigest()
        if args.check:
            same = target.is_file() and target.read_bytes() == data
            stale = stale or not same
            print(f"{item.name}: {'ok' if same else 'DIFFERS'}")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            print(f"{item.name}: {item.rows} rows, {len(data)} bytes, sha256 {digest}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
