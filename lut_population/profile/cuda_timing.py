"""Timing backends on a CUDA GPU: CUDA-graph replay and eager launches, timed by CUDA events.

:class:`CudaGraphBackend` captures a step as one CUDA graph (per shape) and
times each replay between two CUDA events, as the project's H100
microbenchmarks did (``graph`` mode: GPU time only, no host time). Before
capture the step runs a few times on a side stream, as PyTorch's CUDA-graph
documentation requires. :class:`CudaEventBackend` launches the step from
Python without a graph (``eager`` mode, for prefill). Both report
``torch.cuda.max_memory_allocated`` as the peak memory.

This module imports PyTorch; import it only when a measurement runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lut_population.profile.timing import Step
from lut_population.shapes import BYTES_PER_MIB

CAPTURE_WARMUP = 3
"""Eager runs on a side stream before capture (the example of PyTorch's CUDA-graph notes)."""


def _event_timer(launch: Callable[[], object]) -> Callable[[], float]:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def run() -> float:
        start.record()
        launch()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    return run


class CudaEventBackend:
    """Eager launches timed with CUDA events."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.name = f"cuda-eager:{torch.cuda.get_device_name(device)}:torch-{torch.__version__}"

    def prepare(self, step: Step) -> Callable[[], float]:
        """Time one eager call of ``step``."""
        return _event_timer(step)

    def reset_peak_memory(self) -> None:
        """Reset ``torch.cuda``'s peak-memory counter."""
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory_mb(self) -> float | None:
        """``torch.cuda.max_memory_allocated`` in MiB."""
        torch.cuda.synchronize(self.device)
        return float(torch.cuda.max_memory_allocated(self.device)) / BYTES_PER_MIB


class CudaGraphBackend(CudaEventBackend):
    """The step captured as one CUDA graph and replayed, each replay timed with CUDA events."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.name = f"cuda-graph:{torch.cuda.get_device_name(device)}:torch-{torch.__version__}"

    def prepare(self, step: Step) -> Callable[[], float]:
        """Warm up on a side stream, capture ``step``, and time one replay per call."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(CAPTURE_WARMUP):
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return _event_timer(graph.replay)
