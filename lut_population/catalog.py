"""Render ``lut/CATALOG.md``: every LUT file, its grids and inputs, and the calibration report."""

from __future__ import annotations

from collections.abc import Iterable

from lut_population import BUILD_DATE, GENERATOR_VERSION
from lut_population.attention import fit_attention
from lut_population.build import BuiltFile, BuiltKey
from lut_population.collectives import all_reduce_fit
from lut_population.cpu_overhead import cpu_overhead_fit
from lut_population.device_roofline import balance, calibrate
from lut_population.distserve_fit import SOURCE as DISTSERVE_SOURCE
from lut_population.distserve_fit import VLLM_SOURCE as DISTSERVE_VLLM_SOURCE
from lut_population.gpu_scaling import gpu_ratios
from lut_population.head_spot_checks import head_points, head_summaries
from lut_population.inputs import (
    has_operator_profile,
    load_attention_profile,
    load_devices_config,
    load_models,
    load_operator_profile,
)
from lut_population.long_context import HARDWARE as MEASURED_HARDWARE
from lut_population.long_context import MIN_CONTEXT, slope_comparisons, slope_summaries
from lut_population.measured_compare import measured_section
from lut_population.microbench import FILLED_NOTE
from lut_population.op_roofline import op_roofline_fit
from lut_population.operators import MonotoneCurve
from lut_population.plan import DTYPE, PIPELINE_PARALLEL, gpu_hardware
from lut_population.power import power_curve
from lut_population.v2_checks import tpot_section

INPUT_SOURCES: dict[str, tuple[str, str, str, str, str]] = {
    "vidur_mlp": (
        "inputs/vidur/mlp/<gpu>__<model>.csv",
        "microsoft/vidur",
        "data/profiling/compute/<gpu>/<org>/<model>/mlp.csv",
        "7d47513363ec447a741ac5e47241580b47724fbf",
        "MIT",
    ),
    "vidur_attention": (
        "inputs/vidur/attention_a100.csv",
        "microsoft/vidur",
        "data/profiling/a100/attention.csv",
        "acb95f6cd118071401fa805a0b0bc11bd2018fc6",
        "MIT",
    ),
    "vidur_cpu": (
        "inputs/vidur/cpu_overheads_a100.csv",
        "microsoft/vidur",
        "data/profiling/a100/cpu_overheads.csv",
        "acb95f6cd118071401fa805a0b0bc11bd2018fc6",
        "MIT",
    ),
    "vidur_network": (
        "inputs/vidur/all_reduce_<gpu>.csv",
        "microsoft/vidur",
        "data/profiling/network/<gpu>_dgx/all_reduce.csv",
        "7d47513363ec447a741ac5e47241580b47724fbf",
        "MIT",
    ),
    "mlenergy_v2": (
        "inputs/energy/mlenergy_v2_rows.csv",
        "ml-energy/leaderboard-v2",
        "data/llm_text_generation/{chat,code}/<gpu>/<org>/<model>/bs*+tp*+pp*.json (as CSV)",
        "c3af7f31e231a2a7021c5f8e2a54dd712d02e6e2",
        "Apache-2.0",
    ),
    "mlenergy_v3": (
        "inputs/energy/mlenergy_v3_rows.csv",
        "ml-energy/leaderboard",
        "public/data/models/*__lm-arena-chat.json (as CSV)",
        "0cd52dab897c5d91a45f4d413038f3b8b4251b0f",
        "Apache-2.0 (ML.ENERGY Benchmark v3 data licence)",
    ),
    "distserve": (
        "inputs/distserve/profiler-a100-80g.distserve.json",
        "LLMServe/DistServe",
        "simdistserve/estimators/profile_data/profiler-a100-80g.distserve.json",
        "82831f1604cc6b10bebd360f6c437a07790dde9f",
        "Apache-2.0",
    ),
    "distserve_vllm": (
        "inputs/distserve/profiler-a100-80g.vllm.json",
        "LLMServe/DistServe",
        "simdistserve/estimators/profile_data/profiler-a100-80g.vllm.json",
        "82831f1604cc6b10bebd360f6c437a07790dde9f",
        "Apache-2.0",
    ),
    "device_facts": (
        "inputs/devices/device_facts_rows.csv",
        "several (source_url column of each row)",
        "READMEs, issue threads, vendor blog; facts with citations",
        "n/a",
        "facts only (per row)",
    ),
    "microbench_h100": (
        "inputs/microbench_h100/iterations.csv",
        "this project (H100 measurements, 2026-11-25)",
        "microbench_h100/iterations.csv (method in that folder's README.md)",
        "n/a",
        "own measurement",
    ),
    "models": (
        "inputs/models.yaml",
        "Hugging Face config.json of each model; Vidur model_config.py",
        "see the source field of each model",
        "86e0a99a9624931a4ef7ae61d2e73d7122ff8b35 (Vidur)",
        "facts",
    ),
    "heads": (
        "inputs/heads.yaml",
        "EAGLE, EAGLE-3, Medusa papers; released drafter config.json files",
        "see the source field of each head",
        "n/a",
        "facts",
    ),
    "microbench_h100_heads": (
        "inputs/microbench_h100/trees_heads.csv",
        "measured for this project (one H100 80GB HBM3, machine C, 2026-11-25)",
        "microbench_h100/trees_heads.csv of the staged data",
        "n/a",
        "own measurement, free to use",
    ),
    "quant_formats": (
        "inputs/quant_formats.yaml",
        "ggml-org/llama.cpp, mlc-ai/mlc-llm, GPTQ configs",
        "see the source field of each format",
        "311c2c9f0ebd6e08f5b20e8827c654cebb7a41d6 (llama.cpp README)",
        "facts",
    ),
}
"""Input id -> (copy in this repository, origin repository, origin path, commit, licence)."""


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def _num(value: float, digits: int = 4) -> str:
    return f"{value:.{digits}g}"


def _axis(values: Iterable[int]) -> str:
    items = list(values)
    return f"{len(items)} values: " + ", ".join(str(v) for v in items)


def _inputs_of(built: BuiltFile) -> list[str]:
    method = built.spec.method
    ids: list[str] = ["models"]
    if method == DISTSERVE_SOURCE:
        return [*ids, "distserve"]
    if method == DISTSERVE_VLLM_SOURCE:
        return [*ids, "distserve_vllm"]
    if "microbench" in method:
        return [*ids, "microbench_h100", "vidur_mlp", "vidur_attention", "mlenergy_v3"]
    if "roofline_v1" in method and "vidur" not in method:
        return [*ids, "device_facts", "quant_formats"]
    ids += ["vidur_mlp", "vidur_attention", "vidur_cpu"]
    if any(k.spec.tensor_parallel > 1 for k in built.keys):
        ids.append("vidur_network")
    ids.append("mlenergy_v3" if built.spec.hardware.startswith("h100") else "mlenergy_v2")
    return ids


def _file_table(files: tuple[BuiltFile, ...]) -> list[str]:
    lines = [
        "| file | model | hardware | TP | phases | rows | source |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for built in files:
        tps = sorted({k.spec.tensor_parallel for k in built.keys})
        phases = sorted({k.spec.phase for k in built.keys})
        lines.append(
            f"| [{built.spec.name}]({built.spec.name}) | {built.spec.model} | {built.spec.hardware} "
            f"| {', '.join(str(t) for t in tps)} | {', '.join(phases)} | {built.rows} "
            f"| `{built.spec.method}` |"
        )
    return lines


def _key_lines(key: BuiltKey) -> list[str]:
    g = key.grid
    over = f"; {key.over_memory} points exceed memory" if key.over_memory else ""
    filled = sum(1 for _, note in key.spec.point_notes if note.startswith(FILLED_NOTE))
    over += f"; {filled} points not measured (filled)" if filled else ""
    return [
        f"- `{key.spec.phase}`, TP {key.spec.tensor_parallel} ({g.size} rows{over})",
        f"  - context_len {_axis(g.context)}",
        f"  - microbatch {_axis(g.batch)}",
        f"  - fanout_k {_axis(g.fanout_k)}",
    ]


def _file_section(built: BuiltFile) -> list[str]:
    spec = built.spec
    tps = sorted({k.spec.tensor_parallel for k in built.keys})
    lines = [
        f"### {spec.name}",
        "",
        f"- model: `{spec.model}`; hardware: `{spec.hardware}`",
        f"- tensor_parallel: {', '.join(str(t) for t in tps)}; pipeline_parallel: "
        f"{PIPELINE_PARALLEL}; dtype: {DTYPE}",
        f"- source: `{spec.method}`",
        "- inputs: " + ", ".join(f"`{i}`" for i in _inputs_of(built)),
        f"- generator {GENERATOR_VERSION}, built {BUILD_DATE}",
        "- grids:",
    ]
    for key in built.keys:
        lines += ["  " + line for line in _key_lines(key)]
    lines.append("")
    return lines


def _inputs_section() -> list[str]:
    lines = [
        "## Inputs",
        "",
        "Copies live in `lut_population/inputs/` (filtered by `python -m lut_population prepare`);"
        " origins and licences are in `lut_population/inputs/SOURCES.md`.",
        "",
        "| id | copy | origin | origin path | commit | licence |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, (copy, repo, path, commit, licence) in INPUT_SOURCES.items():
        lines.append(f"| `{key}` | `{copy}` | {repo} | `{path}` | {commit} | {licence} |")
    return [*lines, ""]


def _gpu_section() -> list[str]:
    fit = fit_attention(load_attention_profile())
    lines = [
        "## Calibration and fit quality",
        "",
        "### Attention (Vidur A100 FlashAttention table, 32 q-heads / 4 KV-heads / 128 per GPU)",
        "",
        f"- memory-bound part: m0 {_num(fit.mem[0])} ms, m1 {_num(fit.mem[1])} ms, "
        f"{_num(fit.bandwidth_gb_per_s)} GB/s; {fit.rows[0]} decode rows, relative error median "
        f"{_pct(fit.decode_error[0])}, p90 {_pct(fit.decode_error[1])}",
        f"- compute-bound part: c0 {_num(fit.cmp[0])} ms, {_num(fit.tflop_per_s)} TFLOP/s, "
        f"{_num(fit.cmp[2])} ms per 1000 chunk tokens; {fit.rows[1]} prefill rows, relative error "
        f"median {_pct(fit.prefill_error[0])}, p90 {_pct(fit.prefill_error[1])}",
        "",
    ]
    for gpu in sorted(set(gpu_hardware().values()) - {"a100"}):
        r = gpu_ratios("a100", gpu)
        lines += [
            f"### {gpu} / a100 time ratios (Vidur operator profiles of llama-2-7b and llama-2-70b)",
            "",
            f"- bandwidth-bound: {_num(r.mem, 3)} (range {_num(r.mem_range[0], 3)}-"
            f"{_num(r.mem_range[1], 3)}, {r.samples[0]} samples)",
            f"- compute-bound: {_num(r.cmp, 3)} (range {_num(r.cmp_range[0], 3)}-"
            f"{_num(r.cmp_range[1], 3)}, {r.samples[1]} samples)",
            "",
        ]
    lines += ["### Operator profile smoothing (knots 1, 2, 3, 4, 6, 8, 12, ... tokens)", ""]
    lines += [
        "| gpu | model | ops x TP | median deviation | median p90 | worst p90 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    models = load_models()
    for gpu in sorted(set(gpu_hardware().values())):
        for model_id in sorted(models):
            if not has_operator_profile(gpu, model_id):
                continue
            errors = [
                MonotoneCurve(curve).smoothing_error
                for per_op in load_operator_profile(gpu, model_id).curves.values()
                for curve in per_op.values()
            ]
            med = sorted(e[0] for e in errors)[len(errors) // 2]
            p90 = sorted(e[1] for e in errors)
            lines.append(
                f"| {gpu} | {model_id} | {len(errors)} | {_pct(med)} | {_pct(p90[len(p90) // 2])} "
                f"| {_pct(p90[-1])} |"
            )
    lines.append("")
    for gpu in sorted(set(gpu_hardware().values())):
        fit_op = op_roofline_fit(gpu)
        lines += [
            f"### Operator roofline for unprofiled models on {gpu}",
            "",
            f"- fitted to {', '.join(fit_op.models)} ({fit_op.samples[0]} matrix-product and "
            f"{fit_op.samples[1]} element-wise samples): g0 {_num(fit_op.gemm[0])} ms, "
            f"{_num(fit_op.bandwidth_gb_per_s)} GB/s, {_num(fit_op.tflop_per_s)} TFLOP/s; "
            f"relative error median {_pct(fit_op.fit_error[0])}, p90 {_pct(fit_op.fit_error[1])}",
        ]
        if fit_op.holdout_error:
            per_op = ", ".join(f"{op} {_pct(e)}" for op, e in sorted(fit_op.holdout_error.items()))
            block = ", ".join(
                f"{n} tokens {_pct(e)}" for n, e in sorted(fit_op.holdout_block_error.items())
            )
            lines.append(f"- held-out phi-2, median error per operator: {per_op}")
            lines.append(f"- held-out phi-2, error of the summed block operators: {block}")
        lines.append("")
    lines += ["### Tensor-parallel all-reduce (Vidur NCCL, inside one node)", ""]
    lines += [
        "| gpu | workers | latency ms | GB/s | median error | p90 error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for gpu in sorted(set(gpu_hardware().values())):
        for workers in (2, 4, 8):
            f = all_reduce_fit(gpu, workers)
            lines.append(
                f"| {gpu} | {workers} | {_num(f.latency_ms)} | {_num(f.bandwidth_gb_per_s)} "
                f"| {_pct(f.error[0])} | {_pct(f.error[1])} |"
            )
    cpu = cpu_overhead_fit()
    lines += ["", "### Host overhead (Vidur A100 CPU overheads, batch 8-128)", ""]
    for part, (a, b) in cpu.parts.items():
        lines.append(f"- {part}: {_num(a)} ms + {_num(b)} ms x n")
    lines += [
        f"- summed fit error on the profiled rows: median {_pct(cpu.error[0])}, max "
        f"{_pct(cpu.error[1])}",
        "",
        "### Power (ML.ENERGY)",
        "",
    ]
    for gpu in sorted(set(gpu_hardware().values())):
        for size in ("small", "large"):
            curve = power_curve(gpu, size)
            points = ", ".join(
                f"{_num(b, 4)}: {_num(p, 4)} W"
                for b, p in zip(curve.batch, curve.power_w, strict=True)
            )
            lines.append(
                f"- {gpu}, {size} models: {curve.model} TP {curve.tensor_parallel}, per-GPU power "
                f"by batch {points}"
            )
    lines.append("")
    return lines


def _long_context_section() -> list[str]:
    fit = fit_attention(load_attention_profile())
    ratios = gpu_ratios("a100", "h100")
    lines = [
        "### Long context: attention beyond the profiled 4 096 tokens",
        "",
        "Beyond the attention table the same rule holds (PLAN.md 4.4): decode and verify pay the "
        "bytes of KV read over the fitted bandwidth, prefill the causal FLOPs (quadratic in the "
        f"prompt) over the fitted throughput. Implied rates: KV read {_num(fit.bandwidth_gb_per_s)} "
        f"GB/s on a100, {_num(fit.bandwidth_gb_per_s / ratios.mem)} GB/s on h100; attention "
        f"{_num(fit.tflop_per_s)} TFLOP/s on a100, {_num(fit.tflop_per_s / ratios.cmp)} TFLOP/s "
        "on h100.",
        "",
        f"Check against the H100 measurements (`inputs/microbench_h100/iterations.csv`, GPU time, "
        f"context {MIN_CONTEXT} to 4 096): least-squares context slope (ms per 1 000 tokens) of "
        f"the composed latency ({MEASURED_HARDWARE}, TP 1) over the measured one at fixed batch "
        "and k. Level = composed / measured latency at the largest measured context.",
        "",
        "| group | series | median slope ratio | worst slope ratio | median level ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in slope_summaries():
        lines.append(
            f"| {s.label} | {s.series} | {_num(s.median_ratio, 3)} | {_num(s.worst_ratio, 3)} "
            f"| {_num(s.median_level_ratio, 3)} |"
        )
    lines += [
        "",
        "| phase | model | mode | batch | k | contexts | measured ms/1k | composed ms/1k "
        "| slope ratio | level ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in slope_comparisons():
        lines.append(
            f"| {c.phase} | {c.model} | {c.mode} | {c.batch} | {c.fanout_k} "
            f"| {', '.join(str(x) for x in c.contexts)} | {_num(c.measured_ms_per_1k)} "
            f"| {_num(c.composed_ms_per_1k)} | {_num(c.slope_ratio, 3)} | {_num(c.level_ratio, 3)} |"
        )
    lines.append("")
    return lines


def _head_section() -> list[str]:
    points = head_points(None)
    lines = [
        "### Draft heads against the H100 head measurements",
        "",
        f"EAGLE head step composed from the target's operators against "
        f"`inputs/microbench_h100/trees_heads.csv` ({len(points)} shapes: Llama-2-7B and "
        "Llama-3-8B, context 512 and 2048, batch 1-64, width 1, 4, 8; CUDA graphs, GPU time). "
        "Ratios composed / measured; `python -m lut_population check` prints every point.",
        "",
        "| comparison | median | worst |",
        "| --- | --- | --- |",
    ]
    for summary in head_summaries(points):
        name = summary.name.replace("head LUT row", "composed head step")
        lines.append(f"| {name} | {_num(summary.median, 3)} | {_num(summary.worst, 3)} |")
    return [*lines, ""]


def _device_section() -> list[str]:
    bal = balance()
    lines = [
        "### Roofline devices",
        "",
        f"Compute-to-bandwidth balance: median {_num(bal.flop_per_byte)} FLOP/byte over "
        f"{len(bal.rows)} devices (llama.cpp, Llama-3-8B). Leave-one-out error of predicting each "
        "device's prefill rate from its decode rate:",
        "",
        "| device | format | GB/s | TFLOP/s | FLOP/byte | leave-one-out error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in bal.rows:
        lines.append(
            f"| {row.device} | {row.quant} | {_num(row.bandwidth_gb_per_s)} | "
            f"{_num(row.tflop_per_s)} | {_num(row.balance)} | {_pct(row.loo_error)} |"
        )
    lines += [
        "",
        "| hardware | GB/s | TFLOP/s | memory MiB | power W | fact | measured tok/s "
        "| predicted tok/s | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for hardware in sorted(load_devices_config()["roofline"]):
        cal = calibrate(hardware)
        for check in cal.checks:
            kind = "calibration (exact by construction)" if check.fitted else "held out"
            memory = "-" if cal.memory_mb is None else _num(cal.memory_mb, 6)
            power = "-" if cal.power_w is None else _num(cal.power_w)
            lines.append(
                f"| {hardware} | {_num(cal.bandwidth_gb_per_s)} | {_num(cal.tflop_per_s)} | "
                f"{memory} | {power} | {check.model} {check.format}, {kind} | "
                f"{_num(check.measured_tok_s)} | {_num(check.predicted_tok_s)} | "
                f"{_pct(check.error)} |"
            )
    lines += ["", "Power of each device:", ""]
    for hardware in sorted(load_devices_config()["roofline"]):
        lines.append(f"- {hardware}: {calibrate(hardware).power_kind}")
    lines.append("")
    return lines


def _not_built() -> list[str]:
    skipped = load_devices_config().get("skipped") or {}
    lines = ["## Not built", ""]
    for hardware, reason in sorted(skipped.items()):
        lines.append(f"- `{hardware}`: {reason}")
    lines += [
        "- dtype bf16 and fp8: the profiles are fp16; no measurement gives their cost.",
        "- pipeline_parallel > 1: not modelled (every file has pipeline_parallel 1).",
        "- llama-2-70b and llama-3.1-70b at TP 1: their fp16 weights alone exceed one 80 GB GPU.",
        "- codellama-34b at TP 2 and above, and token-tree fanouts in its H100 verify rows: "
        "the set's size budget (52 MiB) has no room for them (the Verify-PD documents run it "
        "on one GPU).",
        "- draft heads whose authors released none for the target's family: EAGLE-3 for "
        "Llama-2-7B and Llama-2-70B, Medusa for Llama-2-70B and Llama-3-8B; multi-token "
        "prediction (MTP) for every bundled target (no Llama model has MTP modules). See "
        "`lut_population/PLAN.md` section 2.",
        "",
    ]
    return lines


def render_catalog(files: tuple[BuiltFile, ...]) -> str:
    """The catalog text for the built files."""
    lines = [
        "# LUT catalog",
        "",
        "Generated by `python -m lut_population build` from the committed inputs in "
        "`lut_population/inputs/`; do not edit by hand. "
        f"Generator version {GENERATOR_VERSION}, build date {BUILD_DATE}. "
        "How every number is made: `lut_population/PLAN.md`.",
        "",
        "All files: dtype fp16, pipeline_parallel 1, megabytes are MiB, latency is GPU time and "
        "energy in mJ the GPU's energy over it (host time and idle power are the simulator's: "
        "engine and device profiles). Rows whose peak memory exceeds the "
        "replica's memory are kept (the grid must stay rectangular) and say so in `notes`. "
        "Linear interpolation between neighbouring grid points is within 2 % of the composed "
        "latency and energy. Fused files (`<target>+<draft>`) run the draft on one GPU of the "
        "target replica (TP 1). Files in `microbench/` are built from the project's H100 "
        "measurements instead (measured grid points only, no refinement; unmeasured points "
        "filled and marked in `notes`; see the comparison below and `lut_population/PLAN.md` "
        "section 12). "
        "Files with source `distserve_fit_v1` (OPT-13B and OPT-66B on A100) are DistServe's own "
        "fitted iteration times of its engine, evaluated on the grid, and those in "
        "`distserve_vllm/` (`distserve_vllm_fit_v1`) its fits of vLLM (`lut_population/PLAN.md` "
        "section 14): whole engine iterations as DistServe profiled them, and their decode rows "
        "step down once, where DistServe's estimator switches from its small-batch to its "
        "large-batch fit. "
        "Draft heads (`<target>.<kind>`: EAGLE, EAGLE-3, Medusa) and their "
        "fused files (`<target>+<target>.<kind>`) run on the whole target replica at its TP "
        "degree; a head file's `verify` rows are one head step over `fanout_k + 1` candidates "
        "per sequence (one token-tree level).",
        "",
        "## Files",
        "",
        *_file_table(files),
        "",
        *_inputs_section(),
        *_gpu_section(),
        *_long_context_section(),
        *_head_section(),
        *_device_section(),
        *measured_section(files),
        *tpot_section(),
        *_not_built(),
        "## File details",
        "",
    ]
    for built in files:
        lines += _file_section(built)
    return "\n".join(lines).rstrip("\n") + "\n"
