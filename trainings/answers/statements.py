"""The answer link's statements on PostgreSQL: prepared once per connection, and no health check of their
own.

A followed link runs the same statement every time (trainings/queries.py: a POST opens the link and
records its answer in one), so each is bound on the server and prepared the first time a connection runs
it: later answers skip parsing and planning, which cost PostgreSQL as much as running them. Django's
per-request health check (`conn_health_checks`, a `SELECT 1` before a request's first statement on a kept
connection) is a round trip per answer; here the first statement itself is the check: if it fails
because the kept connection died while idle, the connection is closed and the statement runs once more on
a new one, which is what the health check would have done. The statements are idempotent (a read, or a
write that changes nothing when repeated), so a repeat after a connection lost mid-answer records nothing
twice.

Prepared statements live in a server session: behind a transaction-pooling proxy (PgBouncer's
`pool_mode = transaction`) they need its `max_prepared_statements` (PgBouncer 1.21 and later).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import InterfaceError, OperationalError
from django.db import connection as _connection

from common.prepared import prepared_cursor

# Django's connection, with the attributes django-stubs leaves out (the health check's, the raw connection's
# type).
connection: Any = _connection


def fetch_one(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row of one statement, prepared, through Django's cursor wrapper (so it is logged and
    counted like any query, and its errors are Django's)."""
    unchecked = (
        connection.connection is not None
        and connection.health_check_enabled
        and not connection.health_check_done
    )
    try:
        row = _fetch_one(sql, params)
    except (OperationalError, InterfaceError):
        if not unchecked or connection.in_atomic_block or connection.is_usable():
            raise  # not a connection that died while idle: the error is the statement's
        connection.close()
        row = _fetch_one(sql, params)
    connection.health_check_done = True  # the connection works: no SELECT 1 for the rest of the request
    return row


def _fetch_one(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> tuple[Any, ...] | None:
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row if row is None else tuple(row)
