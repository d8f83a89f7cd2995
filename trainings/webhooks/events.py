"""Turning the service's events into signed deliveries: one HTTP callback job of the engine per (event,
subscription), inserted in the transaction that records what happened.

The occurrence table is the outbox (docs/design.md): an answer and its events commit together or not at
all, and the engine then delivers them at least once, with its retries and backoff, its SSRF guard, the
same `webhook-id` on every attempt (the occurrence's idempotency key) and a Standard Webhooks signature
made at each attempt with that attempt's time (reminders/transports/http.py; the job's secret is the
subscription's `whsec_` secret). Nothing is written when no one subscribes, and who subscribes is read
at most once per TRAININGS_WEBHOOK_CACHE_SECONDS per process: an answer link is one statement, and a
second one per answer would cost as much as the answer itself.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from delivery.api import PushOutcome
from reminders.api import Callback, JobSpec, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType
from trainings.models import Player, Training, WebhookEvent, WebhookJob, WebhookSubscription

# Every delivery job's key starts so (reserved in trainings/handlers.py: no API caller takes one).
KEY_PREFIX = "trainings-webhook-"
# A platform's own id for a player, where the roster has it (read only if the field exists).
_PLAYER_FIELDS = ["id"] + [f.name for f in Player._meta.concrete_fields if f.name == "external_id"]


@dataclass(frozen=True)
class Subscriber:
    id: int
    url: str
    secret: str


_cache: dict[str, tuple[float, list[Subscriber]]] = {}
_cache_lock = threading.Lock()


def subscribers(event: str) -> list[Subscriber]:
    """The active subscriptions to `event`, as read at most TRAININGS_WEBHOOK_CACHE_SECONDS ago here."""
    ttl = settings.TRAININGS_WEBHOOK_CACHE_SECONDS
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(event)
        if cached is not None and now < cached[0]:
            return cached[1]
    rows = WebhookSubscription.objects.filter(active=True).values_list("id", "url", "secret", "events")
    found = [Subscriber(id_, url, secret) for id_, url, secret, events in rows if event in events]
    with _cache_lock:
        _cache[event] = (now + ttl, found)
    return found


def subscribers_forget() -> None:
    """A subscription was made, deleted or disabled in this process: read them again next time."""
    with _cache_lock:
        _cache.clear()


def events_publish(event: str, datas: Sequence[dict[str, Any]], to: Sequence[Subscriber]) -> int:
    """Schedule each event's delivery to each subscriber now, in the caller's transaction (a savepoint
    of it, or a transaction of its own). Returns how many deliveries."""
    if not datas or not to:
        return 0
    now = timezone.now()
    specs, links = [], []
    for data in datas:
        body = {"type": event, "timestamp": now.isoformat(), "data": data}
        for subscriber in to:
            callback = Callback(type=CallbackType.HTTP, target=subscriber.url, payload=body,
                                secret=subscriber.secret)  # fmt: skip
            specs.append(JobSpec(key=f"{KEY_PREFIX}{subscriber.id}-{uuid.uuid4().hex}", schedules=[now],
                                 callback=callback))  # fmt: skip
            links.append(WebhookJob(subscription_id=subscriber.id, event=event))
    if connection.in_atomic_block:  # the caller's transaction: no savepoint (two more round trips)
        jobs_insert(specs=specs, links=links)
    else:
        with transaction.atomic():
            jobs_insert(specs=specs, links=links)
    scan_kick_on_commit(now)
    return len(specs)


def answer_recorded(
    *,
    training: Training | Callable[[], Training],
    player_id: int,
    guardian_id: int | None,
    kind: str,
    answer: dict[str, Any],
    source: str | None,
    at: datetime | None,
) -> int:
    """`answer.recorded` for an answer just written (and changed) in the caller's transaction: a player's
    or guardian's through a link or the email page, or a coach's through the admin or the API. `training`
    as the writer read it (its id, title, start and team are sent), or how to read it when someone
    subscribes."""
    to = subscribers(WebhookEvent.ANSWER_RECORDED)
    if not to:
        return 0
    data = {
        "player": _players([player_id])[player_id],
        "guardian": {"id": guardian_id} if guardian_id is not None else None,
        "training": _training(training() if callable(training) else training),
        "kind": kind,
        "answer": answer,
        "source": source or None,
        "at": _iso(at),
    }
    return events_publish(WebhookEvent.ANSWER_RECORDED, [data], to)


def _training(training: Training) -> dict[str, Any]:
    return {"id": str(training.pk), "title": training.title, "start": _iso(training.start),
            "team": training.team_id}  # fmt: skip


def _players(ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Each player as an event names them: id and the platform's external_id (null until the roster has
    the field; one query for them all then, none before)."""
    ids = set(ids)
    found = {i: {"id": i, "external_id": None} for i in ids}
    if "external_id" in _PLAYER_FIELDS:
        for row in Player.objects.filter(pk__in=ids).values(*_PLAYER_FIELDS):
            found[row["id"]] = {"id": row["id"], "external_id": row["external_id"]}
    return found


def _iso(instant: datetime | None) -> str | None:
    return instant.isoformat() if instant is not None else None


def push_outcomes(outcomes: Sequence[PushOutcome]) -> int:
    """`push.outcome` for pushes the gateway just finished, in its transaction: one statement for them
    all, and none when no one subscribes (the storm's rounds pay a dictionary look-up)."""
    to = subscribers(WebhookEvent.PUSH_OUTCOME) if outcomes else []
    if not to:
        return 0
    players = _players(o.player for o in outcomes)
    datas = [
        {
            "push": o.push,
            "player": players[o.player],
            "guardian": {"id": o.guardian} if o.guardian is not None else None,
            "training": o.training,
            "kind": o.kind,
            "channel": o.channel,
            "outcome": o.outcome,
        }
        for o in outcomes
    ]
    return events_publish(WebhookEvent.PUSH_OUTCOME, datas, to)
