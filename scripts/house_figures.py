"""The house's figures (issue 41's "Must show"): where the apps' doors hold, where protocols and test peers
live, how many modules write a state, branch on the database vendor or reach into Django's private parts,
and how many import cycles there are.

Read with `ast` and as text, nothing imported, so it runs on any checkout of the project, an old one too:

    python scripts/house_figures.py            # this checkout
    python scripts/house_figures.py --root DIR # another one (e.g. a `git worktree` of an older commit)

It prints one row a figure, with its target, and exits 0; tests/ hold the checks that fail the suite. It
keeps its own reading of the imports (tests/test_import_graph.py's is the suite's) so that it can measure
a checkout from before a figure's test existed.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The shipped packages (pyproject's [tool.setuptools.packages.find]) and what counts as a protocol module.
SHIPPED = ("common", "config", "reminders", "trainings", "delivery")
APPS = ("reminders", "trainings", "delivery")
DELIVERY_DOOR = frozenset({"delivery", "delivery.api", "delivery.models"})
_PROTOCOL = re.compile(r"^(h2|http2|hpack|smtp|mime|amqp|frames|wire)|_(h2|hpack|smtp|mime|frames)(_|$)")
_PRIVATE = re.compile(r"\b(get_compiler|get_converters|ModelState|_state|health_check_done|c_make_encoder)\b")
_VENDOR = re.compile(r"\bvendor\b")
_STATE_COLUMNS = ("status", "disabled_at", "disabled_reason")
_SQL_SET = re.compile(
    r"\bSET\b[^;]*?[\s,.\"](" + "|".join(_STATE_COLUMNS) + r")\"?\s*=", re.IGNORECASE | re.DOTALL
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    implied: bool = False  # a package that runs because a module inside it is imported


def _modules(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in SHIPPED:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _code(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but the bodies of `if TYPE_CHECKING:` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if (
            isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
        ):
            yield from (inner for other in node.orelse for inner in [other, *_code(other)])
            continue
        yield node
        yield from _code(node)


def _edges(modules: dict[str, Path], *, strict: bool = False) -> list[Edge]:
    """Every import between shipped modules, function-local ones included; `a.b.c` runs `a` and `a.b`,
    except a package the importing module sits in (already running), unless `strict` and the import reads
    that package's namespace (`from pkg import x` inside pkg), which ties it to the package's `__init__`."""
    edges: list[Edge] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _code(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join([*package, base] if base else package)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            reads = base if strict and isinstance(node, ast.ImportFrom) and base in modules else None
            if reads and reads != module and module.startswith(reads + "."):
                edges.append(Edge(module, reads))
            for name in names:
                parts = name.split(".")
                for end in range(1, len(parts) + 1):
                    candidate = ".".join(parts[:end])
                    inside = end < len(parts) and module.startswith(candidate + ".")  # already running
                    if candidate in modules and candidate != module and not inside:
                        edges.append(Edge(module, candidate, implied=end < len(parts)))
    return edges


def _cycles(modules: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (a package and its own submodule count)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while (member := stack.pop()) != module:
                component.append(member)
            component.append(module)
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return sorted(found)


def _writes_a_state(tree: ast.Module) -> bool:
    """Assigns, updates or SQL-sets a state column (Occurrence/Push/Invitation status, Device's disabling)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr in _STATE_COLUMNS for t in targets):
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "update" and any(k.arg in _STATE_COLUMNS for k in node.keywords):
                return True
            for keyword in node.keywords:
                if keyword.arg in ("update_fields", "fields") and node.func.attr in ("save", "bulk_update"):
                    named = {c.value for c in ast.walk(keyword.value) if isinstance(c, ast.Constant)}
                    if named & set(_STATE_COLUMNS):
                        return True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL_SET.search(node.value):
            return True
    return False


def _door(edge: Edge) -> bool:
    module = edge.target
    return module in DELIVERY_DOOR or module.startswith("delivery.models.")


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def figures(root: Path) -> list[tuple[str, object, str]]:
    """(figure, value, target) rows."""
    modules = _modules(root)
    edges = _edges(modules)
    trees = {m: ast.parse(p.read_text(), filename=str(p)) for m, p in modules.items()}
    texts = {m: p.read_text() for m, p in modules.items()}
    in_apps = [m for m in modules if _app(m) in ("trainings", "delivery")]
    named = [e for e in edges if not e.implied]
    into_trainings = {e for e in named if (_app(e.source), _app(e.target)) == ("delivery", "trainings")}
    past_the_door = {e for e in named if _app(e.target) == "delivery" != _app(e.source) and not _door(e)}
    sql_files = [p for a in APPS for p in (root / a).rglob("*.sql")]
    return [
        ("delivery app with its door (delivery/api.py)", (root / "delivery/api.py").is_file(), "yes"),
        ("trainings/push/ still there", (root / "trainings/push").is_dir(), "no"),
        ("imports from delivery into trainings", len(into_trainings), "0"),
        ("imports past delivery's door", len(past_the_door), "0"),
        ("wire-protocol modules inside trainings/ or delivery/",
         sum(1 for m in in_apps if _PROTOCOL.search(m.rsplit(".", 1)[-1])), "0"),
        ("peer modules in shipped packages", sum(1 for m in modules if "peer" in m.rsplit(".", 1)[-1]), "0"),
        ("files writing a status",
         sum(1 for m in modules if _app(m) in APPS and _writes_a_state(trees[m]))
         + sum(1 for p in sql_files if _SQL_SET.search(p.read_text())), "<= 4"),
        ("top-level trainings/ modules",
         sum(1 for p in (root / "trainings").glob("*.py") if p.name != "__init__.py"), "<= 15"),
        ("uses of Django's private internals", sum(len(_PRIVATE.findall(t)) for t in texts.values()), "<= 4"),
        ("files branching on the database vendor",
         sum(1 for t in texts.values() if _VENDOR.search(t)), "<= 8"),
        ("import cycles (function-local imports included)", len(_cycles(modules, edges)), "0"),
        ("package <-> submodule cycles (strict reading)",
         len(_cycles(modules, _edges(modules, strict=True))), "0"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--cycles", action="store_true", help="also list the modules of each cycle")
    args = parser.parse_args()
    rows = figures(args.root)
    width = max(len(name) for name, _, _ in rows)
    print(f"{'figure':<{width}}  {'value':>6}  target")
    for name, value, target in rows:
        shown = ("yes" if value else "no") if isinstance(value, bool) else str(value)
        print(f"{name:<{width}}  {shown:>6}  {target}")
    if args.cycles:
        modules = _modules(args.root)
        for strict in (False, True):
            for cycle in _cycles(modules, _edges(modules, strict=strict)):
                print("strict cycle:" if strict else "cycle:", " ".join(cycle))


if __name__ == "__main__":
    main()
