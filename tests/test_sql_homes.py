"""Raw SQL lives in one named place per app: reminders/queries.py, trainings/queries.py and
delivery/queries.py (common's one statement builder is common/rows_insert.py, which writes what a model's
fields say). Elsewhere the ORM; but the statements that move an occurrence's status (OCCURRENCE_SQL_MOVES)
live with the moves' owner, reminders/engine/occurrences.py (tests/test_status_owners.py), and only those.

Read with `ast`, so nothing is imported to check it: no other module holds SQL text (docstrings aside),
each statement of a home has the comment above it that says what it does, and no string anywhere names
a model's table (the statements take `Model._meta.db_table`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.apps import apps

from reminders.models import OCCURRENCE_SQL_MOVES

ROOT = Path(__file__).resolve().parents[1]
APPS = ("common", "reminders", "trainings", "delivery")
HOMES = {"reminders/queries.py", "trainings/queries.py", "delivery/queries.py", "common/rows_insert.py"}
# The owner of a state that holds the statements of its moves made in SQL, and their names.
MOVE_HOMES = {"reminders/engine/occurrences.py": frozenset(OCCURRENCE_SQL_MOVES)}
# A statement's shape, in the upper case every statement of the project is written in.
SQL = re.compile(
    r"\b(INSERT INTO|UPDATE \w+ (AS \w+ )?SET|DELETE FROM|SELECT\b[^\n]*\bFROM|COPY \w+|pg_notify)"
    r"|^\s*SELECT\b|^LISTEN \w+$"
)


def _sources() -> Iterator[tuple[str, ast.Module, list[str]]]:
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative:
                continue
            text = path.read_text()
            yield relative, ast.parse(text), text.splitlines()


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _texts(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every string literal and f-string (its literal parts joined) outside docstrings, with its line."""
    skip = _docstrings(tree)
    inside_fstrings = {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values
    }
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inside_fstrings:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            parts = [p.value if isinstance(p, ast.Constant) else "{}" for p in node.values]
            yield node.lineno, "".join(str(p) for p in parts)


def _assigned_to(tree: ast.Module, line: int) -> str:
    """The name a module-level assignment spanning `line` binds ("" when none does)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.lineno <= line <= (node.end_lineno or node.lineno):
            return next((t.id for t in node.targets if isinstance(t, ast.Name)), "")
    return ""


SOURCES = list(_sources())


def test_no_module_outside_the_homes_holds_sql_text() -> None:
    found = [
        f"{path}:{line}: {text.strip()[:60]!r}"
        for path, tree, _ in SOURCES
        if path not in HOMES
        for line, text in _texts(tree)
        if SQL.search(text) and _assigned_to(tree, line) not in MOVE_HOMES.get(path, ())
    ]
    assert found == [], "raw SQL belongs in the app's queries.py:\n" + "\n".join(found)


@pytest.mark.parametrize("home", sorted((HOMES | set(MOVE_HOMES)) - {"common/rows_insert.py"}))
def test_each_statement_of_a_home_has_a_name_and_a_comment_saying_what_it_does(home: str) -> None:
    [(tree, lines)] = [(tree, lines) for path, tree, lines in SOURCES if path == home]
    uncommented = []
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        name = node.targets[0].id
        texts = [text for _, text in _texts(ast.Module(body=[node], type_ignores=[]))]
        if not any(SQL.search(text) for text in texts):
            continue
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        if not (name.isupper() and above.startswith("#")):
            uncommented.append(f"{home}:{node.lineno} {name}")
    assert uncommented == []


@pytest.mark.django_db(databases=[])
def test_no_string_names_a_models_table() -> None:
    tables = {
        model._meta.db_table
        for app in APPS
        if app != "common"
        for model in apps.get_app_config(app).get_models()
    }
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, tables))) + r")\b")
    found = [
        f"{path}:{line}: {match.group(0)}"
        for path, tree, _ in SOURCES
        for line, text in _texts(tree)
        for match in [pattern.search(text)]
        if match
    ]
    assert found == []
