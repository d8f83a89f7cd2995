"""The answer link's statements and their row types name the same columns in the same order: readers take
a row's values by name (`queries.LinkTargetRow` and the rows built on it), so a column added, removed or
moved in the SQL without its field (or the other way round) fails here, not as a value read from the
wrong column."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import connection

from trainings import queries

_PARAMS: dict[str, Any] = {
    "training": uuid.uuid4(),  # no such training: the statements read and write nothing
    "player": 0,
    "now": dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
    "from_end": False,
    "span": dt.timedelta(0),
    "source": "app",
    "status": "ACCEPTED",
    "phase": "PRE",
    "team": 0,
    "revision": 0,
    "answers": "{}",
}


@pytest.mark.postgres  # the link's statements run on PostgreSQL only (elsewhere the ORM reads the target)
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sql", "row_type"),
    [
        (queries.ANSWER_LINK_TARGET, queries.LinkTargetRow),
        (queries.LINK_RESPONSE_RECORD, queries.LinkResponseRow),
        (queries.LINK_ANSWERS_RECORD, queries.LinkAnswersRow),
    ],
    ids=["ANSWER_LINK_TARGET", "LINK_RESPONSE_RECORD", "LINK_ANSWERS_RECORD"],
)
def test_each_link_statements_columns_are_its_row_types_fields(sql: str, row_type: type) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, _PARAMS)
        columns = [column.name for column in cursor.description]
        assert cursor.fetchall() == []
    assert columns == [field.name for field in dataclasses.fields(row_type)]


def test_the_one_statement_rows_begin_with_the_targets_columns() -> None:
    """target_from_row reads any of them: each row type is the target's fields, then its own."""
    target = [field.name for field in dataclasses.fields(queries.LinkTargetRow)]
    for row_type in (queries.LinkResponseRow, queries.LinkAnswersRow):
        names = [field.name for field in dataclasses.fields(row_type)]
        assert names[: len(target) + 1] == [*target, "open"]
        assert len(set(names)) == len(names)
