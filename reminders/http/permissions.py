"""Who may call the scheduler API: integration callers holding `reminders.use_scheduler_api`.

Every signed-in account used to schedule anything (a player's or a guardian's app token included); the
jobs, bulk, schedules, occurrences and throttle-policy routes now answer 403 to any caller without the
permission (anonymous callers still 401). Which queues a permitted caller may publish to is its queue
grants' business (reminders/transports/queue_access.py).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request

from reminders.transports.queue_access import QueueAccess

SCHEDULER_PERMISSION = "reminders.use_scheduler_api"


class SchedulerCaller(BasePermission):
    message = f"the scheduler API is for integration callers holding the {SCHEDULER_PERMISSION} permission."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.has_perm(SCHEDULER_PERMISSION))


# IsAuthenticated first: an anonymous caller is told to authenticate (401), not refused (403).
SCHEDULER_PERMISSIONS = [IsAuthenticated, SchedulerCaller]


def caller_context(request: Request) -> dict[str, Any]:
    """What the input serializers check a callback against: the caller's queue access."""
    return {"request": request, "queue_access": QueueAccess(request.user)}
