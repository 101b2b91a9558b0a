"""Measure eager lanes launched from Python threads on one GPU (needs PyTorch and CUDA).

The Verify-PD documents run their lanes as Python threads, each launching its
model's forward passes eagerly on its own CUDA stream and waiting for each step
before the next (their loops read the drafted or accepted tokens on the CPU).
This script measures what such lanes do to each other on the GPU it runs on:

- ``alone``: one thread, one step after another, each waited for: the eager
  step time (``mode=eager``) and the same step replayed as a CUDA graph
  (``mode=graph``: GPU time only, no launches);
- ``pair``: two threads started together, each looping its own step on its own
  stream for ``--seconds``; each lane's mean step time while both ran.

Steps (the model of :mod:`lut_population.profile.torch_model`, fp16, random
weights, context 128 as in the Verify-PD sweep): a TinyLlama-1.1B decode step
(``draft``), a Llama-2-7B verify of 4 drafted tokens (``verify``) and an atomic
round of 4 TinyLlama decode steps then that verify, waited for once
(``round``), at batch 1 and 8. Pairs: draft beside draft, draft beside verify,
round beside round.

Usage (on a machine with a CUDA GPU)::

    PYTHONPATH=. python scripts/measure_lane_threads.py --out lane_threads.csv

Writes one CSV row per lane and experiment; the file shipped in
``lut_population/inputs/microbench_h100/lane_threads.csv`` is its output on
one H100 (see that folder's README).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CONTEXT = 128
"""Cached tokens per sequence (the Verify-PD sweep's prompt length)."""

DRAFT_LENGTH = 4
"""Drafted tokens per round (the sweep's k)."""

BATCHES = (1, 8)
"""Sequences per step."""

FIELDS = (
    "experiment",
    "lane",
    "step",
    "batch",
    "mode",
    "steps",
    "mean_ms",
    "median_ms",
    "beside",
)
"""Columns of the output CSV."""


def _timed_loop(step: Callable[[], Any], sync: Callable[[], None], count: int) -> list[float]:
    """``count`` steps, each waited for; the wall time of each in ms."""
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    """Run every experiment and write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of a pair run")
    parser.add_argument("--reps", type=int, default=40, help="timed steps of an alone run")
    parser.add_argument(
        "--transformers",
        action="store_true",
        help="also time the alone steps with Hugging Face Transformers' LlamaForCausalLM "
        "(mode eager-transformers), the library the Verify-PD documents run",
    )
    args = parser.parse_args(argv)

    try:
        import torch
    except ImportError:
        print("error: measure_lane_threads.py needs PyTorch with a CUDA GPU", file=sys.stderr)
        return 2

    from lut_population.inputs import load_models
    from lut_population.profile.points import Point
    from lut_population.profile.torch_model import TorchSteps

    if not torch.cuda.is_available():
        print("error: measure_lane_threads.py needs a CUDA GPU; none is visible", file=sys.stderr)
        return 2
    models = load_models()
    positions = CONTEXT + DRAFT_LENGTH + 2
    draft_model = TorchSteps(models["tinyllama-1.1b"], "fp16", "cuda", positions)
    draft_twin = TorchSteps(models["tinyllama-1.1b"], "fp16", "cuda", positions)
    verify_model = TorchSteps(models["llama-2-7b"], "fp16", "cuda", positions)
    rows: list[dict[str, Any]] = []

    def steps_for(batch: int) -> dict[str, Callable[[], Any]]:
        draft = draft_model.build(Point("draft_decode", CONTEXT, batch))
        twin = draft_twin.build(Point("draft_decode", CONTEXT, batch))
        verify = verify_model.build(Point("verify", CONTEXT, batch, fanout_k=DRAFT_LENGTH))

        def round_() -> None:
            for _ in range(DRAFT_LENGTH):
                draft()
            verify()

        return {"draft": draft, "draft_twin": twin, "verify": verify, "round": round_}

    def graph_of(step: Callable[[], Any], stream: torch.cuda.Stream) -> Callable[[], Any]:
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()
        return graph.replay

    for batch in BATCHES:
        steps = steps_for(batch)
        stream = torch.cuda.Stream()
        for name in ("draft", "verify", "round"):
            step = steps[name]
            with torch.cuda.stream(stream):
                _timed_loop(step, stream.synchronize, 5)
                eager = _timed_loop(step, stream.synchronize, args.reps)
            graph = graph_of(step, stream)
            with torch.cuda.stream(stream):
                replayed = _timed_loop(graph, stream.synchronize, args.reps)
            for mode, times in (("eager", eager), ("graph", replayed)):
                rows.append(
                    {
                        "experiment": f"alone_{name}_b{batch}",
                        "lane": "a",
                        "step": name,
                        "batch": batch,
                        "mode": mode,
                        "steps": len(times),
                        "mean_ms": statistics.fmean(times),
                        "median_ms": statistics.median(times),
                        "beside": "",
                    }
                )
        for first, second in (("draft", "draft_twin"), ("draft", "verify"), ("round", "round")):
            rows += _pair(torch, steps, first, second, batch, args.seconds)
        torch.cuda.synchronize()
        for model in (draft_model, draft_twin, verify_model):
            model.release()

    if args.transformers:
        rows += _transformers_rows(torch, models, args.reps)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()}
            )
    print(
        f"# {torch.cuda.get_device_name()} torch {torch.__version__} "
        f"python {platform.python_version()} {platform.processor() or platform.machine()}"
    )
    for row in rows:
        print(",".join(str(row[f]) for f in FIELDS))
    return 0


def _transformers_rows(torch: Any, models: Any, reps: int) -> list[dict[str, Any]]:
    """Alone steps of the same shapes run by ``transformers.LlamaForCausalLM`` (random weights)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def load(model_id: str) -> Any:
        s = models[model_id]
        config = LlamaConfig(
            hidden_size=s.hidden_size,
            intermediate_size=s.intermediate_size,
            num_hidden_layers=s.num_layers,
            num_attention_heads=s.num_heads,
            num_key_value_heads=s.num_kv_heads,
            vocab_size=s.vocab_size,
            max_position_embeddings=s.max_context,
        )
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
        return model.half().eval()

    # The pair runs enter and leave torch's attention-backend context from two threads at
    # once, which can leave only the flash backend enabled; Transformers needs the others.
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_mem_efficient_sdp(True)
    torch.backends.cuda.enable_math_sdp(True)
    draft, verify = load("tinyllama-1.1b"), load("llama-2-7b")
    rows: list[dict[str, Any]] = []
    stream = torch.cuda.Stream()
    for batch in BATCHES:
        steps = _transformers_steps(torch, draft, verify, batch)
        for name, step in steps.items():
            with torch.cuda.stream(stream):
                _timed_loop(step, stream.synchronize, 5)
                times = _timed_loop(step, stream.synchronize, reps)
            rows.append(
                {
                    "experiment": f"alone_{name}_b{batch}",
                    "lane": "a",
                    "step": name,
                    "batch": batch,
                    "mode": "eager-transformers",
                    "steps": len(times),
                    "mean_ms": statistics.fmean(times),
                    "median_ms": statistics.median(times),
                    "beside": "",
                }
            )
    return rows


def _stepper(torch: Any, model: Any, batch: int, new: int) -> Callable[[], Any]:
    """A Transformers forward of ``new`` tokens per sequence after a 128-token prompt."""
    from transformers import DynamicCache

    cache = DynamicCache()
    prompt = torch.randint(32000, (batch, CONTEXT), device="cuda")
    tokens = torch.randint(32000, (batch, new), device="cuda")
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=cache, use_cache=True)

    def step() -> Any:
        with torch.no_grad():
            out = model(input_ids=tokens, past_key_values=cache, use_cache=True)
        cache.crop(CONTEXT)  # every step runs at the same context
        return out.logits.argmax(-1)

    return step


def _transformers_steps(
    torch: Any, draft: Any, verify: Any, batch: int
) -> dict[str, Callable[[], Any]]:
    """The draft, verify and round steps of :func:`main`, run by Transformers."""
    draft_step = _stepper(torch, draft, batch, 1)
    verify_step = _stepper(torch, verify, batch, DRAFT_LENGTH + 1)

    def round_() -> None:
        for _ in range(DRAFT_LENGTH):
            draft_step()
        verify_step()

    return {"draft": draft_step, "verify": verify_step, "round": round_}


def _pair(
    torch: Any,
    steps: dict[str, Callable[[], Any]],
    first: str,
    second: str,
    batch: int,
    seconds: float,
) -> list[dict[str, Any]]:
    """Two threads, each looping its step on its own stream; step times while both ran."""
    barrier = threading.Barrier(2)
    stop = threading.Event()
    ends: dict[str, list[float]] = {"a": [], "b": []}
    starts: dict[str, float] = {}

    def lane(name: str, step: Callable[[], Any]) -> None:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
            stream.synchronize()
            barrier.wait()
            starts[name] = time.perf_counter()
            while not stop.is_set():
                step()
                stream.synchronize()
                ends[name].append(time.perf_counter())

    threads = [
        threading.Thread(target=lane, args=("a", steps[first])),
        threading.Thread(target=lane, args=("b", steps[second])),
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    # Count only the steps that ended while both lanes still ran.
    both_until = min(ends["a"][-1], ends["b"][-1])
    rows = []
    experiment = f"pair_{first}_{second.removesuffix('_twin')}_b{batch}"
    for name, step_name, other in (("a", first, second), ("b", second, first)):
        marks = [starts[name]] + [t for t in ends[name] if t <= both_until]
        gaps = [(b - a) * 1000.0 for a, b in itertools.pairwise(marks)]
        rows.append(
            {
                "experiment": experiment,
                "lane": name,
                "step": step_name.removesuffix("_twin"),
                "batch": batch,
                "mode": "eager",
                "steps": len(gaps),
                "mean_ms": statistics.fmean(gaps) if gaps else float("nan"),
                "median_ms": statistics.median(gaps) if gaps else float("nan"),
                "beside": other.removesuffix("_twin"),
            }
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
