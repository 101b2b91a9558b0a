"""What every section's checks share: the document, the issue list and the answers several need.

:class:`BuildContext` holds one schema-valid, default-filled document while
the section modules (:mod:`simulator.scenario.sections`) check and build it.
It collects :class:`~simulator.errors.Issue` records instead of raising, so
that one run of the validator reports every problem of a scenario (and of
the files it references) at once. It also answers the questions whose
answers depend on more than one section (the LUT phases each model kind
needs, whether rounds are split into lanes, which draft classes list several
models), so that no section module imports another.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from policies import registry
from policies.plugins import PluginConsent, PolicyImportError, import_policy, is_import_path
from simulator.builtin_data import ALLOWED as ALLOWED_BUILTIN
from simulator.builtin_data import unknown_builtin
from simulator.errors import InputError, Issue, make_issue
from simulator.input_files import file_problem
from simulator.loading import resolve_path
from simulator.scenario.schema import scenario_schema

T = TypeVar("T")

PHASES_BY_MODE: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "none": {"verifier": ("prefill", "draft_decode")},
    "distributed": {"drafter": ("prefill", "draft_decode"), "verifier": ("prefill", "verify")},
    "fused": {"fused": ("prefill", "fused_decode")},
    "hybrid": {
        "drafter": ("prefill", "draft_decode"),
        "verifier": ("prefill", "verify"),
        "fused": ("prefill", "fused_decode"),
    },
}
"""Which LUT phases each model kind needs, per mode."""

MODEL_LISTS: Mapping[str, str] = {
    "drafter_models": "drafter",
    "verifier_models": "verifier",
    "fused_models": "fused",
}
"""The ``speculation`` lists of models, and the kind of model each declares."""

SCHEMA = scenario_schema(plugins=False)
"""The assembled scenario schema, for the defaults of keys (built-in policy names only:
importing this module loads no plug-in)."""


_UNSET = object()
"""Stands for the default of a key whose schema gives none (the key left out)."""


def _non_defaults(
    node: Mapping[str, Any], schema: Mapping[str, Any], prefix: str
) -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(key path, value, default)`` of each key under ``node`` not at its default.

    Objects with their own properties are searched key by key, so the path
    names the innermost key that was set; a key whose schema has no default
    counts as set whenever it is present.
    """
    for name, sub in schema.get("properties", {}).items():
        if name not in node:
            continue
        value = node[name]
        path = f"{prefix}.{name}"
        if isinstance(value, Mapping) and sub.get("properties"):
            yield from _non_defaults(value, sub, path)
        elif value != sub.get("default", _UNSET):
            yield path, value, sub.get("default", _UNSET)


class BuildContext:
    """Accumulates issues while the section modules turn one validated document into objects.

    Attributes:
        doc: The schema-valid, default-filled scenario document.
        file: The scenario file (issues name it; relative paths resolve against its folder).
        consent: The modules an import-path policy may come from.
        base_dir: The scenario file's folder.
        issues: Every problem found so far, in the order found.
    """

    def __init__(self, document: Mapping[str, Any], file: Path, consent: PluginConsent) -> None:
        self.doc = document
        self.file = file
        self.consent = consent
        self.base_dir = file.parent
        self.issues: list[Issue] = []

    # -- reporting ---------------------------------------------------------

    def issue(self, key: str, value: object, allowed: str, problem: str) -> None:
        """Record a problem at ``key`` of the scenario file."""
        self.issues.append(make_issue(self.file, key, value, allowed, problem))

    def refuse_non_defaults(self, section: str, keys: tuple[str, ...], reason: str) -> None:
        """Report every key of ``section`` (only ``keys``, if given) that is not at its default.

        For settings that would change nothing in this scenario: ``reason``
        says why, as the end of the ``allowed`` text.
        """
        node: Mapping[str, Any] = self.doc
        schema: Mapping[str, Any] = SCHEMA
        for part in section.split("."):
            node = node[part]
            schema = schema["properties"][part]
        if keys:
            schema = {"properties": {k: v for k, v in schema["properties"].items() if k in keys}}
        for path, value, default in _non_defaults(node, schema, section):
            allowed = (
                "the key left out" if default is _UNSET else f"{json.dumps(default)} (the default)"
            )
            self.issue(path, value, f"{allowed}: {reason}", "setting that would have no effect")

    def load_file(self, key: str, value: str, loader: Callable[[Path], T], what: str) -> T | None:
        """Load a referenced file; its own problems are reported under its own name."""
        path = resolve_path(self.base_dir, value)
        unknown = unknown_builtin(value)
        if unknown is not None:
            self.issue(key, value, ALLOWED_BUILTIN, unknown)
            return None
        problem = file_problem(path)
        if problem is not None:
            self.issue(key, value, f"an existing {what} file (resolved to {path})", problem)
            return None
        try:
            return loader(path)
        except InputError as exc:
            self.issues.extend(exc.issues)
            return None

    # -- answers that depend on more than one section ---------------------

    def phases_needed(self) -> Mapping[str, tuple[str, ...]]:
        """The LUT phases each model kind needs: the mode's, plus the fused model's for spills."""
        mode = self.doc["speculation"]["mode"]
        needed = PHASES_BY_MODE[mode]
        if mode == "distributed" and self.doc["speculation"]["adaptive_k"]["k_min"] == 0:
            # A k = 0 round is a plain decode step of the verifier.
            needed = {**needed, "verifier": (*needed["verifier"], "draft_decode")}
        if mode == "distributed" and self.spills_to_fused():
            return {**needed, "fused": PHASES_BY_MODE["fused"]["fused"]}
        return needed

    def spills_to_fused(self) -> bool:
        """Whether the verify policy moves requests whose KV does not fit to fused mode."""
        verify = self.doc["scheduler"]["verify"]
        params = verify.get("params") or {}
        return bool(
            verify["policy"] == "kv_aware_edf" and params.get("on_kv_short") == "spill_fused"
        )

    def splits_rounds(self) -> bool:
        """Whether ``scheduler.arbitration.policy`` is a lane rule (it splits fused rounds)."""
        name = self.doc["scheduler"]["arbitration"]["policy"]
        try:
            cls = (
                import_policy("arbitration", name, self.consent)
                if is_import_path(name)
                else registry("arbitration").get(name)
            )
        except (PolicyImportError, KeyError):
            return False  # reported where the policy is built
        return bool(cls.splits_rounds)

    def multi_model_drafters(self) -> list[str]:
        """Drafter models listed by draft classes with several models, in listed order.

        None in a mode where no device drafts.
        """
        if "drafter" not in PHASES_BY_MODE[self.doc["speculation"]["mode"]]:
            return []
        names: dict[str, None] = {}
        for entry in self.doc["hardware_profiles"]:
            if (
                entry["type"] == "draft"
                and isinstance(entry["model"], list)
                and len(entry["model"]) > 1
            ):
                names.update(dict.fromkeys(entry["model"]))
        return list(names)
