"""The shape of the apps: no import cycle (through a package's own `__init__` included), no function-local
import hiding one, no module too long to read in one sitting, the protocols the project speaks in
common/wire/ and in no app, and no loopback peer in a package that ships.

Read with `ast`, so nothing is imported to check it. An import of `a.b.c` counts as importing the packages
`a.b` and `a` too (their `__init__` runs first), except a package the importing module sits in; `from a
import x` inside `a` takes `x` from `a`'s `__init__` and counts as importing `a` in the check of cycles
through a package. Imports under `if TYPE_CHECKING:` are for annotations only and do not count.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
# delivery/ is the push gateway's app once it exists (docs/design.md); its rules are the others'.
APPS = tuple(app for app in ("common", "reminders", "trainings", "delivery") if (ROOT / app).is_dir())


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    line: int
    target: str  # the imported module of the apps
    local: bool  # inside a function or class body, not at module level


def _modules() -> dict[str, Path]:
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (conditionals and try blocks included)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _module_level(block)


def _type_checking_only(tree: ast.Module) -> set[int]:
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for inner in ast.walk(node)
    }


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, *, own_package: bool = False
) -> Iterator[str]:
    """The app modules an import statement runs, parent packages included. With `own_package`, a `from a
    import x` inside `a` names `a` too: `x` is read from the package while its `__init__` may still run."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        if own_package and base in MODULES and base != module and module.startswith(base + "."):
            yield base
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            inside = end < len(parts) and module.startswith(candidate + ".")
            if candidate in MODULES and candidate != module and not inside:
                yield candidate


def _imports(*, own_package: bool = False) -> list[Import]:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top = {id(node) for node in _module_level(tree.body)}
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skip:
                continue
            for target in set(_targets(node, module, path.name == "__init__.py", own_package=own_package)):
                found.append(Import(module, node.lineno, target, local=id(node) not in top))
    return found


def _cycles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for each in imports:
        edges[each.module].add(each.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return sorted(components)


def test_it_reads_every_module_of_the_apps() -> None:
    """The checks look at the real modules and edges (a broken walk would pass them vacuously)."""
    assert {"reminders.models", "reminders.transports.base", "delivery.gateway.consumer"} <= set(MODULES)
    edges = {(i.module, i.target) for i in _imports() if not i.local}
    assert ("reminders.engine.claiming", "reminders.engine.occurrences") in edges
    assert ("trainings.tasks", "trainings.planning.scheduling") in edges
    # Celery finds tasks modules by autodiscovery; a service that enqueues one imports it at the top
    # (trainings.planning.writes) and the task imports only what it calls, never that service.
    assert not [m for m, target in edges if target == "reminders.tasks"]
    assert {m for m, target in edges if target == "trainings.tasks"} == {"trainings.planning.writes"}


# What another app may import of the engine: its front door and its models (reminders/api.py says why).
ENGINE_DOOR = frozenset({"reminders", "reminders.api", "reminders.models"})


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def test_the_domain_uses_the_engine_only_through_its_front_door() -> None:
    """trainings/ imports `reminders.api` and `reminders.models`, nothing else of the engine, at module
    level or inside a function: the engine's insides can move without touching the domain."""
    through_the_wall = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in _imports()
        if _app(i.module) == "trainings" and _app(i.target) == "reminders" and i.target not in ENGINE_DOOR
    )
    assert through_the_wall == []


def test_the_engine_knows_no_trainings_and_common_knows_neither_app() -> None:
    wrong = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in _imports()
        if (_app(i.module), _app(i.target)) in {("reminders", "trainings"), ("common", "reminders"),
                                                ("common", "trainings")}
    )  # fmt: skip
    assert wrong == []


def test_it_sees_an_import_through_the_wall(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: a domain module naming an engine module other than the door is found."""
    node = _parse("from reminders.engine.kick import scan_kick_on_commit")
    assert "reminders.engine.kick" in set(_targets(node, "trainings.planning.scheduling", False))
    assert "reminders.engine.kick" not in ENGINE_DOOR


def test_module_level_imports_form_no_cycle() -> None:
    assert _cycles([i for i in _imports() if not i.local]) == []


def test_no_function_local_import_closes_a_cycle() -> None:
    """A function-local import is fine for laziness (a transport loaded on first use), not to dodge a
    cycle: counted as if it ran at module level, none of them may close one."""
    imports = _imports()
    cycles = _cycles(imports)
    closing = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in imports
        if i.local and any(i.module in c and i.target in c for c in cycles)
    )
    assert cycles == [], f"cycles {cycles}, closed by function-local imports: {closing}"


def test_no_cycle_runs_through_a_package_s_own_init() -> None:
    """A package whose `__init__` imports its submodule `a.b`, where `a.b` says `from a import c`, is a
    cycle too: `a.b` reads `c` from a package still being initialised. Such a module imports its sibling
    as `a.c` (`from a.c import X`, `import a.c as c`)."""
    imports = _imports(own_package=True)
    cycles = _cycles(imports)
    through = sorted(f"{i.module}:{i.line} imports {i.target}" for i in imports
                     if any(i.module in c and i.target in c for c in cycles))  # fmt: skip
    assert cycles == [], f"cycles {cycles}: {through}"


def test_it_sees_a_cycle_through_a_package_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: `a.b` importing `a.c.d` runs `a.c`'s __init__, which imports `a.b`; a module
    importing a sibling inside its own package does not count that package."""
    names = ("a", "a.b", "a.c", "a.c.d", "a.c.base")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", dict.fromkeys(names, ROOT))
    assert sorted(_targets(_parse("import a.c.d"), "a.b", False)) == ["a.c", "a.c.d"]
    assert list(_targets(_parse("from a.c.base import X"), "a.c.d", False)) == ["a.c.base"]
    assert list(_targets(_parse("from . import base"), "a.c", True)) == ["a.c.base"]
    imports = [Import("a.b", 1, "a.c", local=False), Import("a.c", 1, "a.b", local=True)]
    assert _cycles(imports) == [["a.b", "a.c"]]
    assert _cycles([i for i in imports if not i.local]) == []
    # `from a.c import base` inside a.c.d takes base from the package a.c: counted with own_package.
    node = _parse("from a.c import base, d")
    assert sorted(_targets(node, "a.c.d", False)) == ["a.c.base"]
    assert sorted(_targets(node, "a.c.base", False, own_package=True)) == ["a.c", "a.c.d"]
    assert _cycles([Import("a.c", 1, "a.c.d", local=False), Import("a.c.d", 1, "a.c", local=False)]) == [
        ["a.c", "a.c.d"]
    ]


def _parse(source: str) -> ast.Import | ast.ImportFrom:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.Import | ast.ImportFrom)
    return node


# How long a module may grow, per package (the longest matching prefix speaks): past its length a module
# probably holds two concepts and becomes a package of modules, as reminders/engine/ did. A package keeps
# longer modules only with its reason written here, and nothing goes past HARD_LIMIT.
HARD_LIMIT = 500
LENGTH_GUIDE: dict[str, tuple[int, str]] = {
    "": (400, "one concept per module"),
    "reminders.models": (
        480,
        "the engine's tables (the limits' counters among them), their constraints and the indexes their "
        "queries name",
    ),
    "trainings.models": (450, "the domain's tables, their constraints and the indexes their queries name"),
}


def _guide(module: str) -> tuple[str, int, str]:
    package = max((p for p in LENGTH_GUIDE if not p or module == p or module.startswith(p + ".")), key=len)
    return (package, *LENGTH_GUIDE[package])


def test_each_module_keeps_to_its_packages_length() -> None:
    """Migrations and tests are not counted. The message names the package's limit and its reason."""
    too_long = []
    for module, path in MODULES.items():
        lines = len(path.read_text().splitlines())
        package, limit, reason = _guide(module)
        if lines > limit:
            too_long.append(
                f"{module}: {lines} lines, over {limit} for {package or 'any package'} ({reason})"
            )
    assert too_long == []


def test_the_length_guide_has_reasons_and_a_ceiling() -> None:
    assert all(reason and limit <= HARD_LIMIT for limit, reason in LENGTH_GUIDE.values())
    assert _guide("reminders.engine.dispatch") == ("", 400, "one concept per module")
    assert _guide("trainings.models.devices")[0] == "trainings.models"


def test_no_type_ignore_in_tests() -> None:
    """mypy does not check tests/ (pyproject's exclude), so an ignore comment for it there does nothing."""
    marker = "type: " + "ignore"
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if marker in line
    ]
    assert found == []


# What makes a module a protocol of its own: it packs bytes, runs a header codec or MIME writer, subclasses
# asyncio.Protocol, or opens its own connections. Those modules live in common/wire/, beside their tests in
# tests/wire/; an app hands them bytes and headers.
WIRE_IMPORTS = (
    "struct",
    "hpack",
    "hyperframe",
    "h2",
    "quopri",
    "email.header",
    "email.generator",
    "email.mime",
)
WIRE_CALLS = ("open_connection", "create_connection", "start_tls", "create_unix_connection")
WIRE_HOME = "common.wire"


def _speaks_a_protocol(path: Path) -> list[str]:
    """What in a module makes it a wire-protocol module (empty: nothing)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"imports {n}" for n in names if n.split(".")[0] in WIRE_IMPORTS or n in WIRE_IMPORTS]
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            found += [
                f"class {node.name}({b})"
                for b in bases
                if b.endswith(("asyncio.Protocol", "BufferedProtocol"))
            ]
        elif isinstance(node, ast.Attribute) and node.attr in WIRE_CALLS:
            found.append(f"calls {node.attr}")
    return sorted(set(found))


def test_no_app_holds_a_wire_protocol_module() -> None:
    """trainings/, reminders/ and delivery/ speak no protocol themselves: HTTP/2, HPACK, SMTP and the AMQP
    frames are common/wire/'s (MIME is Django's)."""
    in_apps = {
        module: reasons
        for module, path in MODULES.items()
        if _app(module) != "common" and (reasons := _speaks_a_protocol(path))
    }
    assert in_apps == {}
    outside_home = [m for m, p in MODULES.items() if _app(m) == "common" and not m.startswith(WIRE_HOME)
                    and _speaks_a_protocol(p)]  # fmt: skip
    assert outside_home == []


def test_it_sees_the_protocol_modules_it_keeps_out_of_the_apps() -> None:
    """The check itself: each module of common/wire/ is found speaking its protocol."""
    wire = {m: _speaks_a_protocol(p) for m, p in MODULES.items() if m.startswith(WIRE_HOME + ".")}
    assert set(wire) >= {"common.wire.h2client", "common.wire.h2_connection", "common.wire.hpack_codec",
                         "common.wire.smtp", "common.wire.amqp_frames"}  # fmt: skip
    assert all(wire.values()), wire
    for module in wire:
        assert (ROOT / "tests" / "wire").is_dir() and module.startswith(WIRE_HOME)


# A loopback peer: a module that serves connections (a stand-in for APNs, FCM, an SMTP or webhook server).
PEER_CALLS = ("start_server", "create_server", "serve_forever")
PEER_IMPORTS = ("aiosmtpd", "http.server", "socketserver", "granian")


def _serves(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"imports {n}" for n in names if n in PEER_IMPORTS or n.split(".")[0] in PEER_IMPORTS]
        elif isinstance(node, ast.Attribute) and node.attr in PEER_CALLS:
            found.append(f"calls {node.attr}")
        elif isinstance(node, ast.ClassDef) and node.name.endswith("Peer"):
            found.append(f"class {node.name}")
    return sorted(set(found))


def _shipped_packages() -> list[str]:
    """The packages an install carries: pyproject's setuptools find, as setuptools runs it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return sorted(
        find_packages(where=str(ROOT), include=config["include"], exclude=config.get("exclude", ()))
    )


def test_no_loopback_peer_ships() -> None:
    """The stand-ins that accept any push live in tests/peers/ (and the benchmark's in bench/), outside
    every package pyproject ships: an installed service serves nothing it is not meant to."""
    shipped = _shipped_packages()
    assert {"common.wire", "reminders", "trainings"} <= set(shipped)
    assert not [p for p in shipped if p.split(".")[0] in ("tests", "bench")]
    peers = {
        f"{package}.{path.stem}": reasons
        for package in shipped
        for path in sorted((ROOT / package.replace(".", "/")).glob("*.py"))
        if "migrations" not in package and (reasons := _serves(path))
    }
    assert peers == {}


def test_it_sees_a_peer() -> None:
    """The check itself: the loopback peers tests and the benchmark start are found serving."""
    assert "calls start_server" in _serves(ROOT / "tests" / "peers" / "apns_fcm.py")
    assert "imports aiosmtpd.controller" in _serves(ROOT / "tests" / "trainings" / "smtp_peer.py")
    assert "imports granian" not in _serves(ROOT / "bench" / "peer_server.py")  # granian runs it, by name
