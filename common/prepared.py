"""Statements prepared on the server, once per connection, for the few that run very often.

Django's psycopg cursors bind parameters on the client and never prepare; a statement run for every answer
link followed or every commit of the push gateway's recorder pays PostgreSQL's parsing and planning each
time, as much as running it. `prepared_cursor` gives a server-binding cursor that prepares what it runs
(psycopg keeps one prepared statement per query text and connection), through Django's cursor wrapper so
its execute wrappers and errors are Django's. Behind a transaction-pooling proxy prepared statements need
its support (PgBouncer 1.21 and later, `max_prepared_statements`).

`prepared_one` is for a request's hot statements (an answer link's, a limit's count): Django's
per-request health check (`conn_health_checks`, a `SELECT 1` before a request's first statement on a kept
connection) is a round trip of its own; there the first statement itself is the check: if it fails because
the kept connection died while idle, the connection is closed and the statement runs once more on a new
one, which is what the health check would have done. Its statements must bear that repeat (a read, or a
write that changes nothing or little when repeated after a connection lost mid-statement).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from django.db import InterfaceError, OperationalError

# psycopg prepares a query automatically once it has run this many times on a connection (with a
# server-binding cursor); None, Django's default, turns preparing off even when asked. Here only the
# statements asked for are prepared.
_ONLY_WHEN_ASKED = 2**31 - 1
Params = Sequence[Any] | Mapping[str, Any]


class _PreparedCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor that prepares every statement it runs."""

    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        return super().execute(query, params, **{**options, "prepare": True})


def prepared_cursor(connection: Any, *, logged: bool = True) -> Any:
    """A cursor on Django's `connection` (connected here) whose statements are prepared; with `logged`,
    Django's debug cursor when queries are logged (a caller whose parameters it cannot render logs the
    query itself)."""
    connection.ensure_connection()
    connection.validate_thread_sharing()
    if connection.connection.prepare_threshold is None:
        connection.connection.prepare_threshold = _ONLY_WHEN_ASKED
    raw = _PreparedCursor(connection.connection)
    if logged and connection.queries_logged:
        return connection.make_debug_cursor(raw)
    return connection.make_cursor(raw)


def prepared_run(connection: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run one statement prepared, through Django's cursor wrapper (its execute wrappers and errors), and
    return its rows (none for a statement without); logged like any query when queries are (the debug
    cursor cannot read a prepared statement's text back)."""
    start = time.monotonic()
    with prepared_cursor(connection, logged=False) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
    if connection.queries_logged:
        connection.queries_log.append({"sql": sql, "time": f"{time.monotonic() - start:.3f}"})
    return rows


def prepared_one(connection: Any, sql: str, params: Params) -> tuple[Any, ...] | None:
    """The first row of one statement, prepared, through Django's cursor wrapper (logged and counted like
    any query, its errors Django's); the statement is the connection's health check (see above)."""
    rows = prepared_all(connection, sql, params, first=True)
    return rows[0] if rows else None


def prepared_all(connection: Any, sql: str, params: Params, *, first: bool = False) -> list[tuple[Any, ...]]:
    """Every row of one statement (only the first with `first`), as `prepared_one` runs it; on a database
    whose driver is not psycopg (SQLite) through Django's plain cursor: this is the one home of that twin."""
    if not prepares(connection):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if not cursor.description:
                return []
            found = [cursor.fetchone()] if first else cursor.fetchall()
            return [tuple(row) for row in found if row is not None]
    kept = connection.connection is not None and connection.health_check_enabled
    try:
        rows = _prepared_rows(connection, sql, params, first)
    except (OperationalError, InterfaceError):
        if not kept or connection.in_atomic_block or connection.is_usable():
            raise  # not a kept connection that died: the error is the statement's
        connection.close()
        rows = _prepared_rows(connection, sql, params, first)
    # Django's private flag, no public way: the statement was the health check, no SELECT 1 follows.
    connection.health_check_done = True
    return rows


def prepares(connection: Any) -> bool:
    """Whether the connection's driver is psycopg, which prepares statements on the server (SQLite's does
    not); asked of the backend's DB-API module, so no connection is opened for it."""
    return connection.Database is psycopg


def _prepared_rows(connection: Any, sql: str, params: Params, first: bool) -> list[tuple[Any, ...]]:
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        if first:
            row = cursor.fetchone()
            return [] if row is None else [tuple(row)]
        return [tuple(row) for row in cursor.fetchall()]
