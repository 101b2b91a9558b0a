"""The GPU profiler ``python -m lut_population profile``, tested without a GPU.

Grid, memory rule, timing statistics, runner, writer and command line run with
fake timing backends and step factories (no PyTorch). Where PyTorch is
importable, slow tests also run the PyTorch model on the CPU at tiny shapes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path

import pytest

from lut_population.__main__ import main
from lut_population.inputs import load_models
from lut_population.profile import cli
from lut_population.profile.model_input import resolve_model
from lut_population.profile.points import (
    DEFAULT_BATCHES,
    DEFAULT_CONTEXTS,
    DEFAULT_KS,
    DEFAULT_PREFILL_BATCHES,
    Point,
    ProfileGrid,
    check_memory,
    estimated_memory_mb,
    grid_points,
    head_model_id,
)
from lut_population.profile.runner import Measurement, run_points
from lut_population.profile.timing import Step, Timing, WallClockBackend, measure, summarise
from lut_population.profile.writer import RunInfo, render_csv
from lut_population.shapes import BYTES_PER_MIB
from simulator.errors import InputError
from simulator.lut import LutKey, LutManager, load_lut

HAS_TORCH = importlib.util.find_spec("torch") is not None

SMALL_GRID = ProfileGrid(
    contexts=(128, 512), batches=(1, 4), prefill_batches=(1,), ks=(1, 2), head_widths=(1, 4)
)


@dataclass
class FakeBackend:
    """Returns ``times`` in order (cycling), counts calls, reports a fixed peak."""

    times: list[float]
    peak: float | None = 1000.0
    name: str = "fake"
    prepared: int = 0
    calls: int = 0

    def prepare(self, step: Step) -> Callable[[], float]:
        self.prepared += 1

        def run() -> float:
            step()
            value = self.times[self.calls % len(self.times)]
            self.calls += 1
            return value

        return run

    def reset_peak_memory(self) -> None:
        pass

    def peak_memory_mb(self) -> float | None:
        return self.peak


@dataclass
class FakeFactory:
    loaded: list[Point] = field(default_factory=list)
    built: list[Point] = field(default_factory=list)
    released: int = 0
    runs: int = 0

    def load(self, point: Point) -> None:
        self.loaded.append(point)

    def build(self, point: Point) -> Step:
        self.built.append(point)

        def step() -> None:
            self.runs += 1

        return step

    def release(self) -> None:
        self.released += 1


def shape(model_id: str = "llama-68m"):
    return load_models()[model_id]


# --- grid -----------------------------------------------------------------------------------


def test_default_grid_is_the_h100_microbench_grid():
    points = grid_points(ProfileGrid())
    count = {phase: sum(p.phase == phase for p in points) for phase in ("prefill", "verify")}
    assert count["prefill"] == len(DEFAULT_CONTEXTS) * len(DEFAULT_PREFILL_BATCHES)
    assert count["verify"] == len(DEFAULT_CONTEXTS) * len(DEFAULT_BATCHES) * len(DEFAULT_KS)
    assert [p.phase for p in points[:1]] == ["prefill"]
    assert points[-1].phase == "head"


def test_points_describe_each_phase_as_the_lut_row_means_it():
    prefill, decode = Point("prefill", 512, 4), Point("draft_decode", 512, 4)
    verify, head = Point("verify", 512, 4, fanout_k=3), Point("head", 512, 4, width=8)
    assert (prefill.new_tokens, prefill.cached_tokens, prefill.logit_rows) == (512, 0, 1)
    assert (decode.new_tokens, decode.cached_tokens, decode.logit_rows) == (1, 512, 1)
    assert (verify.new_tokens, verify.cached_tokens, verify.logit_rows) == (4, 512, 4)
    assert (head.new_tokens, head.cached_tokens, head.logit_rows) == (8, 512, 8)
    assert head.lut_phase == "draft_decode"
    assert head_model_id("llama-3-8b", 1) == "llama-3-8b.eagle"
    assert head_model_id("llama-3-8b", 4) == "llama-3-8b.eagle-w4"


def test_every_phase_and_width_is_a_complete_rectangle():
    points = grid_points(SMALL_GRID)
    keys: dict[tuple[str, int], set[tuple[int, int, int]]] = {}
    for p in points:
        keys.setdefault((p.phase, p.width), set()).add((p.context_len, p.microbatch, p.fanout_k))
    assert set(keys) == {
        ("prefill", 1),
        ("draft_decode", 1),
        ("verify", 1),
        ("head", 1),
        ("head", 4),
    }
    for cells in keys.values():
        axes = [sorted({c[i] for c in cells}) for i in range(3)]
        assert len(cells) == len(axes[0]) * len(axes[1]) * len(axes[2])
    assert len(points) == len(set(points))


def test_phases_select_what_is_measured():
    points = grid_points(ProfileGrid(phases=("verify",), contexts=(128,), batches=(1,), ks=(1, 8)))
    assert [(p.phase, p.fanout_k) for p in points] == [("verify", 1), ("verify", 8)]


# --- memory rule ----------------------------------------------------------------------------


def test_memory_estimate_is_weights_plus_activations_plus_allocated_kv():
    s = shape("llama-2-7b")
    point = Point("draft_decode", 1024, 8)
    kv = 8 * 1025 * s.kv_mib_per_token
    weights = s.weight_bytes() / BYTES_PER_MIB
    estimate = estimated_memory_mb(s, point)
    assert weights + kv < estimate < weights + kv + 16.0  # activations of 8 tokens: a few MiB
    head = estimated_memory_mb(s, Point("head", 1024, 8))
    assert head < estimate / 5  # one layer plus embedding, fc and LM head


def test_memory_rule_passes_a_grid_that_fits():
    check_memory(shape(), SMALL_GRID, 80 * 1024.0, "--max-memory-gib 80")


def test_memory_rule_refuses_a_grid_with_a_point_over_the_limit():
    s = shape("llama-2-7b")
    grid = ProfileGrid(phases=("draft_decode",), contexts=(128, 4096), batches=(1, 64))
    with pytest.raises(InputError) as raised:
        check_memory(s, grid, 60 * 1024.0, "--max-memory-gib 60")
    text = raised.value.render()
    assert len(raised.value.issues) == 1
    assert "--max-memory-gib 60: phase draft_decode" in text
    assert "1 of 4 points exceed the memory limit" in text
    assert "4096 x 64" in text
    assert "complete rectangles" in text
    assert "context 128: 64, context 4096: 1" in text


# --- timing ---------------------------------------------------------------------------------


def test_warmup_is_discarded_and_median_p10_p90_come_from_the_reps():
    backend = FakeBackend([1000.0] * 5 + [float(i) for i in range(1, 21)])
    factory = FakeFactory()
    timing = measure(backend, factory.build(Point("draft_decode", 1, 1)), warmup=5, reps=20)
    assert astuple(timing) == pytest.approx((10.5, 2.9, 18.1, 20, 5))
    assert (backend.prepared, backend.calls, factory.runs) == (1, 25, 25)


def test_summarise_checks_its_counts():
    assert summarise([3.0, 1.0, 2.0], 0).median_ms == 2.0
    with pytest.raises(ValueError, match="no timed samples"):
        summarise([1.0, 2.0], 2)
    with pytest.raises(ValueError, match="warmup"):
        summarise([1.0], -1)
    with pytest.raises(ValueError, match="reps"):
        measure(FakeBackend([1.0]), lambda: None, 0, 0)


def test_wall_clock_backend_times_calls():
    timing = measure(WallClockBackend(), lambda: sum(range(100)), warmup=1, reps=3)
    assert timing.reps == 3 and timing.median_ms >= 0.0
    assert WallClockBackend().peak_memory_mb() is None


def test_runner_builds_times_and_releases_every_point():
    factory, backend, eager = FakeFactory(), FakeBackend([2.0]), FakeBackend([5.0])
    points = grid_points(SMALL_GRID)
    seen: list[Measurement] = []
    results = run_points(points, factory, backend, 1, 3, eager, seen.append)
    assert [r.point for r in results] == list(points) == factory.built == factory.loaded
    assert factory.released == len(points) and seen == results
    assert all(r.timing.median_ms == 2.0 and r.peak_mem_mb == 1000.0 for r in results)
    assert all((r.eager is not None) == (r.point.phase == "prefill") for r in results)
    assert eager.prepared == sum(p.phase == "prefill" for p in points)


# --- writer ---------------------------------------------------------------------------------


def measurements(points, peak: float | None = 1000.0) -> list[Measurement]:
    out = []
    for i, p in enumerate(points):
        t = Timing(1.0 + 0.01 * i, 0.9, 1.2, 20, 5)
        eager = Timing(3.0, 2.9, 3.1, 20, 5) if p.phase == "prefill" else None
        out.append(Measurement(p, t, eager, peak))
    return out


def write_small(tmp_path: Path, peak: float | None = 1000.0) -> tuple[RunInfo, list[Path]]:
    info = RunInfo(shape(), "my-gpu", "fp16", "fake")
    items = measurements(grid_points(SMALL_GRID), peak)
    return info, cli.write_files(info, items, tmp_path / "llama-68m__my-gpu.csv")


def test_written_rows_load_and_form_complete_grids(tmp_path):
    _, paths = write_small(tmp_path)
    assert sorted(p.name for p in paths) == [
        "llama-68m.eagle-w4__my-gpu.csv",
        "llama-68m.eagle__my-gpu.csv",
        "llama-68m__my-gpu.csv",
    ]
    manager = LutManager([load_lut(p, use_cache=False) for p in paths])
    verify = manager.grid(LutKey("verify", "llama-68m", "my-gpu", 1, 1, "fp16"))
    assert (verify.context_len, verify.microbatch, verify.fanout_k) == ((128, 512), (1, 4), (1, 2))
    prefill = manager.grid(LutKey("prefill", "llama-68m", "my-gpu", 1, 1, "fp16"))
    assert (prefill.context_len, prefill.microbatch) == ((128, 512), (1,))
    head = manager.grid(LutKey("draft_decode", "llama-68m.eagle", "my-gpu", 1, 1, "fp16"))
    assert (head.context_len, head.microbatch, head.fanout_k) == ((128, 512), (1, 4), (1,))


def test_rows_hold_median_measured_peak_formula_kv_and_no_energy(tmp_path):
    import pandas as pd

    write_small(tmp_path)
    frame = pd.read_csv(tmp_path / "llama-68m__my-gpu.csv")
    assert list(frame.columns) == [
        "phase", "model", "hardware", "tensor_parallel", "pipeline_parallel", "context_len",
        "microbatch", "fanout_k", "dtype", "latency_ms", "peak_mem_mb", "kv_delta_mb",
        "energy_mj", "source", "notes",
    ]  # fmt: skip
    assert (frame["source"] == "microbench:profile_v1:fake").all()
    assert (frame["energy_mj"] == 0).all() and (frame["peak_mem_mb"] == 1000).all()
    assert frame["notes"].str.contains("energy not measured").all()
    assert frame["notes"].str.contains("median of 20 reps after 5 warm-up; p10 0.9 ms").all()
    prefill = frame[frame["phase"] == "prefill"]
    assert prefill["notes"].str.contains("eager median 3 ms").all()
    s = shape()
    verify = frame[(frame["phase"] == "verify") & (frame["context_len"] == 512)]
    row = verify[(verify["microbatch"] == 4) & (verify["fanout_k"] == 2)].iloc[0]
    assert row["kv_delta_mb"] == pytest.approx(4 * 3 * s.kv_mib_per_token, rel=1e-5)
    head = pd.read_csv(tmp_path / "llama-68m.eagle-w4__my-gpu.csv")
    one = head[(head["context_len"] == 128) & (head["microbatch"] == 4)].iloc[0]
    assert one["kv_delta_mb"] == pytest.approx(4 * 4 * s.kv_mib_per_token / s.num_layers, rel=1e-5)
    assert "width 4" in one["notes"]


def test_estimated_peak_is_used_and_said_when_the_backend_cannot_measure(tmp_path):
    import pandas as pd

    write_small(tmp_path, peak=None)
    frame = pd.read_csv(tmp_path / "llama-68m__my-gpu.csv")
    assert frame["notes"].str.contains("peak memory estimated, not measured").all()
    first = frame[(frame["phase"] == "draft_decode")].iloc[0]
    point = Point("draft_decode", int(first["context_len"]), int(first["microbatch"]))
    assert first["peak_mem_mb"] == pytest.approx(estimated_memory_mb(shape(), point), rel=1e-5)


def test_render_is_deterministic_and_sorted():
    info = RunInfo(shape(), "my-gpu", "fp16", "fake")
    items = measurements(grid_points(SMALL_GRID))
    assert render_csv(info, items) == render_csv(info, list(reversed(items)))


# --- model input ----------------------------------------------------------------------------


def llama_config(tmp_path: Path, **changes: object) -> Path:
    config = {
        "model_type": "llama",
        "hidden_act": "silu",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 256,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": False,
    }
    config.update(changes)
    folder = tmp_path / "Tiny-Llama"
    folder.mkdir(exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_config_json_gives_the_shape_and_a_default_id(tmp_path):
    s = resolve_model(str(llama_config(tmp_path)))
    assert s.model_id == "tiny-llama"
    assert (s.num_layers, s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim) == (
        2,
        64,
        4,
        2,
        16,
    )
    assert resolve_model(str(llama_config(tmp_path)), "mine").model_id == "mine"


def test_non_llama_configs_and_models_are_refused(tmp_path):
    with pytest.raises(InputError, match="model_type"):
        resolve_model(str(llama_config(tmp_path, model_type="gpt2", num_hidden_layers=0)))
    with pytest.raises(InputError, match="num_hidden_layers"):
        resolve_model(str(llama_config(tmp_path, num_hidden_layers=0)))
    with pytest.raises(InputError, match="gated_mlp"):
        resolve_model("phi-2")
    with pytest.raises(InputError, match="did you mean 'llama-3-8b'"):
        resolve_model("llama-3-8c")
    with pytest.raises(InputError, match="JSONDecodeError"):
        bad = tmp_path / "bad.json"
        bad.write_text("{", encoding="utf-8")
        resolve_model(str(bad))


# --- command line ---------------------------------------------------------------------------


def test_missing_torch_exits_2_with_the_install_hint(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    assert main(["profile", "--model", "llama-68m", "--hardware", "my-gpu"]) == 2
    assert "pip install 'specdec-sim[profile]'" in capsys.readouterr().err


def test_no_gpu_exits_2_naming_cuda(monkeypatch, capsys):
    fake_torch = types.ModuleType("torch")
    fake_torch.__version__ = "0.0-test"  # type: ignore[attr-defined]
    fake_torch.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    assert main(["profile", "--model", "llama-68m", "--hardware", "my-gpu"]) == 2
    assert "no CUDA GPU for --device cuda" in capsys.readouterr().err


def test_unknown_model_exits_2_with_did_you_mean(capsys):
    assert main(["profile", "--model", "llama-3-8c", "--hardware", "my-gpu"]) == 2
    assert "did you mean 'llama-3-8b'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--contexts", "128,8192"], "maximum context, 2048"),
        (["--hardware", "my gpu"], "--hardware"),
        (["--reps", "0"], "--reps"),
        (["--device", "gpu"], "cuda, cuda:<index> or cpu"),
        (["--max-memory-gib", "0.01"], "exceed the memory limit"),
    ],
)
def test_bad_options_exit_2_before_torch_is_needed(monkeypatch, capsys, extra, message):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["profile", "--model", "llama-68m", "--hardware", "my-gpu", *extra]) == 2
    assert message in capsys.readouterr().err


def test_bad_lists_and_phases_are_argparse_errors(capsys):
    for extra in (["--batches", "1,x"], ["--ks", "0,1"], ["--phases", "verfy"]):
        with pytest.raises(SystemExit) as raised:
            main(["profile", "--model", "llama-68m", "--hardware", "my-gpu", *extra])
        assert raised.value.code == 2
    assert "did you mean 'verify'?" in capsys.readouterr().err


def test_whole_command_with_a_fake_runtime_writes_loadable_files(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # nothing on this path may import torch
    runtime = cli.Runtime(FakeFactory(), FakeBackend([1.5]), FakeBackend([4.0]), 70.0)
    monkeypatch.setattr(cli, "_runtime", lambda request: runtime)
    out = tmp_path / "lut" / "llama-68m__my-gpu.csv"
    argv = ["profile", "--model", "llama-68m", "--hardware", "my-gpu", "-o", str(out)]
    argv += ["--contexts", "128,256", "--batches", "1,2", "--ks", "1,4", "--reps", "3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "verify context 256 batch 2 k 4: 1.5 ms" in printed
    table = load_lut(out, use_cache=False)
    assert table.row_count == 2 * 2 + 2 * 2 + 2 * 2 * 2  # prefill, draft_decode, verify
    head = load_lut(tmp_path / "lut" / "llama-68m.eagle__my-gpu.csv", use_cache=False)
    assert head.row_count == 4


def test_free_gpu_memory_is_the_default_limit(monkeypatch, capsys):
    runtime = cli.Runtime(FakeFactory(), FakeBackend([1.0]), None, 0.05)
    monkeypatch.setattr(cli, "_runtime", lambda request: runtime)
    assert main(["profile", "--model", "llama-68m", "--hardware", "my-gpu"]) == 2
    assert "the GPU's free memory (0.1 GiB)" in capsys.readouterr().err


# --- the PyTorch model on the CPU (only where PyTorch is installed) ----------------------------


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_cached_decode_matches_a_longer_prefill(tmp_path):
    import torch

    from lut_population.profile import torch_model as tm

    s = resolve_model(str(llama_config(tmp_path)))
    dev, dtype = torch.device("cpu"), torch.float32
    decoder = tm.Decoder(
        s, tm.random_weights(s, dtype, dev), *tm.rope_tables(s, 64, dtype, dev), False
    )
    tokens = torch.randint(s.vocab_size, (3, 9))
    full = tm.new_caches(s, s.num_layers, 3, 9, dtype, dev)
    whole = decoder.hidden_states(decoder.weights.embed[tokens], full, 0)
    parts = tm.new_caches(s, s.num_layers, 3, 9, dtype, dev)
    first = decoder.hidden_states(decoder.weights.embed[tokens[:, :8]], parts, 0)
    last = decoder.hidden_states(decoder.weights.embed[tokens[:, 8:]], parts, 8)
    assert torch.allclose(first, whole[:, :8], atol=1e-4)
    assert torch.allclose(last, whole[:, 8:], atol=1e-4)
    assert torch.allclose(parts[0].keys, full[0].keys, atol=1e-5)
    assert decoder.forward(tokens, full, 0, 2).shape == (3, 2)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_cpu_run_of_the_command_writes_loadable_files(tmp_path, capsys):
    config = llama_config(tmp_path)
    out = tmp_path / "tiny__cpu.csv"
    argv = ["profile", "--model", str(config), "--model-id", "tiny", "--hardware", "cpu"]
    argv += ["--device", "cpu", "-o", str(out), "--contexts", "16,32", "--batches", "1,2"]
    argv += ["--prefill-batches", "1", "--ks", "1,2", "--head-widths", "1,2"]
    argv += ["--reps", "3", "--warmup", "1"]
    assert main(argv) == 0
    import pandas as pd

    load_lut(out, use_cache=False)
    frame = pd.read_csv(out)
    assert set(frame["phase"]) == {"prefill", "draft_decode", "verify"}
    assert (frame["latency_ms"] > 0).all()
    assert frame["notes"].str.contains("peak memory estimated").all()
    assert frame["source"].str.startswith("microbench:profile_v1:wall-clock").all()
    for name in ("tiny.eagle__cpu.csv", "tiny.eagle-w2__cpu.csv"):
        load_lut(tmp_path / name, use_cache=False)
        assert (pd.read_csv(tmp_path / name)["phase"] == "draft_decode").all()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_nothing_but_the_measurement_imports_torch():
    import subprocess

    code = (
        "import sys, lut_population.__main__, lut_population.profile.cli; "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"
