"""Importing this module registers every built-in policy."""

from __future__ import annotations

from policies import (
    admission,
    arbitration,
    batching,
    draft_selection,
    hybrid,
    k_control,
    routing,
)

__all__ = [
    "admission",
    "arbitration",
    "batching",
    "draft_selection",
    "hybrid",
    "k_control",
    "routing",
]
