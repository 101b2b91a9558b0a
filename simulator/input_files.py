"""Opening input files: regular files only, read with a size bound.

Every loader asks :func:`file_problem` before it opens a file it was given,
so that a missing file, a directory, a FIFO, a device such as ``/dev/zero``
or a symlink loop is reported for what it is (and never blocks or reads
forever), and reads documents with :func:`read_bounded`, which refuses files
larger than the bound it is given.
"""

from __future__ import annotations

import errno
import stat
from pathlib import Path

from simulator.errors import InputError, make_issue

MAX_DOCUMENT_BYTES = 16 * 2**20
"""Largest scenario, device profile or acceptance file read (16 MiB)."""

_KINDS = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def file_problem(path: Path) -> str | None:
    """Return why ``path`` cannot be read as an input file, or None when it can.

    Symlinks are followed; the answer is ``"not found"``, ``"is a symlink loop"``,
    ``"is a directory"``, ``"is not a regular file (FIFO)"`` (or another
    kind) or the operating system's reason.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        return exc.strerror or str(exc)
    except ValueError as exc:  # e.g. a NUL character in the name
        return str(exc)
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "special file")
        return f"is not a regular file ({kind})"
    return None


def read_bounded(path: Path, what: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Return the bytes of a regular file of at most ``max_bytes``.

    Args:
        path: The file.
        what: What the file is, for messages (e.g. ``"scenario"``).
        max_bytes: The size bound, stated in the message when exceeded.

    Raises:
        InputError: The file is not a readable regular file, or is larger.
    """
    problem = file_problem(path)
    if problem is not None:
        raise InputError([make_issue(path, "", str(path), f"an existing {what} file", problem)])
    try:
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(
            [make_issue(path, "", str(path), f"a readable {what} file", str(exc))]
        ) from None
    if len(data) > max_bytes:
        raise InputError(
            [
                make_issue(
                    path,
                    "",
                    f"more than {max_bytes} bytes",
                    f"a {what} file of at most {max_bytes} bytes ({max_bytes // 2**20} MiB)",
                    "file too large",
                )
            ]
        )
    return data
