"""What a results directory was computed from: the scenario, its input files and the code.

Three hashes, all written to ``run.json``, which a sweep compares before it
keeps (resumes) a point's earlier results:

- :func:`scenario_sha256`: the resolved scenario and the package version;
- :func:`input_sha256`: the content of every file the scenario names
  (device profiles, LUTs, acceptance curves, traces, ``builtin:`` data);
- :func:`code_sha256`: the source of the installed ``simulator`` and
  ``policies`` packages, so that any change to the code (released or not,
  committed or not) makes earlier results stale.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from simulator._version import __version__
from simulator.builtin_data import builtin_path, is_builtin
from simulator.scenario.load import TRACE_PREFIX, file_references
from simulator.scenario.model import Scenario

CODE_PACKAGES = ("simulator", "policies")
"""The packages whose sources make up the code identity."""
CODE_SUFFIXES = (".py", ".json")
"""The files of those packages that are code (modules, JSON schemas)."""
_DATA_PACKAGE = "simulator/data/"
"""Shipped data files (LUTs, profiles, traces) count as inputs where a scenario names them."""
_CHUNK_BYTES = 2**20

_FILE_HASHES: dict[tuple[str, int, int], str] = {}
"""File hashes by (path, size, modification time in ns): a file is read once per process."""


def scenario_sha256(scenario: Scenario) -> str:
    """Return the SHA-256 of the resolved scenario and the package version.

    The hash covers the canonical JSON (sorted keys, no spaces) of the
    document ``scenario.resolved.yaml`` holds and the ``specdec-sim`` version
    that ran it. The content of the files the scenario names is covered by
    :func:`input_sha256`, the code by :func:`code_sha256`.
    """
    canonical = json.dumps(
        {"scenario": scenario.resolved(), "specdec_sim_version": __version__},
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@cache
def code_sha256() -> str:
    """Return the SHA-256 of the code that runs: the installed ``simulator`` and ``policies``.

    Computed once per process over every ``.py`` and ``.json`` file of the
    two packages as installed (editable or not; caches such as
    ``__pycache__`` and the shipped data files left out), in sorted order of
    their paths relative to the package's parent, each path and content
    length-prefixed.
    """
    digest = hashlib.sha256()
    for name, path in sorted(_code_files()):
        data = path.read_bytes()
        for part in (name.encode("utf-8"), data):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()


def _code_files() -> list[tuple[str, Path]]:
    """Every code file of :data:`CODE_PACKAGES`, with its path relative to the package's parent."""
    files = []
    for package in CODE_PACKAGES:
        spec = find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = Path(location)
            for path in root.rglob("*"):
                name = f"{package}/{path.relative_to(root).as_posix()}"
                if (
                    path.suffix in CODE_SUFFIXES
                    and "__pycache__" not in path.parts
                    and not (name.startswith(_DATA_PACKAGE) and path.suffix != ".py")
                    and path.is_file()
                ):
                    files.append((name, path))
    return files


def file_sha256(path: Path) -> str:
    """Return the SHA-256 of a file's content, read in chunks (traces can be large).

    Remembered per (path, size, modification time) for the life of the
    process. A file that cannot be read gets ``unreadable: REASON`` instead,
    which matches no hash.
    """
    try:
        status = path.stat()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    key = (str(path), status.st_size, status.st_mtime_ns)
    known = _FILE_HASHES.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK_BYTES):
                digest.update(chunk)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    _FILE_HASHES[key] = digest.hexdigest()
    return _FILE_HASHES[key]


def input_files(scenario: Scenario) -> dict[str, Path]:
    """Every file the resolved scenario names, by its reference (``trace://`` left off)."""
    files = {}
    for reference in file_references(scenario.resolved()):
        value = reference.removeprefix(TRACE_PREFIX)
        files[value] = builtin_path(value) if is_builtin(value) else Path(value)
    return files


def input_sha256(scenario: Scenario) -> dict[str, str]:
    """The SHA-256 of the content of every file the scenario names, by reference, sorted."""
    files = input_files(scenario)
    return {reference: file_sha256(files[reference]) for reference in sorted(files)}
