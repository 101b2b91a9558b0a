"""``speculation.tree``: the token-tree shape of fused rounds.

Refused outside mode ``fused``, with a draft length other than the tree's
depth or an adaptive k controller, with an arbitration rule other than
``prefill_first`` and with a node count the depth and width cannot hold;
loads the head's and the target's LUTs and checks they price every target
pool's rounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.loading import resolve_path
from simulator.lut import LutKey, LutManager, LutTable, load_lut
from simulator.scenario.model import DeviceClass, LaneModel, TreeSpec, tree_lut_key
from simulator.scenario.sections.context import BuildContext

KEY = "speculation.tree"

TREE_ARBITRATION = "prefill_first"
"""The arbitration rule tree rounds run under: the lane rules split chain rounds, and
``chunked_prefill``'s token budget counts ``k + 1`` tokens per round."""


def build_tree(
    ctx: BuildContext, classes: list[DeviceClass], luts: dict[Path, LutTable | None]
) -> TreeSpec | None:
    """``speculation.tree``: check the shape against the rest of the scenario; load its LUTs."""
    spec = ctx.doc["speculation"]
    raw = spec["tree"]
    if raw is None:
        return None
    mode = spec["mode"]
    if mode != "fused":
        ctx.issue(
            KEY,
            raw,
            f"null in mode {mode!r} (token trees are fused rounds: mode fused)",
            "token tree outside mode fused",
        )
        return None
    depth, width, nodes = int(raw["depth"]), int(raw["width"]), int(raw["nodes"])
    if not depth + 1 <= nodes <= 1 + depth * width:
        ctx.issue(
            f"{KEY}.nodes",
            nodes,
            f"from depth + 1 ({depth + 1}) to 1 + depth x width ({1 + depth * width})",
            "more nodes than the tree's levels hold"
            if nodes > 1 + depth * width
            else "fewer nodes than one per level plus the root",
        )
    if int(spec["k"]) != depth:
        ctx.issue(
            "speculation.k",
            spec["k"],
            f"{depth} (speculation.tree.depth: a tree round drafts one token per level)",
            "draft length other than the tree's depth",
        )
    adaptive = spec["adaptive_k"]
    if adaptive["enabled"]:
        ctx.issue(
            "speculation.adaptive_k.enabled",
            True,
            "false with speculation.tree (a tree's shape is fixed: every round drafts depth levels)",
            "adaptive draft length with a fixed tree",
        )
    rule = ctx.doc["scheduler"]["arbitration"]["policy"]
    if rule != TREE_ARBITRATION:
        ctx.issue(
            "scheduler.arbitration.policy",
            rule,
            f"{TREE_ARBITRATION} with speculation.tree (lane rules split chain rounds; "
            "chunked_prefill's token budget counts k + 1 tokens per round)",
            "arbitration rule that does not run tree rounds",
        )
    drafter = _lane_model(
        ctx, "drafter", raw["drafter"], "verify" if width > 1 else "draft_decode", luts
    )
    verifier = _lane_model(ctx, "verifier", raw["verifier"], "verify", luts)
    if drafter is None or verifier is None:
        return None
    tree = TreeSpec(depth, width, nodes, drafter, verifier)
    _check_coverage(ctx, classes, luts, tree)
    return tree


def _lane_model(
    ctx: BuildContext,
    role: str,
    entry: dict[str, Any],
    phase: str,
    luts: dict[Path, LutTable | None],
) -> LaneModel | None:
    """Load one of the tree's LUTs and name its model (the file's only one with ``phase`` rows)."""
    key = f"{KEY}.{role}"
    path = resolve_path(ctx.base_dir, entry["lut"])
    if path not in luts:
        luts[path] = ctx.load_file(f"{key}.lut", entry["lut"], load_lut, "LUT")
    table = luts[path]
    if table is None:
        return None
    model = entry.get("model")
    if model is None:
        provided = table.keys()
        ids = sorted({k.model for k in provided if k.phase == phase})
        if len(ids) != 1:
            ctx.issue(
                f"{key}.model",
                None,
                f"one of {', '.join(ids)}" if ids else f"a LUT with {phase} rows",
                f"the LUT has {len(ids)} model ids with {phase} rows",
            )
            return None
        model = ids[0]
    return LaneModel(model, path, entry.get("dtype", "fp16"))


def _check_coverage(
    ctx: BuildContext, classes: list[DeviceClass], luts: dict[Path, LutTable | None], tree: TreeSpec
) -> None:
    """Every fused target pool finds the head's level rows and the target's tree-verify rows."""
    parts = (
        ("drafter", tree.drafter, tree.head_phase, tree.width - 1 if tree.width > 1 else 1),
        ("verifier", tree.verifier, "verify", tree.nodes - 1),
    )
    for role, model, phase, fanout_k in parts:
        table = luts[model.lut_path]
        assert table is not None
        have = LutManager([table])
        for device in classes:
            if device.type != "target" or device.fused_model is None:
                continue
            lut_key = tree_lut_key(model, device, phase)
            if not have.has(lut_key) or not _covers(have, lut_key, fanout_k):
                ctx.issue(
                    f"{KEY}.{role}",
                    ctx.doc["speculation"]["tree"][role],
                    f"a LUT with {phase} rows of model {model.model_id} on {lut_key.hardware} "
                    f"at tensor parallel {lut_key.tensor_parallel}, dtype {model.dtype}, "
                    f"fanout_k {fanout_k} within its grid (target pool {device.id})",
                    "LUT without the rows the tree rounds need",
                )


def _covers(have: LutManager, key: LutKey, fanout_k: int) -> bool:
    """Whether ``key``'s fanout_k axis spans ``fanout_k``."""
    axis = have.grid(key)[2]
    return bool(axis[0] <= fanout_k <= axis[-1])
