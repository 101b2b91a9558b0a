"""Read an acceptance curve file, validate it completely and build its model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulator.acceptance.protocol import AcceptanceModel
from simulator.acceptance.registry import (
    builder_for,
    cross_field_issues,
    kinds,
    unknown_kind_issue,
)
from simulator.errors import InputError, make_issue, raise_if_any
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
                    "a mapping with keys method, kind, bins, source",
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
            for issue in cross_field_issues(kind, document, file):
                if (issue.key_path, issue.problem) not in known:
                    issues.append(issue)
        else:
            issues.append(unknown_kind_issue(kind, file))
    raise_if_any(issues)
    filled = fill_defaults(document, schema)
    bin_schema = schema["$defs"].get(f"{kind}_bin")
    if bin_schema is not None:
        filled["bins"] = fill_defaults(filled["bins"], {"items": bin_schema})
    return builder_for(str(kind), file)(filled, file)


def load_acceptance_model(path: Path) -> AcceptanceModel:
    """Load an acceptance curve file (YAML or JSON).

    Args:
        path: The curve file.

    Raises:
        InputError: The file is missing or unreadable, or with every problem in it.
    """
    return build_acceptance_model(read_document(path, "acceptance curve"), path)
