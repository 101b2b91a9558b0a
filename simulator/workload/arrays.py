"""Array type aliases and the read-only copies the frozen tables hold."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
"""One-dimensional int64 array (token counts, ids, row numbers)."""

FloatArray = npt.NDArray[np.float64]
"""One-dimensional float64 array (times in seconds)."""

StrArray = npt.NDArray[np.str_]
"""One-dimensional array of text (class names, device class ids)."""

_Array = TypeVar("_Array", bound=npt.NDArray[Any])


def frozen(array: _Array) -> _Array:
    """Return a read-only copy of ``array`` (so frozen tables really are immutable)."""
    out: _Array = array.copy()
    out.flags.writeable = False
    return out


def text_array(values: Any, size: int | None = None) -> StrArray:
    """Return ``values`` as a one-dimensional array of text.

    Args:
        values: A sequence of strings, or one string to repeat ``size`` times.
        size: Length of the result when ``values`` is a single string.
    """
    if isinstance(values, str):
        if size is None:
            raise ValueError("size is needed to repeat a single string")
        return np.full(size, values, dtype=f"<U{max(len(values), 1)}")
    array = np.asarray(values, dtype=np.str_)
    if array.size == 0:
        return np.zeros(0, dtype="<U1")
    return array


def rebuild(cls: type[Any], arguments: dict[str, Any]) -> Any:
    """Construct ``cls(**arguments)``: how the frozen tables are unpickled.

    A table whose ``__post_init__`` wraps a mapping in a read-only
    :class:`types.MappingProxyType` (which cannot be pickled) pickles as its
    constructor arguments instead, and is rebuilt (and re-checked) from them.
    """
    return cls(**arguments)


def constructor_arguments(table: Any) -> dict[str, Any]:
    """The constructor arguments of a frozen dataclass, read-only mappings as plain dicts."""
    arguments: dict[str, Any] = {}
    for item in dataclasses.fields(table):
        if not item.init:
            continue
        value = getattr(table, item.name)
        arguments[item.name] = dict(value) if isinstance(value, MappingProxyType) else value
    return arguments
