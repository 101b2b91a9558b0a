"""``scheduler.arbitration.params.token_budget`` against the target prefill LUTs.

Under ``chunked_prefill`` a prompt's first chunk holds at least the smallest
context of its prefill LUT (or the whole prompt), so that no chunk is priced
below the grid (:meth:`simulator.engine.mixed.MixedIterations.offer_chunks`). A
budget smaller than that context can never hold the first chunk of a longer
prompt (or of a recomputation's context): such a prompt would wait for ever
and the run would stop with it unfinished. Such a budget is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from policies.arbitration import ChunkedPrefillParams
from simulator.lut import LutTable
from simulator.scenario.model import DeviceClass, ModelSpec, replica_lut_key
from simulator.scenario.sections.context import BuildContext

KEY = "scheduler.arbitration.params.token_budget"


def check_chunk_budget(
    ctx: BuildContext,
    classes: list[DeviceClass],
    models: Mapping[str, ModelSpec],
    luts: Mapping[Path, LutTable | None],
) -> None:
    """Refuse a chunked-prefill token budget below a target prefill LUT's smallest context."""
    arbitration = ctx.doc["scheduler"]["arbitration"]
    if arbitration["policy"] != "chunked_prefill":
        return
    budget = arbitration["params"].get("token_budget", ChunkedPrefillParams().token_budget)
    if not isinstance(budget, int):
        return  # the policy's own parameter check reports it
    for device in classes:
        if device.type != "target":
            continue
        for name in (device.model, device.fused_model):
            model = models.get(name) if name is not None else None
            table = luts.get(model.lut_path) if model is not None else None
            if model is None or table is None:
                continue
            key = replica_lut_key(model.model_id, model.dtype, device, "prefill")
            if not table.has(key):
                continue  # the LUT coverage check reports it
            smallest = table.grid(key).context_len[0]
            if budget < smallest:
                ctx.issue(
                    KEY,
                    budget,
                    f">= {smallest}, the smallest context of the prefill rows of "
                    f"{model.model_id} on {device.hardware} ({model.lut_path.name}) that "
                    f"{device.id} runs: a prompt's first chunk holds at least that many "
                    "tokens (or the whole prompt), so that no chunk is priced below the grid",
                    "token budget too small for the first chunk of a longer prompt, "
                    "which would never start",
                )
                return
