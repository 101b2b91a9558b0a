"""What the acceptance-data tests share: the derivation script as a module and the shipped curves."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent
ACCEPTANCE = ROOT / "acceptance"


def load_derive() -> ModuleType:
    """``acceptance/derive.py`` imported as a module."""
    return load_script(ACCEPTANCE / "derive.py", "acceptance_derive")


def shipped() -> list[Path]:
    """The shipped curve files (``acceptance/*.yaml``), sorted."""
    return sorted(ACCEPTANCE.glob("*.yaml"))
