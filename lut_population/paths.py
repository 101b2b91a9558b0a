"""Locations of the committed inputs and the generated outputs, relative to the repository."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
"""The ``lut_population`` package directory."""

REPO_ROOT = PACKAGE_DIR.parent
"""The repository root."""

INPUTS_DIR = PACKAGE_DIR / "inputs"
"""Committed copies of the measurements the build reads."""

LUT_DIR = REPO_ROOT / "lut"
"""Where the generated LUT files and the catalog go."""

CATALOG_NAME = "CATALOG.md"
"""File name of the generated catalog inside :data:`LUT_DIR`."""


def repo_relative(path: Path) -> str:
    """Return ``path`` relative to the repository root when it is inside it."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()
