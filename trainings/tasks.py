"""Celery entry points for trainings: thin wrappers around one service each.

The services that enqueue these import this module at the top; it imports only what it calls
(trainings.planning.scheduling), never them, so there is no cycle to hide.
"""

from __future__ import annotations

import uuid

from celery import Task, shared_task
from django.db import OperationalError

from common.db_retry import is_transient
from trainings.analytics.summary import summaries_refresh
from trainings.planning.scheduling import rule_reschedule_batch_ids, rule_reschedule_trainings
from trainings.reminding.held import held_pushes_overdue_check
from trainings.retention import trainings_purge_old
from trainings.webhooks.subscriptions import subscriptions_failing_disable


@shared_task(bind=True, name="trainings.tasks.rule_reschedule", ignore_result=True, max_retries=8)
def rule_reschedule(
    self: Task, rule_id: int, after: str | None = None, training_ids: list[str] | None = None
) -> None:
    """One bounded batch per task run; a full batch enqueues the next one, so no run holds a worker long.

    The next batch is enqueued before this one is written, so a batch that fails never stops the ones
    after it. A batch still refused for a lock conflict after its own attempts runs again later, alone
    (`training_ids`, no chain): the task owns that retry.
    """
    if training_ids is None:
        batch = rule_reschedule_batch_ids(rule_id=rule_id, after=uuid.UUID(after) if after else None)
        if batch.cursor is not None:
            rule_reschedule.delay(rule_id, str(batch.cursor))
        ids = batch.training_ids
    else:
        ids = [uuid.UUID(pk) for pk in training_ids]
    try:
        rule_reschedule_trainings(rule_id=rule_id, training_ids=ids)
    except OperationalError as exc:
        if not is_transient(exc):
            raise
        countdown = min(60, 2**self.request.retries)
        raise self.retry(
            args=(rule_id,), kwargs={"training_ids": [str(pk) for pk in ids]}, countdown=countdown, exc=exc
        ) from exc


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


@shared_task(name="trainings.tasks.webhooks_check", ignore_result=True)
def webhooks_check() -> list[int]:
    """Every 10 minutes (a beat row made by migration 0039): disable the subscriptions failing for a day."""
    return subscriptions_failing_disable()
