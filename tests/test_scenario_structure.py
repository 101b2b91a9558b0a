"""The scenario package's structure: one module per section, coordinated by ``build``."""

from __future__ import annotations

from tests.import_graph import PACKAGE, imports

SECTIONS = PACKAGE / "scenario" / "sections"
SHARED = {"simulator.scenario.sections.context", "simulator.scenario.sections.policy_choice"}


def test_a_section_module_imports_no_other_section():
    for path in SECTIONS.glob("*.py"):
        own = f"simulator.scenario.sections.{path.stem}"
        others = {
            name
            for name in imports(path)
            if name.startswith("simulator.scenario.sections") and name not in SHARED | {own}
        }
        assert not others, (path.name, others)


def test_sections_never_import_the_coordinator_or_the_loader():
    for path in SECTIONS.glob("*.py"):
        assert not imports(path) & {"simulator.scenario.build", "simulator.scenario.load"}


def test_the_workload_never_imports_the_scenario_package():
    for path in (PACKAGE / "workload").glob("*.py"):
        assert not any(name.startswith("simulator.scenario") for name in imports(path)), path
