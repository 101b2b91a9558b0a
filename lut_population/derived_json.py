"""The command line of a script that derives one JSON file of constants from copied data.

``render`` writes the content stably (sorted keys, two-space indent), so a
rerun on the same data gives the same bytes; ``derive_main`` prints it and
writes it, or with ``--check`` writes nothing and exits 1 when the shipped
file differs from what the data give.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def render(content: dict[str, object]) -> str:
    """The derived file's text (stable: sorted keys, two-space indent)."""
    return json.dumps(content, indent=2, sort_keys=True) + "\n"


def derive_main(
    argv: Sequence[str] | None,
    description: str,
    data: Path,
    output: Path,
    derive: Callable[[Path], dict[str, object]],
) -> int:
    """Derive from ``--data``; write ``--out`` (or ``--check`` it); return the exit status."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--data", type=Path, default=data, help="the copied data")
    parser.add_argument("--out", type=Path, default=output, help="derived file to write")
    args = parser.parse_args(argv)
    text = render(derive(args.data))
    print(text, end="")
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out.name}: {'up to date' if same else 'differs'}", file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    return 0
