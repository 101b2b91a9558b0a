"""The ``python -m lut_population profile`` subcommand.

Everything up to the measurement (model shape, grid, memory rule, option
checks) runs without PyTorch; PyTorch is imported only to measure. Exit
status: 0 written; 2 bad input, PyTorch missing, no GPU, or out of GPU memory.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lut_population.profile.arguments import INSTALL_HINT
from lut_population.profile.model_input import check_id, resolve_model
from lut_population.profile.points import (
    DEFAULT_CONTEXTS,
    ProfileGrid,
    check_memory,
    grid_points,
)
from lut_population.profile.runner import Measurement, StepFactory, run_points
from lut_population.profile.timing import TimingBackend, WallClockBackend
from lut_population.profile.writer import RunInfo, render_csv, split_by_model
from lut_population.shapes import ModelShape
from simulator.errors import EXIT_INPUT_ERROR, InputError, make_issue
from simulator.lut import load_lut

DEVICE_PATTERN = re.compile(r"cpu|cuda(:[0-9]+)?")
"""Devices ``--device`` accepts."""


class ProfileEnvironmentError(Exception):
    """The machine cannot run the measurement (no PyTorch, no GPU, out of memory)."""


@dataclass(frozen=True)
class Request:
    """A checked ``profile`` command line."""

    target: ModelShape
    hardware: str
    output: Path
    grid: ProfileGrid
    reps: int
    warmup: int
    max_memory_gib: float | None
    dtype: str
    device: str


def _option_issue(option: str, value: object, allowed: str) -> InputError:
    return InputError([make_issue("command line", option, value, allowed)])


def check_request(args: argparse.Namespace) -> Request:
    """Turn parsed arguments into a :class:`Request`; no PyTorch needed.

    Raises:
        InputError: Unknown model, bad id, a context over the model's maximum, bad counts, or a
            grid over ``--max-memory-gib``.
    """
    target = resolve_model(args.model, args.model_id)
    hardware = check_id(args.hardware, "--hardware")
    if args.reps < 1:
        raise _option_issue("--reps", args.reps, "a whole number >= 1")
    if args.warmup < 0:
        raise _option_issue("--warmup", args.warmup, "a whole number >= 0")
    if DEVICE_PATTERN.fullmatch(args.device) is None:
        raise _option_issue("--device", args.device, "cuda, cuda:<index> or cpu")
    if args.max_memory_gib is not None and not args.max_memory_gib > 0:
        raise _option_issue("--max-memory-gib", args.max_memory_gib, "a number > 0")
    contexts = args.contexts or tuple(c for c in DEFAULT_CONTEXTS if c <= target.max_context)
    if not contexts or contexts[-1] > target.max_context:
        raise _option_issue(
            "--contexts",
            contexts[-1] if contexts else DEFAULT_CONTEXTS[0],
            f"at most the model's maximum context, {target.max_context} tokens",
        )
    grid = ProfileGrid(
        args.phases, contexts, args.batches, args.prefill_batches, args.ks, args.head_widths
    )
    output = args.output or Path(f"{target.model_id}__{hardware}.csv")
    request = Request(
        target,
        hardware,
        output,
        grid,
        args.reps,
        args.warmup,
        args.max_memory_gib,
        args.dtype,
        args.device,
    )
    if request.max_memory_gib is not None:
        limit = f"--max-memory-gib {request.max_memory_gib:g}"
        check_memory(target, grid, request.max_memory_gib * 1024.0, limit)
    return request


@dataclass(frozen=True)
class Runtime:
    """What PyTorch provides for a run."""

    factory: StepFactory
    backend: TimingBackend
    eager_backend: TimingBackend | None
    free_memory_gib: float | None


def _runtime(request: Request) -> Runtime:
    """Import PyTorch and set up the device; raise :class:`ProfileEnvironmentError` if unable."""
    try:
        import torch
    except ImportError:
        raise ProfileEnvironmentError(
            f"the profiler needs PyTorch, which is not installed: {INSTALL_HINT}"
        ) from None
    if request.device != "cpu" and not torch.cuda.is_available():
        raise ProfileEnvironmentError(
            f"no CUDA GPU for --device {request.device}: torch.cuda.is_available() is false "
            f"(PyTorch {torch.__version__}); the profiler measures on an NVIDIA GPU with a CUDA "
            "build of PyTorch (--device cpu only checks the pipeline)"
        )
    from lut_population.profile.torch_model import TorchSteps

    grid = request.grid
    longest = max(grid.ks) + 1 if "verify" in grid.phases else 1
    positions = grid.contexts[-1] + max(longest, *grid.head_widths)
    factory = TorchSteps(request.target, request.dtype, request.device, positions)
    if request.device == "cpu":
        return Runtime(factory, WallClockBackend(), None, None)
    from lut_population.profile.cuda_timing import CudaEventBackend, CudaGraphBackend

    device = torch.device(request.device)
    free_bytes, _ = torch.cuda.mem_get_info(device)
    return Runtime(
        factory,
        CudaGraphBackend(device),
        CudaEventBackend(device),
        free_bytes / 1024.0**3,
    )


def _progress(item: Measurement) -> None:
    p, t = item.point, item.timing
    k = f" k {p.fanout_k}" if p.phase == "verify" else ""
    w = f" width {p.width}" if p.phase == "head" else ""
    print(
        f"{p.phase} context {p.context_len} batch {p.microbatch}{k}{w}: "
        f"{t.median_ms:.4g} ms (p10 {t.p10_ms:.4g}, p90 {t.p90_ms:.4g})",
        flush=True,
    )


def write_files(info: RunInfo, items: list[Measurement], output: Path) -> list[Path]:
    """Write the target's rows to ``output`` and each head model's next to it; check each loads."""
    written = []
    for model_id, group in split_by_model(info, items).items():
        path = (
            output
            if model_id == info.target.model_id
            else (output.parent / f"{model_id}__{info.hardware}.csv")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_csv(info, group), encoding="utf-8")
        load_lut(path, use_cache=False)
        written.append(path)
    return written


def measure_and_write(request: Request, runtime: Runtime) -> list[Path]:
    """Check the memory limit, measure every point and write the LUT files."""
    if request.max_memory_gib is None and runtime.free_memory_gib is not None:
        limit = f"the GPU's free memory ({runtime.free_memory_gib:.1f} GiB)"
        check_memory(request.target, request.grid, runtime.free_memory_gib * 1024.0, limit)
    items = run_points(
        grid_points(request.grid),
        runtime.factory,
        runtime.backend,
        request.warmup,
        request.reps,
        runtime.eager_backend,
        _progress,
    )
    info = RunInfo(request.target, request.hardware, request.dtype, runtime.backend.name)
    return write_files(info, items, request.output)


def run(args: argparse.Namespace) -> int:
    """Run ``profile``; return the exit status (InputError propagates to the caller)."""
    request = check_request(args)
    try:
        runtime = _runtime(request)
        written = measure_and_write(request, runtime)
    except ProfileEnvironmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except RuntimeError as error:
        if "out of memory" not in str(error).lower():
            raise
        print(
            f"error: out of GPU memory ({str(error).splitlines()[0]}); lower --max-memory-gib "
            "or drop the largest --contexts/--batches values",
            file=sys.stderr,
        )
        return EXIT_INPUT_ERROR
    for path in written:
        print(f"wrote {path}")
    return 0
