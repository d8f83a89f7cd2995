"""The HTTP lane: a worker's HTTP chunks are delivered on threads of their own, beside its scan.

An HTTP chunk waits for its slowest endpoint (up to REMINDERS_HTTP_READ_TIMEOUT). Delivered inside the
scan, a hanging endpoint held every row due behind its rows, other queues' included
(docs/operations/faults.md, the retry storm). Here the scan hands the chunk over and goes on; the chunk's
outcome is marked on the marker thread (reminders/engine/connection_thread.py) under the chunk's lease.
At most REMINDERS_HTTP_LANE_CHUNKS chunks are out at once per process; the scan hands back the rows of a
chunk that finds the lane full, due again `DEFER_SECONDS` later (reminders/engine/dispatch.py), so a
slow endpoint costs its own rows time, not everyone's, and no row waits in a queue while its lease runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from reminders.engine.scan_result import ScanResult

logger = logging.getLogger(__name__)

# How long the rows of a chunk that found the lane full wait before they are claimable again: about one
# fast endpoint's round of a chunk, so they come back soon, and behind the rows due now.
DEFER_SECONDS = 1.0


class Lane:
    """Chunks out on this process's lane threads, at most `REMINDERS_HTTP_LANE_CHUNKS` at once.

    `result` counts what the lane's marks did; the scan task adds it to the next scan's totals.
    Started on first use in each process (a forked worker child starts its own).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.result = ScanResult()
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0  # the executor's size: the capacity when it was made
        self._pid = 0
        self._busy = 0
        self._idle = threading.Condition()

    @staticmethod
    def capacity() -> int:
        return int(settings.REMINDERS_HTTP_LANE_CHUNKS)

    def take(self) -> bool:
        """Reserve a place for one chunk; False when the lane is full (or off)."""
        capacity = self.capacity()
        with self._idle:
            if self._pid != os.getpid():  # a forked child: the parent's threads are not here
                self._executor, self._pid, self._busy, self.result = None, os.getpid(), 0, ScanResult()
            if self._busy >= capacity:
                return False
            self._busy += 1
            if self._executor is None or self._threads < capacity:  # (a larger capacity: never queue)
                if self._executor is not None:
                    self._executor.shutdown(wait=False)  # its chunks out finish on its threads
                self._executor = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix=self.name)
                self._threads = capacity
            return True

    def run(self, job: Callable[[], None]) -> None:
        """Run `job` on a lane thread, in the place `take` reserved; the place is free once it returns."""
        assert self._executor is not None, "take() reserves the place first"
        try:
            self._executor.submit(self._job, job)
        except RuntimeError:  # shut down meanwhile (the process is exiting): run it here
            self._job(job)

    def add(self, result: ScanResult) -> None:
        """Count what one chunk's marks did (from the marker thread)."""
        with self._idle:
            self.result.add(result)

    def take_result(self) -> ScanResult:
        """What the lane's marks did since the last call (for the scan task's totals)."""
        with self._idle:
            result, self.result = self.result, ScanResult()
        return result

    def stop(self, timeout: float) -> bool:
        """Wait up to `timeout` for the chunks out to come back; False if some are still out."""
        with self._idle:
            if self._pid != os.getpid():
                return True
            done = self._idle.wait_for(lambda: self._busy == 0, timeout)
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=done)
        return done

    def _job(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception:
            logger.exception("a chunk of the %s lane failed; its lease covers its rows", self.name)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()


_http = Lane("reminders-http-lane")


def http_lane() -> Lane:
    return _http
