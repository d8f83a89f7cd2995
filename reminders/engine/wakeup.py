"""LISTEN/NOTIFY on PostgreSQL: a write of something due soon wakes an idle scan at once.

Writers notify after their transaction commits (reminders/engine/kick.py, once per transaction however many
rows
it wrote); a scan waits on its own LISTEN connection instead of sleeping, so a reminder posted for "now"
is claimed within a round trip rather than at the next poll. Polling stays as the safety net: a lost
notification (the listener reconnecting, a writer that does not notify, such as a raw SQL import) costs
at most one poll interval. SQLite has no such channel: there the wait is a sleep.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import time

import psycopg
from django.db import DatabaseError, connection

from reminders import queries

logger = logging.getLogger(__name__)

CHANNEL = queries.DUE_CHANNEL
# After the listener's connection failed, sleep-poll this long before trying to open it again.
_RETRY_SECONDS = 5.0


def notify_due() -> None:
    """Tell listening scans that something is due within their look-ahead. Best effort (polling covers)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(queries.DUE_NOTIFY, [CHANNEL])
    except DatabaseError:
        logger.warning("could not notify the scan; the next poll will find the work", exc_info=True)


class Listener:
    """One dedicated autocommit connection per process, LISTENing on CHANNEL.

    Kept between scans, so a notification sent while no scan was running is waiting for the next one.
    """

    def __init__(self) -> None:
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._pid = 0
        self._broken_until = 0.0

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification; True if one came (all pending are consumed)."""
        conn = self._connection()
        if conn is None:
            time.sleep(max(0.0, timeout))
            return False
        try:
            if self._drain(conn):
                return True
            if timeout > 0:
                ready, _, _ = select.select([conn.fileno()], [], [], timeout)
                if ready:
                    return self._drain(conn)
            return False
        except (psycopg.Error, OSError, ValueError):
            logger.warning("LISTEN connection lost; polling until it is back", exc_info=True)
            self.close()
            self._broken_until = time.monotonic() + _RETRY_SECONDS
            return False

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _drain(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        return any(True for _ in conn.notifies(timeout=0))

    def _connection(self) -> psycopg.Connection[tuple[object, ...]] | None:
        if self._conn is not None and self._pid != os.getpid():
            self._conn = None  # a forked child must not share its parent's socket
        if self._conn is None and time.monotonic() >= self._broken_until:
            try:
                self._conn = _listen()
                self._pid = os.getpid()
            except psycopg.Error:
                logger.warning("could not LISTEN for due work; polling instead", exc_info=True)
                self._broken_until = time.monotonic() + _RETRY_SECONDS
        return self._conn


def _listen() -> psycopg.Connection[tuple[object, ...]]:
    """A new connection to the database Django uses (the test database under pytest), LISTENing."""
    config = connection.settings_dict
    params = {
        "dbname": config["NAME"],
        "user": config.get("USER") or None,
        "password": config.get("PASSWORD") or None,
        "host": config.get("HOST") or None,
        "port": config.get("PORT") or None,
    }
    options = config.get("OPTIONS") or {}
    params.update({k: options[k] for k in _LIBPQ_OPTIONS if k in options})
    conn = psycopg.connect(autocommit=True, **{k: v for k, v in params.items() if v is not None})
    conn.execute(queries.DUE_LISTEN)
    return conn


# Connection options of the database settings that the LISTEN connection takes over (a tagged
# application_name lets an operator, or the fault suite, find it beside the worker's other backend).
_LIBPQ_OPTIONS = (
    "application_name",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "connect_timeout",
    "target_session_attrs",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)

_listener: Listener | None = None


def listener() -> Listener:
    """This process's listener (created on first use)."""
    global _listener
    if _listener is None:
        _listener = Listener()
    return _listener
