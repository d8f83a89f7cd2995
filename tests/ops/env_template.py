"""Which environment variables the settings read, and which the environment file template lists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "systemd" / "reminders.env"
ENV_READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list"}


def settings_variables() -> set[str]:
    """Every environment variable config/settings.py and config/celery.py read: the first argument of the
    strict readers of config/env.py, and direct os.environ / os.getenv reads."""
    names: set[str] = set()
    for module in ("settings.py", "celery.py"):
        tree = ast.parse((ROOT / "config" / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and _is_environ(node.value):
                names.update(_literal(node.slice))
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            reader = isinstance(func, ast.Name) and func.id in ENV_READERS
            environ = isinstance(func, ast.Attribute) and (
                (func.attr == "get" and _is_environ(func.value))
                or (func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os")
            )
            if reader or environ:
                names.update(_literal(node.args[0]))
    names.discard("DJANGO_SETTINGS_MODULE")  # set by manage.py, wsgi.py and celery.py themselves
    return names


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _literal(node: ast.expr) -> set[str]:
    return {node.value} if isinstance(node, ast.Constant) and isinstance(node.value, str) else set()


def template_variables() -> dict[str, str | None]:
    """The template's variables: the value of an active line, None for a commented default."""
    found: dict[str, str | None] = {}
    for line in TEMPLATE.read_text().splitlines():
        match = re.fullmatch(r"(#?)([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if match:
            commented, name, value = match.groups()
            if not commented or name not in found:
                found[name] = None if commented else value
    return found
