"""Run labels: the ``--label`` override and legend names that never repeat.

A run's label is ``metadata.label`` (default: its ``scenario_id``);
``simulate --label`` replaces it for one run and ``scripts/plot_metrics.py
--label`` for a report. Figures and tables name runs by
:func:`distinct_labels`, so two runs never share a legend entry.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

LABEL_KEY = "metadata.label"
"""The scenario key ``--label`` overrides."""


def label_override(label: str) -> str:
    """The ``--set`` override that makes ``label`` the run's ``metadata.label`` (always a string)."""
    return f"{LABEL_KEY}={json.dumps(label)}"


def _repeated(names: Sequence[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


def distinct_labels(
    labels: Sequence[str], scenario_ids: Sequence[str], seeds: Sequence[int]
) -> list[str]:
    """Legend names for runs, in order, none repeated.

    A label shared by several runs gains the run's scenario id, then its seed;
    names still repeated (the same scenario and seed twice) gain their
    position among the runs (``#1``, ``#2``...). Unique labels are kept as
    they are, so the result depends only on the inputs and their order.

    Args:
        labels: Each run's label.
        scenario_ids: Each run's ``scenario_id``.
        seeds: Each run's seed.
    """
    widened: list[list[str]] = [
        [f"{label} ({sid})", f"{label} ({sid}, seed {seed})", f"{label} ({sid}, seed {seed}) #{i}"]
        for i, (label, sid, seed) in enumerate(zip(labels, scenario_ids, seeds, strict=True), 1)
    ]
    names = list(labels)
    for step in range(3):
        repeated = _repeated(names)
        if not repeated:
            break
        names = [widened[i][step] if name in repeated else name for i, name in enumerate(names)]
    return names
