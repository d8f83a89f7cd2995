"""Run a transaction again when PostgreSQL aborted it for a lock conflict, and count each time.

A deadlock (SQLSTATE 40P01) or a serialization failure (40001) says nothing about the work: the database
picked this transaction as the victim of a conflict with another one, rolled it back, and the same work
succeeds once the other has committed. Any other error is raised at once. Only a transaction of its own
is retried: inside a caller's transaction the caller still holds its locks, and its transaction is the
one that must start over.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from prometheus_client import Counter

logger = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure

RETRIES = Counter(
    "db_transaction_retries",
    "Transactions PostgreSQL aborted for a deadlock or serialization failure, by operation and what "
    "followed: retried (run again), gave_up (the attempts were spent; the caller's own retry takes over).",
    ["operation", "outcome"],
)


def is_transient(exc: BaseException) -> bool:
    """A deadlock or serialization failure (Django's OperationalError wrapping psycopg's error)."""
    return any(getattr(error, "sqlstate", None) in TRANSIENT_SQLSTATES for error in (exc, exc.__cause__))


def transient_retry(
    work: Callable[[], T],
    *,
    operation: str,
    attempts: int = 5,
    first_delay: float = 0.05,
    using: str = DEFAULT_DB_ALIAS,
) -> T:
    """`work()` (which opens its own transaction), run again after a deadlock or serialization failure,
    up to `attempts` times with a jittered, doubling pause. The last failure is raised."""
    if connections[using].in_atomic_block:
        return work()  # the caller's transaction is the one to retry
    for attempt in range(1, attempts + 1):
        try:
            return work()
        except OperationalError as exc:
            if not is_transient(exc):
                raise
            if attempt == attempts:
                RETRIES.labels(operation, "gave_up").inc()
                raise
            RETRIES.labels(operation, "retried").inc()
            delay = first_delay * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
            logger.warning("%s: %s; attempt %d of %d in %.2f s", operation, exc, attempt + 1, attempts, delay)
            time.sleep(delay)
    raise AssertionError("not reached")  # the loop returns or raises
