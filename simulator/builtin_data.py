"""Shipped data files named by ``builtin:`` references.

A scenario may name a shipped file instead of a path: ``builtin:`` followed by
the file's path below the data folders, as it is laid out in the repository::

    lut: builtin:lut/llama-2-70b__a100-sxm4-80gb.csv
    profile: builtin:device_profiles/a100-tp4.yaml
    file: builtin:acceptance/sps_vicuna-7b.yaml
    source: trace://builtin:scenarios/traces/azure_conv_10k.csv

The same works for a scenario on the command line
(``simulate run builtin:scenarios/examples/none_baseline.yaml``). The files are
those of the installed package (see :mod:`simulator.data`) or, in a checkout,
the repository's top-level folders.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path, PurePosixPath

from simulator.errors import InputError, make_issue
from simulator.suggest import close_matches

BUILTIN_PREFIX = "builtin:"
DATA_DIRS = ("lut", "device_profiles", "acceptance", "scenarios")
"""The folders whose files are shipped and named by ``builtin:`` references."""
ALLOWED = "builtin:<folder>/<file> naming a shipped file (folders: " + ", ".join(DATA_DIRS) + ")"


@cache
def data_root() -> Path:
    """Return the folder holding the shipped data folders.

    The installed package's copy when it has one, else the checkout's
    top-level folders.
    """
    installed = Path(str(files("simulator.data")))
    if (installed / DATA_DIRS[0]).is_dir():
        return installed
    return Path(__file__).resolve().parent.parent


def is_builtin(value: str) -> bool:
    """Whether a path value names a shipped file (``builtin:...``)."""
    return value.startswith(BUILTIN_PREFIX)


def _name(value: str) -> str:
    return value[len(BUILTIN_PREFIX) :]


def builtin_path(value: str) -> Path:
    """Return the file a ``builtin:`` reference names (which may not exist)."""
    return data_root().joinpath(*PurePosixPath(_name(value)).parts)


@cache
def builtin_names() -> tuple[str, ...]:
    """Return every shipped file's name (``lut/...``, ``scenarios/...``), sorted."""
    root = data_root()
    names = []
    for folder in DATA_DIRS:
        for path in (root / folder).rglob("*"):
            relative = path.relative_to(root)
            if path.is_file() and not any(part.startswith((".", "__")) for part in relative.parts):
                names.append(relative.as_posix())
    return tuple(sorted(names))


@cache
def builtin_folders() -> tuple[str, ...]:
    """Return every shipped folder's name (``scenarios``, ``scenarios/examples``), sorted."""
    folders = {
        parent.as_posix()
        for name in builtin_names()
        for parent in PurePosixPath(name).parents
        if parent != PurePosixPath(".")
    }
    return tuple(sorted(folders))


def unknown_builtin(value: str, folders: bool = False) -> str | None:
    """Return why a ``builtin:`` reference names no shipped file, or None.

    With ``folders``, a shipped folder (``builtin:scenarios/examples``) is
    accepted too. The reason lists the closest shipped names. Values that
    are not ``builtin:`` references get None.
    """
    if not is_builtin(value):
        return None
    name = _name(value)
    parts = PurePosixPath(name).parts
    known = builtin_names() + (builtin_folders() if folders else ())
    if ".." not in parts and (name in known or (folders and name.rstrip("/") in known)):
        return None
    names = known
    close = close_matches(name, names, most=3)
    base = PurePosixPath(name).name
    close += [n for n in names if PurePosixPath(n).name == base and n not in close]
    hint = (
        "; close matches: " + ", ".join(BUILTIN_PREFIX + n for n in close[:5])
        if close
        else f"; shipped folders: {', '.join(DATA_DIRS)}"
    )
    what = "file or folder" if folders else "file"
    return f"no shipped {what} {name!r}{hint}"


def scenario_path(value: str) -> Path:
    """Return the scenario file a command-line argument names (a path or ``builtin:``).

    Raises:
        InputError: A ``builtin:`` name that no shipped file has.
    """
    problem = unknown_builtin(value)
    if problem is not None:
        raise InputError([make_issue("command line", "SCENARIO", value, ALLOWED, problem)])
    return builtin_path(value) if is_builtin(value) else Path(value)
