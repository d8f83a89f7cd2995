"""Celery entry points: thin wrappers that call one service each."""

from __future__ import annotations

import logging
import socket
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from reminders import health
from reminders.beat import PURGE_TASK, SCAN_TASK
from reminders.firing import occurrences_fire_for
from reminders.history import history_purge_old
from reminders.kick import scan_kick
from reminders.occurrences import occurrences_purge_old
from reminders.status import scan_minutes_purge, scan_record

logger = logging.getLogger(__name__)


@shared_task(name=SCAN_TASK, ignore_result=True)
def scan_due() -> dict[str, int]:
    totals, backlog = occurrences_fire_for(seconds=settings.REMINDERS_SCAN_SECONDS)
    health.scan_finished(worker=scan_due.request.hostname)
    # The status page's "last scan" and deliveries per minute (one upsert per run, reminders/status.py).
    scan_record(result=totals, worker=scan_due.request.hostname or socket.gethostname())
    if backlog:
        # A full last batch means more is due: drain it now instead of waiting for the next beat tick.
        # Best effort: with the broker down the work done stands, and beat's next tick goes on.
        scan_kick()
    if totals.claimed:
        logger.info(
            "scan: claimed=%d delivered=%d retried=%d failed=%d skipped=%d released=%d lost_lease=%d",
            totals.claimed, totals.delivered, totals.retried, totals.failed, totals.skipped,
            totals.released, totals.lost_lease,
        )  # fmt: skip
    return {"claimed": totals.claimed, "delivered": totals.delivered}


@shared_task(name=PURGE_TASK, ignore_result=True)
def purge_old() -> int:
    scan_minutes_purge(before=timezone.now() - timedelta(days=2))  # the status page reads the last hour
    history_purge_old()  # audit rows past REMINDERS_HISTORY_RETENTION_DAYS
    return occurrences_purge_old()
