"""Lane iterations are engine steps: host time and an eager engine's launches priced per profile.

A lane rule's draft iteration (k TinyLlama decode steps), verify pass and
prefill run under the pool's engine profile as any step does: the CUDA-graph
engine adds host time once per iteration, the older engine once per forward
pass, an eager engine launches every forward pass (a TinyLlama step at batch 1
is launch-bound); the added time runs as host time before the GPU work, and
``host_overhead_ms`` adds a framework's own time per forward pass on top.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from policies.lanes import DRAFT_PASS, VERIFY_PASS
from simulator.devices.engine_profile import load_engine_profile, step_models
from simulator.engine.costs import LaneCosts, PhaseCost
from simulator.engine.request_state import RequestState
from simulator.engine.sharing import HOST, LAUNCH
from simulator.engine.split_rounds import SplitRounds
from simulator.engine.step_pricing import StepPricer
from simulator.lut import LutKey, LutManager, load_lut
from simulator.scenario.model import LanesSpec

ROOT = Path(__file__).resolve().parent.parent
H100 = "h100-sxm5-80gb"
MANAGER = LutManager(
    [
        load_lut(ROOT / "lut" / f"tinyllama-1.1b__{H100}.csv"),
        load_lut(ROOT / "lut" / f"llama-2-7b__{H100}.csv"),
        load_lut(ROOT / "lut" / f"llama-2-7b+tinyllama-1.1b__{H100}.csv"),
    ]
)


def _cost(phase: str, model: str, engine: str | None) -> PhaseCost:
    pricer = (
        None
        if engine is None
        else StepPricer(
            load_engine_profile(ROOT / "device_profiles" / "engines" / f"{engine}.yaml"),
            phase,
            step_models(phase, model),
            idle_power_w=0.0,
        )
    )
    return PhaseCost(MANAGER, LutKey(phase, model, H100, 1, 1, "fp16"), "clamp", pricer)


def _split(engine: str | None, host_overhead_ms: float = 0.0) -> SplitRounds:
    costs = LaneCosts(
        draft=_cost("draft_decode", "tinyllama-1.1b", engine),
        verify=_cost("verify", "llama-2-7b", engine),
    )
    prefill = _cost("prefill", "llama-2-7b+tinyllama-1.1b", engine)
    spec = LanesSpec(split_rounds=True, host_overhead_ms=host_overhead_ms)
    return SplitRounds(simpy.Environment(), spec, costs, prefill)


def _requests(n: int, k: int) -> list[RequestState]:
    out = []
    for i in range(n):
        req = RequestState(i, 0.0, 1000, 100, "default", "")
        req.generated, req.k = 24, k
        out.append(req)
    return out


def _host_and_gpu(split: SplitRounds, kind: str, n: int, k: int) -> tuple[float, float]:
    """The iteration's time besides its GPU work, and its GPU work (ms)."""
    segments, _ = split.price(kind, _requests(n, k))
    total = sum(s.duration_s for s in segments)
    gpu = sum(s.gpu_s if s.klass == LAUNCH else s.duration_s for s in segments if s.klass != HOST)
    return (total - gpu) * 1000, gpu * 1000


@pytest.mark.parametrize("k", [1, 4])
def test_a_cuda_graph_engine_adds_host_time_once_per_lane_iteration(k: int) -> None:
    plain = load_engine_profile(ROOT / "device_profiles" / "engines" / "cuda-graph.yaml").plain
    host_ms, gpu_ms = _host_and_gpu(_split("cuda-graph"), DRAFT_PASS, 8, k)
    assert gpu_ms == pytest.approx(_host_and_gpu(_split(None), DRAFT_PASS, 8, k)[1])
    assert host_ms == pytest.approx(plain.time_ms(8, 8 * k))


@pytest.mark.parametrize("k", [1, 4])
def test_the_older_engine_adds_host_time_per_draft_step(k: int) -> None:
    fit = load_engine_profile(ROOT / "device_profiles" / "engines" / "vidur-vllm-v0.yaml").plain
    host_ms, _ = _host_and_gpu(_split("vidur-vllm-v0"), DRAFT_PASS, 8, k)
    assert host_ms == pytest.approx(k * fit.time_ms(8, 8))


def test_an_eager_engine_launches_every_draft_step_and_is_launch_bound_at_batch_one() -> None:
    profile = load_engine_profile(ROOT / "device_profiles" / "engines" / "eager-pytorch.yaml")
    assert profile.launch is not None
    k = 4
    launches_ms = k * profile.launch.forward_ms("tinyllama-1.1b")
    host_ms, gpu_ms = _host_and_gpu(_split("eager-pytorch"), DRAFT_PASS, 1, k)
    assert gpu_ms < launches_ms  # a TinyLlama step at batch 1 is shorter than its launches
    assert host_ms + gpu_ms == pytest.approx(launches_ms + profile.plain.time_ms(1, k))
    # So the iteration lasts its launches, its GPU work running inside them.
    segments, _ = _split("eager-pytorch").price(DRAFT_PASS, _requests(1, k))
    assert [s.klass for s in segments] == [HOST, LAUNCH]
    assert segments[1].duration_s * 1000 == pytest.approx(launches_ms)
    assert segments[1].gpu_s * 1000 == pytest.approx(gpu_ms)
    # The verify: one forward of the 7B target, also launch-bound at batch 1.
    verify_host, verify_gpu = _host_and_gpu(_split("eager-pytorch"), VERIFY_PASS, 1, k)
    launch = profile.launch.forward_ms("llama-2-7b")
    assert verify_host + verify_gpu == pytest.approx(
        max(verify_gpu, launch) + profile.speculative.time_ms(1, k + 1)
    )


def test_host_overhead_adds_a_frameworks_time_per_forward_pass_on_top() -> None:
    base, _ = _host_and_gpu(_split("cuda-graph"), DRAFT_PASS, 2, 4)
    extra, _ = _host_and_gpu(_split("cuda-graph", host_overhead_ms=5.0), DRAFT_PASS, 2, 4)
    assert extra - base == pytest.approx(4 * 5.0)
    none_host, _ = _host_and_gpu(_split(None), DRAFT_PASS, 2, 4)
    assert none_host == 0.0
