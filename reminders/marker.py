"""The marker thread: one per process, marking delivered chunks off the publishing thread, on a database
connection of its own, so a mark UPDATE does not delay the next instant's publish (reminders/firing.py)."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)


class Marker:
    """One thread per process that marks outcomes, in the order handed over, on its own connection."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], None], threading.Event] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def submit(self, job: Callable[[], None]) -> threading.Event:
        """Run `job` after the ones handed over before it; the event is set once it has run."""
        if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
            self._jobs = queue.Queue()
            self._thread = threading.Thread(target=self._run, name="reminders-marker", daemon=True)
            self._pid = os.getpid()
            self._thread.start()
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
                job()
            except Exception:
                logger.exception("the marker's job failed")
            finally:
                done.set()


def connect_ahead() -> None:
    """Open this thread's database connection before its first use needs it (best effort)."""
    try:
        connection.ensure_connection()
    except DatabaseError:
        logger.warning("could not connect ahead; the first query will try again", exc_info=True)


_marker = Marker()


def marker() -> Marker:
    return _marker
