"""reminders/ imports in one direction: no cycle, and no import moved into a function to hide one.

Issue 18: a six-file cycle (claiming -> schedules -> services -> tasks -> dispatch -> claiming) was held
together by two function-local imports. The graph is read from the source with `ast`, as Python would
import it at module level; imports under `if TYPE_CHECKING:` are not run and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "reminders"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "migrations" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


class _Imports(ast.NodeVisitor):
    """The package's modules each module imports: at module level, and inside functions."""

    def __init__(self, modules: dict[str, Path]) -> None:
        self.modules = modules
        self.top: set[str] = set()
        self.local: set[str] = set()
        self._depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None:
            raise AssertionError(f"relative import at line {node.lineno}: import from {PACKAGE}.… instead")
        for alias in node.names:
            submodule = f"{node.module}.{alias.name}"
            self._add(submodule if submodule in self.modules else node.module)

    def _add(self, name: str) -> None:
        if name in self.modules:
            (self.local if self._depth else self.top).add(name)


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    top: dict[str, set[str]] = {}
    local: dict[str, set[str]] = {}
    for name, path in modules.items():
        visitor = _Imports(modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        top[name] = visitor.top - {name}
        local[name] = visitor.local - {name}
    return top, local


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A chain of imports from `start` to `goal`, if there is one (depth first)."""
    stack, seen = [(start, [start])], {start}
    while stack:
        node, chain = stack.pop()
        if node == goal:
            return chain
        for following in sorted(graph.get(node, ())):
            if following not in seen:
                seen.add(following)
                stack.append((following, [*chain, following]))
    return None


def test_there_is_no_import_cycle_inside_reminders() -> None:
    top, _ = _graph()
    cycles = [
        [module, *chain]
        for module, imported in top.items()
        for target in imported
        if (chain := _path(top, target, module)) is not None
    ]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_no_function_local_import_inside_reminders_hides_a_cycle() -> None:
    """A function-local import is fine for laziness (a transport loaded on first use), not to dodge a
    cycle: made a module-level import, none of them may close one."""
    top, local = _graph()
    hidden = [
        f"{module} imports {target} in a function, and {' -> '.join(chain)} already"
        for module, targets in local.items()
        for target in targets
        if (chain := _path(top, target, module)) is not None
    ]
    assert not hidden, "; ".join(hidden)


def test_the_graph_is_read_from_the_engine_modules() -> None:
    """The checks above look at the real modules (a broken walk would pass them vacuously)."""
    top, _ = _graph()
    assert "reminders.occurrences" in top["reminders.claiming"]
    assert "reminders.queries" in top["reminders.occurrences"]
    assert "reminders.tasks" not in {target for targets in top.values() for target in targets}
