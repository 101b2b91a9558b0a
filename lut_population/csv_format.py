"""How LUT CSV files are written: column order, number format, quoting.

Shared by the generator (:mod:`lut_population.build`) and the GPU profiler
(:mod:`lut_population.profile.writer`), so both write byte-identical styles.
"""

from __future__ import annotations

import numpy as np

from simulator.lut import column_names

COLUMNS: tuple[str, ...] = column_names()
"""LUT columns, in the order of the shared naming contract."""

SIGNIFICANT_DIGITS = 6


def format_number(value: float) -> str:
    """Six significant digits, positional notation, no trailing zeros."""
    text = np.format_float_positional(
        float(value), precision=SIGNIFICANT_DIGITS, unique=False, fractional=False, trim="-"
    )
    return "0" if text in ("-0", "0.") else text


def quote_cell(cell: str) -> str:
    """Quote a CSV cell holding a comma, a quote or a newline."""
    if any(ch in cell for ch in ',"\n'):
        return '"' + cell.replace('"', '""') + '"'
    return cell
