"""The Verify-PD claims table and summary tables, computed from the sweeps' results.

Reads the ``results.csv`` files that ``scripts/verify_pd_sweep.py`` writes under
one results folder, in the sub-folders the commands of
``scenarios/verify_pd/README.md`` name (:data:`PAIRS`, :data:`ENGINES`):

- ``<pair>_<engine>``: the main grid (every architecture, the documents' C,
  both loops, measured GPU sharing, 0 ms host overhead);
- ``001_<pair>_<engine>``: the smaller sweep (``--sweep001``);
- ``mixed_<pair>_<engine>``: the main grid on the mixed workload
  (``--workload azure_conv``);
- ``overlap_<pair>``: the overlap sensitivity sweep (``--overlap``);
- ``k_static_<pair>``, ``k_feedback_<pair>``, ``k_none_<pair>``: the
  acceptance-aware controller's grid and its references.

Writes ``report.md`` there (and prints it): one row per quantitative claim of
the Verify-PD documents (claim, document, simulated figure, verdict, why),
then the tables the README's analysis cites. A folder that is missing leaves
its rows out, saying so.

Usage::

    python scripts/verify_pd_report.py RESULTS [--readme scenarios/verify_pd/README.md]

``--readme`` also replaces the part of that file between :data:`BEGIN` and
:data:`END` with the report (headings one level down).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

PAIRS = {
    "llama2_7b_tinyllama_a100": "Llama-2-7B, A100",
    "llama2_7b_tinyllama_h100": "Llama-2-7B, H100",
    "llama2_70b_tinyllama_a100_tp4": "Llama-2-70B, A100 TP4",
    "llama2_70b_tinyllama_h100_tp2": "Llama-2-70B, H100 TP2",
    "codellama_34b_tinyllama_a100": "CodeLlama-34B, A100",
    "codellama_34b_tinyllama_h100": "CodeLlama-34B, H100",
    "tinyllama_tinyllama_a100": "TinyLlama, A100",
    "tinyllama_tinyllama_h100": "TinyLlama, H100",
}
"""Result folder stem of each model pair and GPU, and its label."""

ENGINES = ("eager-pytorch", "cuda-graph")
"""The engine profiles every grid runs under."""

DOCUMENT_PD = statistics.fmean((44.93, 44.61, 44.39, 45.98, 48.17, 48.17, 48.17))
"""Mean PD throughput of document 001's table (tokens/s, its seven concurrency levels)."""

BEGIN = "<!-- BEGIN scripts/verify_pd_report.py -->"
END = "<!-- END scripts/verify_pd_report.py -->"
"""The lines between which ``--readme`` puts the report."""

SEVEN_B = ("llama2_7b_tinyllama_a100", "llama2_7b_tinyllama_h100")
"""The pairs the smaller sweep and the mixed workload run on."""


@dataclass(frozen=True)
class Claim:
    """One row of the claims table."""

    claim: str
    source: str
    figure: str
    verdict: str
    why: str


def _folders() -> list[tuple[str, str, str]]:
    """``(sweep, pair, folder)`` of every results folder the README's commands write."""
    per_engine = [
        (sweep, pair, f"{prefix}{pair}_{engine}")
        for sweep, prefix in (("main", ""), ("001", "001_"), ("mixed", "mixed_"))
        for pair in PAIRS
        for engine in ENGINES
    ]
    per_pair = [
        (sweep, pair, f"{sweep}_{pair}")
        for sweep in ("overlap", "k_static", "k_feedback", "k_none")
        for pair in PAIRS
    ]
    return per_engine + per_pair


class Results:
    """Every ``results.csv`` under a folder, with lookups by point.

    Raises:
        ValueError: The folder holds none of the sweeps the README's commands write.
    """

    def __init__(self, root: Path) -> None:
        frames = []
        for sweep, pair, folder in _folders():
            path = root / folder / "results.csv"
            if path.is_file():
                frame = pd.read_csv(path)
                frame["sweep"] = sweep
                frame["pair"] = pair
                frames.append(frame)
        if not frames:
            raise ValueError(
                f"{root}: no results.csv in the folders the README's commands write "
                f"(<pair>_<engine>, 001_..., mixed_..., overlap_..., k_..._<pair>)"
            )
        self.frame = pd.concat(frames, ignore_index=True)

    def has(self, sweep: str, pair: str, engine: str) -> bool:
        """Whether that grid ran."""
        f = self.frame
        return bool(((f["sweep"] == sweep) & (f["pair"] == pair) & (f["engine"] == engine)).any())

    def value(
        self,
        column: str,
        *,
        pair: str,
        engine: str,
        architecture: str,
        concurrency: int,
        loop: str = "closed",
        accounting: str = "all",
        sweep: str = "main",
    ) -> float:
        """One figure of one point (NaN when that point did not run)."""
        f = self.frame
        rows = f[
            (f["sweep"] == sweep)
            & (f["pair"] == pair)
            & (f["engine"] == engine)
            & (f["architecture"] == architecture)
            & (f["concurrency"] == concurrency)
            & (f["loop"] == loop)
            & (f["accounting"] == accounting)
            & (f["host_overhead"] == 0)
        ]
        return float(rows[column].iloc[0]) if len(rows) else math.nan


def _pct(ratio: float) -> str:
    """A ratio as a signed change in per cent."""
    return "n/a" if math.isnan(ratio) else f"{(ratio - 1) * 100:+.1f} %"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _span(values: Sequence[float], fmt: str = "{:.1f}") -> str:
    """``lo-hi`` of the finite values (one value alone when they agree)."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "n/a"
    lo, hi = fmt.format(min(finite)), fmt.format(max(finite))
    return lo if lo == hi else f"{lo} to {hi}"


def _ratios(
    r: Results,
    column: str,
    top: str,
    bottom: str,
    pairs: Sequence[str],
    engines: Sequence[str],
    levels: Sequence[int],
    **where: str,
) -> list[float]:
    out = []
    for pair in pairs:
        for engine in engines:
            for c in levels:
                a = r.value(
                    column, pair=pair, engine=engine, architecture=top, concurrency=c, **where
                )
                b = r.value(
                    column, pair=pair, engine=engine, architecture=bottom, concurrency=c, **where
                )
                out.append(a / b if b else math.nan)
    return out


def _ran(r: Results, sweep: str, pairs: Sequence[str]) -> list[str]:
    return [p for p in pairs if any(r.has(sweep, p, e) for e in ENGINES)]


def claims(r: Results) -> list[Claim]:
    """Every claim of the documents with the simulator's figure and verdict."""
    rows: list[Claim] = []
    main_pairs = _ran(r, "main", list(PAIRS))
    small = _ran(r, "001", SEVEN_B)
    mixed = _ran(r, "mixed", SEVEN_B)
    eager = ("eager-pytorch",)

    # 000: tail decode latency against batched speculative decoding, mixed workload.
    higher = {
        q: [
            100 * (x - 1)
            for x in _ratios(
                r,
                f"tpot_{q}_ms",
                "pdv",
                "engine",
                mixed,
                ENGINES,
                (8, 32, 128),
                loop="open",
                sweep="mixed",
            )
        ]
        for q in ("p95", "p99")
    }
    against_pd = [
        100 * (x - 1)
        for x in _ratios(
            r, "tpot_p95_ms", "pdv", "pd", mixed, eager, (8, 32, 128), loop="open", sweep="mixed"
        )
    ]
    lower = [-v for q in higher for v in _finite(higher[q])]
    rows.append(
        Claim(
            "30-50 % lower p95/p99 decode latency under mixed workloads than baseline "
            "speculative decoding",
            "000",
            "`pdv` against `engine` (speculative decoding batched over the running set, no "
            "lanes), same engine profile, Azure conversation lengths, open loop, C = 8, 32, 128, "
            "Llama-2-7B on A100 and H100, both engines: TPOT p95 "
            f"{_span(higher['p95'], '{:+.0f}')} %, p99 {_span(higher['p99'], '{:+.0f}')} % "
            f"(positive: `pdv` higher); against `pd` (eager): p95 "
            f"{_span(against_pd, '{:+.0f}')} %",
            "reproduced" if lower and min(lower) >= 30 else "not reproduced",
            "A verify lane separate from the decode lane does not shorten a token's time: each "
            "token still waits for its draft steps and its verify, and splitting a round into "
            "lane iterations batches fewer requests per pass, each pass paying its host time "
            "(measured sharing: the lanes' passes get no faster together). Against a batch-1 "
            "design (`pd`) the lanes' batching, not their separation, cuts the tail.",
        )
    )

    # 000: equivalent throughput.
    equal = _ratios(r, "throughput_tok_s", "pdv", "engine", main_pairs, ENGINES, (128,))
    equal_8 = _ratios(r, "throughput_tok_s", "pdv", "engine", main_pairs, ENGINES, (8,))
    rows.append(
        Claim(
            "Equivalent throughput to baseline speculative decoding",
            "000",
            f"`pdv` / `engine`, closed loop, `all`: {_span(equal, '{:.2f}')}x at C = 128, "
            f"{_span(equal_8, '{:.2f}')}x at C = 8 (every pair, both engines)",
            f"at C = 128: {sum(abs(v - 1) <= 0.15 for v in _finite(equal))} of "
            f"{len(_finite(equal))} grids within 15 %; below saturation not reproduced",
            "At equal admission and batch size the lanes run the same passes as fused rounds; "
            "at low C the lanes' smaller batches cost more per token.",
        )
    )

    # 001: +11.5 % throughput, 7.5 % better latency at C = 5; matching PD at C <= 3.
    up = _ratios(r, "throughput_tok_s", "pdv_hybrid", "pd", small, ENGINES, (5,), sweep="001")
    lat = _ratios(r, "p95_ms", "pdv_hybrid", "pd", small, ENGINES, (5,), sweep="001")
    rows.append(
        Claim(
            "PDV +11.5 % throughput and 7.5 % better latency than PD at C = 5",
            "001",
            f"`pdv_hybrid` (001's PDV: atomic rounds up to 3 running requests) against `pd`, "
            f"smaller sweep, C = 5: throughput {_span([100 * (v - 1) for v in up], '{:+.0f}')} %, "
            f"p95 {_span([100 * (v - 1) for v in lat], '{:+.0f}')} % (Llama-2-7B, A100 and H100, "
            "both engines)",
            "direction reproduced, size not"
            if min(_finite(up), default=0) > 1.115
            else "not reproduced",
            "Its lanes batch up to C requests per pass while `pd` runs one request's round at a "
            "time, so the gain grows with C far beyond 11.5 %; the documents' figures imply "
            "lanes that barely batch.",
        )
    )
    low = _ratios(r, "throughput_tok_s", "pdv_hybrid", "pd", small, ENGINES, (1, 2, 3), sweep="001")
    rows.append(
        Claim(
            "PDV matches PD at low concurrency (C <= 3)",
            "001",
            f"`pdv_hybrid` / `pd`, smaller sweep, C = 1-3: {_span(low, '{:.3f}')}x",
            "reproduced" if all(abs(v - 1) <= 0.05 for v in _finite(low)) else "not reproduced",
            "Up to three running requests both run one atomic round at a time.",
        )
    )

    # 001: absolute figures under the documents' engine.
    def spread(arch: str, column: str) -> list[float]:
        return [
            r.value(
                column,
                pair=p,
                engine="eager-pytorch",
                architecture=arch,
                concurrency=c,
                sweep="001",
            )
            for p in small
            for c in range(1, 11)
        ]

    pd_tok, pdv_tok, base_tok = (
        spread("pd", "throughput_tok_s"),
        spread("pdv_hybrid", "throughput_tok_s"),
        spread("baseline", "throughput_tok_s"),
    )
    p95 = [v / 1000 for arch in ("pd", "pdv_hybrid", "baseline") for v in spread(arch, "p95_ms")]
    rows.append(
        Claim(
            "PD 44-48, PDV 44-51, Baseline 9-14 tokens/s; token P95 15.2-68.1 s "
            "(C = 1-10, 10 requests each)",
            "001",
            f"`eager-pytorch`, smaller sweep (100 tokens), A100/H100: `pd` {_span(pd_tok)}, "
            f"`pdv_hybrid` {_span(pdv_tok)}, `baseline` {_span(base_tok)} tokens/s; p95 "
            f"{_span(p95)} s",
            f"PD {_span([100 * (v / DOCUMENT_PD - 1) for v in _finite(pd_tok)], '{:+.0f}')} % "
            f"from the documents' mean ({DOCUMENT_PD:.1f}) under the eager engine, no constant "
            "fitted; PDV, "
            "Baseline and P95 not reproduced",
            "The eager profile's launch costs (measured on an H100 host) alone bring `pd` near the "
            "documents' figures, on either GPU: its batch-1 steps are launch-bound. `pdv_hybrid` batches above 3 requests and `baseline` is a batch-1 "
            "design like `pd`; nothing in the documents explains a baseline 3-5x slower than PD, "
            "and their P95 (tens of seconds for 10 requests of at most 100 tokens) implies "
            "steps about 10x slower than these.",
        )
    )

    # 001 / 003: GPU utilisation.
    def active(arch: str, c: int, sweep: str = "main") -> list[float]:
        return [
            r.value(
                "gpu_kernel_active",
                pair=p,
                engine="eager-pytorch",
                architecture=arch,
                concurrency=c,
                sweep=sweep,
            )
            for p in (small if sweep == "001" else main_pairs)
        ]

    util = {
        arch: (active(arch, 10, "001"), active(arch, 128))
        for arch in ("pdv_hybrid", "pd", "baseline", "pdv_unified")
    }

    def pct(values: Sequence[float]) -> str:
        return _span([100 * v for v in values], "{:.0f}") + " %"

    rows.append(
        Claim(
            "GPU utilisation: PDV 90 %+, PD ~67 %, Baseline ~50 %",
            "001, 003",
            "Share of time a kernel runs (`gpu_kernel_active`), eager engine, measured sharing, "
            f"closed loop: C = 10 (smaller sweep) `pdv_hybrid` {pct(util['pdv_hybrid'][0])}, "
            f"`pd` {pct(util['pd'][0])}, `baseline` {pct(util['baseline'][0])}; C = 128 (main "
            f"grid, every pair) `pdv_hybrid` {pct(util['pdv_hybrid'][1])}, `pd` "
            f"{pct(util['pd'][1])}, `baseline` {pct(util['baseline'][1])}",
            "PDV's 90 %+ only at high C; PD and Baseline not",
            "Batch-1 eager passes are launch-bound: the GPU runs kernels for well under half of "
            "each step whatever the lanes; lanes in Python threads share one host thread, so "
            "`baseline`'s workers and `pd`'s lanes cannot launch faster together. Only large "
            "batches make passes long enough to keep the GPU busy.",
        )
    )
    rows.append(
        Claim(
            "The unified worker's GPU utilisation is comparable to PD's (45-75 %)",
            "003",
            f"`pdv_unified` {pct(util['pdv_unified'][1])} against `pd` {pct(util['pd'][1])} "
            "(C = 128, eager, every pair)",
            "comparable: reproduced; the level depends on the pair",
            "Both run one request's atomic round at a time.",
        )
    )

    # 003: the overhead valley.
    valley = (6, 8, 10, 12, 16)
    unified, lanes = (
        _ratios(
            r,
            "throughput_tok_s",
            arch,
            "pd",
            main_pairs,
            eager,
            valley,
            loop="open",
            accounting="completed",
        )
        for arch in ("pdv_unified", "pdv")
    )
    rows.append(
        Claim(
            "An overhead valley at C = 6-16 where PD beats PDV by 0.5-13 %",
            "003",
            f"C = 6-16, open loop, completed-only, eager: `pdv_unified` / `pd` "
            f"{_span(unified, '{:.2f}')}x, `pdv` / `pd` {_span(lanes, '{:.2f}')}x",
            "not reproduced",
            "Below saturation every architecture completes the same requests and delivers the "
            "offered load; no coordination cost that grows with C is in the data, and the "
            "simulator adds none.",
        )
    )

    # 003: the headline multiples.
    headline = (
        ("tinyllama_tinyllama_a100", 128, 33.7, "TinyLlama drafting for TinyLlama"),
        ("codellama_34b_tinyllama_a100", 128, 31.0, "CodeLlama-34B"),
        ("llama2_7b_tinyllama_a100", 84, 29.6, "Llama-2-7B"),
        ("llama2_7b_tinyllama_a100", 72, 13.4, "Llama-2-7B"),
        ("llama2_7b_tinyllama_a100", 64, 8.5, "Llama-2-7B"),
    )
    for pair, c, claimed, label in headline:
        rows.append(_multiple(r, pair, c, claimed, label))

    # 003: average latency reduction at high C (the documents' table: C = 32, 64, 96, 128).
    claimed = {32: -20.8, 64: -9.3, 96: -18.3, 128: -39.5}
    seven = ("llama2_7b_tinyllama_a100",)
    changes = {
        accounting: [
            100 * (v - 1)
            for v in _ratios(
                r,
                "mean_ms",
                "pdv_unified",
                "pd",
                seven,
                eager,
                tuple(claimed),
                loop="open",
                accounting=accounting,
            )
        ]
        for accounting in ("completed", "all")
    }
    done, every = _finite(changes["completed"]), _finite(changes["all"])
    in_range = bool(done) and min(done) >= -45 and max(done) <= 0 and max(every, default=1) <= 0
    rows.append(
        Claim(
            "9-40 % lower average latency than PD at C = 32-128 (-20.8, -9.3, -18.3, -39.5 % at "
            "C = 32, 64, 96, 128) despite the throughput gains",
            "003",
            "`pdv_unified` / `pd` mean end-to-end latency, open loop, Llama-2-7B A100, eager, "
            "C = 32, 64, 96, 128: "
            + ", ".join(f"{v:+.0f}" for v in changes["completed"])
            + " % completed-only, "
            + ", ".join(f"{v:+.0f}" for v in changes["all"])
            + " % counting every request (unfinished ones at their age at the cut)",
            "reproduced over the range (not level by level), in both accountings"
            if in_range
            else "not reproduced",
            "Not from throughput, which is the same (both run one atomic round at a time): the "
            "unified worker serves the requests of its batch one after the other, nearer arrival "
            "order, while `pd` round-robins every admitted request, so each finishes late.",
        )
    )

    # 003: the large verifiers at C = 1-2.
    heavy = [p for p in main_pairs if "70b" in p or "34b" in p]
    small_c = _ratios(
        r,
        "throughput_tok_s",
        "pdv_unified",
        "pd",
        heavy,
        ENGINES,
        (1, 2),
        loop="open",
        accounting="completed",
    )
    rows.append(
        Claim(
            "+2-4 % at C = 1-2 with large verifiers",
            "003",
            "`pdv_unified` / `pd`, open loop, completed-only, C = 1 and 2, Llama-2-70B and "
            f"CodeLlama-34B pairs, both engines: {_span(small_c, '{:.3f}')}x",
            "not reproduced"
            if max((abs(v - 1) for v in _finite(small_c)), default=0) < 0.02
            else "reproduced",
            "With one or two requests both run the same atomic rounds one at a time.",
        )
    )
    return rows


def _multiple(r: Results, pair: str, c: int, claimed: float, label: str) -> Claim:
    """A headline multiple of 003: the unified worker over PD at ``c``, open loop."""
    title = f"{claimed}x throughput of the unified worker over PD at C = {c}, {label}"
    engines = [e for e in ENGINES if r.has("main", pair, e)]
    if not engines:
        return Claim(title, "003", "not run", "not testable", f"no results for {PAIRS[pair]}")
    figures = []
    best = {"completed": 0.0, "all": 0.0}
    for engine in engines:
        ratio = {}
        for accounting in best:
            ratio[accounting] = _ratios(
                r,
                "throughput_tok_s",
                "pdv_unified",
                "pd",
                (pair,),
                (engine,),
                (c,),
                loop="open",
                accounting=accounting,
            )[0]
            best[accounting] = max(best[accounting], ratio[accounting])
        finished = [
            int(
                r.value(
                    "completed",
                    pair=pair,
                    engine=engine,
                    architecture=a,
                    concurrency=c,
                    loop="open",
                )
            )
            for a in ("pd", "pdv_unified")
        ]
        figures.append(
            f"{engine}: {ratio['completed']:.2f}x completed-only ({finished[0]} against "
            f"{finished[1]} requests completed), {ratio['all']:.2f}x counting every request"
        )
    if best["all"] >= claimed / 2:
        verdict = "reproduced"
    elif best["completed"] >= claimed / 2:
        verdict = "only under completed-only accounting"
    else:
        verdict = "not reproduced"
    return Claim(
        title,
        "003",
        f"{PAIRS[pair]}, open loop: " + "; ".join(figures),
        verdict,
        "Both are batch-1 designs: counting every request they serve the same tokens. A "
        "multiple appears only when `pd` leaves most requests unfinished at the cut and the "
        "count keeps only the completed ones.",
    )


def claims_table(rows: Sequence[Claim]) -> str:
    """The claims as a markdown table."""
    lines = [
        "| claim | document | simulated | verdict | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in rows:
        lines.append(f"| {c.claim} | {c.source} | {c.figure} | {c.verdict} | {c.why} |")
    return "\n".join(lines)


def headline_table(r: Results) -> str:
    """Per pair and engine: throughput at C = 1 and 128 and the ratios the README cites."""
    lines = [
        "| pair | engine | `pd` C = 1 | `pd` C = 128 | `pdv` C = 128 | `engine` C = 128 | "
        "`none` C = 128 | `pdv`/`engine` | `pdv`/`pd` | kernel active `pdv` / `pd`, C = 128 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for pair, label in PAIRS.items():
        for engine in ENGINES:
            if not r.has("main", pair, engine):
                continue

            def tok(arch: str, c: int, pair: str = pair, engine: str = engine) -> float:
                return r.value(
                    "throughput_tok_s", pair=pair, engine=engine, architecture=arch, concurrency=c
                )

            def act(arch: str, pair: str = pair, engine: str = engine) -> float:
                return r.value(
                    "gpu_kernel_active",
                    pair=pair,
                    engine=engine,
                    architecture=arch,
                    concurrency=128,
                )

            lines.append(
                f"| {label} | {engine} | {tok('pd', 1):.1f} | {tok('pd', 128):.1f} | "
                f"{tok('pdv', 128):.1f} | {tok('engine', 128):.1f} | {tok('none', 128):.1f} | "
                f"{tok('pdv', 128) / tok('engine', 128):.2f}x | "
                f"{tok('pdv', 128) / tok('pd', 128):.1f}x | "
                f"{100 * act('pdv'):.0f} % / {100 * act('pd'):.0f} % |"
            )
    return "\n".join(lines)


def saturation_table(r: Results) -> str:
    """The C from which each architecture serves 90 % of its best (closed) and first cuts (open)."""
    archs = ("baseline", "pd", "pdv", "pdv_hybrid", "pdv_unified", "engine", "none")
    lines = [
        "| pair | engine | " + " | ".join(f"`{a}`" for a in archs) + " |",
        "| --- | --- |" + " --- |" * len(archs),
    ]
    f = r.frame
    for pair, label in PAIRS.items():
        for engine in ENGINES:
            if not r.has("main", pair, engine):
                continue
            cells = []
            for arch in archs:
                rows = f[
                    (f["sweep"] == "main")
                    & (f["pair"] == pair)
                    & (f["engine"] == engine)
                    & (f["architecture"] == arch)
                    & (f["accounting"] == "all")
                    & (f["host_overhead"] == 0)
                ]
                closed = rows[rows["loop"] == "closed"].sort_values("concurrency")
                best = closed["throughput_tok_s"].max()
                knee = closed[closed["throughput_tok_s"] >= 0.9 * best]["concurrency"].min()
                opened = rows[(rows["loop"] == "open") & (rows["unfinished"] > 0)]
                cut = opened["concurrency"].min()
                cells.append(f"{int(knee)} / {'none' if math.isnan(cut) else int(cut)}")
            lines.append(f"| {label} | {engine} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seven_b_table(
    r: Results,
    sweep: str,
    levels: Sequence[int],
    columns: Sequence[str],
    cell: Callable[[str, str, str, int], str],
) -> str:
    """One row per Llama-2-7B pair, engine and C of ``sweep``; ``cell(pair, engine, arch, c)``."""
    lines = [
        "| pair | engine | C | " + " | ".join(columns) + " |",
        "| --- | --- | --- |" + " --- |" * len(columns),
    ]
    for pair in SEVEN_B:
        for engine in ENGINES:
            if not r.has(sweep, pair, engine):
                continue
            for c in levels:
                cells = [cell(pair, engine, arch, c) for arch in _ARCHS[sweep]]
                lines.append(f"| {PAIRS[pair]} | {engine} | {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


_ARCHS = {"001": ("baseline", "pd", "pdv_hybrid", "pdv"), "mixed": ("pd", "pdv", "engine", "none")}
"""The architectures of the smaller sweep's and the mixed workload's tables."""


def smaller_sweep_table(r: Results) -> str:
    """The smaller sweep beside the documents' table (tokens/s and p95 at each C)."""

    def cell(pair: str, engine: str, arch: str, c: int) -> str:
        where = {"pair": pair, "engine": engine, "architecture": arch, "concurrency": c}
        tok = r.value("throughput_tok_s", sweep="001", **where)
        p95 = r.value("p95_ms", sweep="001", **where)
        return f"{tok:.1f} ({p95 / 1000:.2f})"

    columns = [f"`{a}` tok/s (p95 s)" for a in _ARCHS["001"]]
    return _seven_b_table(r, "001", (1, 3, 5, 7, 10), columns, cell)


def mixed_table(r: Results) -> str:
    """TPOT tails on the mixed workload, open loop."""

    def cell(pair: str, engine: str, arch: str, c: int) -> str:
        where = {"pair": pair, "engine": engine, "architecture": arch, "concurrency": c}
        p95, p99 = (
            r.value(f"tpot_{q}_ms", loop="open", sweep="mixed", **where) for q in ("p95", "p99")
        )
        return f"{p95:.1f} / {p99:.1f}"

    columns = [f"`{a}` TPOT p95 / p99 (ms)" for a in _ARCHS["mixed"]]
    return _seven_b_table(r, "mixed", (8, 32, 128), columns, cell)


def overlap_table(r: Results) -> str:
    """Throughput against the symmetric overlap efficiency (closed loop, 0 ms, `all`)."""
    f = r.frame
    f = f[(f["sweep"] == "overlap") & (f["accounting"] == "all") & (f["loop"] == "closed")]
    efficiencies = sorted(f["overlap_efficiency"].dropna().unique())
    lines = [
        "| pair | architecture | C | serialized | "
        + " | ".join(f"{e:g}" for e in efficiencies)
        + " |",
        "| --- | --- | --- | --- |" + " --- |" * len(efficiencies),
    ]
    shown = (
        ("pdv", (8, 32, 128)),
        ("pd", (128,)),
        ("baseline", (8, 128)),
        ("engine", (8, 32, 128)),
    )
    for pair, label in PAIRS.items():
        rows = f[f["pair"] == pair]
        if rows.empty:
            continue
        for arch, levels in shown:
            for c in levels:
                point = rows[(rows["architecture"] == arch) & (rows["concurrency"] == c)]
                if point.empty:
                    continue
                serial = point[point["gpu_sharing"] == "serialized"]["throughput_tok_s"]
                cells = [
                    point[point["overlap_efficiency"] == e]["throughput_tok_s"]
                    for e in efficiencies
                ]
                lines.append(
                    f"| {label} | `{arch}` | {c} | {serial.iloc[0]:.1f} | "
                    + " | ".join(f"{v.iloc[0]:.1f}" if len(v) else "" for v in cells)
                    + " |"
                )
    return "\n".join(lines)


def controller_table(r: Results) -> str:
    """Throughput with the fixed k and with ``acceptance_feedback`` (closed loop, `all`)."""
    f = r.frame
    f = f[(f["accounting"] == "all") & (f["loop"] == "closed")]
    levels = (1, 8, 32, 128)
    lines = [
        "| pair | host | architecture | " + " | ".join(f"C = {c}" for c in levels) + " |",
        "| --- | --- | --- |" + " --- |" * len(levels),
    ]
    for pair, label in PAIRS.items():
        static = f[(f["sweep"] == "k_static") & (f["pair"] == pair)]
        feedback = f[(f["sweep"] == "k_feedback") & (f["pair"] == pair)]
        plain = f[(f["sweep"] == "k_none") & (f["pair"] == pair)]
        if static.empty or feedback.empty:
            continue
        for host in sorted(static["host_overhead"].unique()):
            for arch in ("pd", "pdv", "engine"):
                cells = []
                for c in levels:
                    pick = [
                        t[
                            (t["architecture"] == arch)
                            & (t["concurrency"] == c)
                            & (t["host_overhead"] == host)
                        ]["throughput_tok_s"]
                        for t in (static, feedback)
                    ]
                    cells.append(
                        " / ".join(f"{v.iloc[0]:.1f}" for v in pick)
                        if all(len(v) for v in pick)
                        else ""
                    )
                if any(cells):
                    lines.append(
                        f"| {label} | {host:g} ms | `{arch}` | " + " | ".join(cells) + " |"
                    )
        if not plain.empty:
            cells = [
                f"{plain[plain['concurrency'] == c]['throughput_tok_s'].iloc[0]:.1f}"
                for c in levels
            ]
            lines.append(f"| {label} | 0 ms | `none` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


SECTIONS: tuple[tuple[str, Callable[[Results], str]], ...] = (
    ("Claims", lambda r: claims_table(claims(r))),
    ("Throughput at C = 1 and 128 (closed loop, `all`, tokens/s)", headline_table),
    (
        "Saturation (closed: C reaching 90 % of the best; open: first C with unfinished requests)",
        saturation_table,
    ),
    ("The smaller sweep (closed loop, 10 requests of 100 tokens)", smaller_sweep_table),
    ("Mixed workload (Azure conversation lengths, open loop)", mixed_table),
    (
        "Sensitivity to a symmetric `overlap_efficiency` (`cuda-graph`, closed loop, `all`, tokens/s)",
        overlap_table,
    ),
    (
        "The acceptance-aware controller (`cuda-graph`, closed loop, `all`, tokens/s, fixed k = 4 / "
        "`acceptance_feedback`)",
        controller_table,
    ),
)


def report(root: Path) -> str:
    """The whole report as markdown."""
    r = Results(root)
    parts = [f"### {title}\n\n{make(r)}\n" for title, make in SECTIONS]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the folder the README's commands write into")
    parser.add_argument(
        "--readme",
        type=Path,
        default=None,
        help=f"also put the report between the lines {BEGIN!r} and {END!r} of this file",
    )
    args = parser.parse_args(argv)
    try:
        text = report(args.results)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    (args.results / "report.md").write_text(text)
    if args.readme is not None:
        readme = args.readme.read_text()
        if BEGIN not in readme or END not in readme:
            print(f"{args.readme}: no {BEGIN!r} ... {END!r} lines to replace", file=sys.stderr)
            return 2
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        args.readme.write_text(f"{head}{BEGIN}\n\n{text}\n{END}{tail}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
