"""A table of bad inputs: each is refused with one clear message, never a traceback.

Every case starts from a valid fixture scenario (``tests/engine_fixtures.py``),
breaks one thing in it or in a file it references, and checks that validation
reports the file, the key path, the bad value and what is allowed. A few cases
go through the command-line tools end to end to check exit status 2 and the
absence of a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator.cli import main as simulate_main
from simulator.validate import Verdict, validate_file
from tests.commands import run_python
from tests.engine_fixtures import (
    BATCH_AXIS,
    CONTEXT_AXIS,
    PROFILES,
    constant,
    synthetic,
    write_lut,
    write_scenario,
)

Document = dict[str, Any]


def _base(tmp_path: Path, mode: str = "distributed") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return write_scenario(tmp_path, mode=mode, workload=synthetic(5, 1.0, 100, 10))


def _edit(change: Callable[[Document], None], mode: str = "distributed") -> Callable[[Path], Path]:
    """A case that edits the scenario document (of a fixture scenario in ``mode``)."""

    def build(tmp_path: Path) -> Path:
        path = _base(tmp_path, mode)
        document = yaml.safe_load(path.read_text())
        change(document)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    return build


def _edit_lut(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], Path]:
    """A case that edits the target LUT the scenario names."""

    def build(tmp_path: Path) -> Path:
        path = _base(tmp_path)
        lut = tmp_path / "target.csv"
        change(pd.read_csv(lut)).to_csv(lut, index=False)
        return path

    return build


def _with_trace(text: str) -> Callable[[Path], Path]:
    """A case whose workload replays a small CSV trace with ``text``."""

    def build(tmp_path: Path) -> Path:
        (tmp_path / "trace.csv").write_text(text)
        return _edit(
            lambda d: d.__setitem__(
                "workload",
                {
                    "source": "trace://trace.csv",
                    "format": "csv",
                    "slo": {"ttft_ms": 100, "tpot_ms": 10},
                },
            )
        )(tmp_path)

    return build


def _set(dotted: str, value: Any) -> Callable[[Document], None]:
    def change(document: Document) -> None:
        node: Any = document
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _nan_latency(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[3, "latency_ms"] = float("nan")
    return frame


def _negative_latency(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[0, "latency_ms"] = -1.0
    return frame


def _acceptance_alpha_above_one(tmp_path: Path) -> Path:
    path = _base(tmp_path)
    curve = {
        "method": "test",
        "kind": "iid",
        "topology": {"kind": "chain"},
        "bins": [{"alpha": 1.5}],
        "source": "test",
    }
    (tmp_path / "acc.yaml").write_text(yaml.safe_dump(curve))
    return path


def _yaml_syntax_error(tmp_path: Path) -> Path:
    path = _base(tmp_path)
    path.write_text(path.read_text().replace("mode: distributed", "mode: [distributed"))
    return path


def _duplicate_yaml_key(tmp_path: Path) -> Path:
    path = _base(tmp_path)
    path.write_text(path.read_text() + "\nseed: 3\n")
    return path


def _json_scenario(tmp_path: Path) -> Path:
    document = yaml.safe_load(_base(tmp_path).read_text())
    document["speculation"]["k"] = 0
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document))
    return path


def _hybrid_with_bad_params(tmp_path: Path) -> Path:
    return write_scenario(
        tmp_path,
        mode="hybrid",
        workload=synthetic(5, 1.0, 100, 10),
        extra={"speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold": 5}}},
    )


def _profile_with_negative_power(tmp_path: Path) -> Path:
    profile = yaml.safe_load((PROFILES / "rtx-4050-laptop.yaml").read_text())
    profile["energy"]["active_power_w"] = -3
    (tmp_path / "rtx-4050-laptop.yaml").write_text(yaml.safe_dump(profile))
    return _edit(_set("hardware_profiles.0.profile", "rtx-4050-laptop.yaml"))(tmp_path)


def _second_class_linked(index: int, new_id: str) -> Callable[[Document], None]:
    """Declare a copy of ``hardware_profiles[index]`` as ``new_id`` and link the two."""

    def change(document: Document) -> None:
        entry = dict(document["hardware_profiles"][index], id=new_id)
        document["hardware_profiles"].append(entry)
        first = document["hardware_profiles"][index]["id"]
        document["network"]["links"].append(
            {"src": first, "dst": new_id, "rtt_ms": 1, "bw_mbps": 100}
        )
        if entry["type"] == "draft":
            document["network"]["links"].append(
                {"src": new_id, "dst": "pool", "rtt_ms": 1, "bw_mbps": 100}
            )

    return change


def _target_grid(
    contexts: tuple[int, ...] = CONTEXT_AXIS, batches: tuple[int, ...] = BATCH_AXIS
) -> Callable[[Path], None]:
    """Rewrite the fixture's target LUT on another context or batch grid."""

    def rewrite(tmp_path: Path) -> None:
        write_lut(
            tmp_path / "target.csv",
            "target-model",
            "a100-sxm4-80gb",
            {phase: constant(10.0) for phase in ("prefill", "draft_decode", "verify")},
            contexts=contexts,
            batches=batches,
        )

    return rewrite


def _lut_reach(
    lut: Callable[[Path], None], change: Callable[[Document], None] = lambda _d: None
) -> Callable[[Path], Path]:
    """A case whose run would look a LUT up off its grid (``lut_out_of_range: raise``)."""

    def build(tmp_path: Path) -> Path:
        path = _edit(change)(tmp_path)
        lut(tmp_path)
        return path

    return build


TRACE_WORKLOAD = {"source": "trace://trace.csv", "slo": {"ttft_ms": 100, "tpot_ms": 10}}


def _short_prompt_trace(tmp_path: Path) -> None:
    """A target LUT from context 128 and a trace whose second row has a 3-token prompt."""
    _target_grid(contexts=(128, 131072))(tmp_path)
    (tmp_path / "trace.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens\n0,300,5\n1,3,5\n2,200,5\n"
    )


def _draft_grid_from_128(tmp_path: Path) -> None:
    """A drafter LUT from context 128 (the fixture's prompts have 100 tokens)."""
    write_lut(
        tmp_path / "draft.csv",
        "draft-model",
        "rtx-4050-laptop",
        {"prefill": constant(5.0), "draft_decode": constant(4.0)},
        contexts=(128, 131072),
    )


def _long_drafts(document: Document) -> None:
    """k = 9 (the fixture's LUTs stop at k = 8), outputs long enough to draft it."""
    _set("speculation.k", 9)(document)
    _set("speculation.adaptive_k", {"k_max": 12})(document)
    _set("workload.synthetic.output_tokens.value", 50)(document)


def _long_synthetic_duration(document: Document) -> None:
    synthetic_block = document["workload"]["synthetic"]
    synthetic_block["num_requests"] = None
    synthetic_block["duration_s"] = 1e9


def _drop_key(key: str) -> Callable[[Document], None]:
    return lambda document: document.pop(key) and None


@dataclass(frozen=True)
class Case:
    """One bad input and the pieces its message must contain."""

    build: Callable[[Path], Path]
    file: str
    key_path: str
    value: str
    allowed: str


CASES: dict[str, Case] = {
    "wrong type": Case(
        _edit(_set("speculation.k", "four")), "scenario.yaml", "speculation.k", "'four'", "integer"
    ),
    "unknown top-level key": Case(
        _edit(_set("scheduller", {})),
        "scenario.yaml",
        "scheduller",
        "did you mean 'scheduler'",
        "keys hardware_profiles",
    ),
    "unknown nested key": Case(
        _edit(_set("network.jiter", {})),
        "scenario.yaml",
        "network.jiter",
        "did you mean 'jitter'",
        "keys jitter, links, payload",
    ),
    "missing required key": Case(
        _edit(_drop_key("scenario_id")),
        "scenario.yaml",
        "scenario_id",
        "(missing)",
        "a value is required",
    ),
    "missing profile file": Case(
        _edit(_set("hardware_profiles.0.profile", "nope.yaml")),
        "scenario.yaml",
        "hardware_profiles[0].profile",
        "'nope.yaml'",
        "an existing device profile file",
    ),
    "missing LUT file": Case(
        _edit(_set("speculation.verifier_models.0.lut", "gone.csv")),
        "scenario.yaml",
        "speculation.verifier_models[0].lut",
        "'gone.csv'",
        "an existing LUT file",
    ),
    "missing acceptance file": Case(
        _edit(_set("speculation.acceptance_models.0.file", "gone.yaml")),
        "scenario.yaml",
        "speculation.acceptance_models[0].file",
        "'gone.yaml'",
        "an existing acceptance model file",
    ),
    "missing trace file": Case(
        _edit(
            _set("workload", {"source": "trace://none.csv", "slo": {"ttft_ms": 1, "tpot_ms": 1}})
        ),
        "scenario.yaml",
        "workload.source",
        "'none.csv'",
        "an existing trace file",
    ),
    "empty trace": Case(
        _with_trace("arrival_s,prompt_tokens,output_tokens\n"),
        "scenario.yaml",
        "workload.source",
        "'trace.csv'",
        "at least one request row",
    ),
    "negative prompt length in trace": Case(
        _with_trace("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,-4,5\n"),
        "trace.csv",
        "row 2, column prompt_tokens",
        "'-4'",
        "a whole number >= 1",
    ),
    "NaN arrival in trace": Case(
        _with_trace("arrival_s,prompt_tokens,output_tokens\n0,10,5\nnan,4,5\n"),
        "trace.csv",
        "row 2, column arrival_s",
        "'nan'",
        "a finite number",
    ),
    "link to an unknown device": Case(
        _edit(_set("network.links.0.dst", "poool")),
        "scenario.yaml",
        "network.links[0].dst",
        "'poool'",
        "a hardware_profiles id: laptops, pool",
    ),
    "link from a device to itself": Case(
        _edit(
            lambda d: d["network"]["links"].append(
                {"src": "pool", "dst": "pool", "rtt_ms": 1, "bw_mbps": 1}
            )
        ),
        "scenario.yaml",
        "network.links[1].dst",
        "'pool'",
        "a different device than src",
    ),
    "link between two target pools": Case(
        _edit(_second_class_linked(1, "pool2")),
        "scenario.yaml",
        "network.links[1].dst",
        "'pool2'",
        "a draft class: a link joins client devices (draft) to a target pool",
    ),
    "link between two client classes": Case(
        _edit(_second_class_linked(0, "phones")),
        "scenario.yaml",
        "network.links[1].dst",
        "'phones'",
        "a target class: a link joins client devices (draft) to a target pool",
    ),
    "fused model in distributed mode": Case(
        _edit(_set("speculation.fused_models", [{"name": "fused-model", "lut": "fused.csv"}])),
        "scenario.yaml",
        "speculation.fused_models",
        "['fused-model']",
        "[] (mode 'distributed' uses drafter_models and verifier_models)",
    ),
    "fused model in none mode": Case(
        _edit(_set("speculation.fused_models", [{"name": "f", "lut": "fused.csv"}]), "none"),
        "scenario.yaml",
        "speculation.fused_models",
        "['f']",
        "[] (mode 'none' uses verifier_models)",
    ),
    "drafter model in fused mode": Case(
        _edit(_set("speculation.drafter_models", [{"name": "d", "lut": "draft.csv"}]), "fused"),
        "scenario.yaml",
        "speculation.drafter_models",
        "['d']",
        "[] (mode 'fused' uses fused_models)",
    ),
    "verifier model in fused mode": Case(
        _edit(_set("speculation.verifier_models", [{"name": "v", "lut": "target.csv"}]), "fused"),
        "scenario.yaml",
        "speculation.verifier_models",
        "['v']",
        "[] (mode 'fused' uses fused_models)",
    ),
    "client class names a model in none mode": Case(
        _edit(_set("hardware_profiles.0.model", "draft-model"), "none"),
        "scenario.yaml",
        "hardware_profiles[0].model",
        "'draft-model'",
        "null: mode 'none' runs no model on client devices",
    ),
    "acceptance curve on a verifier": Case(
        _edit(_set("speculation.verifier_models.0.acceptance", "acc")),
        "scenario.yaml",
        "speculation.verifier_models[0].acceptance",
        "'acc'",
        "null: a verifier model does not draft",
    ),
    "parallelism of a drafter": Case(
        _edit(_set("speculation.drafter_models.0.parallelism", {"tensor": 2})),
        "scenario.yaml",
        "speculation.drafter_models[0].parallelism.tensor",
        "2",
        "1 or left out: a client device runs its draft model unsplit",
    ),
    "k in none mode": Case(
        _edit(_set("speculation.k", 6), "none"),
        "scenario.yaml",
        "speculation.k",
        "6",
        "4 (the default): nothing speculates in mode 'none'",
    ),
    "temperature in none mode": Case(
        _edit(_set("speculation.temperature", 0.7), "none"),
        "scenario.yaml",
        "speculation.temperature",
        "0.7",
        "0 (the default): nothing speculates in mode 'none'",
    ),
    "adaptive k in none mode": Case(
        _edit(_set("speculation.adaptive_k", {"k_max": 6}), "none"),
        "scenario.yaml",
        "speculation.adaptive_k.k_max",
        "6",
        "8 (the default): nothing speculates in mode 'none'",
    ),
    "acceptance curves in none mode": Case(
        _edit(_set("speculation.acceptance_models", [{"name": "a", "file": "acc.yaml"}]), "none"),
        "scenario.yaml",
        "speculation.acceptance_models",
        "[{'name': 'a', 'file': 'acc.yaml'}]",
        "[] (the default): nothing speculates in mode 'none'",
    ),
    "hybrid policy outside hybrid mode": Case(
        _edit(_set("speculation.hybrid", {"params": {"threshold_ms": 5}})),
        "scenario.yaml",
        "speculation.hybrid.params",
        "{'threshold_ms': 5}",
        "{} (the default): it applies only in mode 'hybrid', not 'distributed'",
    ),
    "microbatch on the prefill lane": Case(
        _edit(_set("scheduler.prefill.microbatch", {"max_microbatch": 8})),
        "scenario.yaml",
        "scheduler.prefill.microbatch",
        "unknown key",
        "keys batching, params, policy",
    ),
    "microbatch on the draft lane": Case(
        _edit(_set("scheduler.draft.microbatch", {"fallback": "per_request"})),
        "scenario.yaml",
        "scheduler.draft.microbatch",
        "unknown key",
        "keys batching, model_selection, params, policy",
    ),
    "trace prompt shorter than the target LUT's grid": Case(
        _lut_reach(_short_prompt_trace, _set("workload", TRACE_WORKLOAD)),
        "scenario.yaml",
        "workload.source",
        "shortest prompt 3 tokens (request 1, row 2 of trace.csv)",
        ">= 128 tokens, as its prefill is looked up at context >= 128, the smallest context_len "
        "of LUT target.csv for phase=prefill",
    ),
    "synthetic prompt shorter than the draft LUT's grid": Case(
        _lut_reach(_draft_grid_from_128),
        "scenario.yaml",
        "workload.synthetic.prompt_tokens",
        "shortest prompt 100 tokens (request 0 of the generated workload)",
        ">= 128 tokens, as its prefill is looked up at context >= 128, the smallest context_len "
        "of LUT draft.csv for phase=prefill model=draft-model hardware=rtx-4050-laptop",
    ),
    "verify batch limit beyond the LUT's grid": Case(
        _lut_reach(_target_grid(batches=(1, 2))),
        "scenario.yaml",
        "scheduler.verify.batching.max_batch",
        "64",
        "<= 2, the largest microbatch of LUT target.csv for phase=verify",
    ),
    "LUT grid without batches of one": Case(
        _lut_reach(_target_grid(batches=(2, 4096))),
        "scenario.yaml",
        "speculation.verifier_models[0].lut",
        "smallest microbatch 2 for phase prefill",
        "a grid starting at microbatch 1 in LUT target.csv",
    ),
    "k beyond the LUT's fanout grid": Case(
        _lut_reach(lambda _tmp_path: None, _long_drafts),
        "scenario.yaml",
        "speculation.k",
        "9",
        "<= 8, the largest fanout_k of LUT target.csv for phase=verify",
    ),
    "planner batch limit beyond the LUT's grid": Case(
        _lut_reach(
            _target_grid(batches=(1, 2)),
            lambda d: (
                _set("scheduler.verify.batching.max_batch", 2)(d),
                _set(
                    "planner",
                    {"enabled": True, "model_load_s": 0, "candidates": {"max_batch": [1, 4]}},
                )(d),
            ),
        ),
        "scenario.yaml",
        "planner.candidates.max_batch",
        "4",
        "<= 2, the largest microbatch of LUT target.csv for phase=verify",
    ),
    "planner k beyond the LUT's fanout grid": Case(
        _lut_reach(
            lambda _tmp_path: None,
            lambda d: (
                _long_drafts(d),
                _set("speculation.k", 4)(d),
                _set(
                    "planner",
                    {"enabled": True, "model_load_s": 0, "candidates": {"k": [2, 9]}},
                )(d),
            ),
        ),
        "scenario.yaml",
        "planner.candidates.k",
        "9",
        "<= 8, the largest fanout_k of LUT target.csv for phase=verify",
    ),
    "availability window beyond its period": Case(
        _edit(
            _set(
                "hardware_profiles.0.availability",
                {"kind": "windows", "period_s": 10, "windows": [{"start_s": 2, "end_s": 12}]},
            )
        ),
        "scenario.yaml",
        "hardware_profiles[0].availability.windows[0].end_s",
        "12",
        "<= period_s (10)",
    ),
    "availability windows without a period": Case(
        _edit(
            _set(
                "hardware_profiles.0.availability",
                {"kind": "windows", "windows": [{"start_s": 2, "end_s": 5}]},
            )
        ),
        "scenario.yaml",
        "hardware_profiles[0].availability.period_s",
        "None",
        "a number > 0",
    ),
    "availability key misspelt": Case(
        _edit(_set("hardware_profiles.0.availability", {"kinds": "always"})),
        "scenario.yaml",
        "hardware_profiles[0].availability.kinds",
        "did you mean 'kind'",
        "keys kind, period_s, windows",
    ),
    "availability windows on clients that do not draft": Case(
        _edit(
            _set(
                "hardware_profiles.0.availability",
                {"kind": "windows", "period_s": 10, "windows": [{"start_s": 0, "end_s": 5}]},
            ),
            "fused",
        ),
        "scenario.yaml",
        "hardware_profiles[0].availability",
        "'period_s': 10",
        "kind 'always' (or null)",
    ),
    "draft lane settings in none mode": Case(
        _edit(_set("scheduler.draft", {"batching": {"max_batch": 4}}), "none"),
        "scenario.yaml",
        "scheduler.draft.batching.max_batch",
        "4",
        "32 (the default): no client device drafts in mode 'none'",
    ),
    "draft payload in fused mode": Case(
        _edit(_set("network.payload", {"bytes_per_draft_token": 8}), "fused"),
        "scenario.yaml",
        "network.payload.bytes_per_draft_token",
        "8",
        "4 (the default): no client device drafts in mode 'fused'",
    ),
    "duplicate hardware id": Case(
        _edit(lambda d: d["hardware_profiles"].append(dict(d["hardware_profiles"][0]))),
        "scenario.yaml",
        "hardware_profiles[2].id",
        "'laptops'",
        "ids unique",
    ),
    "k_min above k_max": Case(
        _edit(_set("speculation.adaptive_k", {"enabled": True, "k_min": 6, "k_max": 3})),
        "scenario.yaml",
        "speculation.adaptive_k.k_min",
        "6",
        "<= k_max (3)",
    ),
    "k outside k_min..k_max": Case(
        _edit(_set("speculation.adaptive_k", {"enabled": True, "k_min": 1, "k_max": 3})),
        "scenario.yaml",
        "speculation.k",
        "4",
        "between k_min (1) and k_max (3)",
    ),
    "microbatch context ratio without the per_request fallback": Case(
        _edit(_set("scheduler.verify.microbatch", {"max_context_ratio": 4})),
        "scenario.yaml",
        "scheduler.verify.microbatch.max_context_ratio",
        "4",
        "unless microbatch.fallback is per_request",
    ),
    "adaptive k enabled with the static controller": Case(
        _edit(_set("speculation.adaptive_k", {"enabled": True})),
        "scenario.yaml",
        "speculation.adaptive_k.enabled",
        "True",
        "false, or adaptive_k.controller set to",
    ),
    "k_min with the static controller": Case(
        _edit(_set("speculation.adaptive_k", {"k_min": 2})),
        "scenario.yaml",
        "speculation.adaptive_k.k_min",
        "2",
        "1 with the static controller",
    ),
    "negative RTT": Case(
        _edit(_set("network.links.0.rtt_ms", -5)),
        "scenario.yaml",
        "network.links[0].rtt_ms",
        "-5",
        ">= 0",
    ),
    "zero bandwidth": Case(
        _edit(_set("network.links.0.bw_mbps", 0)),
        "scenario.yaml",
        "network.links[0].bw_mbps",
        "0",
        ">= 1e-12",
    ),
    "loss above 100 %": Case(
        _edit(_set("network.links.0.loss_pct", 150)),
        "scenario.yaml",
        "network.links[0].loss_pct",
        "150",
        "<= 90",
    ),
    "loss close to 100 %": Case(
        _edit(_set("network.links.0.loss_pct", 99.9999)),
        "scenario.yaml",
        "network.links[0].loss_pct",
        "99.9999",
        "<= 90",
    ),
    "unknown policy name": Case(
        _edit(_set("scheduler.routing", {"policy": "round_robbin"})),
        "scenario.yaml",
        "scheduler.routing.policy",
        "did you mean 'round_robin'",
        "'kv_aware', 'kv_transfer_aware', 'least_outstanding', 'network_aware', 'power_of_two', 'round_robin'",
    ),
    "policy parameter misspelt": Case(
        _hybrid_with_bad_params,
        "scenario.yaml",
        "speculation.hybrid.params.threshold",
        "did you mean 'threshold_ms'",
        "keys threshold_ms",
    ),
    "negative SLO": Case(
        _edit(_set("workload.slo.ttft_ms", -1)),
        "scenario.yaml",
        "workload.slo.ttft_ms",
        "-1",
        "> 0",
    ),
    "zero SLO": Case(
        _edit(_set("workload.slo.tpot_ms", 0)),
        "scenario.yaml",
        "workload.slo.tpot_ms",
        "0",
        "> 0",
    ),
    "unknown mode": Case(
        _edit(_set("speculation.mode", "speculative")),
        "scenario.yaml",
        "speculation.mode",
        "'speculative'",
        "'none', 'distributed', 'fused', 'hybrid'",
    ),
    "planner draft replicas outside hybrid": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"draft_replicas": [2, 4]}},
            )
        ),
        "scenario.yaml",
        "planner.candidates.draft_replicas",
        "[2, 4]",
        "the key left out, or speculation.mode: hybrid",
    ),
    "planner negative draft replicas": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"draft_replicas": [-1, 2]}},
            ),
            mode="hybrid",
        ),
        "scenario.yaml",
        "planner.candidates.draft_replicas[0]",
        "-1",
        ">= 0",
    ),
    "planner split without replicas": Case(
        _edit(
            _set(
                "planner",
                {
                    "enabled": True,
                    "model_load_s": 30,
                    "candidates": {"draft_replicas": [0, 2], "verify_replicas": [0, 2]},
                },
            ),
            mode="hybrid",
        ),
        "scenario.yaml",
        "planner.candidates.draft_replicas",
        "[0, 2]",
        "values whose sum with every verify_replicas value is at least 1",
    ),
    "planner zero verify replicas without a split": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"verify_replicas": [0, 2]}},
            )
        ),
        "scenario.yaml",
        "planner.candidates.verify_replicas",
        "[0, 2]",
        "at least 1 each (0 only with draft_replicas)",
    ),
    "fused model on a pool that serves none": Case(
        _edit(_set("hardware_profiles.1.fused_model", "fused-model")),
        "scenario.yaml",
        "hardware_profiles[1].fused_model",
        "fused-model",
        "null: only a target in mode hybrid, or distributed with spill_fused",
    ),
    "fused model on a client class": Case(
        _edit(_set("hardware_profiles.0.fused_model", "fused-model"), mode="hybrid"),
        "scenario.yaml",
        "hardware_profiles[0].fused_model",
        "fused-model",
        "null: fused models run on target pools",
    ),
    "unknown fused model on a pool": Case(
        _edit(_set("hardware_profiles.1.fused_model", "nope"), mode="hybrid"),
        "scenario.yaml",
        "hardware_profiles[1].fused_model",
        "nope",
        "one of fused-model",
    ),
    "planner k candidates outside k_max": Case(
        _edit(_set("planner", {"enabled": True, "model_load_s": 30, "candidates": {"k": [2, 12]}})),
        "scenario.yaml",
        "planner.candidates.k",
        "[2, 12]",
        "draft lengths between 1 and speculation.adaptive_k.k_max (8)",
    ),
    "planner k candidates in mode none": Case(
        _edit(
            _set("planner", {"enabled": True, "model_load_s": 30, "candidates": {"k": [1, 3]}}),
            mode="none",
        ),
        "scenario.yaml",
        "planner.candidates.k",
        "[1, 3]",
        "the key left out in mode 'none'",
    ),
    "planner k and k controller candidates": Case(
        _edit(
            _set(
                "planner",
                {
                    "enabled": True,
                    "model_load_s": 30,
                    "candidates": {"k": [2], "k_controller": ["static", "pid"]},
                },
            )
        ),
        "scenario.yaml",
        "planner.candidates.k_controller",
        "['static', 'pid']",
        "k or k_controller, not both",
    ),
    "planner unknown k controller": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"k_controller": ["magic"]}},
            )
        ),
        "scenario.yaml",
        "planner.candidates.k_controller",
        "['magic']",
        "registered k controllers: ",
    ),
    "planner draft model with one drafter per class": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"draft_model": ["x"]}},
            )
        ),
        "scenario.yaml",
        "planner.candidates.draft_model",
        "['x']",
        "a draft class lists several models under hardware_profiles[].model",
    ),
    "planner microbatch candidates with a lane architecture": Case(
        _edit(
            lambda d: (
                _set(
                    "planner",
                    {"enabled": True, "model_load_s": 30, "candidates": {"max_microbatch": [4]}},
                )(d),
                _set("scheduler.arbitration.policy", "pdv")(d),
            ),
            mode="fused",
        ),
        "scenario.yaml",
        "planner.candidates.max_microbatch",
        "[4]",
        "the key left out with scheduler.arbitration.policy pdv",
    ),
    "planner fused fraction outside hybrid": Case(
        _edit(
            _set(
                "planner",
                {"enabled": True, "model_load_s": 30, "candidates": {"fused_fraction": [0.5]}},
            )
        ),
        "scenario.yaml",
        "planner.candidates.fused_fraction",
        "[0.5]",
        "speculation.mode: hybrid with speculation.hybrid.policy: fused_fraction",
    ),
    "planner without model load time": Case(
        _edit(_set("planner", {"enabled": True, "candidates": {"verify_replicas": [1, 2]}})),
        "scenario.yaml",
        "planner.model_load_s",
        "None",
        "seconds a new replica takes to load its model",
    ),
    "planner objectives without goodput first": Case(
        _edit(
            _set(
                "planner",
                {
                    "enabled": True,
                    "model_load_s": 30,
                    "objectives": ["energy", "goodput"],
                    "candidates": {"verify_replicas": [1, 2]},
                },
            )
        ),
        "scenario.yaml",
        "planner.objectives",
        "['energy', 'goodput']",
        "goodput, goodput_at_slo_floor or gpus_at_slo_floor first",
    ),
    "planner interval while disabled": Case(
        _edit(_set("planner", {"interval_s": 5})),
        "scenario.yaml",
        "planner.interval_s",
        "5",
        "10 (the default): planner.enabled is false, so no planner runs",
    ),
    "planner candidates while disabled": Case(
        _edit(_set("planner", {"candidates": {"verify_replicas": [2, 4]}})),
        "scenario.yaml",
        "planner.candidates.verify_replicas",
        "[2, 4]",
        "the key left out: planner.enabled is false",
    ),
    "empty planner candidates": Case(
        _edit(_set("planner", {"candidates": {"k": []}})),
        "scenario.yaml",
        "planner.candidates.k",
        "[]",
        "at least 1 item",
    ),
    "origin weights name an undeclared class": Case(
        _edit(_set("workload.origin", {"rule": "weights", "weights": {"tablets": 1}})),
        "scenario.yaml",
        "workload",
        "'tablets'",
        "a hardware_profiles id of type draft: laptops",
    ),
    "target profile used as a draft class": Case(
        _edit(
            lambda d: d["hardware_profiles"][0].update(profile=d["hardware_profiles"][1]["profile"])
        ),
        "scenario.yaml",
        "hardware_profiles[0].type",
        "'draft'",
        "'target' (the role of profile a100-tp1)",
    ),
    "negative seed": Case(_edit(_set("seed", -3)), "scenario.yaml", "seed", "-3", "integer >= 0"),
    "unknown out-of-range rule": Case(
        _edit(_set("simulation", {"lut_out_of_range": "wrap"})),
        "scenario.yaml",
        "simulation.lut_out_of_range",
        "'wrap'",
        "'raise', 'clamp', 'extrapolate'",
    ),
    "NaN in a LUT": Case(
        _edit_lut(_nan_latency),
        "target.csv",
        "row 5, column latency_ms",
        "(empty)",
        "a finite number >= 0",
    ),
    "negative LUT latency": Case(
        _edit_lut(_negative_latency),
        "target.csv",
        "row 2, column latency_ms",
        "'-1.0'",
        "a finite number >= 0",
    ),
    "duplicate LUT grid point": Case(
        _edit_lut(lambda f: pd.concat([f, f.iloc[[0]]])),
        "target.csv",
        "row 42",
        "'context_len=1, microbatch=1, fanout_k=1'",
        "one row per key and grid point",
    ),
    "incomplete LUT grid": Case(
        _edit_lut(lambda f: f.drop(index=1)),
        "target.csv",
        "rows with phase=prefill",
        "rows",
        "a row for every point of context_len",
    ),
    "LUT without a required column": Case(
        _edit_lut(lambda f: f.drop(columns=["energy_mj"])),
        "target.csv",
        "header",
        "(missing)",
        "a column named 'energy_mj'",
    ),
    "LUT lacks a phase the mode needs": Case(
        _edit_lut(lambda f: f[f["phase"] != "verify"]),
        "scenario.yaml",
        "speculation.verifier_models[0].lut",
        "'target.csv'",
        "rows for phase=verify",
    ),
    "acceptance probability above one": Case(
        _acceptance_alpha_above_one, "acc.yaml", "bins[0].alpha", "1.5", "<= 1"
    ),
    "device profile with negative power": Case(
        _profile_with_negative_power,
        "rtx-4050-laptop.yaml",
        "energy.active_power_w",
        "-3",
        "> 0",
    ),
    "YAML syntax error": Case(
        _yaml_syntax_error, "scenario.yaml", "line 38, column 4", "'k: 4'", "valid YAML"
    ),
    "duplicate YAML key": Case(
        _duplicate_yaml_key, "scenario.yaml", "duplicate key 'seed'", "'seed: 3'", "valid YAML"
    ),
    "JSON scenario": Case(_json_scenario, "scenario.json", "speculation.k", "0", "integer >= 1"),
    "device count beyond any machine": Case(
        _edit(_set("hardware_profiles.1.count", 1e30)),
        "scenario.yaml",
        "hardware_profiles[1].count",
        "1e+30",
        "<= 1000000000",
    ),
    "a billion target replicas": Case(
        _edit(_set("hardware_profiles.1.count", 10**9)),
        "scenario.yaml",
        "hardware_profiles[1].count",
        "1000000000",
        "at most 4,096 target replicas",
    ),
    "a billion synthetic requests": Case(
        _edit(_set("workload.synthetic.num_requests", 10**9)),
        "scenario.yaml",
        "workload.synthetic.num_requests",
        "1000000000",
        "<= 1000000",
    ),
    "a synthetic duration with a billion arrivals": Case(
        _edit(_long_synthetic_duration),
        "scenario.yaml",
        "workload.synthetic.duration_s",
        "1000000000.0",
        "at most 1,000,000 requests are expected to arrive",
    ),
    "empty model name": Case(
        _edit(_set("speculation.verifier_models.0.name", "")),
        "scenario.yaml",
        "speculation.verifier_models[0].name",
        "''",
        "with at least 1 character(s)",
    ),
    "empty acceptance curve name": Case(
        _edit(_set("speculation.acceptance_models.0.name", "")),
        "scenario.yaml",
        "speculation.acceptance_models[0].name",
        "''",
        "with at least 1 character(s)",
    ),
    "empty results directory": Case(
        _edit(_set("metrics.output_dir", "")),
        "scenario.yaml",
        "metrics.output_dir",
        "''",
        "with at least 1 character(s)",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_refused_with_a_clear_message(tmp_path, name):
    case = CASES[name]
    assert_refused(case, validate_file(case.build(tmp_path)))


def assert_refused(case: Case, verdict: Verdict) -> None:
    """Check ``verdict`` refuses the input with a message holding every piece of ``case``."""
    assert not verdict.ok
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    matching = [
        line for line in lines if case.file in line and case.key_path in line and case.value in line
    ]
    assert matching, "\n".join(lines)
    assert any(case.allowed in line for line in matching), "\n".join(lines)
    for issue in verdict.error.issues:
        assert issue.file and issue.value and issue.allowed


def test_there_are_at_least_25_distinct_cases():
    assert len(CASES) >= 25
    assert len({(c.file, c.key_path, c.value) for c in CASES.values()}) == len(CASES)


def test_all_problems_of_a_file_are_reported_together(tmp_path):
    def change(document: Document) -> None:
        _set("speculation.k", "four")(document)
        _set("network.links.0.rtt_ms", -5)(document)
        _set("seed", -1)(document)

    verdict = validate_file(_edit(change)(tmp_path))
    assert verdict.error is not None
    assert len(verdict.error.issues) == 3
    assert str(verdict.error).startswith("error: 3 problems in the input")


@pytest.mark.slow
def test_validate_script_exits_2_without_a_traceback(tmp_path):
    good = _base(tmp_path / "good")
    bad = CASES["negative RTT"].build(tmp_path / "bad")
    done = run_python("scripts/validate_scenario.py", str(tmp_path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    assert f"OK {good}" in done.stdout
    assert f"{bad}: network.links[0].rtt_ms" in done.stdout + done.stderr


def test_simulate_exits_2_and_leaves_earlier_results_untouched(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    earlier = results / "summary.json"
    earlier.write_text('{"earlier": true}\n')
    bad = CASES["NaN in a LUT"].build(tmp_path / "case")
    code = simulate_main([str(bad), "-o", str(results), "--quiet"])
    assert code == 2
    assert "row 5, column latency_ms" in capsys.readouterr().err
    assert earlier.read_text() == '{"earlier": true}\n'
    assert sorted(p.name for p in results.iterdir()) == ["summary.json"]


@pytest.mark.slow
def test_simulate_rejects_a_bad_override_end_to_end(tmp_path):
    scenario = _base(tmp_path)
    done = run_python(
        "-m", "simulator.cli", str(scenario), "--set", "speculation.kk=3", "-o", str(tmp_path)
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "speculation.kk" in done.stderr
    assert "did you mean 'k'" in done.stderr


@pytest.mark.slow
def test_a_gap_the_run_would_meet_is_refused_before_it_starts(tmp_path):
    """A prompt below a LUT's context grid is found by the loader: exit 2, no results."""
    scenario = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 50, 10))
    write_lut(
        tmp_path / "target.csv",
        "target-model",
        "a100-sxm4-80gb",
        {"prefill": lambda c, b, _k: 10.0, "draft_decode": lambda c, b, _k: 20.0},
        contexts=(128, 131072),
    )
    done = run_python("-m", "simulator.cli", str(scenario), "-o", str(tmp_path / "out"), "-q")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "scenario.yaml: workload.synthetic.prompt_tokens" in done.stderr
    assert "got 'shortest prompt 50 tokens (request 0 of the generated workload)'" in done.stderr
    assert ">= 128 tokens, as its prefill is looked up at context >= 128" in done.stderr
    assert "or set simulation.lut_out_of_range: clamp or extrapolate" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_workload_beyond_the_request_limit_is_refused(tmp_path, monkeypatch, capsys):
    """Traces are counted once read: more rows than a run may hold are refused by name."""
    monkeypatch.setattr("simulator.workload.run_requests.MAX_REQUESTS", 3)
    scenario = write_scenario(tmp_path, mode="none", workload=synthetic(5, 1.0, 200, 10))
    code = simulate_main([str(scenario), "-o", str(tmp_path / "out"), "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert "scenario.yaml: workload.max_requests: too many requests to simulate" in err
    assert "(got '5 requests in the workload'; allowed: at most 3 requests per run" in err
    assert not (tmp_path / "out").exists()


def test_a_billion_replicas_are_refused_in_seconds_and_little_memory(tmp_path):
    scenario = _edit(_set("hardware_profiles.1.count", 10**9))(tmp_path)
    # The child's own peak: VmHWM belongs to the process image and starts again at exec, while
    # ru_maxrss carries over from the forking test process (large late in a full run).
    done = run_python(
        "-c",
        "import re, resource, sys; from pathlib import Path; from simulator.cli import main; "
        "code = main(sys.argv[1:]); status = Path('/proc/self/status'); "
        "found = re.search(r'VmHWM:\\s+(\\d+)', status.read_text()) if status.exists() else None; "
        "print(found.group(1) if found else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); "
        "sys.exit(code)",
        str(scenario),
        "-o",
        str(tmp_path / "out"),
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "1,000,000,000 target replicas" in done.stderr
    assert int(done.stdout.split()[-1]) < 400_000  # kB


def test_an_override_that_brings_in_an_unknown_key_is_blamed_on_the_option(tmp_path, capsys):
    """``--set bogus.key=1`` makes a mapping ``bogus``: its refusal names the option, not the file."""
    scenario = _base(tmp_path)
    code = simulate_main([str(scenario), "--set", "bogus.key=1", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--set bogus.key=1: bogus: unknown key (got 'bogus'; allowed: keys" in err
    assert "scenario.yaml" not in err
    code = simulate_main(
        [str(scenario), "--set", "hardware_profiles.0.nope.x=1", "-o", str(tmp_path / "out")]
    )
    assert code == 2
    assert "--set hardware_profiles.0.nope.x=1: hardware_profiles[0].nope: unknown key" in (
        capsys.readouterr().err
    )


def test_an_override_found_bad_once_the_workload_is_read_is_blamed_on_the_option(tmp_path, capsys):
    scenario = _base(tmp_path)
    out = tmp_path / "out"
    code = simulate_main([str(scenario), "--set", "workload.arrival_scale=1e-300", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--set workload.arrival_scale=1e-300: arrival times too late once scaled" in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "capacity"])
def test_a_negative_seed_option_is_the_command_lines(tmp_path, capsys, command):
    scenario = _base(tmp_path)
    extra = ["--slo-attainment", "0.9"] if command == "capacity" else ["-o", str(tmp_path / "o")]
    code = simulate_main([command, str(scenario), "--seed", "-1", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert "command line: --seed (got -1; allowed: an integer >= 0)" in err
    assert "scenario.yaml" not in err


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--workers", "0"], "command line: --workers (got 0; allowed: an integer >= 1)"),
        (["--executor", "bogus"], "--executor: unknown executor (got 'bogus'; allowed: local"),
    ],
)
def test_run_refuses_bad_executor_options_without_a_planner(tmp_path, capsys, option, expected):
    """The options are checked whether or not the scenario's planner would use them."""
    scenario = _base(tmp_path)
    code = simulate_main([str(scenario), "-o", str(tmp_path / "out"), "-q", *option])
    assert code == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_plan_refuses_a_top_below_one_before_searching(tmp_path, capsys):
    space = Path(__file__).parents[1] / "scenarios" / "plans" / "hybrid_mix_placement.yaml"
    code = simulate_main(["plan", str(space), "--top", "0", "-o", str(tmp_path / "out")])
    assert code == 2
    assert "command line: --top (got 0; allowed: an integer >= 1)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
