"""Whether each acceptance curve a run draws from fits how the run uses it.

A curve states what it was measured on (``acceptance/README.md``); the run
must not use it for something else without saying so:

* **Draft shape.** A curve measured on trees serves a run drafting chains
  (or the reverse) only under the ``speculation.acceptance_conversion`` rule
  that names that direction; a tree curve that states its width or node
  count serves only a tree of that width and node count. A rule no curve
  needs is refused.
* **Temperature.** A curve measured at one temperature serves only that
  ``speculation.temperature``.
* **Draft length.** A curve that can only answer up to some ``k`` (a
  replayed one) refuses a longer draft.
* **Task categories.** A curve with per-category bins must have every
  category the workload's requests carry.
* **Request spread.** ``from_curve`` needs a curve with a fitted spread and
  no categories in the workload (the fitted spread is the categories'); a
  replayed curve carries its own spread and takes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.acceptance import AcceptanceModel
from simulator.acceptance.info import CHAIN, TREE
from simulator.scenario.model import AcceptanceCurve, DeviceClass, ModelSpec, SpeculationSpec
from simulator.scenario.sections.context import BuildContext
from simulator.workload import WorkloadSpec

REPLAY = "replay"
"""The kind of a replayed curve (its requests replay logged sequences)."""

CONVERSION_RULES: Mapping[tuple[str, str], str] = {
    (TREE, CHAIN): "tree_as_chain",
    (CHAIN, TREE): "chain_as_tree",
}
"""(curve topology, run topology) -> the conversion rule that allows it."""


def curves_in_use(
    classes: Sequence[DeviceClass], models: Mapping[str, ModelSpec], spec: SpeculationSpec
) -> dict[str, set[str]]:
    """Return each curve the run draws from, with the draft shapes it is used for.

    Drafter models of client classes draft chains; fused models of target
    classes draft ``speculation.tree`` when set, else chains.
    """
    used: dict[str, set[str]] = {}
    for device in classes:
        if device.type == "draft":
            names = list(device.draft_models)
            shape = CHAIN
        else:
            names = [device.fused_model] if device.fused_model else []
            shape = TREE if spec.tree is not None else CHAIN
        for name in names:
            curve = models[name].acceptance if name in models else None
            if curve is not None and curve in spec.acceptance:
                used.setdefault(curve, set()).add(shape)
    return used


def _curve_key(ctx: BuildContext, name: str) -> str:
    for index, raw in enumerate(ctx.doc["speculation"]["acceptance_models"]):
        if raw["name"] == name:
            return f"speculation.acceptance_models[{index}].file"
    return "speculation.acceptance_models"


def check_acceptance_use(
    ctx: BuildContext,
    classes: Sequence[DeviceClass],
    models: Mapping[str, ModelSpec],
    spec: SpeculationSpec,
    workload: WorkloadSpec | None,
) -> None:
    """Report every curve the run would use for something it was not measured on."""
    if spec.mode == "none":
        return
    used = curves_in_use(classes, models, spec)
    needed: set[str] = set()
    categories = workload.category_names() if workload is not None else frozenset()
    for name, shapes in sorted(used.items()):
        curve = spec.acceptance[name]
        for shape in sorted(shapes):
            rule = _check_shape(ctx, curve, shape, spec)
            if rule:
                needed.add(rule)
        _check_temperature(ctx, curve, spec)
        _check_draft_length(ctx, curve.model, spec)
        _check_categories(ctx, curve, categories)
        _check_spread(ctx, curve, spec, categories)
    conversion = spec.acceptance_conversion
    if conversion != "none" and conversion not in needed:
        ctx.issue(
            "speculation.acceptance_conversion",
            conversion,
            "none: every curve in use was measured on the draft shape the run drafts",
            "conversion rule that no curve needs",
        )


def _check_shape(
    ctx: BuildContext, curve: AcceptanceCurve, shape: str, spec: SpeculationSpec
) -> str:
    """Check a curve serves one draft shape; return the conversion rule it needs ("": none)."""
    topology = curve.model.info.topology
    if topology.kind != shape:
        rule = CONVERSION_RULES[(topology.kind, shape)]
        if spec.acceptance_conversion != rule:
            ctx.issue(
                _curve_key(ctx, curve.name),
                str(curve.path),
                f"a curve measured on {shape}s, or speculation.acceptance_conversion: {rule} "
                "(documented in acceptance/README.md)",
                f"curve {curve.name!r} was measured on {topology.describe()} and the run drafts "
                f"{shape}s",
            )
        return rule
    tree = spec.tree
    if shape == TREE and tree is not None:
        for field, wanted in (("width", topology.width), ("nodes", topology.nodes)):
            have = getattr(tree, field)
            if wanted is not None and wanted != have:
                ctx.issue(
                    f"speculation.tree.{field}",
                    have,
                    f"{wanted}, the tree curve {curve.name!r} was measured on (or a curve "
                    "measured on this tree)",
                    f"tree {field} other than the curve's",
                )
    return ""


def _check_temperature(ctx: BuildContext, curve: AcceptanceCurve, spec: SpeculationSpec) -> None:
    temperatures = curve.model.temperatures
    if len(temperatures) == 1 and spec.temperature != temperatures[0]:
        ctx.issue(
            "speculation.temperature",
            spec.temperature,
            f"{temperatures[0]:g}: curve {curve.name!r} holds one temperature (a curve with "
            "several is interpolated between them)",
            f"temperature curve {curve.name!r} was not measured at",
        )


def _check_draft_length(ctx: BuildContext, model: AcceptanceModel, spec: SpeculationSpec) -> None:
    limit = model.max_k
    if limit is None:
        return
    adaptive = spec.k_control.name != "static"
    key, k = ("speculation.adaptive_k.k_max", spec.k_max) if adaptive else ("speculation.k", spec.k)
    if k > limit:
        ctx.issue(
            key,
            k,
            f"at most {limit}, the draft length curve {model.name!r} was measured at",
            "draft length beyond the curve's",
        )


def _check_categories(
    ctx: BuildContext, curve: AcceptanceCurve, categories: frozenset[str]
) -> None:
    have = set(curve.model.categories)
    missing = sorted(categories - have) if have else []
    if missing:
        ctx.issue(
            _workload_category_key(ctx),
            ", ".join(missing),
            f"categories curve {curve.name!r} has bins for: " + ", ".join(sorted(have)),
            "task category without acceptance data",
        )


def _workload_category_key(ctx: BuildContext) -> str:
    workload = ctx.doc["workload"]
    if workload.get("source") == "synthetic":
        return "workload.synthetic.category_mix"
    return "workload.source (its category column)"


def _check_spread(
    ctx: BuildContext,
    curve: AcceptanceCurve,
    spec: SpeculationSpec,
    categories: frozenset[str],
) -> None:
    spread = spec.request_spread
    if spread == "none":
        return
    model = curve.model
    if model.info.kind == REPLAY:
        ctx.issue(
            "speculation.request_spread",
            spread,
            "none: the replayed curve " + repr(curve.name) + " carries its own spread",
            "spread on a replayed curve",
        )
    elif spread == "from_curve":
        if model.info.request_spread is None:
            ctx.issue(
                "speculation.request_spread",
                spread,
                "none or a Beta concentration: curve "
                + repr(curve.name)
                + " has no fitted request_spread",
                "no spread to take from the curve",
            )
        elif categories and model.categories:
            ctx.issue(
                "speculation.request_spread",
                spread,
                "none, or a concentration for the spread within a category: the fitted spread "
                f"of {curve.name!r} is the spread between categories, which the workload's "
                "categories already model",
                "between-category spread counted twice",
            )
