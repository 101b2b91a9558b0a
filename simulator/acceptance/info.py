"""Descriptive fields shared by every acceptance curve file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHAIN = "chain"
TREE = "tree"


@dataclass(frozen=True)
class Topology:
    """The draft shape a curve was measured on.

    Attributes:
        kind: ``chain`` (k drafted tokens in a row) or ``tree``.
        width: Tree candidates per level, when the source states it (else None).
        nodes: Tree tokens verified per round, root included, when stated (else None).
    """

    kind: str = CHAIN
    width: int | None = None
    nodes: int | None = None

    def describe(self) -> str:
        """Return the shape in words, e.g. ``tree (width 8, 64 nodes)``."""
        parts = []
        if self.width is not None:
            parts.append(f"width {self.width}")
        if self.nodes is not None:
            parts.append(f"{self.nodes} nodes")
        return self.kind + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class RequestSpread:
    """A source's spread of acceptance between requests (see ``acceptance/README.md``).

    Attributes:
        distribution: ``beta``.
        concentration: The Beta concentration ``c``.
        fitted_to: What ``c`` was fitted to.
    """

    distribution: str
    concentration: float
    fitted_to: str


@dataclass(frozen=True)
class CurveInfo:
    """What a curve is and where its numbers come from.

    Attributes:
        name: Curve name (the file name without extension when not given).
        method: Speculation method, e.g. ``eagle3``.
        kind: Model kind, e.g. ``iid``.
        target_model: Target model the curve was measured with (may be empty).
        draft_model: Draft model or mechanism (may be empty).
        topology: The draft shape the numbers were measured on.
        dataset: Dataset or task it was measured on (may be empty).
        engine: Engine or implementation that measured it (may be empty).
        request_spread: The source's spread between requests (None: not shown).
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
    topology: Topology = Topology()
    dataset: str = ""
    engine: str = ""
    request_spread: RequestSpread | None = None
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
    raw_topology = document.get("topology") or {}
    topology = Topology(
        str(raw_topology.get("kind", CHAIN)),
        None if raw_topology.get("width") is None else int(raw_topology["width"]),
        None if raw_topology.get("nodes") is None else int(raw_topology["nodes"]),
    )
    raw_spread = document.get("request_spread")
    spread = (
        None
        if raw_spread is None
        else RequestSpread(
            str(raw_spread["distribution"]),
            float(raw_spread["concentration"]),
            str(raw_spread["fitted_to"]),
        )
    )
    return CurveInfo(
        name=str(document.get("name") or file.stem),
        method=str(document["method"]),
        kind=str(document["kind"]),
        target_model=str(document.get("target_model", "")),
        draft_model=str(document.get("draft_model", "")),
        topology=topology,
        dataset=str(document.get("dataset", "")),
        engine=str(document.get("engine", "")),
        request_spread=spread,
        interpolation=str(document.get("interpolation", "linear")),
        source=str(document["source"]),
        derivation=str(document.get("derivation", "")),
        notes=str(document.get("notes", "")),
    )


class DescribedCurve:
    """What every acceptance model says of itself: its :class:`CurveInfo`, name and method.

    Attributes:
        info: The curve's descriptive fields (set by the subclass's constructor).
    """

    info: CurveInfo

    @property
    def name(self) -> str:
        """The curve's name."""
        return self.info.name

    @property
    def method(self) -> str:
        """The speculation method the curve describes."""
        return self.info.method
