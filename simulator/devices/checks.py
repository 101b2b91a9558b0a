"""Cross-field rules of a device profile, checked after JSON Schema validation.

The schema checks each value on its own; these rules relate values to each
other and to the file: the id must equal the file name, role-specific keys
must fit the role, a replica's GPU count must equal its parallel degrees, and
every number must be cited. Each function returns :class:`~simulator.errors.Issue`
records so that the loader can report all of them at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from simulator.errors import Issue, key_path, make_issue
from simulator.suggest import did_you_mean

TARGET_ONLY_KEYS: tuple[tuple[str, str], ...] = (
    ("compute", "tensor_parallel"),
    ("compute", "pipeline_parallel"),
    ("compute", "gpus_per_replica"),
    ("compute", "parallelism_limits"),
    ("memory", "gpu_memory_gb"),
    ("network", "interconnect"),
    ("energy", "active_power_w_per_gpu"),
)
"""Keys that only describe a serving replica; a draft device must not set them."""

SELF_CITED_KEY = "source"
"""A list item holding this key cites its own numbers."""

_REL_TOL = 1e-6


MIN_AVAILABILITY_SPAN_S = 1e-3
"""Shortest availability window or gap: schedules are kept well above the
clock's floating-point resolution, so the start and end of every window are
distinct representable times."""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _get(document: Mapping[str, Any], *parts: str) -> Any:
    node: Any = document
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def id_issues(document: Any, file: Path) -> list[Issue]:
    """The profile ``id`` must equal the file name without its extension."""
    if not isinstance(document, Mapping):
        return []
    profile_id = document.get("id")
    if isinstance(profile_id, str) and profile_id != file.stem:
        return [
            make_issue(
                file,
                "id",
                profile_id,
                repr(file.stem) + " (the file name without extension)",
                "id does not match the file name",
            )
        ]
    return []


def numeric_leaves(document: Any) -> Iterator[str]:
    """Yield the key path of every number that needs a ``sources`` entry.

    Numbers inside a list item that carries its own ``source`` string are cited
    by it and are skipped; so is the ``sources`` mapping itself.
    """
    if isinstance(document, Mapping):
        for key, value in document.items():
            if key == "sources":
                continue
            yield from _leaves(value, [key])


def _leaves(node: Any, path: list[Any]) -> Iterator[str]:
    if _is_number(node):
        yield key_path(path)
    elif isinstance(node, Mapping):
        if len(path) > 0 and isinstance(path[-1], int) and SELF_CITED_KEY in node:
            return
        for key, value in node.items():
            yield from _leaves(value, [*path, key])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, [*path, index])


def _all_number_paths(node: Any, path: list[Any]) -> Iterator[str]:
    if _is_number(node):
        yield key_path(path)
    elif isinstance(node, Mapping):
        for key, value in node.items():
            if path or key != "sources":
                yield from _all_number_paths(value, [*path, key])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _all_number_paths(value, [*path, index])


def source_issues(document: Any, file: Path, report_unused: bool = True) -> list[Issue]:
    """Every numeric value needs a ``sources`` entry; every entry must name a numeric value.

    Args:
        document: The profile as written.
        file: The profile file, for messages.
        report_unused: Also report ``sources`` keys that name no number (the
            loader turns this off while the file has schema problems, since a
            misspelt key would otherwise be reported twice).
    """
    if not isinstance(document, Mapping):
        return []
    sources = document.get("sources")
    cited = sources if isinstance(sources, Mapping) else {}
    issues: list[Issue] = []
    needed = list(numeric_leaves(document))
    for path in needed:
        if path not in cited:
            issues.append(
                make_issue(
                    file,
                    path,
                    _get_path_value(document, path),
                    f'a sources entry "{path}": "<data file, rows, column, arithmetic>" '
                    '(or "configuration: <why>" for a chosen value)',
                    "number without a citation in sources",
                )
            )
    existing = set(_all_number_paths(document, []))
    for key in cited if report_unused else ():
        if key not in existing:
            hint = did_you_mean(key, sorted(existing))
            allowed = (
                "key paths of numbers in this file: " + ", ".join(sorted(existing))
                if existing
                else "no entries (the file holds no numbers)"
            )
            issues.append(
                make_issue(
                    file,
                    f'sources["{key}"]',
                    key,
                    allowed,
                    f"cites no number in this file{hint}",
                )
            )
    return issues


def _get_path_value(document: Mapping[str, Any], path: str) -> Any:
    """Return the value at a rendered key path (for messages); ``None`` if not found."""
    node: Any = document
    for part in path.replace("[", ".[").split("."):
        if part.startswith("[") and isinstance(node, list):
            node = node[int(part[1:-1])]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def role_issues(raw: Mapping[str, Any], file: Path) -> list[Issue]:
    """Keys that only fit one role, checked on the document as written."""
    role = raw.get("role")
    issues: list[Issue] = []
    concurrency = _get(raw, "compute", "max_concurrent_requests")
    if role == "draft":
        for section, key in TARGET_ONLY_KEYS:
            value = _get(raw, section, key)
            if value is not None:
                issues.append(
                    make_issue(
                        file,
                        f"{section}.{key}",
                        value,
                        "no value on a draft device (remove the key)",
                        "only meaningful for role 'target'",
                    )
                )
        if concurrency is None:
            issues.append(
                make_issue(
                    file,
                    "compute.max_concurrent_requests",
                    "(missing)",
                    "an integer >= 1",
                    "required for role 'draft'",
                )
            )
    elif role == "target" and concurrency is not None:
        issues.append(
            make_issue(
                file,
                "compute.max_concurrent_requests",
                concurrency,
                "no value on a target (batching is a scheduler setting)",
                "only meaningful for role 'draft'",
            )
        )
    return issues


def parallelism_issues(doc: Mapping[str, Any], file: Path) -> list[Issue]:
    """A replica's GPU count equals tp x pp and stays within the stated limits."""
    compute = doc["compute"]
    tp, pp, gpus = (
        compute["tensor_parallel"],
        compute["pipeline_parallel"],
        compute["gpus_per_replica"],
    )
    issues: list[Issue] = []
    if gpus != tp * pp:
        issues.append(
            make_issue(
                file,
                "compute.gpus_per_replica",
                gpus,
                f"{tp * pp} (tensor_parallel {tp} x pipeline_parallel {pp})",
                "does not equal tensor_parallel x pipeline_parallel",
            )
        )
    limits = compute.get("parallelism_limits")
    if isinstance(limits, Mapping):
        for key, value, limit_key in (
            ("tensor_parallel", tp, "max_tensor_parallel"),
            ("pipeline_parallel", pp, "max_pipeline_parallel"),
            ("gpus_per_replica", gpus, "max_gpus_per_replica"),
        ):
            limit = limits.get(limit_key)
            if limit is not None and value > limit:
                issues.append(
                    make_issue(
                        file,
                        f"compute.{key}",
                        value,
                        f"<= {limit} (compute.parallelism_limits.{limit_key})",
                        "exceeds the parallelism limit",
                    )
                )
    return issues


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=1e-9)


def per_gpu_issues(doc: Mapping[str, Any], file: Path) -> list[Issue]:
    """Whole-replica memory and power equal the per-GPU value times the GPU count."""
    gpus = doc["compute"]["gpus_per_replica"]
    issues: list[Issue] = []
    for section, total_key, per_key in (
        ("memory", "device_memory_gb", "gpu_memory_gb"),
        ("energy", "active_power_w", "active_power_w_per_gpu"),
    ):
        total = doc[section].get(total_key)
        per_gpu = doc[section].get(per_key)
        if total is not None and per_gpu is not None and not _close(total, per_gpu * gpus):
            issues.append(
                make_issue(
                    file,
                    f"{section}.{total_key}",
                    total,
                    f"{per_gpu * gpus:g} ({section}.{per_key} {per_gpu:g} x gpus_per_replica {gpus})",
                    "does not equal the per-GPU value times the GPUs of the replica",
                )
            )
    return issues


def availability_issues(doc: Mapping[str, Any], file: Path) -> list[Issue]:
    """``always`` has no schedule; ``windows`` has a period and ordered windows inside it."""
    return availability_section_issues(doc["availability"], file, "availability")


def availability_section_issues(
    availability: Mapping[str, Any], file: Path, key: str
) -> list[Issue]:
    """Check one default-filled ``availability`` block found at key path ``key`` of ``file``.

    A profile's block and a scenario's override (``hardware_profiles[].availability``)
    follow the same rules: ``always`` has no schedule; ``windows`` has a period
    and sorted, non-overlapping windows inside it.
    """
    kind = availability["kind"]
    period = availability["period_s"]
    windows = availability["windows"]
    issues: list[Issue] = []
    if kind == "always":
        if period is not None:
            issues.append(
                make_issue(
                    file,
                    f"{key}.period_s",
                    period,
                    "null with kind 'always'",
                    "a period only applies to kind 'windows'",
                )
            )
        if windows:
            issues.append(
                make_issue(
                    file,
                    f"{key}.windows",
                    windows,
                    "[] with kind 'always'",
                    "windows only apply to kind 'windows'",
                )
            )
        return issues
    if period is None:
        issues.append(
            make_issue(
                file,
                f"{key}.period_s",
                None,
                "a number > 0",
                "required for kind 'windows'",
            )
        )
    if not windows:
        issues.append(
            make_issue(
                file,
                f"{key}.windows",
                windows,
                "at least one {start_s, end_s}",
                "required for kind 'windows'",
            )
        )
    previous_end = 0.0
    for index, window in enumerate(windows):
        start, end = window["start_s"], window["end_s"]
        where = f"{key}.windows[{index}]"
        if end < start + MIN_AVAILABILITY_SPAN_S:
            issues.append(
                make_issue(
                    file,
                    f"{where}.end_s",
                    end,
                    f">= start_s + {MIN_AVAILABILITY_SPAN_S} s ({start + MIN_AVAILABILITY_SPAN_S})",
                    "empty window" if end <= start else "window shorter than 1 ms",
                )
            )
        if 0.0 < start - previous_end < MIN_AVAILABILITY_SPAN_S:
            issues.append(
                make_issue(
                    file,
                    f"{where}.start_s",
                    start,
                    f"{previous_end} (touching the previous window) or at least "
                    f"{previous_end + MIN_AVAILABILITY_SPAN_S}",
                    "gap shorter than 1 ms",
                )
            )
        if period is not None and end > period:
            issues.append(
                make_issue(
                    file, f"{where}.end_s", end, f"<= period_s ({period})", "ends after the period"
                )
            )
        if start < previous_end:
            issues.append(
                make_issue(
                    file,
                    f"{where}.start_s",
                    start,
                    f">= {previous_end} (the end of the previous window)",
                    "windows must be sorted and must not overlap",
                )
            )
        previous_end = max(previous_end, end)
    if period is not None and windows:
        wrap_gap = period - previous_end + windows[0]["start_s"]
        if 0.0 < wrap_gap < MIN_AVAILABILITY_SPAN_S:
            issues.append(
                make_issue(
                    file,
                    f"{key}.windows",
                    windows,
                    "no gap or a gap of at least 1 ms from the last window's end, across the "
                    "period's end, to the first window's start",
                    "gap shorter than 1 ms",
                )
            )
    return issues


def interconnect_issues(doc: Mapping[str, Any], file: Path) -> list[Issue]:
    """Each collective is fitted at most once per GPU count."""
    interconnect = doc["network"].get("interconnect")
    if not isinstance(interconnect, Mapping):
        return []
    issues: list[Issue] = []
    for op in ("all_reduce", "send_recv"):
        seen: set[int] = set()
        for index, fit in enumerate(interconnect.get(op, [])):
            workers = fit["num_workers"]
            if workers in seen:
                issues.append(
                    make_issue(
                        file,
                        f"network.interconnect.{op}[{index}].num_workers",
                        workers,
                        "one entry per GPU count",
                        "duplicate num_workers",
                    )
                )
            seen.add(workers)
    return issues


def cross_field_issues(raw: Mapping[str, Any], doc: Mapping[str, Any], file: Path) -> list[Issue]:
    """Run every rule that needs a schema-valid document.

    Args:
        raw: The document as written (to tell set keys from defaults).
        doc: The same document with schema defaults filled in.
        file: The profile file, for messages.
    """
    issues = role_issues(raw, file)
    issues += parallelism_issues(doc, file)
    issues += per_gpu_issues(doc, file)
    issues += availability_issues(doc, file)
    issues += interconnect_issues(doc, file)
    return issues
