"""The project's structure: no import circle at load, type-only imports included; no class over 600 lines."""

from __future__ import annotations

import ast

from tests.import_graph import PACKAGE, cycle, project_graph

MAX_CLASS_LINES = 600
"""No class in ``simulator/`` is longer: each concept gets its own room."""


def test_the_project_imports_no_circle_type_only_imports_included():
    graph = project_graph()
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_no_class_is_over_600_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.name} ({lines} lines)")
    assert not long, long
