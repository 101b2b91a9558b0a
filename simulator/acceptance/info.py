"""Descriptive fields shared by every acceptance curve file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CurveInfo:
    """What a curve is and where its numbers come from.

    Attributes:
        name: Curve name (the file name without extension when not given).
        method: Speculation method, e.g. ``eagle3``.
        kind: Model kind, e.g. ``iid``.
        target_model: Target model the curve was measured with (may be empty).
        draft_model: Draft model or mechanism (may be empty).
        interpolation: How values between bins are obtained (``linear``).
        source: Where the numbers come from.
        derivation: Rows, columns and formula used to obtain the numbers.
        notes: Caveats.
    """

    name: str
    method: str
    kind: str
    target_model: str = ""
    draft_model: str = ""
    interpolation: str = "linear"
    source: str = ""
    derivation: str = ""
    notes: str = ""


def curve_info(document: Mapping[str, Any], file: Path) -> CurveInfo:
    """Build :class:`CurveInfo` from a schema-valid document with defaults filled in.

    Args:
        document: The validated curve document.
        file: The file it was read from; its stem is the default name.
    """
    return CurveInfo(
        name=str(document.get("name") or file.stem),
        method=str(document["method"]),
        kind=str(document["kind"]),
        target_model=str(document.get("target_model", "")),
        draft_model=str(document.get("draft_model", "")),
        interpolation=str(document.get("interpolation", "linear")),
        source=str(document["source"]),
        derivation=str(document.get("derivation", "")),
        notes=str(document.get("notes", "")),
    )
