"""A thread per process that runs jobs in the order handed over, on a database connection of its own.

The look-ahead scan uses two (reminders/engine/lookahead.py): the marker, which marks delivered chunks so a
mark
UPDATE does not delay the next instant's publish, and the carrier, which publishes what a scan still held
at its end while the next scan starts.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)


class ConnectionThread:
    """Jobs run one after another on a daemon thread, started on first use in each process (a forked
    child starts its own); its connection is kept between jobs and closed when it stops."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.Queue[tuple[Callable[[], None], threading.Event] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def ready(self) -> None:
        """Start the thread (and open its connection) if this process has none running."""
        if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
            self._jobs = queue.Queue()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._pid = os.getpid()
            self._thread.start()

    def submit(self, job: Callable[[], None]) -> threading.Event:
        """Run `job` after the ones handed over before it; the event is set once it has run."""
        self.ready()
        done = threading.Event()
        self._jobs.put((job, done))
        return done

    def stop(self, timeout: float) -> bool:
        """Finish the jobs handed over, end the thread and close its connection; False on timeout."""
        thread = self._thread
        if thread is None or not thread.is_alive() or self._pid != os.getpid():
            return True
        self._jobs.put(None)
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        connect_ahead()
        while True:
            item = self._jobs.get()
            if item is None:
                connection.close()
                return
            job, done = item
            try:
                connection.close_if_unusable_or_obsolete()
                job()
            except Exception:
                logger.exception("a job of the %s thread failed", self.name)
            finally:
                done.set()


def connect_ahead() -> None:
    """Open this thread's database connection before its first use needs it (best effort)."""
    try:
        connection.ensure_connection()
    except DatabaseError:
        logger.warning("could not connect ahead; the first query will try again", exc_info=True)


_marker = ConnectionThread("reminders-marker")


def marker() -> ConnectionThread:
    return _marker
