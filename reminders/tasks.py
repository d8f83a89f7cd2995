"""Celery entry points: thin wrappers that call one service each."""

from __future__ import annotations

import gc
import logging
import socket
from datetime import timedelta
from typing import Any

from celery import shared_task, signals
from django.conf import settings
from django.utils import timezone

from common.history import history_purge_old
from common.idempotency import idempotency_purge_expired
from reminders.beat import PURGE_TASK, SCAN_TASK
from reminders.engine.connection_thread import marker
from reminders.engine.kick import scan_kick
from reminders.engine.lane import http_lane
from reminders.engine.lookahead import CARRY_SECONDS, carrier, occurrences_fire_for
from reminders.engine.occurrences import occurrences_purge_old
from reminders.engine.scan_result import ScanResult
from reminders.http.counts import request_counts_purge
from reminders.ops import health
from reminders.ops.figures import scan_minutes_purge, scan_record

logger = logging.getLogger(__name__)


@shared_task(name=SCAN_TASK, ignore_result=True)
def scan_due() -> dict[str, int]:
    _freeze_once()
    worker = scan_due.request.hostname or socket.gethostname()

    def carried(result: ScanResult) -> None:
        scan_record(result=result, worker=worker)  # from the carrier thread, once it has published

    totals, backlog = occurrences_fire_for(
        seconds=settings.REMINDERS_SCAN_SECONDS, carry=CARRY_SECONDS, carried=carried
    )
    totals.add(http_lane().take_result())  # the HTTP chunks the lane marked since the last scan
    health.scan_finished(worker=scan_due.request.hostname)
    # The status page's "last scan" and deliveries per minute (one upsert per run, reminders/ops/figures.py).
    scan_record(result=totals, worker=worker)
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


_frozen = False


def _freeze_once() -> None:
    """Move everything the worker process has loaded (Django, Celery, the app) out of the collector's sight.

    Otherwise every full collection goes through all of it again, and nothing is published meanwhile.
    """
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


@signals.worker_process_shutdown.connect
def _publish_carried_before_exit(**kwargs: Any) -> None:
    """A worker stopping waits for what its last scan handed to the carrier (at most a carry's length) and
    for the HTTP chunks out on its lane (one round of their timeouts), then for their marks."""
    carrier().stop(timeout=CARRY_SECONDS + 5.0)
    round_trip = settings.REMINDERS_HTTP_CONNECT_TIMEOUT + settings.REMINDERS_HTTP_READ_TIMEOUT
    http_lane().stop(timeout=round_trip + 5.0)
    marker().stop(timeout=5.0)


@shared_task(name=PURGE_TASK, ignore_result=True)
def purge_old() -> int:
    scan_minutes_purge(before=timezone.now() - timedelta(days=2))  # the status page reads the last hour
    history_purge_old()  # audit rows past REMINDERS_HISTORY_RETENTION_DAYS
    request_counts_purge()  # the limits' windows that ended
    idempotency_purge_expired()  # API callers' Idempotency-Keys past IDEMPOTENCY_KEY_TTL_HOURS
    return occurrences_purge_old()
