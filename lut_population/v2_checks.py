"""CodeLlama-34B's composed decode step against ML.ENERGY v2's time per output token.

CodeLlama-34B has no Vidur profile; its rows are priced by the operator roofline
(``PLAN.md`` 4.6). ML.ENERGY v2 served it with vLLM at tensor parallel 2 on H100
and 4 on A100-SXM4-40GB, batch 64 to 768 (``inputs/energy/mlenergy_v2_rows.csv``).
The LUT set ships it at TP 1 only, so no shipped row is comparable; the check
evaluates the same cost model (``plan.gpu_model``) at the measured H100 TP
degree, 2. The A100 rows are not compared: TP 4 is not built, and they were
measured on the 40 GB part, whose memory bandwidth is not the 80 GB part's.

v2's ``avg_tpot_s`` is not one decode step: it is a request's time per output
token while the engine also runs other requests' prefills, so it is about three
to four times the decode step even for models whose decode rows match
ML.ENERGY v3's median inter-token latency within the spot checks' tolerance
(Llama-3.1-8B and Llama-3.1-70B, :mod:`lut_population.spot_checks`). What is
checked is therefore a ratio of ratios: ``decode / avg_tpot`` of CodeLlama-34B
against the median of the same ratio over the v2 H100 rows of those two
reference models in CodeLlama-34B's measured batch range. A roofline that
mispriced CodeLlama-34B's shape (a missing operator, a unit slip) moves its
ratio away from theirs; the tolerance is the spot checks' (the models, their
tasks and output lengths differ). Every decode step is at
:data:`~lut_population.spot_checks.SPOT_CONTEXT` tokens of context (the runs'
contexts are not in the data) and at the measured average batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import numpy as np

from lut_population.inputs import PowerPoint, load_power_points
from lut_population.phases import SinglePhaseCost
from lut_population.plan import gpu_model
from lut_population.spot_checks import SPOT_CONTEXT, SPOT_TOLERANCE

HARDWARE = "h100-sxm5-80gb"
"""The GPU compared (the only one with CodeLlama-34B rows at a TP degree below 4)."""

CHECKED = ("codellama/CodeLlama-34b-hf", "codellama-34b", 2)
"""(ML.ENERGY model, LUT model id, TP) of the checked model."""

REFERENCES = (
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b", 4),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b", 1),
)
"""(ML.ENERGY model, LUT model id, TP) of the v2 H100 runs the ratio is compared with."""


@dataclass(frozen=True)
class TpotPoint:
    """One v2 row and the composed decode step at its batch.

    Attributes:
        model: LUT model id.
        tensor_parallel: TP degree of the run.
        batch: Measured average batch.
        decode_ms: Composed decode step at that batch and :data:`SPOT_CONTEXT`.
        tpot_ms: ``avg_tpot_s`` of the row, in ms.
        reference: The row.
    """

    model: str
    tensor_parallel: int
    batch: float
    decode_ms: float
    tpot_ms: float
    reference: str

    @property
    def ratio(self) -> float:
        """Decode step over time per output token."""
        return self.decode_ms / self.tpot_ms


@dataclass(frozen=True)
class TpotCheck:
    """The ratio of ratios and its points.

    Attributes:
        checked: CodeLlama-34B's points.
        references: The reference models' points in the checked batch range.
    """

    checked: tuple[TpotPoint, ...]
    references: tuple[TpotPoint, ...]

    @property
    def deviation(self) -> float:
        """Median ratio of the checked model over the references' median ratio, minus 1."""
        mine = median(p.ratio for p in self.checked)
        theirs = median(p.ratio for p in self.references)
        return mine / theirs - 1.0

    @property
    def ok(self) -> bool:
        """Within the spot checks' tolerance."""
        return (
            bool(self.checked) and bool(self.references) and abs(self.deviation) <= SPOT_TOLERANCE
        )


def _points(model: str, lut_model: str, tp: int, rows: list[PowerPoint]) -> list[TpotPoint]:
    cost = SinglePhaseCost(gpu_model(lut_model, HARDWARE, tp), "draft_decode")
    out = []
    for row in rows:
        if row.model != model or row.tensor_parallel != tp:
            continue
        latency = cost.evaluate(
            np.array([float(SPOT_CONTEXT)]), np.array([row.batch]), np.array([1.0])
        ).latency_ms
        out.append(
            TpotPoint(lut_model, tp, row.batch, float(latency[0]), row.itl_ms, row.reference)
        )
    return sorted(out, key=lambda p: p.batch)


def tpot_check() -> TpotCheck:
    """CodeLlama-34B at H100 TP 2 against the reference models' v2 H100 rows."""
    rows = [p for p in load_power_points() if "mlenergy_v2" in p.reference and p.gpu == "h100"]
    checked = _points(*CHECKED, rows)
    low = min((p.batch for p in checked), default=0.0)
    high = max((p.batch for p in checked), default=0.0)
    references = [p for ref in REFERENCES for p in _points(*ref, rows) if low <= p.batch <= high]
    return TpotCheck(tuple(checked), tuple(references))


def tpot_lines(check: TpotCheck) -> list[str]:
    """One summary line, then one line per point."""
    mine = median(p.ratio for p in check.checked) if check.checked else float("nan")
    theirs = median(p.ratio for p in check.references) if check.references else float("nan")
    lines = [
        f"{'ok' if check.ok else 'FAIL'}: codellama-34b H100 TP2 decode / ML.ENERGY v2 avg TPOT, "
        f"median {mine:.3f}, against {theirs:.3f} for the reference runs "
        f"({check.deviation:+.1%}; tolerance {SPOT_TOLERANCE:.0%})"
    ]
    for p in (*check.checked, *check.references):
        lines.append(
            f"    {p.model} TP{p.tensor_parallel} batch {p.batch:g}: decode {p.decode_ms:.2f} ms, "
            f"avg TPOT {p.tpot_ms:.2f} ms, ratio {p.ratio:.3f} [{p.reference.split(':')[0]}]"
        )
    return lines


def tpot_section() -> list[str]:
    """The catalog section."""
    check = tpot_check()
    return [
        "## CodeLlama-34B against ML.ENERGY v2",
        "",
        "CodeLlama-34B is priced by the operator roofline (no Vidur profile) and shipped at "
        "TP 1, where ML.ENERGY has no run. Its cost model at the measured H100 TP degree (2, "
        "rows not shipped) is compared with v2's time per output token, which includes other "
        "requests' prefills, through the same ratio for the v2 H100 runs of Llama-3.1-70B "
        f"(TP 4) and Llama-3.1-8B (TP 1) in the same batch range; context {SPOT_CONTEXT} "
        "tokens (`lut_population/v2_checks.py`). The A100 rows (TP 4 on A100-SXM4-40GB) are "
        "not compared: TP 4 is not built.",
        "",
        "```",
        *tpot_lines(check),
        "```",
        "",
    ]
