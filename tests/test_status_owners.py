"""Occurrence, Push, Device and the answer (Invitation's status) each have one owner of their state: no
other module of the apps assigns their state columns, updates them (`.update(status=...)`,
`save(update_fields=[...])`, `bulk_update`) or sets them in raw SQL (`SET status = ...`).

Read with `ast` (and the text of any .sql file), so nothing is imported to check it. The state columns are
recognised by name, whatever the model: a module that writes another model's `status` is listed in
OTHER_MODELS with why. Creating a row in its first state is not a move (its insert has one home of its own).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from delivery.devices import DEVICE_TRANSITIONS, DeviceState
from reminders.models import OCCURRENCE_SQL_MOVES, OCCURRENCE_TRANSITIONS
from trainings.models import PushStatus
from trainings.transitions import PUSH_INITIAL, PUSH_TRANSITIONS

ROOT = Path(__file__).resolve().parents[1]
APPS = ("reminders", "trainings", "delivery")

# The state columns: Occurrence's and Push's `status`, Device's `disabled_at` and `disabled_reason`.
COLUMNS = frozenset({"status", "disabled_at", "disabled_reason"})
# The owners: reminders/engine/occurrences.py moves occurrences, trainings/transitions.py pushes,
# experiments and webhook subscriptions, delivery/devices.py devices, trainings/answers/recording.py the
# answer (Invitation.status: the RSVP, a squad's waiting list and its promotions included, whoever gives
# it: a link, a coach, a squad's decision).
OWNERS = frozenset({
    "reminders/engine/occurrences.py", "trainings/transitions.py", "delivery/devices.py",
    "trainings/answers/recording.py",
})  # fmt: skip
# The answer's statements: SQL texts in trainings/queries.py with the others, each run by the answer's owner
# only (`test_the_answer_s_statements_are_run_by_its_owner_only`), with what each writes.
ANSWER_STATEMENTS = {
    "INVITATION_ANSWER_RECORD": "Invitation.status, an answer link's RSVP",
    "LINK_RESPONSE_RECORD": "Invitation.status, an answer link's one-statement POST",
    "QUESTIONNAIRE_ANSWER_RECORD": "QuestionnaireAnswer, a link's questionnaire answers",
    "LINK_ANSWERS_RECORD": "QuestionnaireAnswer, a questionnaire link's one-statement POST",
}
ANSWER_OWNER = "trainings/answers/recording.py"
# The ORM's ways of writing rows, as a model's manager or queryset offers them.
_ROW_WRITES = frozenset(
    {"create", "get_or_create", "update_or_create", "bulk_create", "bulk_update", "update"}
)

_SET = re.compile(r"\bSET\b(.*?)(?=\bWHERE\b|\bRETURNING\b|\bFROM\b|;|$)", re.IGNORECASE | re.DOTALL)
_SQL_NAME = re.compile(r"^--\s*name:\s*(\w+)", re.MULTILINE)


def _sets_a_column(sql: str) -> bool:
    """Whether an SQL text has a SET clause assigning a state column."""
    return any(
        re.search(rf"(^|[\s,.\"]){column}\"?\s*=", clause)
        for clause in _SET.findall(sql)
        for column in COLUMNS
    )


def _sources() -> Iterator[tuple[str, Path]]:
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*")):
            if path.suffix in (".py", ".sql") and "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path


def _named(tree: ast.Module) -> dict[int, str]:
    """For each node, the name it sits under: its function, or the constant a module assigns it to."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            name = name or node.targets[0].id
        names[id(node)] = name
        for child in ast.iter_child_nodes(node):
            visit(child, name)

    visit(tree, "")
    return names


def _assigned(targets: list[ast.expr]) -> Iterator[ast.expr]:
    """What an assignment writes: its targets, through tuples (`a.x, b = ...`), not what indexes them."""
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            yield from _assigned(list(target.elts))
        elif isinstance(target, ast.Starred):
            yield from _assigned([target.value])
        else:
            yield target


def _writes(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """(node, what) for each write of a state column in a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for each in _assigned(targets):
                if isinstance(each, ast.Attribute) and each.attr in COLUMNS:
                    yield node, f"assigns .{each.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "update":
                written = {k.arg for k in node.keywords} & COLUMNS
                if written:
                    yield node, f".update({', '.join(sorted(written))}=...)"
            for keyword in node.keywords:
                if keyword.arg in ("update_fields", "fields") and method in ("save", "bulk_update"):
                    named = {c.value for c in ast.walk(keyword.value) if isinstance(c, ast.Constant)}
                    if named & COLUMNS:
                        yield node, f".{method}({keyword.arg}={sorted(named & COLUMNS)})"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _sets_a_column(node.value):
            yield node, "SQL SET of a state column"


def _trespasses() -> list[str]:
    found = []
    for name, path in _sources():
        if name in OWNERS:
            continue
        text = path.read_text()
        if path.suffix == ".sql":
            for statement in re.split(r"(?=^--\s*name:)", text, flags=re.MULTILINE):
                match = _SQL_NAME.match(statement)
                label = match.group(1) if match else ""
                if _sets_a_column(statement):
                    found.append(f"{name} {label or '(unnamed)'}: SQL SET of a state column")
            continue
        tree = ast.parse(text, filename=name)
        under = _named(tree)
        for node, what in _writes(tree):
            where = under.get(id(node), "")
            if where in ANSWER_STATEMENTS and name == "trainings/queries.py":
                continue
            found.append(f"{name}:{getattr(node, 'lineno', '?')} ({where or 'module'}) {what}")
    return sorted(found)


def test_no_module_but_the_owners_writes_a_state_column() -> None:
    assert _trespasses() == [], "move it through its owner (OWNERS)"


def test_the_owners_and_the_named_sql_moves_are_where_this_test_looks() -> None:
    """The allowances name real things: a moved owner or a renamed statement fails here, not silently."""
    sources = dict(_sources())
    assert set(OWNERS) <= set(sources)
    for owner in OWNERS:
        assert list(_writes(ast.parse(sources[owner].read_text()))), f"{owner} writes no state column"
    # The moves made in SQL are statements of their owner (and no other module's: see _trespasses).
    owner = ast.parse(sources["reminders/engine/occurrences.py"].read_text())
    under = _named(owner)
    statements = {under.get(id(node)) for node, what in _writes(owner) if what.startswith("SQL")}
    assert set(OCCURRENCE_SQL_MOVES) <= statements
    for source, to in OCCURRENCE_SQL_MOVES.values():
        assert to in OCCURRENCE_TRANSITIONS[source]
    queries = ast.parse(sources["trainings/queries.py"].read_text())
    defined = {t.id for node in queries.body if isinstance(node, ast.Assign) for t in node.targets
               if isinstance(t, ast.Name)}  # fmt: skip
    assert set(ANSWER_STATEMENTS) <= defined


def _answer_writes(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, what) for each use of an answer statement's name and each ORM write of QuestionnaireAnswer."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ANSWER_STATEMENTS:
            yield node.lineno, f"runs {node.attr}"
        elif isinstance(node, ast.Name) and node.id in ANSWER_STATEMENTS:
            yield node.lineno, f"runs {node.id}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _ROW_WRITES
        ):
            names = {n.id for n in ast.walk(node.func.value) if isinstance(n, ast.Name)}
            if "QuestionnaireAnswer" in names:
                yield node.lineno, f"QuestionnaireAnswer ... .{node.func.attr}()"


def test_the_answer_s_statements_are_run_by_its_owner_only() -> None:
    """A questionnaire's answers, like an invitation's response, have one writer (ANSWER_OWNER), whatever
    the way in: no other module runs an answer statement or writes QuestionnaireAnswer rows."""
    found = [
        f"{name}:{line} {what}"
        for name, path in _sources()
        if path.suffix == ".py" and name not in (ANSWER_OWNER, "trainings/queries.py")
        for line, what in _answer_writes(ast.parse(path.read_text()))
    ]
    assert found == [], f"write the answer through {ANSWER_OWNER}"
    owner = list(_answer_writes(ast.parse((ROOT / ANSWER_OWNER).read_text())))
    assert {what.split()[-1] for _, what in owner if what.startswith("runs")} == set(ANSWER_STATEMENTS)
    assert any("QuestionnaireAnswer" in what for _, what in owner)


@pytest.mark.parametrize(
    "source",
    [
        "QuestionnaireAnswer.objects.update_or_create(training=t, defaults={})\n",
        "QuestionnaireAnswer.objects.filter(pk=1).update(answers={})\n",
        "fetch_one(queries.LINK_ANSWERS_RECORD, params)\n",
    ],
)
def test_it_sees_each_way_of_writing_an_answer(source: str) -> None:
    assert len(list(_answer_writes(ast.parse(source)))) == 1
    assert list(_answer_writes(ast.parse("QuestionnaireAnswer.objects.filter(pk=1).first()\n"))) == []


@pytest.mark.parametrize(
    "source",
    [
        "push.status = 'sent'\n",
        "push.language, push.status = 'en', 'sent'\n",
        "Push.objects.filter(pk=1).update(status='sent')\n",
        "device.save(update_fields=['disabled_at'])\n",
        "Device.objects.bulk_update(devices, fields=['disabled_reason'])\n",
        "SQL = \"UPDATE trainings_push SET sent_at = now(), status = 'sent' WHERE id = 1\"\n",
        "def f():\n    cursor.execute(f'UPDATE {table} AS p SET \"status\" = %s')\n",
    ],
)
def test_it_sees_each_way_of_writing_a_state(source: str) -> None:
    """The check itself: each form is found; a filter or a read on the column is not a write."""
    assert len(list(_writes(ast.parse(source)))) == 1
    reads = (
        "Push.objects.filter(status='sent').update(sent_at=None)\nx = push.status\ncounts[push.status] += 1\n"
    )
    reads += "SQL = \"SELECT id FROM t WHERE status = 'sent'\"\n"
    assert list(_writes(ast.parse(reads))) == []


def test_every_push_status_has_its_moves_written_down_and_finished_ones_stay_finished() -> None:
    assert set(PUSH_TRANSITIONS) == set(PushStatus.values)
    assert {s for s, moves in PUSH_TRANSITIONS.items() if not moves} == {
        PushStatus.SENT, PushStatus.WITHDRAWN, PushStatus.SKIPPED
    }  # fmt: skip
    # Only a pending push is published; a held one is released to pending first.
    assert {s for s, moves in PUSH_TRANSITIONS.items() if PushStatus.SENT in moves} == {PushStatus.PENDING}
    assert set(PUSH_INITIAL) <= set(PUSH_TRANSITIONS)
    assert set(DEVICE_TRANSITIONS) == set(DeviceState.values)
