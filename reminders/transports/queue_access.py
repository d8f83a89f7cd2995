"""Who may publish a `rabbitmq` callback to which queue.

An API caller publishes only to queues one of its `QueueGrant`s matches, and no caller, staff and
superusers included, to the service's own queues: Celery's (its task queues, where the scan kicks go, and
its control and event queues), and every queue an app declares for itself (`queues_reserve`: the push
queue and its dead letters). A message there would be read as the service's own: a push to any player, a
task for the worker. `service_queues()` reads their names from the settings on every call, so a queue
renamed by configuration stays refused under its new name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from celery import current_app
from django.conf import settings

from reminders.models import QueueGrant

# Celery's queues that no setting names: each worker's remote-control mailbox (`<node>.celery.pidbox`,
# replies `<id>.reply.celery.pidbox`) and the event receivers (`celeryev.<id>`). A message in a worker's
# mailbox is a control command (shutdown, pool_shrink ...).
_CELERY_PATTERNS = (r".*\.pidbox", r"celeryev\..*")

_reserved: list[tuple[Callable[[], Iterable[str]], str]] = []


def queues_reserve(names: Callable[[], Iterable[str]], *, owner: str) -> None:
    """Reserve the queues an app declares for itself; `names` is called (reading settings) at each check."""
    if all(existing is not names for existing, _ in _reserved):
        _reserved.append((names, owner))


def service_queues() -> dict[str, str]:
    """Every queue name of the service itself, with whose it is: Celery's and the apps' reservations."""
    found: dict[str, str] = {}
    conf = current_app.conf
    celery_names = [settings.CELERY_TASK_DEFAULT_QUEUE, conf.task_default_queue, *current_app.amqp.queues]
    celery_names += [_route_queue(route) for route in _routes(conf.task_routes)]
    for name in celery_names:
        if name:
            found.setdefault(str(name), "Celery's task queue, where the scan kicks go")
    for names, owner in _reserved:
        for name in names():
            found.setdefault(name, owner)
    return found


def service_queue_owner(queue: str, service: dict[str, str] | None = None) -> str | None:
    """Whose queue `queue` is when it is one of the service's own (`service`: `service_queues()`, read
    once by a caller that checks many), else None."""
    owner = (service_queues() if service is None else service).get(queue)
    if owner is None and any(re.fullmatch(pattern, queue) for pattern in _CELERY_PATTERNS):
        owner = "a Celery worker's control or event queue"
    return owner


class QueueAccess:
    """One caller's right to publish, checked per queue; the grants and the service's queues are read once
    (a bulk request checks thousands of jobs)."""

    def __init__(self, caller: Any) -> None:
        self.caller = caller if getattr(caller, "pk", None) else None
        self._service: dict[str, str] | None = None
        self._grants: list[re.Pattern[str]] | None = None

    def refusal(self, queue: str) -> str | None:
        """Why the caller may not publish to `queue`, or None when it may."""
        if self._service is None:
            self._service = service_queues()
        owner = service_queue_owner(queue, self._service)
        if owner is not None:
            return f"{queue!r} is this service's own queue ({owner}); no caller may publish to it."
        if self.caller is None:
            return "no caller whose queue grants could allow it."
        if self._grants is None:
            patterns = QueueGrant.objects.filter(user=self.caller).values_list("pattern", flat=True)
            self._grants = [_grant_regex(pattern) for pattern in patterns]
        if not any(grant.fullmatch(queue) for grant in self._grants):
            return (
                f"you have no queue grant matching {queue!r}: an operator grants each caller the queue-name "
                "patterns it may publish to (admin: Reminders, queue grants)."
            )
        return None


@lru_cache(maxsize=1024)
def _grant_regex(pattern: str) -> re.Pattern[str]:
    """A grant's pattern as a regular expression: `*` matches any run of characters, the rest literally."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def _routes(routes: Any) -> list[Any]:
    if not routes:
        return []
    if isinstance(routes, dict):
        return list(routes.values())
    if isinstance(routes, list | tuple):
        return [value for route in routes if isinstance(route, dict) for value in route.values()]
    return []


def _route_queue(route: Any) -> str | None:
    if isinstance(route, dict):
        queue = route.get("queue")
        return getattr(queue, "name", queue)
    return None
