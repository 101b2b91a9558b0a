"""The project's import graph, read from the source: shared by the structure tests."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "simulator"
ROOTS = ("simulator", "policies")


def imports(path: Path) -> set[str]:
    """Every ``simulator.*`` module a file imports, type-checking-only imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulator"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("simulator"))
    return found


def module_graph() -> dict[str, set[str]]:
    """Each ``simulator`` module and every ``simulator`` module it imports anywhere."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[name] = imports(path)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of ``graph`` (the modules on it, the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it loads, ``if TYPE_CHECKING:`` blocks included.

    An import inside a function runs when the function is called (the
    commands import their heavy modules that way, and the policy registry
    imports the built-ins on first use), so it closes no circle at load.
    """
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)

    walk(tree.body)
    return found


def project_graph() -> dict[str, set[str]]:
    """Each module of ``simulator`` and ``policies`` and the project modules it imports at load.

    ``from package import name`` counts as importing the submodule where
    ``name`` is one, else the package's face (its ``__init__``).
    """
    files: dict[str, Path] = {}
    for root in ROOTS:
        for path in (ROOT / root).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        for node in module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module or node.module.split(".")[0] not in ROOTS:
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in files else node.module)
            else:
                found.update(a.name for a in node.names if a.name.split(".")[0] in ROOTS)
        graph[name] = found
    return graph
