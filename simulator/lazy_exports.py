"""Package attributes imported on first use (PEP 562), so importing a package stays light."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that imports each name of ``exports`` from its module.

    Args:
        package: The package's name (for the error of an unknown attribute).
        exports: Public name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return __getattr__
