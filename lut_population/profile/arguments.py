"""Arguments of ``python -m lut_population profile`` (argparse only; no PyTorch, no pandas).

:mod:`lut_population.__main__` adds them to its parser; :mod:`~lut_population.profile.cli`
runs the command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lut_population.profile.points import (
    DEFAULT_BATCHES,
    DEFAULT_CONTEXTS,
    DEFAULT_HEAD_WIDTHS,
    DEFAULT_KS,
    DEFAULT_PREFILL_BATCHES,
    PROFILE_PHASES,
)
from simulator.suggest import did_you_mean

INSTALL_HINT = "pip install 'specdec-sim[profile]' (in a checkout: pip install -e '.[profile]')"
"""How to get PyTorch (the ``profile`` extra)."""


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers (e.g. 1,4,16)"
        ) from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole numbers >= 1 (e.g. 1,4,16)")
    return tuple(values)


def _phase_list(text: str) -> tuple[str, ...]:
    phases = [part.strip() for part in text.split(",") if part.strip()]
    for phase in phases:
        if phase not in PROFILE_PHASES:
            raise argparse.ArgumentTypeError(
                f"unknown phase {phase!r}{did_you_mean(phase, PROFILE_PHASES)} "
                f"(allowed: {', '.join(PROFILE_PHASES)})"
            )
    if not phases:
        raise argparse.ArgumentTypeError(f"no phase given (allowed: {', '.join(PROFILE_PHASES)})")
    return tuple(p for p in PROFILE_PHASES if p in phases)


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def add_parser(commands: Any) -> None:
    """Add the ``profile`` subcommand to the ``lut_population`` subparsers."""
    parser = commands.add_parser(
        "profile",
        help="measure a Llama-architecture model on this machine's GPU and write LUT rows "
        "(needs PyTorch: the package's 'profile' extra)",
        description="Build a Llama-architecture model with random weights in PyTorch, time its "
        "prefill, decode (draft_decode), verify and EAGLE-style head steps as CUDA graphs, and "
        "write the medians as LUT rows (source microbench:...). Head steps go to "
        "<model>.eagle__<hardware>.csv next to the output. See lut_population/PLAN.md, "
        "'Profiling your own GPU'.",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="a model id of lut_population/inputs/models.yaml (e.g. llama-3-8b) or the path of "
        "a Hugging Face config.json of a Llama model",
    )
    parser.add_argument(
        "--model-id",
        help="model id written into the rows (default: the models.yaml id, or the lower-cased "
        "folder name of the config.json)",
    )
    parser.add_argument("--hardware", required=True, help="hardware id written into the rows")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="LUT file of the target's rows (default: <model>__<hardware>.csv here)",
    )
    parser.add_argument(
        "--phases",
        type=_phase_list,
        default=PROFILE_PHASES,
        help=f"comma-separated phases to measure (default: {','.join(PROFILE_PHASES)})",
    )
    parser.add_argument(
        "--contexts",
        type=_int_list,
        help="context lengths (prompt length for prefill) (default: "
        f"{_csv(DEFAULT_CONTEXTS)}, those up to the model's maximum context)",
    )
    grid_help = [
        ("--batches", DEFAULT_BATCHES, "batch sizes of decode, verify and head steps"),
        ("--prefill-batches", DEFAULT_PREFILL_BATCHES, "batch sizes of prefill"),
        ("--ks", DEFAULT_KS, "draft lengths k of verify"),
        ("--head-widths", DEFAULT_HEAD_WIDTHS, "candidates per sequence of a head step"),
    ]
    for flag, default, what in grid_help:
        parser.add_argument(
            flag, type=_int_list, default=default, help=f"{what} (default: {_csv(default)})"
        )
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions (default: 20)")
    parser.add_argument(
        "--warmup", type=int, default=5, help="repetitions discarded first (default: 5)"
    )
    parser.add_argument(
        "--max-memory-gib",
        type=float,
        help="refuse grids with a point whose weights + activations + KV exceed this "
        "(default: the GPU's free memory at start)",
    )
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument(
        "--device",
        default="cuda",
        help="torch device (default: cuda); 'cpu' runs the same steps timed by the host clock, "
        "to check the pipeline, not to make LUTs",
    )
