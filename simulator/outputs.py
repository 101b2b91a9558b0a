"""Writing a run's results to a directory.

:func:`check_output_dir` refuses a results directory that cannot be written
before a run starts; :func:`write_results` writes the files.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from simulator import __version__
from simulator.errors import InputError, make_issue
from simulator.runner import Result

FLOAT_FORMAT = "%.9g"
OUTPUT_FILES = (
    "summary.json",
    "requests.csv",
    "timeseries.csv",
    "scenario.resolved.yaml",
    "run.json",
)


OUTPUT_DIR_ALLOWED = "a directory that exists or can be created, and that this user can write"


def check_output_dir(out_dir: Path, file: str, key: str) -> None:
    """Refuse ``out_dir`` unless results can be written there.

    Called before a run so that a bad results directory costs seconds, not a
    whole run. The directory must be a directory (or not exist yet, under
    directories only), and the directory that would hold it must accept a new
    entry (checked by creating and removing an empty directory there).

    Args:
        out_dir: The results directory.
        file: Where the directory was named (a scenario file or the command line).
        key: The key or option that named it.

    Raises:
        InputError: Naming the directory and what is wrong with it.
    """

    def refuse(problem: str) -> InputError:
        return InputError([make_issue(file, key, str(out_dir), OUTPUT_DIR_ALLOWED, problem)])

    target = out_dir.absolute()
    if target.exists() and not target.is_dir():
        raise refuse("not a directory")
    holder = target.parent
    while not holder.exists():
        holder = holder.parent
    if not holder.is_dir():
        raise refuse(f"lies under {holder}, which is not a directory")
    try:
        Path(tempfile.mkdtemp(prefix=f".{target.name}.probe-", dir=holder)).rmdir()
    except OSError as exc:
        raise refuse(f"cannot create entries in {holder}: {exc.strerror}") from None


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def summary_json(summary: dict[str, Any]) -> str:
    """Serialise a summary deterministically."""
    return json.dumps(summary, indent=2, sort_keys=False, allow_nan=False) + "\n"


def write_results(result: Result, out_dir: Path, argv: list[str] | None = None) -> list[Path]:
    """Write every output file of ``result`` into ``out_dir`` (created if needed).

    ``summary.json``, ``requests.csv`` and ``timeseries.csv`` depend only on
    the scenario and seed (byte-identical across runs); wall-clock time and
    versions go to ``run.json``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = result.scenario.resolved()
    texts = {
        "summary.json": summary_json(result.summary),
        "requests.csv": result.requests.to_csv(
            index=False, float_format=FLOAT_FORMAT, lineterminator="\n"
        ),
        "timeseries.csv": result.timeseries.to_csv(
            index=False, float_format=FLOAT_FORMAT, lineterminator="\n"
        ),
        "scenario.resolved.yaml": yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True),
        "run.json": json.dumps(
            {
                "wall_s": round(result.wall_s, 6),
                "specdec_sim_version": __version__,
                "python": sys.version.split()[0],
                "scenario_file": str(result.scenario.source_file),
                "argv": argv or [],
            },
            indent=2,
        )
        + "\n",
    }
    written = []
    for name in OUTPUT_FILES:
        path = out_dir / name
        _write_atomic(path, texts[name])
        written.append(path)
    return written
