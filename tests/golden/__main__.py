"""Rewrite ``tests/golden/examples.json`` from fresh runs of the examples."""

from __future__ import annotations

import json

from tests.golden.runs import GOLDEN_FILE, TEST_SIZE, key_figures, run_example


def main() -> None:
    """Run every example and store its key figures."""
    golden = {name: key_figures(run_example(name)) for name in sorted(TEST_SIZE)}
    GOLDEN_FILE.write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN_FILE.name} for {len(golden)} examples")


if __name__ == "__main__":
    main()
