"""The committed filtering step (``python -m lut_population prepare DATA_DIR``) on a fake staged directory."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from lut_population.__main__ import main
from lut_population.prepare import (
    ATTENTION_SOURCE,
    CPU_COLUMNS,
    CPU_SOURCE,
    DEVICE_ROWS,
    LICENSES,
    MICROBENCH_FILES,
    MLP_KEY_COLUMNS,
    MLP_SOURCES,
    SERVING_LOOP_DIR,
    SERVING_STEP_COLUMNS,
    SERVING_STEP_FILES,
    prepare,
)


def write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def staged(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "MANIFEST.md").write_text("staged\n", encoding="utf-8")
    mlp_header = [
        "time_stats.emb.min",
        "time_stats.emb.median",
        "time_stats.add.median",
        *MLP_KEY_COLUMNS,
    ]
    for _, _, name in MLP_SOURCES:
        write(
            root / "vidur" / "compute" / name,
            mlp_header,
            [[0.1, "0.215", "0.055", 1, 1, 32, 32, 4096, 11008, 32768, True]],
        )
    attention_header = [
        "is_prefill",
        "batch_size",
        "kv_cache_size",
        "prefill_chunk_size",
        "n_embd",
        "n_q_head",
        "n_kv_head",
        "num_tensor_parallel_workers",
        "time_stats.attn_decode.median",
        "time_stats.attn_prefill.median",
        "attention_backend",
    ]
    write(
        root / "vidur" / "compute" / ATTENTION_SOURCE,
        attention_header,
        [
            ["False", 8, 512, 0, 8192, 64, 8, 2, "0.015", "", "FA"],
            ["False", 3, 512, 0, 8192, 64, 8, 2, "0.014", "", "FA"],
            ["True", 1, 0, 256, 8192, 64, 8, 2, "", "0.05", "FA"],
            ["True", 1, 0, 80, 8192, 64, 8, 2, "", "0.02", "FA"],
        ],
    )
    write(
        root / "vidur" / "compute" / CPU_SOURCE,
        ["", *CPU_COLUMNS, "ray_comm_time_mean"],
        [[0, "m", 8, 2, 0.04, 0.65, 0.14, 0.32, 2.5]],
    )
    for gpu in ("a100", "h100"):
        write(
            root / "vidur" / "network" / f"{gpu}_dgx_all_reduce.csv",
            ["", "time_stats.all_reduce.median", "num_workers", "size", "devices_per_node"],
            [[0, "0.04", 2, 2048, 2], [1, "0.09", 2, 2048, 1]],
        )
    (root / "distserve").mkdir(parents=True)
    for engine in ("distserve", "vllm"):
        distserve = root / "distserve" / f"profiler-a100-80g.{engine}.json"
        distserve.write_text(json.dumps({"facebook/opt-66b": {}}), encoding="utf-8")
    write(
        root / "energy" / "mlenergy_v2_llm_a100_h100.csv",
        ["task", "gpu", "model", "tp"],
        [
            ["chat", "A100", "meta-llama/Meta-Llama-3.1-8B-Instruct", 1],
            ["chat", "A100", "google/gemma-2-9b-it", 1],
        ],
    )
    write(
        root / "energy" / "mlenergy_v3_llm_h100_b200.csv",
        ["task", "gpu", "model", "tp"],
        [
            ["lm-arena-chat", "H100", "meta-llama/Llama-3.1-8B-Instruct", 1],
            ["lm-arena-chat", "B200", "meta-llama/Llama-3.1-8B-Instruct", 1],
            ["gpqa", "H100", "meta-llama/Llama-3.1-8B-Instruct", 1],
        ],
    )
    device, quant = DEVICE_ROWS[0]
    write(
        root / "devices" / "device_facts_curated.csv",
        ["device", "quant", "decode_tok_s"],
        [[device, quant, "70.94"], ["Some other board", "Q8_0", "5"]],
    )
    for name in MICROBENCH_FILES:
        write(
            root / "microbench_h100" / name,
            ["phase", "model", "latency_ms_median"],
            [["draft_head", "llama-2-7b", "0.32341"], ["lm_head", "llama-3-8b", "0.41248"]],
        )
    loop = root / SERVING_LOOP_DIR
    write(loop / "lut_raw.csv", ["phase", "n", "wall_ms_median"], [["decode", 1, "6.12249"]])
    for name in SERVING_STEP_FILES:
        write(
            loop / name,
            ["step", *SERVING_STEP_COLUMNS, "gap_ms"],
            [[0, "decode", "6.8035", 3, 4, "698.33", 894, 0, 0, "0.0114"]],
        )
    for name in LICENSES:
        (root / "LICENSES").mkdir(exist_ok=True)
        (root / "LICENSES" / name).write_text("licence\n", encoding="utf-8")
    return root


def test_prepare_keeps_only_the_documented_rows_and_columns(tmp_path):
    data = staged(tmp_path / "data")
    out = tmp_path / "inputs"
    lines = prepare(data, out)
    assert any("attention_a100.csv: 2 rows" in line for line in lines)
    mlp = read(out / "vidur" / "mlp" / "a100__llama-2-7b.csv")
    assert list(mlp[0]) == [*MLP_KEY_COLUMNS, "time_stats.emb.median", "time_stats.add.median"]
    assert mlp[0]["time_stats.emb.median"] == "0.215"  # copied as text
    attention = read(out / "vidur" / "attention_a100.csv")
    assert [(r["is_prefill"], r["batch_size"], r["prefill_chunk_size"]) for r in attention] == [
        ("False", "8", "0"),
        ("True", "1", "256"),
    ]
    assert "attention_backend" not in attention[0]
    assert "ray_comm_time_mean" not in read(out / "vidur" / "cpu_overheads_a100.csv")[0]
    assert [
        r["time_stats.all_reduce.median"] for r in read(out / "vidur" / "all_reduce_a100.csv")
    ] == ["0.04"]
    assert len(read(out / "energy" / "mlenergy_v2_rows.csv")) == 1
    assert len(read(out / "energy" / "mlenergy_v3_rows.csv")) == 1
    assert [r["device"] for r in read(out / "devices" / "device_facts_rows.csv")] == [
        DEVICE_ROWS[0][0]
    ]
    assert sorted(p.name for p in (out / "LICENSES").iterdir()) == sorted(LICENSES)
    for name in MICROBENCH_FILES:
        copied = (out / "microbench_h100" / name).read_bytes()
        assert copied == (data / "microbench_h100" / name).read_bytes()
    steps = read(out / SERVING_LOOP_DIR / SERVING_STEP_FILES[0])
    assert list(steps[0]) == list(SERVING_STEP_COLUMNS)
    assert steps[0]["mean_ctx"] == "698.33"  # copied as text
    assert read(out / SERVING_LOOP_DIR / "lut_raw.csv")[0]["wall_ms_median"] == "6.12249"


def test_prepare_refuses_a_directory_without_manifest(tmp_path, capsys):
    assert main(["prepare", str(tmp_path)]) == 2
    assert "MANIFEST.md" in capsys.readouterr().err
