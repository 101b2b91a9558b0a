"""Roofline costs for devices without operator profiles, calibrated to measured tokens/s.

Phones, laptops, Apple silicon and Jetson boards have one or a few measured
decode rates (tokens/s of a named model in a named weight format) and no
hardware figures we could trust for LLM kernels. The data-driven calibration:

* effective bandwidth ``BW = decode_tok_s x bytes read per token`` of the
  measured model and format (all block matrices and the LM head at the
  format's bits per weight, plus the fp16 KV cache of the measured context);
* effective compute ``F = balance x BW``, where ``balance`` (FLOP per byte) is
  the median, over the devices in the data with both rates measured on the
  same model (llama.cpp, Llama-3-8B), of ``prefill FLOP/s / decode bytes/s``.

An iteration of a fp16 model then takes ``max(bytes / BW, FLOPs / F)`` with
``bytes`` = fp16 weights read once + KV read and written, and ``FLOPs`` =
block matrices for every new token + LM head for the logit rows + causal
attention. Decode is bandwidth-bound, prefill compute-bound. The error
against each fact used is reported: a single fact is matched exactly by
construction; further facts of a device (Jetson) are predicted, not fitted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.inputs import (
    load_device_facts,
    load_devices_config,
    load_models,
    load_quant_formats,
)
from lut_population.paths import INPUTS_DIR, repo_relative
from lut_population.shapes import BYTES_PER_MIB, ModelShape
from lut_population.work import Work, fp16_activations_mb
from simulator.errors import InputError, make_issue

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
DEVICES_FILE = repo_relative(INPUTS_DIR / "devices.yaml")
FACTS_FILE = "inputs/devices/device_facts_rows.csv"


def fact_row(device: str, quant: str) -> dict[str, str]:
    """The copied fact row of ``device`` measured with ``quant``."""
    rows = [r for r in load_device_facts() if r["device"] == device and r["quant"] == quant]
    if len(rows) != 1:
        raise InputError(
            [
                make_issue(
                    DEVICES_FILE,
                    "fact",
                    f"{device} / {quant}",
                    f"one row of {FACTS_FILE}",
                    f"{len(rows)} matching rows",
                )
            ]
        )
    return rows[0]


def cited_number(row: dict[str, str], column: str, value: float, where: str) -> float:
    """Return ``value`` after checking that it is written in ``row[column]``.

    Raises:
        InputError: The cell does not contain the number.
    """
    cell = row.get(column, "")
    if any(abs(float(x) - value) < 1e-9 for x in _NUMBER.findall(cell)):
        return float(value)
    raise InputError(
        [
            make_issue(
                DEVICES_FILE,
                where,
                value,
                f"a number written in column {column} of {row.get('device')!r}: {cell!r}",
                "not found in the cited cell",
            )
        ]
    )


def decode_bytes(shape: ModelShape, format_name: str, context: float) -> float:
    """Bytes one decode step reads: weights in ``format_name`` plus the fp16 KV of ``context``."""
    fmt = load_quant_formats()[format_name]
    weights = shape.decode_read_bytes(fmt.block_bits, fmt.embedding_bits)
    return weights + context * shape.kv_bytes_per_token


@dataclass(frozen=True)
class BalanceRow:
    """Compute-to-bandwidth balance of one device measured at both prefill and decode.

    Attributes:
        device: The fact row's device.
        quant: The fact row's weight format.
        bandwidth_gb_per_s: decode tok/s x bytes per token.
        tflop_per_s: prefill tok/s x FLOPs per prompt token.
        balance: FLOP per byte.
        loo_error: Relative error of prefill tok/s predicted with the median balance of
            the other rows.
    """

    device: str
    quant: str
    bandwidth_gb_per_s: float
    tflop_per_s: float
    balance: float
    loo_error: float


@dataclass(frozen=True)
class Balance:
    """The compute-to-bandwidth balance used for prefill on roofline devices.

    Attributes:
        flop_per_byte: Median balance.
        rows: Every row used.
    """

    flop_per_byte: float
    rows: tuple[BalanceRow, ...]


@cache
def balance() -> Balance:
    """Measure the compute-to-bandwidth balance from the rows named in ``devices.yaml``."""
    config = load_devices_config()["balance"]
    shape = load_models()[config["model"]]
    prompt = float(config["prompt_tokens"]["value"])
    context = float(config["mean_context"]["value"])
    flops_per_prompt = (
        prompt * shape.matmul_flops_per_token
        + shape.lm_head_flops_per_token
        + float(shape.attention_flops(np.asarray(prompt), np.asarray(0.0)))
    )
    raw: list[tuple[str, str, float, float]] = []
    for entry in config["rows"]:
        row = fact_row(entry["device"], entry["quant"])
        decode = float(row["decode_tok_s"])
        prefill = float(row["prefill_tok_s"])
        bandwidth = decode * decode_bytes(shape, entry["format"], context) / 1e9
        tflops = prefill * flops_per_prompt / prompt / 1e12
        raw.append((entry["device"], entry["quant"], bandwidth, tflops))
    ratios = np.array([t * 1e12 / (b * 1e9) for _, _, b, t in raw])
    rows = []
    for i, (device, quant, bandwidth, tflops) in enumerate(raw):
        others = float(np.median(np.delete(ratios, i)))
        predicted = others * bandwidth * 1e9 / 1e12
        rows.append(
            BalanceRow(device, quant, bandwidth, tflops, float(ratios[i]), predicted / tflops - 1)
        )
    return Balance(float(np.median(ratios)), tuple(rows))


@dataclass(frozen=True)
class FactCheck:
    """One measured decode rate and the roofline's prediction of it.

    Attributes:
        model: Measured model id.
        format: Weight format.
        measured_tok_s: The fact.
        predicted_tok_s: The calibrated roofline's rate.
        fitted: Whether the fact was used to calibrate (then the error is 0 by construction).
        reference: Which row and column.
    """

    model: str
    format: str
    measured_tok_s: float
    predicted_tok_s: float
    fitted: bool
    reference: str

    @property
    def error(self) -> float:
        """Relative error of the prediction."""
        return self.predicted_tok_s / self.measured_tok_s - 1.0


@dataclass(frozen=True)
class DeviceCalibration:
    """Calibrated roofline of one device.

    Attributes:
        hardware: Hardware id.
        bandwidth_gb_per_s: Effective memory bandwidth.
        tflop_per_s: Effective compute (balance x bandwidth).
        memory_mb: Device memory, or None when not in the data.
        power_w: Power while busy, or None when not in the data.
        power_kind: What the power figure is.
        checks: The facts and their predictions.
        fact: Citation of the calibrating row.
    """

    hardware: str
    bandwidth_gb_per_s: float
    tflop_per_s: float
    memory_mb: float | None
    power_w: float | None
    power_kind: str
    checks: tuple[FactCheck, ...]
    fact: str


def row_named(device: str) -> dict[str, str]:
    """The first copied fact row whose device is ``device``."""
    for row in load_device_facts():
        if row["device"] == device:
            return row
    raise InputError(
        [make_issue(DEVICES_FILE, "row", device, f"a device of {FACTS_FILE}", "no such row")]
    )


def _optional_number(entry: Any, row: dict[str, str], where: str) -> float | None:
    if entry is None:
        return None
    source_row = row_named(entry["row"]) if "row" in entry else row
    return cited_number(source_row, entry["column"], float(entry["value"]), where)


@cache
def calibrate(hardware: str) -> DeviceCalibration:
    """Calibrate the roofline of ``hardware`` from its entry in ``devices.yaml``."""
    entry = load_devices_config()["roofline"][hardware]
    where = f"roofline.{hardware}"
    row = fact_row(entry["fact"]["device"], entry["fact"]["quant"])
    models = load_models()
    shape = models[entry["model"]]
    tok_s = cited_number(
        row,
        entry["decode_tok_s"]["column"],
        float(entry["decode_tok_s"]["value"]),
        f"{where}.decode_tok_s",
    )
    context = float(entry["mean_context"]["value"])
    bandwidth = tok_s * decode_bytes(shape, entry["format"], context) / 1e9
    tflops = balance().flop_per_byte * bandwidth * 1e9 / 1e12
    reference = f"{FACTS_FILE} row {row['device']!r}, column {entry['decode_tok_s']['column']}"
    checks = [FactCheck(entry["model"], entry["format"], tok_s, tok_s, True, reference)]
    for index, held in enumerate(entry.get("holdout") or []):
        measured = cited_number(
            row, held["column"], float(held["decode_tok_s"]), f"{where}.holdout[{index}]"
        )
        held_shape = models[held["model"]]
        predicted = bandwidth * 1e9 / decode_bytes(held_shape, held["format"], context)
        ref = f"{FACTS_FILE} row {row['device']!r}, column {held['column']} ({held['reading']})"
        checks.append(FactCheck(held["model"], held["format"], measured, predicted, False, ref))
    memory = _optional_number(entry.get("memory_gb"), row, f"{where}.memory_gb")
    power = _optional_number(entry.get("power_w"), row, f"{where}.power_w")
    return DeviceCalibration(
        hardware=hardware,
        bandwidth_gb_per_s=bandwidth,
        tflop_per_s=tflops,
        memory_mb=None if memory is None else memory * 1024.0,
        power_w=power,
        power_kind=str(entry["power_kind"]),
        checks=tuple(checks),
        fact=reference,
    )


@dataclass
class RooflineModel:
    """Iteration costs of a fp16 model on a calibrated roofline device.

    Attributes:
        shape: The model.
        calibration: The device.
        tensor_parallel: Always 1.
        capacity_mb: Device memory, or None.
        source: The ``source`` tag of the rows.
    """

    shape: ModelShape
    calibration: DeviceCalibration
    tensor_parallel: int
    capacity_mb: float | None
    source: str

    def bytes_moved(self, work: Work) -> FloatArray:
        """fp16 weights read once plus the KV cache read and written."""
        kv = work.batch * (work.cached + work.new) * self.shape.kv_bytes_per_token
        return np.asarray(self.shape.decode_read_bytes() + kv)

    def flops(self, work: Work) -> FloatArray:
        """Matrix FLOPs of the new tokens, LM-head FLOPs of the logit rows, attention FLOPs."""
        attention = self.shape.attention_flops(work.new, work.cached)
        return np.asarray(
            work.tokens * self.shape.matmul_flops_per_token
            + work.logit_rows * self.shape.lm_head_flops_per_token
            + work.batch * attention
        )

    def latency_ms(self, work: Work) -> FloatArray:
        """``max(bytes / BW, FLOPs / F)`` in milliseconds."""
        memory = self.bytes_moved(work) / (self.calibration.bandwidth_gb_per_s * 1e9)
        compute = self.flops(work) / (self.calibration.tflop_per_s * 1e12)
        return np.asarray(np.maximum(memory, compute) * 1000.0)

    def power_w(self, work: Work) -> FloatArray | None:
        """The device's power (constant), or None when the data have none."""
        if self.calibration.power_w is None:
            return None
        return np.full_like(np.asarray(work.tokens, dtype=np.float64), self.calibration.power_w)

    def weights_mb(self) -> float:
        """fp16 weights."""
        return self.shape.weight_bytes() / BYTES_PER_MIB

    def activations_mb(self, work: Work) -> FloatArray:
        """Live fp16 activations plus fp32 logits."""
        return fp16_activations_mb(self.shape, work, 1)
