"""Ask a worker to scan now: the scan task is sent by name, so no module needs the worker's code.

Writes call `scan_kick_on_commit` with the earliest instant they stored; the kicks go out only after the
transaction commits, and once per transaction however many rows or calls it made:
- on PostgreSQL, when that instant falls within the look-ahead, a NOTIFY wakes a scan that is waiting
  (reminders/engine/wakeup.py), so something due now is claimed within milliseconds;
- when it falls due before beat's next tick would find it, the scan task is sent, for a worker that is
  not running a scan at the moment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from reminders.beat import SCAN_TASK
from reminders.engine.dialect import wakes_on_notify
from reminders.engine.wakeup import notify_due

logger = logging.getLogger(__name__)

# A kick older than this is useless (beat has ticked since): it must not pile up behind a stopped worker.
KICK_EXPIRES_SECONDS = 30


def scan_kick() -> None:
    """Best effort: if the broker is down, beat's next tick does it."""
    try:
        current_app.send_task(SCAN_TASK, expires=KICK_EXPIRES_SECONDS)
    except Exception:
        logger.warning("could not kick the scan; beat will pick the work up", exc_info=True)


def lookahead_seconds() -> float:
    """How far ahead a scan claims and holds rows: REMINDERS_LOOKAHEAD_SECONDS, and 0 on SQLite (polls).

    At most a quarter of the lease, so a held row is published long before its lease nears its end.
    """
    if not wakes_on_notify():
        return 0.0
    return min(float(settings.REMINDERS_LOOKAHEAD_SECONDS), settings.REMINDERS_LEASE_SECONDS / 4)


def scan_kick_on_commit(earliest: datetime | None) -> None:
    """After commit: NOTIFY if `earliest` is due within the look-ahead, kick if within a scan's length."""
    if earliest is None:
        return
    now = timezone.now()
    if wakes_on_notify() and earliest <= now + timedelta(seconds=lookahead_seconds()):
        _on_commit_once(notify_due)
    if earliest <= now + timedelta(seconds=settings.REMINDERS_SCAN_SECONDS):
        _on_commit_once(scan_kick)


def _on_commit_once(func: Callable[[], None]) -> None:
    """Register `func` to run after commit unless this transaction already has it pending.

    A bulk write calls `scan_kick_on_commit` once per job it replaces; one notification and one kick per
    transaction is what the workers need. (If the registration kept was made in a savepoint that is later
    rolled back, the kick is lost with it: the next poll finds the work.)
    """
    pending = [entry[1] for entry in connection.run_on_commit]
    if connection.in_atomic_block and any(each is func for each in pending):
        return
    transaction.on_commit(func)
