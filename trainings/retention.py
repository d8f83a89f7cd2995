"""Retention for the trainings bookkeeping that would otherwise grow forever: pushes and reminder runs.
Each is deleted past its own age, in bounded batches, by an hourly task.

- `Push` rows whose reminder instant (`fire_at`) is older than TRAININGS_PUSH_RETENTION_DAYS (30): by then
  the occurrence has long finished (and been purged after REMINDERS_RETENTION_DAYS), so the row no longer
  guards against a second push for the same (reminder, player).
- `CoachPush` rows (the coaches' digests) past the same age: by then their trainings are long over.
- `ReminderRun` rows that ran more than TRAININGS_RUN_RETENTION_DAYS (90) ago (the training timeline then
  shows no outcome for those reminders).

The gateway's send records (delivery's `PushSend`) are kept: they are the pushes' history, and since the
finished-push keys (`DeliveredPush`) were folded into them they also say which pushes are finished.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Model, QuerySet
from django.utils import timezone

from trainings.models import CoachPush, Push, ReminderRun

logger = logging.getLogger(__name__)


def trainings_purge_old(*, now: datetime | None = None, max_batches: int = 100) -> dict[str, int]:
    """Delete what is past its retention; returns how many rows of each kind went."""
    now = now or timezone.now()
    days = timedelta(days=1)
    deleted = {
        "push": _purge(
            Push.objects.filter(fire_at__lt=now - settings.TRAININGS_PUSH_RETENTION_DAYS * days), max_batches
        ),
        "coach_push": _purge(
            CoachPush.objects.filter(fire_at__lt=now - settings.TRAININGS_PUSH_RETENTION_DAYS * days),
            max_batches,
        ),
        "reminder_run": _purge(
            ReminderRun.objects.filter(ran_at__lt=now - settings.TRAININGS_RUN_RETENTION_DAYS * days),
            max_batches,
        ),
    }
    if any(deleted.values()):
        logger.info("purged trainings bookkeeping: %s", deleted)
    return deleted


def _purge(rows: QuerySet[Model], max_batches: int) -> int:
    """One short DELETE per batch (found through the age index), so no purge holds a long transaction."""
    batch = settings.REMINDERS_PURGE_BATCH
    deleted = 0
    for _ in range(max_batches):
        ids = list(rows.values_list("pk", flat=True)[:batch])
        if not ids:
            break
        count, _ = rows.model._default_manager.filter(pk__in=ids).delete()
        deleted += count
    return deleted
