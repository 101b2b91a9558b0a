"""Read and check the input files of ``acceptance/derive.py`` (see ``inputs/SOURCES.md``).

Every leaderboard value a curve uses is checked against the markdown page it
was converted from; curated rows are looked up by source URL, method and draft
length.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SPECBENCH_CSV = "specbench_leaderboard.csv"
SPECBENCH_MD = "specbench_Leaderboard.md"
MEDUSA_CSV = "medusa_head_accuracy_wandb.csv"
CURATED_CSV = "acceptance_points_curated.csv"
SPECBENCH_SETTINGS_CSV = "specbench_draft_settings.csv"


# ---------------------------------------------------------------------------
# Reading the inputs
# ---------------------------------------------------------------------------


def read_csv(path: Path) -> list[dict[str, str]]:
    """Return the rows of a CSV file as dictionaries."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


PAGE_COLUMNS: dict[str, str] = {
    "speedup_multiturn": "Multi-turn Conversation",
    "speedup_translation": "Translation",
    "speedup_summarization": "Summa-rization",
    "speedup_qa": "Question Answering",
    "speedup_math": "Mathematical Reasoning",
    "speedup_rag": "Retrieval-aug. Generation",
    "mean_accepted_tokens": "#Mean Accepted Tokens",
    "speedup_overall": "Overall",
}
"""Leaderboard CSV column -> the column header of Leaderboard.md it was converted from."""

CATEGORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("multi_turn", "speedup_multiturn"),
    ("translation", "speedup_translation"),
    ("summarization", "speedup_summarization"),
    ("qa", "speedup_qa"),
    ("math", "speedup_math"),
    ("rag", "speedup_rag"),
)
"""Spec-Bench's six task categories (curve category name, leaderboard CSV column)."""


def leaderboard_page_values(text: str) -> dict[tuple[str, str, str], dict[str, float]]:
    """Return every numeric cell of Leaderboard.md by (device, target model, method).

    Args:
        text: The markdown page.

    Returns:
        ``{(device, target, method): {column header: value}}``; speed-ups are
        read without their ``x`` and bold marks.
    """
    values: dict[tuple[str, str, str], dict[str, float]] = {}
    device = target = ""
    headers: list[str] = []
    for line in text.splitlines():
        if line.startswith("## Leaderboard on "):
            device, target = line.removeprefix("## Leaderboard on ").strip(), ""
        elif line.startswith("### "):
            target = line.removeprefix("### ").strip()
        elif line.startswith("- Experimental Settings:"):
            first = line.split(":", 1)[1].split(",")[0].strip()
            if first.startswith("Vicuna"):
                target = first
        elif line.startswith("| Models"):
            headers = [cell.strip() for cell in line.strip().strip("|").split("|")]
        elif line.startswith("| [") and device and target and headers:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            match = re.match(r"^\[(.+?)\]\(", cells[0])
            if match is None:
                raise ValueError(f"cannot read the method of leaderboard line {line!r}")
            values[(device, target, match.group(1))] = {
                header: float(cell.strip("*").rstrip("x").strip("*"))
                for header, cell in zip(headers[1:], cells[1:], strict=True)
            }
    return values


@dataclass(frozen=True)
class SpecBenchMean:
    """Spec-Bench's mean tokens per step for one (method, target), over devices.

    Attributes:
        method: Method as named on the leaderboard.
        target: Target model.
        rows: Every leaderboard CSV row used (one per device), checked against the page.
    """

    method: str
    target: str
    rows: tuple[dict[str, str], ...]

    @property
    def by_device(self) -> tuple[tuple[str, float], ...]:
        """``(device, mean accepted tokens)`` of every row used."""
        return tuple((row["device"], float(row["mean_accepted_tokens"])) for row in self.rows)

    @property
    def tokens_per_step(self) -> float:
        """The mean over devices (tokens per step including the target's token)."""
        return math.fsum(value for _, value in self.by_device) / len(self.by_device)

    def describe(self) -> str:
        """Return the rows used, e.g. ``3090: 2.28, A100: 2.28``."""
        return ", ".join(f"{device}: {value:.2f}" for device, value in self.by_device)


def specbench_mean(inputs: Inputs, method: str, target: str) -> SpecBenchMean:
    """Collect the leaderboard rows of a (method, target) and check them against the page.

    Every column the curves use (mean accepted tokens, the six category
    speed-ups and the overall speed-up) must equal the markdown page's cell.

    Raises:
        ValueError: No row matches, or the CSV disagrees with the markdown page.
    """
    rows = [r for r in inputs.specbench if r["method"] == method and r["target_model"] == target]
    if not rows:
        raise ValueError(f"no Spec-Bench row for {method} / {target}")
    for row in rows:
        page = inputs.specbench_page.get((row["device"], target, method), {})
        for column, header in PAGE_COLUMNS.items():
            value = float(row[column])
            if page.get(header) != value:
                raise ValueError(
                    f"Spec-Bench CSV row {row['device']}/{target}/{method} {column} ({value}) "
                    f"does not match Leaderboard.md {header!r} ({page.get(header)})"
                )
    return SpecBenchMean(method, target, tuple(rows))


@dataclass(frozen=True)
class Inputs:
    """The parsed input files.

    Attributes:
        specbench: Rows of the Spec-Bench leaderboard CSV.
        specbench_page: Every number of the leaderboard page itself.
        specbench_settings: The draft settings of Spec-Bench's methods, by leaderboard method.
        medusa: Rows of the Medusa accuracy export, by run name (``7b``, ``13b``, ``33b``).
        curated: Rows of the curated acceptance points.
    """

    specbench: tuple[dict[str, str], ...]
    specbench_page: dict[tuple[str, str, str], dict[str, float]]
    specbench_settings: dict[str, dict[str, str]]
    medusa: dict[str, dict[str, str]]
    curated: tuple[dict[str, str], ...]


def read_inputs(inputs_dir: Path) -> Inputs:
    """Read every input file from ``inputs_dir``."""
    return Inputs(
        specbench=tuple(read_csv(inputs_dir / SPECBENCH_CSV)),
        specbench_page=leaderboard_page_values(
            (inputs_dir / SPECBENCH_MD).read_text(encoding="utf-8")
        ),
        specbench_settings={
            row["method"]: row for row in read_csv(inputs_dir / SPECBENCH_SETTINGS_CSV)
        },
        medusa={row["Name"]: row for row in read_csv(inputs_dir / MEDUSA_CSV)},
        curated=tuple(read_csv(inputs_dir / CURATED_CSV)),
    )


def curated_row(
    inputs: Inputs,
    url: str,
    method: str,
    k_or_steps: str,
    topology_temperature: tuple[str, str] | None = None,
) -> dict[str, str]:
    """Return the one curated row with this source URL, method and draft length.

    Args:
        inputs: The parsed inputs.
        url: The row's ``source_url``.
        method: The row's ``method``.
        k_or_steps: The row's ``k_or_steps``.
        topology_temperature: Also match ``topology`` and ``temperature``.

    Raises:
        ValueError: Not exactly one row matches.
    """
    rows = [
        r
        for r in inputs.curated
        if r["source_url"] == url
        and r["method"] == method
        and r["k_or_steps"] == k_or_steps
        and (
            topology_temperature is None
            or (r["topology"], r["temperature"]) == topology_temperature
        )
    ]
    if len(rows) != 1:
        raise ValueError(f"expected one curated row for {url} {method} {k_or_steps}, got {rows}")
    return rows[0]


def draft_length(row: Mapping[str, str]) -> int:
    """Return the draft length of a curated row (``7`` or ``8 steps``)."""
    match = re.match(r"^(\d+)", row["k_or_steps"])
    if match is None:
        raise ValueError(f"no draft length in {row['k_or_steps']!r}")
    return int(match.group(1))


def per_position_shares(row: Mapping[str, str]) -> tuple[float, ...]:
    """Return a curated row's per-position shares P(A >= i), checked against its mean length.

    Raises:
        ValueError: The shares do not sum to the mean accepted length minus one.
    """
    shares = tuple(float(v) for v in row["per_position_accept_rate"].split(","))
    mean_incl_bonus = float(row["mean_accept_len_incl_bonus"])
    if abs(math.fsum(shares) + 1.0 - mean_incl_bonus) > 0.006:
        raise ValueError(f"per-position shares {shares} do not sum to {mean_incl_bonus} - 1")
    return shares
