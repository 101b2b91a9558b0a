"""Shared steps of every input loader: read, validate against a schema, fill defaults.

Scenario files, device profiles and acceptance curves all go through the same
pipeline: :func:`read_document` parses YAML or JSON (reporting a missing file
or a syntax error as an :class:`~simulator.errors.Issue`),
:func:`schema_issues` checks the document against a JSON Schema shipped in
``simulator/schemas`` and turns every violation into an issue with a key path
and a "did you mean" hint for misspelt keys, and :func:`fill_defaults` copies
the schema's ``default`` values into the document. Builders then turn the
validated document into frozen dataclasses.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from simulator.builtin_data import builtin_path, is_builtin
from simulator.errors import InputError, Issue, describe_value, key_path, make_issue
from simulator.input_files import read_bounded
from simulator.suggest import did_you_mean

SCHEMA_PACKAGE = "simulator.schemas"


@cache
def _packaged_schema_text(name: str) -> str:
    return resources.files(SCHEMA_PACKAGE).joinpath(name).read_text(encoding="utf-8")


def load_packaged_schema(name: str) -> dict[str, Any]:
    """Return a fresh copy of the JSON Schema ``simulator/schemas/<name>``."""
    loaded: dict[str, Any] = json.loads(_packaged_schema_text(name))
    return loaded


MAX_NESTING_DEPTH = 64
"""Deepest nesting of mappings and lists accepted in a YAML or JSON document."""

MAX_YAML_VALUES = 1_000_000
"""Most values (scalars, lists, mappings) a YAML document may hold once its aliases
are expanded; bounds "billion laughs" documents."""

BOUNDED_YAML = (
    f"valid YAML nested at most {MAX_NESTING_DEPTH} levels, "
    f"with at most {MAX_YAML_VALUES} values once aliases are expanded"
)
"""What a YAML document (or ``--set`` value) must be, for messages about the bounds."""


class YamlBoundError(yaml.composer.ComposerError):
    """A YAML document exceeds :data:`MAX_NESTING_DEPTH` or :data:`MAX_YAML_VALUES`."""


_YAML_12_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+
    |[-+]?\.[0-9_]+[eE][-+]?[0-9]+)$""",
    re.X,
)
"""Scientific notation YAML 1.1 leaves as text (``1e3``, ``1e-3``, ``1.0e12``)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate and unhashable mapping keys and bounds nesting.

    Scientific notation resolves to floats as in YAML 1.2.
    """

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Compose one node, refusing nesting deeper than :data:`MAX_NESTING_DEPTH`."""
        self._depth += 1
        try:
            if self._depth > MAX_NESTING_DEPTH:
                raise YamlBoundError(
                    None,
                    None,
                    f"nested deeper than {MAX_NESTING_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a {type(key).__name__} used as a mapping key (keys must be text or numbers)",
                key_node.start_mark,
            )
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r}",
                key_node.start_mark,
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


class _FastUniqueKeyLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """:class:`_UniqueKeyLoader`'s rules on libyaml's parser (when PyYAML was built with it).

    Used only for a document whose nesting an event pass has bounded first
    (libyaml composes nodes recursively); any error is reported by re-reading
    the text with :class:`_UniqueKeyLoader`, so messages do not depend on
    which parser PyYAML has.
    """


for _loader in (_UniqueKeyLoader, _FastUniqueKeyLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_12_FLOAT, list("-+0123456789."))


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph holding more than :data:`MAX_YAML_VALUES` values with aliases expanded.

    Aliases share nodes, so sizes are counted once per node (memoised) and
    the check takes time proportional to the text, not to the expansion.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        if total > MAX_YAML_VALUES:
            raise YamlBoundError(
                None,
                None,
                f"aliases expand to more than {MAX_YAML_VALUES} values",
                node.start_mark,
            )
        sizes[id(node)] = total
        return total

    size(root)


def _nesting_within_bound(text: str) -> bool:
    """Whether libyaml's events of ``text`` nest at most :data:`MAX_NESTING_DEPTH` levels."""
    depth = 0
    for event in yaml.parse(text, Loader=_FastUniqueKeyLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING_DEPTH:
                return False
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return True


def _load_fast(text: str) -> tuple[bool, Any]:
    """Parse with libyaml: ``(True, document)``, or ``(False, None)`` to read it again slowly.

    The slow reading reports errors and bounds exactly; libyaml only speeds up
    documents that pass them (a scenario file: about 5x faster).
    """
    if not yaml.__with_libyaml__:
        return False, None
    try:
        if not _nesting_within_bound(text):
            return False, None
        loader = _FastUniqueKeyLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return True, None
            _check_expanded_size(node)
            return True, loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError:
        return False, None


def load_yaml(text: str) -> Any:
    """Parse one YAML document with the bounded, duplicate-refusing safe loader.

    Raises:
        yaml.YAMLError: The text is not valid YAML, or exceeds a bound
            (:data:`MAX_NESTING_DEPTH`, :data:`MAX_YAML_VALUES`).
    """
    parsed, document = _load_fast(text)
    if parsed:
        return document
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _nesting_depth(document: Any) -> int:
    """Return how deeply lists and mappings nest in a parsed document (iteratively)."""
    deepest = 0
    stack = [(document, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _read_json(path: Path, text: str) -> Any:
    allowed = f"valid JSON (nesting depth <= {MAX_NESTING_DEPTH})"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            [
                make_issue(
                    path,
                    f"line {exc.lineno}, column {exc.colno}",
                    exc.doc[exc.pos : exc.pos + 20],
                    allowed,
                    exc.msg,
                )
            ]
        ) from None
    except RecursionError:
        document = None
        depth = MAX_NESTING_DEPTH + 1
    else:
        depth = _nesting_depth(document)
    if depth > MAX_NESTING_DEPTH:
        raise InputError(
            [make_issue(path, "", text[:20], allowed, f"nested deeper than {MAX_NESTING_DEPTH}")]
        )
    return document


def read_document(path: Path, what: str = "file") -> Any:
    """Parse a YAML (``.yaml``/``.yml``) or JSON (``.json``) file.

    The file must be a regular file of at most
    :data:`~simulator.input_files.MAX_DOCUMENT_BYTES`; nesting and alias
    expansion are bounded (:data:`MAX_NESTING_DEPTH`, :data:`MAX_YAML_VALUES`).

    Args:
        path: The file to read.
        what: What the file is, for messages (e.g. ``"scenario"``).

    Raises:
        InputError: The file is missing, unreadable, too large or not valid YAML/JSON.
    """
    return parse_document(path, read_bounded(path, what), what)


def parse_document(path: Path, data: bytes, what: str = "file") -> Any:
    """Parse the bytes of a YAML or JSON file already read (see :func:`read_document`).

    Raises:
        InputError: The bytes are not UTF-8, or not valid YAML/JSON within the bounds.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            [make_issue(path, "", str(path), f"a readable UTF-8 {what} file", str(exc))]
        ) from None
    if path.suffix.lower() == ".json":
        return _read_json(path, text)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        lines = text.splitlines()
        bad_line = lines[mark.line].strip() if mark is not None and mark.line < len(lines) else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        allowed = BOUNDED_YAML if isinstance(exc, YamlBoundError) else "valid YAML"
        raise InputError([make_issue(path, where, bad_line, allowed, problem)]) from None


def bounds_text(schema: Mapping[str, Any]) -> list[str]:
    """The numeric bounds of a (sub)schema as text, e.g. ``[">= 0", "< 1"]``."""
    return [
        f"{sign} {schema[key]}"
        for key, sign in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
        )
        if key in schema
    ]


def _allowed_text(schema: Mapping[str, Any]) -> str:
    """Describe what a (sub)schema accepts, for the ``allowed`` part of a message."""
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    parts: list[str] = []
    kind = schema.get("type")
    if isinstance(kind, list):
        parts.append(" or ".join(kind))
    elif isinstance(kind, str):
        parts.append(kind)
    bounds = bounds_text(schema)
    if bounds:
        parts.append(" and ".join(bounds))
    if "pattern" in schema:
        parts.append(f"matching {schema['pattern']}")
    if "minItems" in schema:
        parts.append(f"with at least {schema['minItems']} item(s)")
    if schema.get("uniqueItems"):
        parts.append("without duplicates")
    if "minProperties" in schema:
        count = schema["minProperties"]
        parts.append(f"with at least {count} {'entry' if count == 1 else 'entries'}")
    if "minLength" in schema:
        parts.append(f"with at least {schema['minLength']} character(s)")
    if "description" in schema and not parts:
        parts.append(str(schema["description"]))
    return " ".join(parts) if parts else "see the schema"


def _branch_of_its_type(
    context: Sequence[jsonschema.ValidationError],
) -> list[jsonschema.ValidationError]:
    """The errors of the one ``oneOf``/``anyOf`` branch the value's type fits, or ``[]``.

    When every other branch refused the value for its type, the value meant
    that branch: its errors say what is wrong better than "matches no form".
    """
    by_branch: dict[object, list[jsonschema.ValidationError]] = {}
    for sub in context:
        branch = sub.relative_schema_path[0] if sub.relative_schema_path else None
        by_branch.setdefault(branch, []).append(sub)
    fitting = [
        errors
        for errors in by_branch.values()
        if not any(e.validator == "type" and not e.relative_path for e in errors)
    ]
    return fitting[0] if len(fitting) == 1 and len(by_branch) > 1 else []


def _issues_from_error(file: Path, error: jsonschema.ValidationError) -> Iterator[Issue]:
    """Turn one jsonschema error (possibly with sub-errors) into readable issues."""
    path = list(error.absolute_path)
    where = key_path(path) or "(top level)"
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    validator = error.validator
    if validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = sorted(schema.get("properties", {}))
        extra = [k for k in error.instance if k not in schema.get("properties", {})]
        moved = schema.get("x-moved-keys", {})
        for name in extra:
            if name in moved:
                yield make_issue(
                    file,
                    key_path([*path, name]),
                    error.instance[name],
                    f"the key {moved[name]}",
                    "key that has moved",
                )
                continue
            hint = did_you_mean(str(name), known)
            yield make_issue(
                file,
                key_path([*path, name]),
                name,
                "keys " + ", ".join(known) if known else "no keys",
                f"unknown key{hint}",
            )
        return
    if validator == "required":
        missing = str(error.message).split("'")[1] if "'" in error.message else error.message
        yield make_issue(
            file,
            key_path([*path, missing]),
            "(missing)",
            "a value is required here",
            "missing required key",
        )
        return
    if validator in ("oneOf", "anyOf") and error.context:
        # Report the branch that got furthest: the deepest sub-error.
        best = max(error.context, key=lambda e: (len(e.absolute_path), -len(e.context or [])))
        if len(best.absolute_path) > len(error.absolute_path):
            yield from _issues_from_error(file, best)
            return
        typed = _branch_of_its_type(error.context)
        if typed:  # the one form of the value's type: its own problems (a missing key, ...)
            for sub in typed:
                yield from _issues_from_error(file, sub)
            return
        branches = [sub for sub in schema.get(validator, []) if isinstance(sub, Mapping)]
        options = [_allowed_text(sub) for sub in branches]
        hint = ""
        if isinstance(error.instance, str):
            names = [str(v) for sub in branches for v in sub.get("enum", [])]
            hint = did_you_mean(error.instance, names)
        yield make_issue(
            file, where, error.instance, " | ".join(options), f"matches no allowed form{hint}"
        )
        return
    instance = error.instance
    if validator == "enum" and isinstance(instance, str):
        hint = did_you_mean(instance, [str(v) for v in schema.get("enum", [])])
        yield make_issue(
            file, where, instance, _allowed_text(schema), f"not an allowed value{hint}"
        )
        return
    if validator == "type" and isinstance(instance, float) and math.isnan(instance):
        yield make_issue(file, where, instance, _allowed_text(schema), "NaN is not a number here")
        return
    yield make_issue(file, where, instance, _allowed_text(schema), _short_problem(error))


def _short_problem(error: jsonschema.ValidationError) -> str:
    validator = str(error.validator)
    return {
        "type": "wrong type",
        "minimum": "too small",
        "exclusiveMinimum": "too small",
        "maximum": "too large",
        "exclusiveMaximum": "too large",
        "pattern": "wrong format",
        "minItems": "too few items",
        "maxItems": "too many items",
        "uniqueItems": "duplicate items",
        "minLength": "too short",
        "const": "wrong value",
        "minProperties": "too few entries",
    }.get(validator, describe_value(error.message))


def _reject_nan(document: Any, path: list[Any], file: Path) -> Iterator[Issue]:
    if isinstance(document, float) and (math.isnan(document) or math.isinf(document)):
        yield make_issue(
            file, key_path(path) or "(top level)", document, "a finite number", "not finite"
        )
    elif isinstance(document, Mapping):
        for key, value in document.items():
            yield from _reject_nan(value, [*path, key], file)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _reject_nan(value, [*path, index], file)


def schema_issues(document: Any, schema: Mapping[str, Any], file: Path) -> list[Issue]:
    """Validate ``document`` against ``schema``; return every problem as an issue.

    NaN and infinite numbers are rejected everywhere, whatever the schema says.
    """
    issues = list(_reject_nan(document, [], file))
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    errors = sorted(
        validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]
    )
    seen: set[tuple[str, str]] = {(i.key_path, i.problem) for i in issues}
    for error in errors:
        for issue in _issues_from_error(file, error):
            marker = (issue.key_path, issue.problem)
            if marker not in seen:
                seen.add(marker)
                issues.append(issue)
    return issues


def fill_defaults(document: Any, schema: Mapping[str, Any]) -> Any:
    """Return a copy of a *valid* document with the schema's ``default`` values filled in.

    Defaults are taken from ``properties`` (recursively, including objects
    inside ``items``); an object-valued default is itself completed. A whole
    number written as a float (``3.0``) where the schema takes only integers
    (which JSON Schema accepts) becomes the integer, so the filled document,
    and the resolved scenario written from it, reads the same as with ``3``.
    """
    result = copy.deepcopy(document)
    _fill(result, schema)
    return result


def _integer_only(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return "integer" in kinds and "number" not in kinds


def _as_integer(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` as an int when it is a whole float and ``schema`` takes only integers."""
    if isinstance(value, float) and value.is_integer() and _integer_only(schema):
        return int(value)
    return value


def _fill(node: Any, schema: Mapping[str, Any]) -> None:
    if isinstance(node, dict):
        for name, subschema in schema.get("properties", {}).items():
            if name not in node and "default" in subschema:
                node[name] = copy.deepcopy(subschema["default"])
            if name in node:
                node[name] = _as_integer(node[name], subschema)
                _fill(node[name], subschema)
        for branch_key in ("oneOf", "anyOf"):
            for branch in schema.get(branch_key, []):
                if _branch_matches(node, branch):
                    _fill(node, branch)
                    break
    elif isinstance(node, list) and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        for index, item in enumerate(node):
            node[index] = _as_integer(item, items)
            _fill(node[index], items)


def _branch_matches(node: Any, branch: Mapping[str, Any]) -> bool:
    try:
        jsonschema.validators.validator_for(branch)(branch).validate(node)
    except jsonschema.ValidationError:
        return False
    return True


def resolve_path(base_dir: Path, value: str) -> Path:
    """Resolve a path named in a file against that file's directory.

    A ``builtin:`` reference names a shipped file (see :mod:`simulator.builtin_data`).
    """
    if is_builtin(value):
        return builtin_path(value)
    candidate = Path(value).expanduser()
    return candidate if candidate.is_absolute() else (base_dir / candidate)


def load_validated(path: Path, schema_name: str, what: str, data: bytes | None = None) -> Any:
    """Read ``path`` (or parse its ``data``), validate it against a packaged schema, fill defaults.

    Raises:
        InputError: With every problem found in the file.
    """
    document = read_document(path, what) if data is None else parse_document(path, data, what)
    schema = load_packaged_schema(schema_name)
    issues = schema_issues(document, schema, path)
    if issues:
        raise InputError(issues)
    return fill_defaults(document, schema)
