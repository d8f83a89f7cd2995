"""Celery entry points for trainings: thin wrappers around one service each.

The services that enqueue these import this module at the top; it imports only what it calls
(trainings.scheduling), never them, so there is no cycle to hide.
"""

from __future__ import annotations

import uuid

from celery import shared_task

from trainings.analytics.summary import summaries_refresh
from trainings.held import held_pushes_overdue_check
from trainings.retention import trainings_purge_old
from trainings.scheduling import rule_reschedule_batch


@shared_task(name="trainings.tasks.rule_reschedule", ignore_result=True)
def rule_reschedule(rule_id: int, after: str | None = None) -> None:
    """One bounded batch per task run; a full batch enqueues the next one, so no run holds a worker long."""
    cursor = rule_reschedule_batch(rule_id=rule_id, after=uuid.UUID(after) if after else None)
    if cursor is not None:
        rule_reschedule.delay(rule_id, str(cursor))


@shared_task(name="trainings.tasks.purge_old", ignore_result=True)
def purge_old() -> dict[str, int]:
    """The hourly bookkeeping: first the held pushes past their release (released or skipped, counted),
    then the purge of what is past its retention."""
    held_pushes_overdue_check()
    return trainings_purge_old()


@shared_task(name="trainings.tasks.analytics_refresh", ignore_result=True)
def analytics_refresh() -> int:
    """Every few minutes (a beat row made by migration 0020): the analytics summaries up to now."""
    return summaries_refresh()
