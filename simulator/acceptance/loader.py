"""Read an acceptance curve file, validate it completely and build its model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulator.acceptance.binned import BinnedModel
from simulator.acceptance.protocol import AcceptanceModel
from simulator.acceptance.registry import (
    builder_for,
    cross_field_issues,
    kinds,
    unknown_kind_issue,
)
from simulator.errors import InputError, Issue, make_issue, raise_if_any
from simulator.loading import fill_defaults, load_packaged_schema, read_document, schema_issues

SCHEMA_NAME = "acceptance.schema.json"


def _string_keys(node: Any) -> Any:
    """Return ``node`` with integer mapping keys written as strings (YAML allows ``4:``)."""
    if isinstance(node, Mapping):
        return {
            (str(key) if isinstance(key, int) and not isinstance(key, bool) else key): (
                _string_keys(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_string_keys(item) for item in node]
    return node


def _category_issues(kind: str, document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the cross-field problems of every category's bins, under ``categories.<name>``."""
    issues: list[Issue] = []
    categories = document.get("categories")
    if not isinstance(categories, Mapping):
        return issues
    for category, bins in categories.items():
        for issue in cross_field_issues(kind, {**document, "bins": bins}, file):
            if issue.key_path.startswith("bins"):
                issue = dataclasses.replace(
                    issue, key_path=f"categories.{category}" + issue.key_path[len("bins") :]
                )
            issues.append(issue)
    return issues


REPLAY_ONLY_KEYS: tuple[str, ...] = ("replay",)
"""Top-level keys only a replayed curve has."""
BINNED_ONLY_KEYS: tuple[str, ...] = ("bins", "categories", "request_spread")
"""Top-level keys a replayed curve does not have (its data is its CSV)."""


def _key_issues(document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return keys that do not belong to the document's kind or topology."""
    issues: list[Issue] = []
    kind = document.get("kind")
    unwanted = BINNED_ONLY_KEYS if kind == "replay" else REPLAY_ONLY_KEYS
    allowed = "no such key for kind " + repr(kind)
    for key in unwanted:
        if document.get(key) not in (None, {}):
            issues.append(make_issue(file, key, document[key], allowed, "key of another kind"))
    topology = document.get("topology")
    if isinstance(topology, Mapping) and topology.get("kind") == "chain":
        for key in ("width", "nodes"):
            if key in topology:
                issues.append(
                    make_issue(
                        file,
                        f"topology.{key}",
                        topology[key],
                        "no width or nodes for a chain (they describe trees)",
                        "tree field on a chain",
                    )
                )
    return issues


def _attach_categories(
    model: AcceptanceModel, filled: dict[str, Any], bin_schema: Any, file: Path
) -> None:
    """Build one model per category of a binned curve and attach them to it."""
    categories = filled.get("categories") or {}
    if not categories:
        return
    if not isinstance(model, BinnedModel):
        raise InputError(
            [
                make_issue(
                    file,
                    "categories",
                    sorted(categories),
                    "no categories for kind " + repr(filled["kind"]),
                    "this kind cannot hold per-category bins",
                )
            ]
        )
    builder = builder_for(str(filled["kind"]), file)
    built: dict[str, BinnedModel[Any]] = {}
    for category, bins in categories.items():
        if bin_schema is not None:
            bins = fill_defaults(bins, {"items": bin_schema})
        sub = builder({**filled, "bins": bins, "categories": {}}, file)
        assert isinstance(sub, BinnedModel)
        built[str(category)] = sub
    model.set_categories(built)


def build_acceptance_model(document: Any, file: Path) -> AcceptanceModel:
    """Validate a parsed curve document and build its model.

    Args:
        document: The parsed YAML/JSON document.
        file: Where it came from (for messages; its stem is the default name).

    Raises:
        InputError: With every problem found in the document.
    """
    if not isinstance(document, Mapping):
        raise InputError(
            [
                make_issue(
                    file,
                    "(top level)",
                    type(document).__name__,
                    "a mapping with keys method, kind, topology, bins, source",
                    "not a mapping",
                )
            ]
        )
    document = _string_keys(document)
    schema = load_packaged_schema(SCHEMA_NAME)
    issues = schema_issues(document, schema, file)
    kind = document.get("kind")
    if isinstance(kind, str) and kind:
        if kind in kinds():
            known = {(issue.key_path, issue.problem) for issue in issues}
            for issue in cross_field_issues(kind, document, file) + _category_issues(
                kind, document, file
            ):
                if (issue.key_path, issue.problem) not in known:
                    issues.append(issue)
        else:
            issues.append(unknown_kind_issue(kind, file))
    issues.extend(_key_issues(document, file))
    raise_if_any(issues)
    filled = fill_defaults(document, schema)
    bin_schema = schema["$defs"].get(f"{kind}_bin")
    if bin_schema is not None:
        filled["bins"] = fill_defaults(filled["bins"], {"items": bin_schema})
    model = builder_for(str(kind), file)(filled, file)
    _attach_categories(model, filled, bin_schema, file)
    return model


def load_acceptance_model(path: Path) -> AcceptanceModel:
    """Load an acceptance curve file (YAML or JSON).

    Args:
        path: The curve file.

    Raises:
        InputError: The file is missing or unreadable, or with every problem in it.
    """
    return build_acceptance_model(read_document(path, "acceptance curve"), path)
