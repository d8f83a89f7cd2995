"""The beat rows the project needs, created by a migration (and re-creatable by `ensure_beat`).

Beat only kicks; the scan itself decides what is due. A kick expires after a few seconds so a stopped
worker does not find thousands of stale kicks queued when it comes back.
"""

from __future__ import annotations

from typing import Any

SCAN_TASK_NAME = "reminders: scan due occurrences"
SCAN_TASK = "reminders.tasks.scan_due"
PURGE_TASK_NAME = "reminders: purge old occurrences"
PURGE_TASK = "reminders.tasks.purge_old"


def ensure_periodic_tasks(interval_model: Any, periodic_task_model: Any) -> None:
    """Idempotently create or repair the scan (every second) and purge (hourly) periodic tasks.

    Takes the model classes so a migration can pass its historical models.
    """
    every_second, _ = interval_model.objects.get_or_create(every=1, period="seconds")
    hourly, _ = interval_model.objects.get_or_create(every=1, period="hours")
    periodic_task_model.objects.update_or_create(
        name=SCAN_TASK_NAME,
        defaults={"task": SCAN_TASK, "interval": every_second, "enabled": True, "expire_seconds": 5},
    )
    periodic_task_model.objects.update_or_create(
        name=PURGE_TASK_NAME,
        defaults={"task": PURGE_TASK, "interval": hourly, "enabled": True, "expire_seconds": 600},
    )
