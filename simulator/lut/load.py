"""Loading a LUT file into a :class:`~simulator.lut.table.LutTable`.

:func:`load_lut` reads a CSV (or Parquet) file, checks it completely
(:mod:`simulator.lut.check`) and builds one :class:`KeyGrid` per key. Loaded
tables are kept in a small content-keyed cache (:mod:`simulator.built_files`):
loading the same file again while its bytes are unchanged returns the same
table (with its warm lookup cache); any change to the file's content makes it
load afresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simulator.built_files import BuiltFromFiles
from simulator.errors import InputError
from simulator.lut.check import ParsedLut, check_lut
from simulator.lut.interpolate import KeyGrid, Values
from simulator.lut.read import (
    RawLut,
    frame_to_raw,
    parse_lut_bytes,
    read_lut_bytes,
)
from simulator.lut.schema import VALUE_COLUMNS
from simulator.lut.table import LutKey, LutTable

if TYPE_CHECKING:
    import pandas as pd

LOAD_CACHE_SIZE = 32
"""Most loaded tables kept by :func:`load_lut` (least recently used ones are dropped)."""

_loaded: BuiltFromFiles[LutTable] = BuiltFromFiles(LOAD_CACHE_SIZE)


def _key_of(values: tuple[object, ...]) -> LutKey:
    phase, model, hardware, tp, pp, dtype = values
    return LutKey(str(phase), str(model), str(hardware), int(str(tp)), int(str(pp)), str(dtype))


def build_grids(parsed: ParsedLut, file: str) -> dict[LutKey, KeyGrid]:
    """Turn checked rows (complete grids, no duplicates) into one grid per key, keys sorted."""
    grids: dict[LutKey, KeyGrid] = {}
    points = parsed.points
    value_columns = [parsed.columns[c].tolist() for c in VALUE_COLUMNS]
    for key_values, rows in sorted(parsed.groups.items(), key=lambda item: item[0]):
        key = _key_of(key_values)
        ordered = sorted(rows, key=points.__getitem__)
        axes = [sorted({points[row][axis] for row in rows}) for axis in range(3)]
        values: list[Values] = [
            (
                float(value_columns[0][row]),
                float(value_columns[1][row]),
                float(value_columns[2][row]),
                float(value_columns[3][row]),
            )
            for row in ordered
        ]
        grids[key] = KeyGrid(file, key.describe(), axes[0], axes[1], axes[2], values)
    return grids


def table_from_raw(raw: RawLut, path: Path) -> LutTable:
    """Check text cells and build a table from them.

    Raises:
        InputError: With every problem found (up to the listing limit).
    """
    issues, parsed = check_lut(raw)
    if issues:
        raise InputError(issues)
    return LutTable(path, build_grids(parsed, raw.file), raw.digest, len(parsed))


def table_from_frame(frame: pd.DataFrame, name: str = "<table>") -> LutTable:
    """Check and load a LUT held in memory (e.g. before writing it to a file).

    Args:
        frame: One row per grid point, columns as in a LUT file.
        name: What to call the table in messages; rows are numbered from 2
            as in the CSV file the frame would be saved as.

    Raises:
        InputError: With every problem found.
    """
    return table_from_raw(frame_to_raw(frame, name), Path(name))


def load_lut(path: str | Path, use_cache: bool = True) -> LutTable:
    """Load and check one LUT file.

    Args:
        path: A ``.csv`` file, or a ``.parquet`` file when pyarrow is installed.
        use_cache: Return the already loaded table when the file's content is
            unchanged since it was last loaded.

    Raises:
        InputError: The file is missing, empty or unreadable, or has bad
            columns, cells or grids; every problem found is listed.
    """
    file = Path(path)
    data = read_lut_bytes(file)

    def build() -> LutTable:
        return table_from_raw(parse_lut_bytes(file, data), file)

    return _loaded.load(str(file.resolve()), data, build) if use_cache else build()


def clear_load_cache() -> None:
    """Forget every table :func:`load_lut` has kept."""
    _loaded.clear()
