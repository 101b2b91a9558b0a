"""Writing a run's results to a directory.

:func:`check_output_dir` refuses a results directory that cannot be written
before a run starts; :func:`write_results` writes the files.

The files of a run are written into a new directory beside the results
directory and swapped in whole, so a reader (or a run killed while writing)
sees the earlier set or the new one, never a mix; two runs writing the same
directory at once take turns at the swap, and the last one's set wins whole.
The results directory therefore holds results only: one that holds other
entries is refused. A run killed during the swap itself may leave a hidden
``.NAME.new-*`` or ``.NAME.old-*`` directory beside it, safe to delete.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd
import yaml

import simulator.written_results as written_results
from simulator._version import __version__
from simulator.content_hash import code_sha256, input_sha256, scenario_sha256
from simulator.csv_table import FLOAT_FORMAT as FLOAT_FORMAT
from simulator.csv_table import write_csv
from simulator.errors import InputError, NonFiniteResult, make_issue
from simulator.runner import Result

logger = logging.getLogger(__name__)

OUTPUT_FILES = (
    "summary.json",
    "requests.csv",
    "timeseries.csv",
    "scenario.resolved.yaml",
    "run.json",
)
PLANNER_LOG = "planner_log.csv"
"""The planner's decisions (runs with ``planner.enabled: true`` only)."""
RESULT_ENTRIES = frozenset(OUTPUT_FILES) | {"report", PLANNER_LOG}
"""What a results directory may hold: the files of a run and its report."""

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


OUTPUT_DIR_ALLOWED = (
    "a directory that exists or can be created, that this user can write, "
    "that is not a symbolic link, and that holds nothing but earlier results"
)


def check_output_dir(
    out_dir: Path, file: str, key: str, entries: frozenset[str] = RESULT_ENTRIES
) -> None:
    """Refuse ``out_dir`` unless results can be written there.

    Called before a run so that a bad results directory costs seconds, not a
    whole run. The directory must be a directory (or not exist yet, under
    directories only), not a symbolic link (the swap would replace the link,
    not the directory it names), and the directory that would hold it must
    accept a new entry (checked by creating and removing an empty directory
    there).

    Args:
        out_dir: The results directory.
        file: Where the directory was named (a scenario file or the command line).
        key: The key or option that named it.
        entries: The names it may already hold (default: those of a run's results).

    Raises:
        InputError: Naming the directory and what is wrong with it.
    """

    def refuse(problem: str) -> InputError:
        return InputError([make_issue(file, key, str(out_dir), OUTPUT_DIR_ALLOWED, problem)])

    target = out_dir.absolute()
    if target.is_symlink():
        try:
            pointed = f" to {target.readlink()}"
        except OSError:
            pointed = ""
        raise refuse(
            f"is a symbolic link{pointed}: the results directory is replaced whole, "
            "so name the directory itself"
        )
    if target.exists() and not target.is_dir():
        raise refuse("not a directory")
    if target.is_dir():
        foreign = sorted(p.name for p in target.iterdir() if p.name not in entries)
        if foreign:
            raise refuse(
                f"holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}, "
                "which are not results: the directory is replaced whole by the new results"
            )
    holder = target.parent
    while not holder.exists():
        holder = holder.parent
    if not holder.is_dir():
        raise refuse(f"lies under {holder}, which is not a directory")
    try:
        Path(tempfile.mkdtemp(prefix=f".{target.name}.probe-", dir=holder)).rmdir()
    except OSError as exc:
        raise refuse(f"cannot create entries in {holder}: {exc.strerror}") from None


def _umask() -> int:
    """The process's file-creation mask.

    Read from ``/proc/self/status`` where the system has it (Linux 4.7+), which
    leaves the mask alone; elsewhere by setting it and restoring it at once.
    """
    try:
        with Path("/proc/self/status").open(encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _exchange(staging: Path, target: Path) -> bool:
    """Swap two directories in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    Returns ``False`` where the system cannot, leaving both as they were.
    """
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(
        _AT_FDCWD, os.fsencode(staging), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE
    )
    return bool(done == 0)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (waiting for other runs that hold it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) for the block; one that came meanwhile is raised after it.

    The swap and the note that it happened are one step: an interrupt
    between them would report the new set as not written.
    """
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    previous = mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, previous)


def _swap_in(staging: Path, target: Path) -> None:
    """Make ``staging`` the directory ``target``, replacing the old one whole.

    The moment it is in place it is noted (:mod:`simulator.written_results`).
    """
    with _locked(target.parent):
        with _sigint_held():
            if not target.exists():
                staging.rename(target)
                written_results.note(target)
                return
            exchanged = _exchange(staging, target)
            if exchanged:
                written_results.note(target)
        if exchanged:
            shutil.rmtree(staging)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        target.rename(old / target.name)
        with _sigint_held():
            staging.rename(target)
            written_results.note(target)
        shutil.rmtree(old)


Content = str | Callable[[TextIO], None]
"""A file of a result set: its text, or what writes it to an open text file."""


def _write_text(path: Path, content: Content) -> None:
    """Write one file of a result set."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        if isinstance(content, str):
            handle.write(content)
        else:
            content(handle)


def csv_writer(frame: pd.DataFrame) -> Callable[[TextIO], None]:
    """What writes ``frame`` as a results CSV, in chunks of rows (:mod:`simulator.csv_table`).

    The bytes are those of ``frame.to_csv(index=False, ...)`` as one string;
    written to the file as they are made, a table of a million rows is never
    held as text whole.
    """

    def write(handle: TextIO) -> None:
        write_csv(frame, handle)

    return write


def summary_json(summary: dict[str, Any]) -> str:
    """Serialise a summary deterministically."""
    return json.dumps(summary, indent=2, sort_keys=False, allow_nan=False) + "\n"


def _non_finite_in(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first number of a summary that is not finite: ``(key path, value)``."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(top level)", value
    if isinstance(value, dict):
        items: Iterator[tuple[str, Any]] = (
            (f"{where}.{k}" if where else str(k), v) for k, v in value.items()
        )
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for path, item in items:
        found = _non_finite_in(item, path)
        if found is not None:
            return found
    return None


def check_finite(result: Result) -> None:
    """Refuse results holding ``inf`` (or NaN in ``summary.json``) before any file is written.

    An empty CSV cell (NaN: no value, e.g. the TPOT of a rejected request) is
    allowed; an infinite one, or any non-finite number in the summary, is not.

    Raises:
        NonFiniteResult: Naming the file, the place in it and the value.
    """
    found = _non_finite_in(result.summary)
    if found is not None:
        raise NonFiniteResult("summary.json", found[0], found[1])
    frames = [("requests.csv", result.requests), ("timeseries.csv", result.timeseries)]
    frames.append((PLANNER_LOG, result.planner_log))
    for name, frame in frames:
        numbers = frame.select_dtypes(include="number")
        # Column by column (no copy of the whole table); the first infinite cell
        # in row order, the leftmost of its row.
        first: tuple[int, int] | None = None
        for column, (_label, series) in enumerate(numbers.items()):
            rows = np.flatnonzero(np.isinf(series.to_numpy(dtype=np.float64)))
            if rows.size and (first is None or int(rows[0]) < first[0]):
                first = (int(rows[0]), column)
        if first is not None:
            row, column = first
            where = f"column {numbers.columns[column]}, row {row + 1}"
            raise NonFiniteResult(name, where, float(numbers.iat[row, column]))


_YAML_DUMPER: Any = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper
"""libyaml's safe dumper where PyYAML has it (as the loader reads with libyaml): about a fifth
of the dumper's time. Shipped scenarios come out byte for byte as the pure-Python dumper writes
them; the two quote some rare characters (control and private-use code points) differently,
and both read back as the same document."""


def write_results(result: Result, out_dir: Path, argv: list[str] | None = None) -> list[Path]:
    """Write every output file of ``result`` as the directory ``out_dir``, whole.

    The files go into a new directory beside ``out_dir`` (readable as the
    umask says), which then replaces ``out_dir`` in one step; a failure
    before that leaves ``out_dir`` as it was.

    ``summary.json``, ``requests.csv`` and ``timeseries.csv`` depend only on
    the scenario and seed (byte-identical across runs); wall-clock time and
    versions go to ``run.json``, with what the results were computed from:
    the content hashes of the resolved scenario, of every file it names and
    of the code (see :mod:`simulator.content_hash`). No file is written when
    a result is not finite (:func:`check_finite`).

    Raises:
        NonFiniteResult: A number in the results is not finite.
    """
    check_finite(result)
    resolved = result.scenario.resolved()
    texts: dict[str, Content] = {
        "summary.json": summary_json(result.summary),
        "requests.csv": csv_writer(result.requests),
        "timeseries.csv": csv_writer(result.timeseries),
        "scenario.resolved.yaml": yaml.dump(
            resolved, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True
        ),
        "run.json": json.dumps(
            {
                "wall_s": round(result.wall_s, 6),
                "specdec_sim_version": __version__,
                "python": sys.version.split()[0],
                "scenario_file": str(result.scenario.source_file),
                "scenario_sha256": scenario_sha256(result.scenario),
                "code_sha256": code_sha256(),
                "input_sha256": input_sha256(result.scenario),
                "argv": argv or [],
            },
            indent=2,
        )
        + "\n",
    }
    names = list(OUTPUT_FILES)
    if not result.planner_log.empty:
        texts[PLANNER_LOG] = csv_writer(result.planner_log)
        names.append(PLANNER_LOG)
    return write_files(out_dir, {name: texts[name] for name in names})


def write_files(
    out_dir: Path, texts: Mapping[str, Content], entries: frozenset[str] = RESULT_ENTRIES
) -> list[Path]:
    """Write ``texts`` (file name -> content: text, or a writer of it) as the directory ``out_dir``.

    The results-directory rules of :func:`check_output_dir` (``entries``: the
    names ``out_dir`` may already hold) and the swap of the module docstring:
    the files go into a new directory beside ``out_dir`` (readable as the
    umask says), which then replaces ``out_dir`` in one step; a failure before
    that leaves ``out_dir`` as it was.
    """
    check_output_dir(out_dir, str(out_dir), "results directory", entries)
    target = out_dir.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        staging.chmod(0o777 & ~_umask())
        for name, text in texts.items():
            _write_text(staging / name, text)
        _swap_in(staging, target)
        logger.info("wrote %d result files to %s", len(texts), out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out_dir / name for name in texts]
