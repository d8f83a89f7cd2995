"""The import graph's figures of the apps: modules, import levels, how the domain reaches into the engine,
import cycles, and the wire-protocol and loopback-peer modules out of place. Run from the repository root:
`python scripts/import_figures.py`.

It reads the graph the way tests/test_import_graph.py does (module-level imports, parents included,
`TYPE_CHECKING` blocks left out), so the figures and the tests agree on what an import is.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_import_graph import (
    MODULES,
    WIRE_HOME,
    _cycles,
    _imports,
    _serves,
    _shipped_packages,
    _speaks_a_protocol,
)


def main() -> None:
    imports = [i for i in _imports() if not i.local]
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for each in imports:
        edges[each.module].add(each.target)

    def app(module: str) -> str:
        return module.split(".", 1)[0]

    @cache
    def level(module: str, inside: bool) -> int:
        """0 for a module importing nothing (of its own app, when `inside`), else one more than its
        deepest import."""
        targets = [t for t in edges[module] if not inside or app(t) == app(module)]
        return 1 + max((level(t, inside) for t in targets), default=-1)

    for name in sorted({app(m) for m in MODULES}):
        mine = [m for m in MODULES if app(m) == name]
        own = 1 + max(level(m, True) for m in mine)
        every = 1 + max(level(m, False) for m in mine)
        print(f"{name}: {len(mine)} modules on {own} import levels ({every} counting other apps' modules)")
    arrows = {(m, t) for m, targets in edges.items() for t in targets}
    across = sorted(
        (m, t)
        for m, t in arrows
        if m.startswith("trainings") and (t == "reminders" or t.startswith("reminders."))
    )
    distinct = sorted({t for _, t in across if t != "reminders"})
    print(f"trainings -> reminders: {len(across)} arrows to {len(distinct)} distinct modules")
    for target in distinct:
        users = sorted(m for m, t in across if t == target)
        print(f"  {target}: {len(users)} ({', '.join(users)})")
    for label, graph in (("module-level imports", imports), ("function-local ones counted", _imports()),
                         ("through a package's own __init__ too", _imports(own_package=True))):  # fmt: skip
        cycles = _cycles(graph)
        print(f"import cycles, {label}: {len(cycles)} {cycles or ''}")
    wire = sorted(
        m for m, path in MODULES.items() if not m.startswith(WIRE_HOME) and _speaks_a_protocol(path)
    )
    print(f"wire-protocol modules outside {WIRE_HOME}: {len(wire)} {wire or ''}")
    shipped = _shipped_packages()
    root = Path(__file__).resolve().parents[1]
    peers = sorted(f"{package}.{path.stem}" for package in shipped
                   for path in (root / package.replace(".", "/")).glob("*.py") if _serves(path))  # fmt: skip
    print(f"loopback peer modules in shipped packages: {len(peers)} {peers or ''}")


if __name__ == "__main__":
    main()
