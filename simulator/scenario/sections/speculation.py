"""``speculation``: mode, draft lengths, k controller and hybrid policy.

Refuses settings the mode does not use and draft lengths out of range.
"""

from __future__ import annotations

from policies import registry
from simulator.scenario.model import AcceptanceCurve, ModelSpec, PolicyChoice, SpeculationSpec
from simulator.scenario.sections.context import BuildContext
from simulator.scenario.sections.policy_choice import build_policy

SPECULATING_KEYS: tuple[str, ...] = (
    "k",
    "temperature",
    "acceptance_conversion",
    "request_spread",
    "adaptive_k",
    "acceptance_models",
)
"""``speculation`` keys that only matter when something speculates (not in mode ``none``)."""


def build_speculation(
    ctx: BuildContext, models: dict[str, ModelSpec], curves: dict[str, AcceptanceCurve]
) -> SpeculationSpec:
    """Build the speculation settings; refuse those the mode ignores, draft lengths out of range."""
    spec = ctx.doc["speculation"]
    mode = spec["mode"]
    if mode == "none":
        ctx.refuse_non_defaults(
            "speculation", SPECULATING_KEYS, "nothing speculates in mode 'none'"
        )
    if mode != "hybrid":
        ctx.refuse_non_defaults(
            "speculation.hybrid", (), f"it applies only in mode 'hybrid', not {mode!r}"
        )
    adaptive = spec["adaptive_k"]
    k = int(spec["k"])
    k_min, k_max = int(adaptive["k_min"]), int(adaptive["k_max"])
    if k_min > k_max:
        ctx.issue(
            "speculation.adaptive_k.k_min",
            k_min,
            f"<= k_max ({k_max})",
            "k_min greater than k_max",
        )
    elif k_min == 0 and mode in ("fused", "hybrid"):
        ctx.issue(
            "speculation.adaptive_k.k_min",
            k_min,
            ">= 1 in mode "
            + repr(mode)
            + " (k = 0 runs a plain decode step of the target, priced by the verifier's "
            "draft_decode LUT rows; only mode 'distributed' has them)",
            "k_min 0 outside mode distributed",
        )
    elif not k_min <= k <= k_max:
        ctx.issue(
            "speculation.k",
            k,
            f"between k_min ({k_min}) and k_max ({k_max})",
            "k outside the allowed range",
        )
    controller = adaptive["controller"] if adaptive["enabled"] else "static"
    if not adaptive["enabled"] and adaptive["controller"] != "static":
        ctx.issue(
            "speculation.adaptive_k.controller",
            adaptive["controller"],
            "'static' while adaptive_k.enabled is false (or set enabled: true)",
            "controller given but adaptive k disabled",
        )
    if controller == "static" and spec["mode"] != "none":
        adaptive_names = [n for n in registry("k_control").names() if n != "static"]
        allowed = (
            "a controller other than static: " + ", ".join(adaptive_names)
            if adaptive_names
            else "no adaptive controller is registered in this version"
        )
        if adaptive["enabled"]:
            ctx.issue(
                "speculation.adaptive_k.enabled",
                True,
                f"false, or adaptive_k.controller set to {allowed}",
                "adaptive k enabled with the static controller, which never adapts",
            )
        if k_min != 1:
            ctx.issue(
                "speculation.adaptive_k.k_min",
                k_min,
                "1 with the static controller (k_min bounds adaptive controllers only; "
                "the static one drafts speculation.k every round)",
                "k_min that no controller uses",
            )
    hybrid = spec["hybrid"]
    hybrid_choice = PolicyChoice("hybrid_mode", hybrid["policy"], None)
    if spec["mode"] == "hybrid":
        hybrid_choice = build_policy(
            ctx, "hybrid_mode", hybrid["policy"], hybrid["params"], "speculation.hybrid"
        )
    return SpeculationSpec(
        mode=spec["mode"],
        models=models,
        acceptance=curves,
        k=k,
        k_min=k_min,
        k_max=k_max,
        temperature=float(spec["temperature"]),
        acceptance_conversion=str(spec["acceptance_conversion"]),
        request_spread=spec["request_spread"]
        if isinstance(spec["request_spread"], str)
        else float(spec["request_spread"]),
        k_control=build_policy(
            ctx,
            "k_control",
            controller,
            adaptive["params"],
            "speculation.adaptive_k",
            name_key="controller",
        ),
        hybrid=hybrid_choice,
    )
