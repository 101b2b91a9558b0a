"""What the acceptance-data tests share: the derivation script as a module and the shipped curves."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
ACCEPTANCE = ROOT / "acceptance"


def load_derive() -> ModuleType:
    """``acceptance/derive.py`` imported as a module."""
    spec = importlib.util.spec_from_file_location("acceptance_derive", ACCEPTANCE / "derive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def shipped() -> list[Path]:
    """The shipped curve files (``acceptance/*.yaml``), sorted."""
    return sorted(ACCEPTANCE.glob("*.yaml"))
