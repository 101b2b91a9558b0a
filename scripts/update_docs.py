"""Regenerate the key reference in SCENARIO.md from the scenario schema.

Usage::

    python scripts/update_docs.py          # rewrite SCENARIO.md
    python scripts/update_docs.py --check  # exit 1 if SCENARIO.md is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.scenario.reference import render_reference, replace_reference
from simulator.scenario.schema import scenario_schema

SCENARIO_DOC = Path(__file__).resolve().parent.parent / "SCENARIO.md"


def current_text() -> str:
    """Return SCENARIO.md as it should read."""
    return replace_reference(
        SCENARIO_DOC.read_text(encoding="utf-8"), render_reference(scenario_schema())
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, do not write")
    args = parser.parse_args(argv)
    wanted = current_text()
    if args.check:
        if wanted != SCENARIO_DOC.read_text(encoding="utf-8"):
            print("SCENARIO.md is out of date: run python scripts/update_docs.py", file=sys.stderr)
            return 1
        return 0
    SCENARIO_DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
