"""Performance lookup tables (LUTs): loading, checking and interpolating.

A LUT file holds the cost of one iteration (latency, energy, peak memory, KV
growth) of a phase of a model on a hardware, on a grid of context length x
microbatch x draft length. Typical use::

    from simulator.lut import LutKey, LutManager, load_lut

    manager = LutManager([load_lut("lut/llama-2-7b__a100-sxm4-80gb.csv")])
    key = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
    manager.lookup(key, context_len=700, microbatch=3, fanout_k=4).latency_ms

See ``lut/README.md`` for the file format and the interpolation contract.
"""

from __future__ import annotations

from simulator.lut.interpolate import OUT_OF_RANGE_MODES, KeyGrid, OutOfRange
from simulator.lut.load import clear_load_cache, load_lut, table_from_frame
from simulator.lut.manager import LutManager
from simulator.lut.schema import (
    AXIS_COLUMNS,
    KEY_COLUMNS,
    SCHEMA_NAME,
    VALUE_COLUMNS,
    choices_of,
    column_names,
)
from simulator.lut.table import LutGrid, LutKey, LutPoint, LutResult, LutTable

__all__ = [
    "AXIS_COLUMNS",
    "KEY_COLUMNS",
    "OUT_OF_RANGE_MODES",
    "SCHEMA_NAME",
    "VALUE_COLUMNS",
    "KeyGrid",
    "LutGrid",
    "LutKey",
    "LutManager",
    "LutPoint",
    "LutResult",
    "LutTable",
    "OutOfRange",
    "choices_of",
    "clear_load_cache",
    "column_names",
    "load_lut",
    "table_from_frame",
]
