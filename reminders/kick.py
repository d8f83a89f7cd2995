"""Ask a worker to scan now: the scan task is sent by name, so no module needs the worker's code.

Writes call `scan_kick_on_commit` with the earliest instant they stored; the kick goes out only after the
transaction commits and only when that instant falls due before beat's next tick would find it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders.beat import SCAN_TASK

logger = logging.getLogger(__name__)

# A kick older than this is useless (beat has ticked since): it must not pile up behind a stopped worker.
KICK_EXPIRES_SECONDS = 30


def scan_kick() -> None:
    """Best effort: if the broker is down, beat's next tick does it."""
    try:
        current_app.send_task(SCAN_TASK, expires=KICK_EXPIRES_SECONDS)
    except Exception:
        logger.warning("could not kick the scan; beat will pick the work up", exc_info=True)


def scan_kick_on_commit(earliest: datetime | None) -> None:
    """Kick after commit if `earliest` is due within a scan's length from now."""
    if earliest is not None and earliest <= timezone.now() + timedelta(
        seconds=settings.REMINDERS_SCAN_SECONDS
    ):
        transaction.on_commit(scan_kick)
