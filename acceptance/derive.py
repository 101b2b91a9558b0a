"""Derive the shipped acceptance curves (``acceptance/*.yaml``) from ``acceptance/inputs/``.

Usage::

    python acceptance/derive.py          # rewrite every curve and the README tables
    python acceptance/derive.py --check  # exit 1 if any file would change

Every number in the generated files is computed here from the copied input
files (see ``acceptance/inputs/SOURCES.md``); each curve records the rows,
columns and formula it came from in its ``source``, ``derivation`` and
``notes`` fields. Output is deterministic, so rerunning the script reproduces
the committed files byte for byte. ``derive_inputs.py`` reads and checks the
input files, ``derive_render.py`` writes the YAML and the README tables; the
rules that turn the data into curves are here.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCEPTANCE_DIR = Path(__file__).resolve().parent
REPO_ROOT = ACCEPTANCE_DIR.parent
for _path in (REPO_ROOT, ACCEPTANCE_DIR):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# These imports need the repository root and this directory on the path.
from derive_inputs import (  # noqa: E402
    CATEGORY_COLUMNS,
    Inputs,
    SpecBenchMean,
    curated_row,
    draft_length,
    per_position_shares,
    read_inputs,
    specbench_mean,
)
from derive_render import (  # noqa: E402
    LISTING_END,
    LISTING_START,
    TABLE_END,
    TABLE_START,
    document_tokens,
    fmt,
    readme_with_table,
    readme_with_tables,
    render_listing,
    render_table,
    render_yaml,
)

from simulator.acceptance import (  # noqa: E402
    build_acceptance_model,
    unconditional_to_conditional,
)

__all__ = [
    "LISTING_END",
    "LISTING_START",
    "TABLE_END",
    "TABLE_START",
    "beta_fit",
    "derive_documents",
    "full_tree_nodes",
    "readme_with_table",
    "readme_with_tables",
    "render_files",
    "render_listing",
    "render_table",
]

INPUTS_DIR = ACCEPTANCE_DIR / "inputs"
README = ACCEPTANCE_DIR / "README.md"
DIGITS = 6
"""Derived probabilities are rounded to this many decimals."""

SPECBENCH_SOURCE = (
    "Spec-Bench leaderboard (hemingkx/Spec-Bench, Leaderboard.md at commit "
    "fd2c1cd7d2201ef71db4c5f4e455008f017967bf, Apache-2.0), as "
    "acceptance/inputs/specbench_leaderboard.csv"
)
MEDUSA_SOURCE = (
    "Medusa head accuracies (FasterDecoding/Medusa, assets/medusa_acc.csv at commit "
    "e2a5d20c048a9b0a4092e6933c34313687422518, Apache-2.0), as "
    "acceptance/inputs/medusa_head_accuracy_wandb.csv"
)
SPECBENCH_SETTING = (
    "Spec-Bench measured greedy decoding (temperature 0), FP16, batch size 1; its mean accepted "
    "tokens is one figure over its six tasks (multi-turn conversation, translation, "
    "summarization, question answering, mathematical reasoning, retrieval-augmented generation)."
)


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------


def rounded(value: float) -> float:
    """Round a derived probability to :data:`DIGITS` decimals."""
    return round(value, DIGITS)


def alpha_from_tokens_per_step(tokens_per_step: float) -> float:
    """Return alpha = 1 - 1/tau: the iid alpha whose tokens per round tend to tau as k grows."""
    return 1.0 - 1.0 / tokens_per_step


def category_tokens_per_step(row: Mapping[str, str]) -> dict[str, float]:
    """Return tau_c = tau * S_c / S_overall of one leaderboard row, by task category.

    ``tau`` is the row's mean accepted tokens, ``S_c`` its speed-up on category
    ``c`` and ``S_overall`` its overall speed-up. The rule assumes that the cost
    of one decoding step relative to a plain decoding step is the same in every
    category of one method and device, so tokens per step scale with speed-up.

    Raises:
        ValueError: A category's tau_c is not above 1 (no acceptance rate would fit).
    """
    tau = float(row["mean_accepted_tokens"])
    overall = float(row["speedup_overall"])
    result: dict[str, float] = {}
    for category, column in CATEGORY_COLUMNS:
        value = tau * float(row[column]) / overall
        if value <= 1.0:
            raise ValueError(f"{row['method']} {row['device']} {category}: tau_c {value} <= 1")
        result[category] = value
    return result


def specbench_category_tokens(mean: SpecBenchMean) -> dict[str, float]:
    """Return tau_c of a (method, target): the per-row tau_c averaged over the rows' devices."""
    per_row = [category_tokens_per_step(row) for row in mean.rows]
    return {
        category: math.fsum(values[category] for values in per_row) / len(per_row)
        for category, _ in CATEGORY_COLUMNS
    }


@dataclass(frozen=True)
class BetaFit:
    """A Beta concentration fitted to the spread of acceptance rates between groups.

    Attributes:
        mean: ``p``, the mean of the rates.
        variance: Their population variance (each group weighs the same).
        concentration: ``c`` with ``p (1 - p) / (c + 1) = variance``.
    """

    mean: float
    variance: float
    concentration: float


def beta_fit(rates: Sequence[float]) -> BetaFit:
    """Fit a Beta concentration to rates: ``c = p (1 - p) / variance - 1``.

    Raises:
        ValueError: The rates do not vary, or vary more than any Beta of that mean can.
    """
    mean = math.fsum(rates) / len(rates)
    variance = math.fsum((rate - mean) ** 2 for rate in rates) / len(rates)
    if variance <= 0.0 or variance >= mean * (1.0 - mean):
        raise ValueError(f"no Beta concentration fits rates {list(rates)}")
    return BetaFit(mean, variance, mean * (1.0 - mean) / variance - 1.0)


def tokens_at(document: Mapping[str, Any], ks: Sequence[int]) -> str:
    """Return ``k=1: 1.56, ...``: E[tokens per verify] of a curve document at each ``k``."""
    model = build_acceptance_model(dict(document), Path(f"{document['name']}.yaml"))
    return ", ".join(f"k={k}: {fmt(model.expected_tokens_per_verify(k, 0))}" for k in ks)


def curve(
    name: str,
    method: str,
    kind: str,
    target_model: str,
    draft_model: str,
    bins: list[dict[str, Any]],
    source: str,
    derivation: str,
    notes: str,
    *,
    topology: Mapping[str, Any],
    dataset: str,
    engine: str,
) -> dict[str, Any]:
    """Assemble one curve document in the key order of the files."""
    return {
        "name": name,
        "method": method,
        "kind": kind,
        "topology": dict(topology),
        "target_model": target_model,
        "draft_model": draft_model,
        "dataset": dataset,
        "engine": engine,
        "interpolation": "linear",
        "bins": bins,
        "source": source,
        "derivation": derivation,
        "notes": notes,
    }


def with_categories(
    document: Mapping[str, Any],
    categories: Mapping[str, list[dict[str, Any]]],
    request_spread: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the document with ``categories`` and ``request_spread`` after its ``bins``."""
    result: dict[str, Any] = {}
    for key, value in document.items():
        result[key] = value
        if key == "bins":
            result["categories"] = dict(categories)
            result["request_spread"] = dict(request_spread)
    return result


CHAIN: Mapping[str, Any] = {"kind": "chain"}
"""The topology of a curve measured on a chain of drafted tokens."""
TREE: Mapping[str, Any] = {"kind": "tree"}
"""The topology of a tree curve whose source does not state its width or node count."""


# ---------------------------------------------------------------------------
# The curves
# ---------------------------------------------------------------------------

CONTEXT_FREE = (
    "Context-independent: the source gives no breakdown by context length, so the curve has a "
    "single bin without context_len, applied at every context length."
)
EAGLE_ISSUE = "https://github.com/SafeAILab/EAGLE/issues/143"


def greedy_only(inputs: Inputs) -> str:
    """The note for a curve measured only with greedy decoding, citing the temperature effect."""
    greedy = curated_row(inputs, EAGLE_ISSUE, "EAGLE-1", "(default)", ("chain", "0.0"))
    sampled = curated_row(inputs, EAGLE_ISSUE, "EAGLE-1", "(default)", ("chain", "1.0"))
    return (
        "The bin is at temperature 0 (greedy), as measured; a run at another temperature "
        "refuses the curve, as the source has no sampled-decoding number; acceptance drops "
        "when sampling "
        f"(e.g. {EAGLE_ISSUE}: EAGLE-1 chain on {greedy['target_model']}, "
        f"{greedy['mean_accept_len_incl_bonus']} tokens per step at temperature 0 vs "
        f"{sampled['mean_accept_len_incl_bonus']} at temperature 1)."
    )


SPECBENCH_COMMIT = "fd2c1cd7d2201ef71db4c5f4e455008f017967bf"
DEVICE_NAMES = {"3090": "RTX 3090", "A100": "A100"}
"""Leaderboard device column -> the device as named on the page."""


def specbench_topology(inputs: Inputs, board_method: str) -> tuple[dict[str, Any], str]:
    """Return the topology of a Spec-Bench method and the sentence that cites its evidence.

    Width and node count are set only where the repository at the leaderboard's
    commit fixes them (``specbench_draft_settings.csv``).
    """
    row = inputs.specbench_settings[board_method]
    topology: dict[str, Any] = {"kind": row["topology"]}
    for key in ("width", "nodes"):
        if row[key]:
            topology[key] = int(row[key])
    shape = "a chain of drafted tokens" if row["topology"] == "chain" else "a token tree"
    sentence = (
        f"Topology: Spec-Bench's {board_method} verifies {shape} per step (hemingkx/Spec-Bench at "
        f"commit {SPECBENCH_COMMIT}: {row['evidence']}; "
        "acceptance/inputs/specbench_draft_settings.csv). The leaderboard itself does not state "
        "the settings; these are the ones the repository's eval.sh runs."
    )
    return topology, sentence


def specbench_draft_model(inputs: Inputs, board_method: str, target: str) -> str:
    """Return the draft model eval.sh names for this method, when it belongs to this target."""
    row = inputs.specbench_settings[board_method]
    if row["draft_target"] in ("", target):
        return row["draft_model"]
    return ""


def specbench_categories(
    mean: SpecBenchMean,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any], str]:
    """Return the category bins, the fitted request spread and the derivation sentences.

    tau_c = tau * S_c / S_overall per leaderboard row, averaged over the rows'
    devices; alpha_c = 1 - 1/tau_c. The spread's concentration is fitted to the
    population variance of the six alpha_c (as written, rounded).
    """
    taus = specbench_category_tokens(mean)
    alphas = {category: rounded(alpha_from_tokens_per_step(tau)) for category, tau in taus.items()}
    fit = beta_fit(list(alphas.values()))
    concentration = rounded(fit.concentration)
    per_row = "; ".join(
        f"{row['device']}: tau {row['mean_accepted_tokens']}, S_overall {row['speedup_overall']}, "
        + ", ".join(f"S_{category} {row[column]}" for category, column in CATEGORY_COLUMNS)
        for row in mean.rows
    )
    averaged = " averaged over the devices" if len(mean.rows) > 1 else ""
    sentences = (
        "Categories: tau_c = tau * S_c / S_overall per leaderboard row (S = the row's speed-up "
        "columns speedup_multiturn, speedup_translation, speedup_summarization, speedup_qa, "
        f"speedup_math, speedup_rag and speedup_overall; {per_row}){averaged}, assuming that "
        "the cost of one step relative to a plain decoding step is the same in every category "
        "of one method and device, so tokens per step scale with speed-up: "
        + ", ".join(f"{category} {taus[category]:.4f}" for category in taus)
        + "; alpha_c = 1 - 1/tau_c: "
        + ", ".join(f"{category} {alphas[category]}" for category in alphas)
        + ". The categories' mean tau_c need not equal tau (the overall speed-up is not the "
        "mean of the category speed-ups). Request spread: p = mean of the six alpha_c = "
        f"{fit.mean:.6f}, variance (population, each category weighs the same) = "
        f"{fit.variance:.6g}, concentration c = p (1 - p) / variance - 1 = {concentration}."
    )
    categories = {
        category: [{"temperature": 0.0, "alpha": alpha}] for category, alpha in alphas.items()
    }
    spread = {
        "distribution": "beta",
        "concentration": concentration,
        "fitted_to": (
            "the spread between Spec-Bench's six task categories: p (1 - p) / (c + 1) = the "
            "population variance of the categories' alpha_c, p their mean (see derivation). "
            "It is the between-category spread only, a lower bound of the per-request spread, "
            "which no source gives; it counts the category spread, so a run that also draws "
            "requests' categories should not use it."
        ),
    }
    return categories, spread, sentences


def specbench_iid(
    inputs: Inputs, name: str, method: str, board_method: str, target: str, extra_notes: str
) -> dict[str, Any]:
    """An ``iid`` curve from Spec-Bench's mean tokens per step (alpha = 1 - 1/tau).

    It carries the six task categories (tau_c from the category speed-ups) and
    a request spread fitted to their alphas.
    """
    mean = specbench_mean(inputs, board_method, target)
    tau = mean.tokens_per_step
    alpha = rounded(alpha_from_tokens_per_step(tau))
    topology, topology_sentence = specbench_topology(inputs, board_method)
    categories, spread, category_sentences = specbench_categories(mean)
    devices = " and ".join(DEVICE_NAMES[device] for device, _ in mean.by_device)
    document = curve(
        name,
        method,
        "iid",
        target,
        specbench_draft_model(inputs, board_method, target),
        [{"temperature": 0.0, "alpha": alpha}],
        SPECBENCH_SOURCE,
        (
            f"Rows with method = {board_method} and target_model = {target} "
            f"(column mean_accepted_tokens; {mean.describe()}), each checked against "
            f"Leaderboard.md. tau = their mean = {tau:.4g} tokens per decoding step including "
            f"the target's own token. alpha = 1 - 1/tau = {alpha}, the per-token acceptance "
            "probability for which the iid model's tokens per verify round, "
            "(1 - alpha^(k+1)) / (1 - alpha), tends to tau as k grows. The leaderboard does not "
            "state the draft length (or tree) the method ran with; for any finite k a larger "
            "alpha would be needed to reach tau, so this alpha is a lower bound and needs no "
            f"assumed k. {category_sentences}"
        ),
        "",
        topology=topology,
        dataset="Spec-Bench (all six tasks)",
        engine=f"Spec-Bench evaluation code (PyTorch 2.5.1, FP16, batch size 1; {devices})",
    )
    tree_sentence = (
        " For a tree curve tau is the tokens per verify round of the whole tree; the iid form "
        "reproduces it as k (the tree depth) grows."
        if topology["kind"] == "tree"
        else ""
    )
    document["notes"] = " ".join(
        [
            SPECBENCH_SETTING,
            topology_sentence + tree_sentence,
            CONTEXT_FREE,
            greedy_only(inputs),
            extra_notes,
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 4, 8))}; "
            f"k -> infinity: {tau:.4g}.",
        ]
    ).strip()
    return with_categories(document, categories, spread)


def sps_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """Vanilla draft-model speculative sampling (Spec-Bench "SpS")."""
    note = (
        "SpS is speculative sampling with a separate small draft model; the leaderboard does "
        "not name it, the repository's eval.sh runs vicuna-68m for the Vicuna-7B target."
    )
    return [
        specbench_iid(inputs, "sps_vicuna-7b", "sps", "SpS", "Vicuna-7B-v1.3", note),
        specbench_iid(inputs, "sps_vicuna-33b", "sps", "SpS", "Vicuna-33B-v1.3", note),
    ]


SGLANG_PR = "https://github.com/sgl-project/sglang/pull/4247"
SGLANG_TREE = (
    f"Topology: a token tree. SGLang's EAGLE worker drafts a tree and verifies it in one target "
    f"pass; {SGLANG_PR} gives the number of draft steps but not --speculative-eagle-topk or "
    "--speculative-num-draft-tokens, so the curve states no width or node count. For context "
    "only: the same authors' sgl-project/sglang PR #4716 ran --speculative-num-steps 8 "
    "--speculative-eagle-topk 8 --speculative-num-draft-tokens 64."
)
VLLM_EAGLE3_ISSUE = "https://github.com/vllm-project/vllm/issues/26191"
LLAMA_CPP_PR = "https://github.com/ggml-org/llama.cpp/pull/24536"
VLLM_NGRAM_PR = "https://github.com/vllm-project/vllm/pull/24344"


def per_k_from_rows(
    rows: Sequence[Mapping[str, str]],
) -> tuple[dict[str, float], list[str]]:
    """Return the ``acceptance`` table (E[A]/k by k) of curated rows and one phrase per row."""
    table: dict[str, float] = {}
    phrases: list[str] = []
    for row in sorted(rows, key=draft_length):
        k = draft_length(row)
        mean_incl_bonus = float(row["mean_accept_len_incl_bonus"])
        fraction = rounded((mean_incl_bonus - 1.0) / k)
        table[f"k={k}"] = fraction
        phrases.append(
            f"k_or_steps {row['k_or_steps']!r}: mean_accept_len_incl_bonus {mean_incl_bonus} -> "
            f"({mean_incl_bonus} - 1) / {k} = {fraction}"
        )
    return table, phrases


def eagle_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """EAGLE-1 on Qwen2-7B-Instruct, chain and tree, at temperatures 0 and 1 (EAGLE issue #143)."""
    curves = []
    for kind in ("chain", "tree"):
        rows = [
            curated_row(inputs, EAGLE_ISSUE, "EAGLE-1", "(default)", (kind, temperature))
            for temperature in ("0.0", "1.0")
        ]
        bins = []
        phrases = []
        for row in rows:
            tau = float(row["mean_accept_len_incl_bonus"])
            alpha = rounded(alpha_from_tokens_per_step(tau))
            bins.append({"temperature": float(row["temperature"]), "alpha": alpha})
            phrases.append(
                f"temperature {row['temperature']}: tau = {tau} -> alpha = 1 - 1/{tau} = {alpha}"
            )
        first = rows[0]
        document = curve(
            f"eagle_qwen2-7b_{kind}",
            "eagle",
            "iid",
            first["target_model"],
            first["draft"],
            bins,
            f"{EAGLE_ISSUE} (EAGLE repository, user-reproduced), as "
            "acceptance/inputs/acceptance_points_curated.csv",
            (
                f"Curated rows source_url = {EAGLE_ISSUE}, method = EAGLE-1, topology = {kind}, "
                "column mean_accept_len_incl_bonus (tau, tokens per round including the target's "
                "own token), one bin per temperature with alpha = 1 - 1/tau, the rule of the "
                "Spec-Bench curves (tokens per round tend to tau as k grows): "
                + "; ".join(phrases)
                + "."
            ),
            "",
            topology=CHAIN if kind == "chain" else TREE,
            dataset=first["dataset"].strip("()"),
            engine=first["engine"],
        )
        shape = (
            "Topology: a chain of drafted tokens."
            if kind == "chain"
            else "Topology: a token tree (the EAGLE repository's tree drafting); the thread "
            "does not give the tree, so the curve states no width or node count."
        )
        document["notes"] = " ".join(
            [
                shape,
                "The thread does not state the draft length (or tree depth), so the bins use the "
                "k-free rule alpha = 1 - 1/tau.",
                "Temperature: bins at 0 (greedy) and 1; between them the two bins' "
                "distributions are mixed linearly, so E[tokens per verify] is linear in the "
                "temperature, and above 1 the temperature-1 bin is used.",
                CONTEXT_FREE,
                f"E[tokens per verify] of this curve at temperature 0: "
                f"{tokens_at(document, (1, 4, 8))}; k -> infinity: "
                + " and ".join(
                    f"{row['mean_accept_len_incl_bonus']} at temperature {row['temperature']}"
                    for row in rows
                )
                + ".",
            ]
        )
        curves.append(document)
    return curves


def eagle2_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """EAGLE-2: Spec-Bench (Vicuna) and SGLang (Llama-3.1-8B)."""
    board_note = (
        "EAGLE-2 drafts a dynamic tree (the top-scored nodes of a top-k expansion); the curve's "
        "tokens per round are those of the whole tree."
    )
    curves = [
        specbench_iid(inputs, "eagle2_vicuna-7b", "eagle2", "EAGLE2", "Vicuna-7B-v1.3", board_note),
        specbench_iid(
            inputs, "eagle2_vicuna-33b", "eagle2", "EAGLE2", "Vicuna-33B-v1.3", board_note
        ),
    ]
    row = curated_row(inputs, SGLANG_PR, "EAGLE-2", "8 steps")
    table, phrases = per_k_from_rows([row])
    document = curve(
        "eagle2_llama-3.1-8b",
        "eagle2",
        "per_k",
        row["target_model"],
        row["draft"],
        [{"temperature": 0.0, "acceptance": table}],
        f"{SGLANG_PR} (SGLang with CUDA graphs, {row['dataset']}), as "
        "acceptance/inputs/acceptance_points_curated.csv",
        (
            f"Curated row source_url = {SGLANG_PR}, method = EAGLE-2: {phrases[0]}, the expected "
            "fraction of the drafted tokens that are accepted (the per_k value). The number of "
            "draft steps is taken as k."
        ),
        "",
        topology=TREE,
        dataset=row["dataset"],
        engine="SGLang (CUDA graphs)",
    )
    document["notes"] = " ".join(
        [
            SGLANG_TREE,
            "The tree has depth 8 (8 draft steps); k is the depth and the per_k value the mean "
            "accepted length over 8. Other k follow the per_k rule (the alpha solved at k=8).",
            CONTEXT_FREE,
            greedy_only(inputs),
            "The SGLang documentation (acceptance_points_curated.csv) reports 244.10 tok/s for "
            "EAGLE-2 vs 158.34 without speculation on one H100 for the same target.",
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 4, 8))}.",
        ]
    )
    curves.append(document)
    return curves


def eagle3_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """EAGLE-3: Spec-Bench (Vicuna-13B), SGLang and vLLM (Llama-3.1-8B), llama.cpp (positional)."""
    curves = [
        specbench_iid(
            inputs,
            "eagle3_vicuna-13b",
            "eagle3",
            "EAGLE3",
            "Vicuna-13B-v1.3",
            "EAGLE-3 drafts a dynamic tree (the top-scored nodes of a top-k expansion); the "
            "curve's tokens per round are those of the whole tree. Spec-Bench lists EAGLE-3 for "
            "Vicuna-13B only.",
        )
    ]

    rows = [
        curated_row(inputs, SGLANG_PR, "EAGLE-3", "5 steps"),
        curated_row(inputs, SGLANG_PR, "EAGLE-3", "8 steps"),
    ]
    table, phrases = per_k_from_rows(rows)
    document = curve(
        "eagle3_llama-3.1-8b",
        "eagle3",
        "per_k",
        rows[0]["target_model"],
        rows[0]["draft"],
        [{"temperature": 0.0, "acceptance": table}],
        f"{SGLANG_PR} (SGLang with CUDA graphs, {rows[0]['dataset']}), as "
        "acceptance/inputs/acceptance_points_curated.csv",
        (
            f"Curated rows source_url = {SGLANG_PR}, method = EAGLE-3: "
            + "; ".join(phrases)
            + ". Each value is the expected accepted fraction E[A]/k; the number of draft "
            "steps is taken as k."
        ),
        "",
        topology=TREE,
        dataset=rows[0]["dataset"],
        engine="SGLang (CUDA graphs)",
    )
    document["notes"] = " ".join(
        [
            SGLANG_TREE,
            "k is the tree depth (draft steps). Between k=5 and k=8 E[A] is interpolated "
            "linearly; below 5 and above 8 the per_k rule applies (alpha solved at 5, resp. 8).",
            "The PR quotes the EAGLE-3 authors' reference figure 6.13 for 8 steps.",
            CONTEXT_FREE,
            greedy_only(inputs),
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 4, 5, 8))}.",
        ]
    )
    curves.append(document)

    row = curated_row(inputs, VLLM_EAGLE3_ISSUE, "EAGLE-3", "7")
    table, phrases = per_k_from_rows([row])
    counts = re.findall(r"(num_\w+)=(\d+)", row["notes"])
    counted = {key: int(value) for key, value in counts}
    exact = counted["num_accepted"] / counted["num_draft_tokens"]
    if abs(exact - table["k=7"]) > 0.002:
        raise ValueError(f"vLLM EAGLE-3 counts give {exact}, mean length gives {table['k=7']}")
    document = curve(
        "eagle3_llama-3.1-8b_vllm-chain",
        "eagle3",
        "per_k",
        row["target_model"],
        row["draft"],
        [{"temperature": 0.0, "acceptance": table}],
        f"{VLLM_EAGLE3_ISSUE} (vLLM V1, {row['dataset']}), as "
        "acceptance/inputs/acceptance_points_curated.csv",
        (
            f"Curated row source_url = {VLLM_EAGLE3_ISSUE}: {phrases[0]}. Cross-check with the "
            f"counters in the row's notes: num_accepted / num_draft_tokens = "
            f"{counted['num_accepted']} / {counted['num_draft_tokens']} = {exact:.6f}."
        ),
        "",
        topology=CHAIN,
        dataset=row["dataset"],
        engine=row["engine"],
    )
    document["notes"] = " ".join(
        [
            "Topology: a chain of k=7 drafted tokens (vLLM's EAGLE proposer drafts one token per "
            "step; the row's topology column). The same target with an "
            "EAGLE-3 tree in SGLang (eagle3_llama-3.1-8b) accepts far more per round; the chain "
            "figure suits engines that verify one chain.",
            CONTEXT_FREE,
            greedy_only(inputs),
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 4, 7, 8))}.",
        ]
    )
    curves.append(document)

    row = curated_row(inputs, LLAMA_CPP_PR, "EAGLE-3 (draft-eagle3)", "3")
    shares = per_position_shares(row)
    rates = [rounded(rate) for rate in unconditional_to_conditional(shares)]
    document = curve(
        "eagle3_llama-cpp",
        "eagle3",
        "positional",
        "",
        row["draft"],
        [{"temperature": 0.0, "rates": rates}],
        f"{LLAMA_CPP_PR} (llama.cpp server), as acceptance/inputs/acceptance_points_curated.csv",
        (
            f"Curated row source_url = {LLAMA_CPP_PR}: per_position_accept_rate "
            f"{row['per_position_accept_rate']} is the share of rounds in which draft position "
            "i was accepted, P(A >= i) (they sum to mean_accept_len_incl_bonus - 1 = "
            f"{float(row['mean_accept_len_incl_bonus']) - 1:.2f}). Conditional rates "
            "p_i = P(A >= i) / P(A >= i-1) with P(A >= 0) = 1."
        ),
        "",
        topology=CHAIN,
        dataset=row["dataset"],
        engine=row["engine"],
    )
    document["notes"] = " ".join(
        [
            "Topology: a chain of 3 drafted tokens (llama.cpp drafts one sequence; the row's "
            "topology column).",
            "A single chat prompt (20 prompt tokens, 256 generated) with k=3; the target model "
            "is not stated in the cited excerpt. Positions beyond 3 repeat p_3.",
            CONTEXT_FREE,
            "Temperature: the engine default, not stated; the bin is written at 0, so a run "
            "at another temperature refuses the curve.",
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 3, 8))}.",
        ]
    )
    curves.append(document)
    return curves


MEDUSA_HEADS = 5
MEDUSA_TREE_WIDTHS = (2,)
"""Widths of the full Medusa trees derived from top-w accuracies. Width 2 over the 5 heads
verifies 63 tokens per round, about the 64 of Spec-Bench's Medusa tree (mc_sim_7b_63); width
3 would already verify 364."""
MEDUSA_RUNS = (("7b", "Vicuna-7B-v1.3"), ("33b", "Vicuna-33B-v1.3"))
MEDUSA_DATASET = "Medusa-1 head training data (not named by the export)"
MEDUSA_ENGINE = "Medusa training runs (Weights & Biases export)"
MEDUSA_COMMON = (
    "Head accuracies are training-set accuracies at the end of training, each measured with the "
    "true preceding tokens; using them as conditional rates assumes the heads' errors are "
    "independent. Medusa-1 has 5 heads, so k > 5 is outside what it drafts (positions beyond 5 "
    "repeat p_5)."
)


def full_tree_nodes(width: int, depth: int) -> int:
    """Return 1 + w + w^2 + ... + w^depth: tokens per round of a full tree, root included."""
    return sum(width**level for level in range(depth + 1))


def medusa_curve(inputs: Inputs, run: str, target: str, width: int) -> dict[str, Any]:
    """One Medusa-1 curve: the chain of top-1 guesses (width 1) or a full tree of top-w guesses.

    The conditional rate of draft position i is head i-1's top-w accuracy: in a
    full tree every depth-i node has the same w children (head i-1's top-w
    tokens), so position i is accepted when the target's token is among them.
    """
    row = inputs.medusa[run]
    columns = [f"train/medusa{head}_top{width}" for head in range(MEDUSA_HEADS)]
    rates = [rounded(float(row[column])) for column in columns]
    board = specbench_mean(inputs, "Medusa", target)
    settings = inputs.specbench_settings["Medusa"]
    if width == 1:
        name = f"medusa_vicuna-{run}"
        topology: dict[str, Any] = dict(CHAIN)
        rule = "p_i = top-1 accuracy of head i-1, the head that predicts the i-th drafted token."
        shape = "Topology: a chain of each head's top-1 token (head i-1 proposes draft position i)."
    else:
        nodes = full_tree_nodes(width, MEDUSA_HEADS)
        name = f"medusa_vicuna-{run}_tree-w{width}"
        topology = {"kind": "tree", "width": width, "nodes": nodes}
        rule = (
            f"p_i = top-{width} accuracy of head i-1. Rule: in a full tree of width {width} every "
            f"node at depth i-1 has the same {width} children, head i-1's top-{width} tokens, so "
            f"draft position i is accepted when the target's token is among them; depth "
            f"{MEDUSA_HEADS} (one level per head) gives nodes = 1 + w + ... + w^{MEDUSA_HEADS} = "
            f"{nodes} tokens per round including the root."
        )
        shape = (
            f"Topology: a full tree of width {width} and depth {MEDUSA_HEADS} ({nodes} tokens "
            "verified per round including the root), derived, not measured; k is the tree depth."
        )
    document = curve(
        name,
        "medusa",
        "positional",
        target,
        f"Medusa-1, {MEDUSA_HEADS} heads ({row['output_dir']})",
        [{"temperature": 0.0, "rates": rates}],
        MEDUSA_SOURCE,
        f"Row Name = {run} (run {row['ID']}, state {row['State']}), columns "
        + ", ".join(columns)
        + ": "
        + rule,
        "",
        topology=topology,
        dataset=MEDUSA_DATASET,
        engine=MEDUSA_ENGINE,
    )
    document["notes"] = " ".join(
        [
            shape,
            MEDUSA_COMMON,
            f"Cross-check: Spec-Bench's Medusa rows for this target (a token tree of "
            f"{settings['nodes']} tokens, mc_sim_7b_63; acceptance/inputs/"
            f"specbench_draft_settings.csv) give {board.describe()} tokens per step; this curve "
            f"gives {fmt(document_tokens(document, MEDUSA_HEADS))} at k=5.",
            CONTEXT_FREE,
            f"Temperature 0 bin (top-{width} accuracy corresponds to greedy acceptance); a run "
            "at another temperature refuses the curve.",
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 3, 5))}.",
        ]
    )
    return document


def medusa_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """Medusa-1 heads' accuracies as positional rates (Vicuna-7B and -33B): chain and trees."""
    return [
        medusa_curve(inputs, run, target, width)
        for run, target in MEDUSA_RUNS
        for width in (1, *MEDUSA_TREE_WIDTHS)
    ]


def ngram_curves(inputs: Inputs) -> list[dict[str, Any]]:
    """n-gram / prompt-lookup drafting: vLLM per-position rates and Spec-Bench PLD."""
    row = curated_row(inputs, VLLM_NGRAM_PR, "ngram (prompt lookup)", "5")
    shares = per_position_shares(row)
    rates = [rounded(rate) for rate in unconditional_to_conditional(shares)]
    pld = specbench_mean(inputs, "PLD", "Vicuna-7B-v1.3")
    context = re.search(r"PR context: ([^;)]+)", row["target_model"])
    if context is None:
        raise ValueError(f"no target in {row['target_model']!r}")
    pr_target = context.group(1).strip()
    lookahead = specbench_mean(inputs, "Lookahead", "Vicuna-7B-v1.3")
    document = curve(
        "ngram_code-edit",
        "ngram",
        "positional",
        pr_target,
        "n-gram prompt lookup (no draft model)",
        [{"temperature": 0.0, "rates": rates}],
        f"{VLLM_NGRAM_PR} (vLLM V1), as acceptance/inputs/acceptance_points_curated.csv",
        (
            f"Curated row source_url = {VLLM_NGRAM_PR}, method = ngram (prompt lookup), "
            f"k = 5: per_position_accept_rate {row['per_position_accept_rate']} is the share of "
            "draft rounds in which position i was accepted, P(A >= i) (they sum to "
            f"mean_accept_len_incl_bonus - 1 = {float(row['mean_accept_len_incl_bonus']) - 1:.2f}"
            "). Conditional rates p_i = P(A >= i) / P(A >= i-1) with P(A >= 0) = 1."
        ),
        "",
        topology=CHAIN,
        dataset=row["dataset"],
        engine=row["engine"],
    )
    document["notes"] = " ".join(
        [
            "Topology: a chain of k=5 drafted tokens (vLLM's n-gram proposer drafts one "
            "sequence; the row's topology column).",
            f"Workload {row['dataset']}: code editing, where the output copies much of the "
            "prompt, so acceptance is far higher than in chat. The rates are per draft round; "
            "in the run, 821 tokens were generated without a draft because no n-gram matched "
            "(the row's notes), which this curve does not model. The target is named only as "
            "the PR's context. Positions beyond 5 repeat p_5. Rates rise with position: once "
            "the first tokens match, the copied span tends to continue.",
            "Cross-check on chat-like tasks: Spec-Bench PLD on Vicuna-7B-v1.3 gives "
            f"{pld.describe()} and Lookahead {lookahead.describe()} tokens per step (see "
            "ngram_vicuna-7b).",
            CONTEXT_FREE,
            "Temperature: the engine default, not stated; the bin is written at 0, so a run "
            "at another temperature refuses the curve.",
            f"E[tokens per verify] of this curve: {tokens_at(document, (1, 3, 5, 8))}.",
        ]
    )
    board = specbench_iid(
        inputs,
        "ngram_vicuna-7b",
        "ngram",
        "PLD",
        "Vicuna-7B-v1.3",
        "PLD is prompt lookup decoding (n-gram matches in the prompt, no draft model). "
        f"Spec-Bench's Lookahead decoding (also n-gram based) gives {lookahead.describe()}.",
    )
    return [document, board]


CURVE_FAMILIES: tuple[Callable[[Inputs], list[dict[str, Any]]], ...] = (
    sps_curves,
    eagle_curves,
    eagle2_curves,
    eagle3_curves,
    medusa_curves,
    ngram_curves,
)


def derive_documents(inputs_dir: Path = INPUTS_DIR) -> list[dict[str, Any]]:
    """Return every curve document, in a fixed order."""
    inputs = read_inputs(inputs_dir)
    documents: list[dict[str, Any]] = []
    for family in CURVE_FAMILIES:
        documents.extend(family(inputs))
    names = [d["name"] for d in documents]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate curve names: {names}")
    return documents


def render_files(inputs_dir: Path = INPUTS_DIR) -> dict[str, str]:
    """Return ``{file name: YAML text}`` for every shipped curve."""
    return {f"{d['name']}.yaml": render_yaml(d) for d in derive_documents(inputs_dir)}


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) the curves and the README tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report differences, write nothing")
    args = parser.parse_args(argv)
    documents = derive_documents(INPUTS_DIR)
    outputs = {ACCEPTANCE_DIR / f"{d['name']}.yaml": render_yaml(d) for d in documents}
    outputs[README] = readme_with_tables(README.read_text(encoding="utf-8"), documents)
    stale = [
        path
        for path, text in outputs.items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    if args.check:
        for path in stale:
            print(f"out of date: {path.relative_to(REPO_ROOT)}")
        return 1 if stale else 0
    for path in stale:
        path.write_text(outputs[path], encoding="utf-8")
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
