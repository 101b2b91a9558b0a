"""The scenario package's structure: one module per section, coordinated by ``build``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "simulator"
SECTIONS = PACKAGE / "scenario" / "sections"
SHARED = {"simulator.scenario.sections.context", "simulator.scenario.sections.policy_choice"}


def _imports(path: Path) -> set[str]:
    """Every ``simulator.*`` module a file imports, type-checking-only imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulator"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("simulator"))
    return found


def test_a_section_module_imports_no_other_section():
    for path in SECTIONS.glob("*.py"):
        own = f"simulator.scenario.sections.{path.stem}"
        others = {
            name
            for name in _imports(path)
            if name.startswith("simulator.scenario.sections") and name not in SHARED | {own}
        }
        assert not others, (path.name, others)


def test_sections_never_import_the_coordinator_or_the_loader():
    for path in SECTIONS.glob("*.py"):
        assert not _imports(path) & {"simulator.scenario.build", "simulator.scenario.load"}


def test_the_workload_never_imports_the_scenario_package():
    for path in (PACKAGE / "workload").glob("*.py"):
        assert not any(name.startswith("simulator.scenario") for name in _imports(path)), path
