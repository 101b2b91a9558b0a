"""Copy the subset of the staged measurements the build needs into ``inputs/``.

This is the documented, committed filtering step: ``python -m lut_population
prepare DATA_DIR`` reads the staged data directory (laid out as described in
its ``MANIFEST.md``: ``vidur/``, ``distserve/``, ``energy/``, ``devices/``,
``LICENSES/``) and writes small, column- and row-filtered copies into
``lut_population/inputs``. Cells are copied as text, unchanged, so the copies
hold exactly the source's numbers. The build itself never reads ``DATA_DIR``.

What is kept (see ``inputs/SOURCES.md`` for origins and licences):

* Vidur ``mlp.csv`` operator profiles: the per-operator ``median`` columns,
  the shape columns and ``num_tokens`` / ``num_tensor_parallel_workers``.
* The Vidur A100 attention table (3 MB): only the columns describing a row
  and the two medians, for decode rows with batch sizes 1, 2, 4, ..., 128
  plus 96, and prefill rows whose chunk size is 64 or a multiple of 128.
* Vidur CPU overheads: the ``*_median`` columns, batch size and TP degree.
* Vidur NCCL all-reduce profiles: rows inside one node
  (``devices_per_node == num_workers``), columns size, workers and median.
* DistServe's fitted A100 coefficients, of its own engine and of vLLM: copied whole.
* ML.ENERGY v2 / v3 rows of the Llama-3.1 8B and 70B models, and the v2 rows of
  CodeLlama-34B.
* The curated device-fact rows named in :data:`DEVICE_ROWS`.
* The H100 measurements made for this project (``microbench_h100/``): the
  whole-iteration file ``iterations.csv``, the token-tree and draft-head file
  ``trees_heads.csv`` and the folder's ``README.md`` (the method the rows are
  cited by), each copied whole, byte for byte.
* The H100 serving-loop measurements (``serving_loop_h100/``): ``lut_raw.csv``
  whole; of each ``steps_<mode>_r<rate>.csv`` every row and the columns in
  :data:`SERVING_STEP_COLUMNS` (read by ``scripts/derive_step_timing.py``,
  not by the build).
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from lut_population.paths import INPUTS_DIR

MLP_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("a100", "llama-2-7b", "a100_meta-llama_Llama-2-7b-hf_mlp.csv"),
    ("a100", "llama-2-70b", "a100_meta-llama_Llama-2-70b-hf_mlp.csv"),
    ("a100", "llama-3-8b", "a100_meta-llama_Meta-Llama-3-8B_mlp.csv"),
    ("a100", "phi-2", "a100_microsoft_phi-2_mlp.csv"),
    ("h100", "llama-2-7b", "h100_meta-llama_Llama-2-7b-hf_mlp.csv"),
    ("h100", "llama-2-70b", "h100_meta-llama_Llama-2-70b-hf_mlp.csv"),
    ("h100", "phi-2", "h100_microsoft_phi-2_mlp.csv"),
)
"""(gpu, model id, staged file name under ``vidur/compute``) of every operator profile used."""

MLP_KEY_COLUMNS = (
    "num_tensor_parallel_workers",
    "num_tokens",
    "n_head",
    "n_kv_head",
    "n_embd",
    "n_expanded_embd",
    "vocab_size",
    "use_gated_mlp",
)
"""Shape and size columns kept from the operator profiles."""

ATTENTION_SOURCE = "a100_attention_n8192_q64_kv8_tp2_OLDFORMAT.csv"
ATTENTION_KEY_COLUMNS = (
    "is_prefill",
    "batch_size",
    "kv_cache_size",
    "prefill_chunk_size",
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "num_tensor_parallel_workers",
)
ATTENTION_DECODE_BATCHES = frozenset({1, 2, 4, 8, 16, 32, 64, 96, 128})
"""Decode batch sizes kept from the attention table."""

CPU_SOURCE = "a100_cpu_overheads_OLDFORMAT.csv"
CPU_COLUMNS = (
    "model_name",
    "batch_size",
    "tensor_parallel_degree",
    "schedule_median",
    "sampler_e2e_median",
    "prepare_inputs_e2e_median",
    "process_model_outputs_median",
)

ENERGY_MODELS_V2 = frozenset(
    {
        "meta-llama/Meta-Llama-3.1-8B-Instruct",
        "meta-llama/Meta-Llama-3.1-70B-Instruct",
        "codellama/CodeLlama-34b-hf",
    }
)
"""ML.ENERGY v2 models copied: the Llama-3.1 power references (``power.REFERENCE_RUNS``) and
CodeLlama-34B, whose time per output token is compared with its LUT (``v2_checks.py``)."""
ENERGY_MODELS_V3 = frozenset(
    {"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"}
)

MICROBENCH_FILES = ("iterations.csv", "trees_heads.csv", "stream_overlap.csv", "README.md")
"""Files of the staged ``microbench_h100/`` folder copied whole: whole-iteration latencies, draft-head
and token-tree latencies, two streams sharing the GPU, and the method they are cited by."""

DEVICE_ROWS: tuple[tuple[str, str], ...] = (
    ("RTX 3070 8GB", "Q4_K_M"),
    ("RTX 3080 10GB", "Q4_K_M"),
    ("RTX 3090 24GB", "Q4_K_M"),
    ("RTX 3090 24GB", "F16"),
    ("RTX 4090 24GB", "Q4_K_M"),
    ("RTX 4090 24GB", "F16"),
    ("A100 SXM 80GB", "Q4_K_M"),
    ("H100 PCIe 80GB", "Q4_K_M"),
    ("H100 SXM 80GB", "bf16"),
    ("M3 Max 40-core GPU 64GB", "Q4_K_M"),
    ("RTX 4050 Laptop", "GPTQ int4"),
    ("iPhone 16 Pro (A18 Pro GPU)", "Q4_0"),
    ("Galaxy S25 (Adreno OpenCL)", "(not stated)"),
    ("Jetson Orin Nano 8GB (original 15W)", "INT4"),
    ("Jetson Orin Nano Super (25W)", "INT4"),
)
"""(device, quant) of the curated device-fact rows that are copied."""

MICROBENCH_DIR = "microbench_h100"
"""Folder of the project's own H100 measurements, in the data directory and in ``inputs/``."""

LICENSES = (
    "vidur_MIT.txt",
    "DistServe_Apache-2.0.txt",
    "mlenergy-leaderboard-v2_Apache-2.0.txt",
    "mlenergy-benchmark-v3-data_Apache-2.0.txt",
)

SERVING_LOOP_DIR = "serving_loop_h100"
"""The staged folder of the H100 serving-loop measurements (and its copy under ``inputs/``)."""
SERVING_STEP_FILES = tuple(
    f"steps_{mode}_r{rate}.csv" for mode in ("plain", "fused") for rate in ("4", "8", "12.1")
)
"""The serving loop's per-step files (plain decode and fused rounds at three arrival rates)."""
SERVING_STEP_COLUMNS = (
    "kind",
    "dur_ms",
    "n",
    "bucket",
    "mean_ctx",
    "max_ctx",
    "prompt",
    "after_idle",
)
"""Per-step columns kept: kind, duration, batch shape and contexts, prompt length."""

Row = dict[str, str]


def _read(path: Path) -> tuple[list[str], list[Row]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        return header, list(reader)


def _write(path: Path, columns: Sequence[str], rows: Iterable[Row]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([row[c] for c in columns])
            count += 1
    return count


def _filtered(
    source: Path, target: Path, columns: Sequence[str], keep: Callable[[Row], bool]
) -> int:
    _, rows = _read(source)
    return _write(target, columns, (r for r in rows if keep(r)))


def _prepare_mlp(data: Path, out: Path) -> list[str]:
    done = []
    for gpu, model, name in MLP_SOURCES:
        header, rows = _read(data / "vidur" / "compute" / name)
        medians = [c for c in header if c.startswith("time_stats.") and c.endswith(".median")]
        columns = [*MLP_KEY_COLUMNS, *medians]
        target = out / "vidur" / "mlp" / f"{gpu}__{model}.csv"
        count = _write(target, columns, rows)
        done.append(f"{target.name}: {count} rows")
    return done


def _keep_attention(row: Row) -> bool:
    if row["is_prefill"] == "False":
        return int(row["batch_size"]) in ATTENTION_DECODE_BATCHES
    chunk = int(row["prefill_chunk_size"])
    return chunk == 64 or chunk % 128 == 0


def _prepare_microbench(data: Path, out: Path) -> list[str]:
    source = data / MICROBENCH_DIR
    (out / MICROBENCH_DIR).mkdir(parents=True, exist_ok=True)
    for name in MICROBENCH_FILES:
        shutil.copyfile(source / name, out / MICROBENCH_DIR / name)
    return [f"{MICROBENCH_DIR}/{name}: copied" for name in MICROBENCH_FILES]


def _prepare_serving_loop(data: Path, out: Path) -> list[str]:
    source = data / SERVING_LOOP_DIR
    target = out / SERVING_LOOP_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "lut_raw.csv", target / "lut_raw.csv")
    done = ["lut_raw.csv: copied"]
    for name in SERVING_STEP_FILES:
        count = _filtered(source / name, target / name, SERVING_STEP_COLUMNS, lambda row: True)
        done.append(f"{name}: {count} rows")
    return done


def prepare(data_dir: Path, inputs_dir: Path = INPUTS_DIR) -> list[str]:
    """Write the filtered copies of the staged data into ``inputs_dir``.

    Args:
        data_dir: The staged data directory (with ``MANIFEST.md``).
        inputs_dir: Where the copies go (normally ``lut_population/inputs``).

    Returns:
        One line per written file, naming it and its row count.
    """
    done = _prepare_mlp(data_dir, inputs_dir)
    compute = data_dir / "vidur" / "compute"
    attention_columns = [
        *ATTENTION_KEY_COLUMNS,
        "time_stats.attn_decode.median",
        "time_stats.attn_prefill.median",
    ]
    count = _filtered(
        compute / ATTENTION_SOURCE,
        inputs_dir / "vidur" / "attention_a100.csv",
        attention_columns,
        _keep_attention,
    )
    done.append(f"attention_a100.csv: {count} rows")
    count = _filtered(
        compute / CPU_SOURCE,
        inputs_dir / "vidur" / "cpu_overheads_a100.csv",
        CPU_COLUMNS,
        lambda row: True,
    )
    done.append(f"cpu_overheads_a100.csv: {count} rows")
    for gpu in ("a100", "h100"):
        count = _filtered(
            data_dir / "vidur" / "network" / f"{gpu}_dgx_all_reduce.csv",
            inputs_dir / "vidur" / f"all_reduce_{gpu}.csv",
            ("num_workers", "size", "time_stats.all_reduce.median"),
            lambda row: row["devices_per_node"] == row["num_workers"],
        )
        done.append(f"all_reduce_{gpu}.csv: {count} rows")
    for engine in ("distserve", "vllm"):
        name = f"profiler-a100-80g.{engine}.json"
        target = inputs_dir / "distserve" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir / "distserve" / name, target)
        done.append(f"{target.name}: copied")
    header, _ = _read(data_dir / "energy" / "mlenergy_v2_llm_a100_h100.csv")
    count = _filtered(
        data_dir / "energy" / "mlenergy_v2_llm_a100_h100.csv",
        inputs_dir / "energy" / "mlenergy_v2_rows.csv",
        header,
        lambda row: row["model"] in ENERGY_MODELS_V2,
    )
    done.append(f"mlenergy_v2_rows.csv: {count} rows")
    header, _ = _read(data_dir / "energy" / "mlenergy_v3_llm_h100_b200.csv")
    count = _filtered(
        data_dir / "energy" / "mlenergy_v3_llm_h100_b200.csv",
        inputs_dir / "energy" / "mlenergy_v3_rows.csv",
        header,
        lambda row: (
            row["gpu"] == "H100"
            and row["model"] in ENERGY_MODELS_V3
            and row["task"] == "lm-arena-chat"
        ),
    )
    done.append(f"mlenergy_v3_rows.csv: {count} rows")
    header, _ = _read(data_dir / "devices" / "device_facts_curated.csv")
    wanted = set(DEVICE_ROWS)
    count = _filtered(
        data_dir / "devices" / "device_facts_curated.csv",
        inputs_dir / "devices" / "device_facts_rows.csv",
        header,
        lambda row: (row["device"], row["quant"]) in wanted,
    )
    done.append(f"device_facts_rows.csv: {count} rows")
    done += _prepare_microbench(data_dir, inputs_dir)
    done += _prepare_serving_loop(data_dir, inputs_dir)
    licences = inputs_dir / "LICENSES"
    licences.mkdir(parents=True, exist_ok=True)
    for name in LICENSES:
        shutil.copyfile(data_dir / "LICENSES" / name, licences / name)
    done.append(f"LICENSES: {len(LICENSES)} files")
    return done
