"""The family's gather window: a guardian's reminders of one minute that fire in different chunks (another
worker, a later claim) still go out as one push (reminding/family.py merges what one publish carries).

At fire time, a guardian's pending push whose guardian has another player with a reminder occurrence due
in the same minute outside this chunk (scheduled, claimed or already delivered) is held, the reason
`GATHERED`, until the latest of those instants plus TRAININGS_FAMILY_GATHER_SECONDS; one engine job per
guardian and minute (`trainings-family-release-<guardian>-<minute>`) releases every push gathered for them
then, each decided again as a held push is (trainings/reminding/held.py: answered meanwhile, withdrawn), and
publishes them in one go, so they become one push. Every fire of that minute computes the same instant
from the same occurrences.

Limits (docs/escalation.md): an occurrence of the minute delivered after the release (a backlog longer
than the window) goes alone; another player's occurrence counts whether or not that player still owes an
answer (the push then waits the window for nothing); pushes held for quiet hours or critical are not
gathered (two trainings' pushes released at the end of a guardian's quiet hours may come as two); the
guardians' other reminders are looked up once per chunk (one query) and only when a chunk has pushes to
guardians of two or more players.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from reminders.api import Callback, Delivery, job_upsert, scan_kick_on_commit
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from trainings.models import Guardianship, Push, PushStatus, Reminds
from trainings.planning import kinds
from trainings.reminding.daily_cap import daily_cap_apply
from trainings.reminding.held import GATHERED, gathered, held_pushes_release
from trainings.reminding.publishing import pushes_publish

FAMILY_RELEASE_HANDLER = "trainings.family_release"
KEY_PREFIX = "trainings-family-release-"
_DUE = (OccurrenceStatus.SCHEDULED, OccurrenceStatus.CLAIMED, OccurrenceStatus.DELIVERED)


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def reach_apply(firings: Sequence[Any]) -> None:
    """What a fired chunk's pushes become before they are recorded: the daily cap (reminding/daily_cap.py),
    then the family's gather window."""
    daily_cap_apply(firings)
    family_gather(firings)


def family_gather(firings: Sequence[Any]) -> int:
    """Hold the chunk's pushes to guardians who have another player's reminder due in the same minute in
    another chunk, and schedule their family's release (its own transaction, before the pushes are
    recorded: a release that finds nothing is harmless). Returns how many were held."""
    candidates = [
        (f, i, push)
        for f in firings
        if f.training is not None and not f.critical
        for i, push in enumerate(f.pushes)
        if push.guardian_id is not None and push.status == PushStatus.PENDING
    ]
    if not candidates:
        return 0
    guardians = {push.guardian_id for _, _, push in candidates}
    wards: dict[int, set[int]] = {}
    for guardian_id, player_id in Guardianship.objects.filter(guardian_id__in=guardians).values_list(
        "guardian_id", "player_id"
    ):
        wards.setdefault(guardian_id, set()).add(player_id)
    families = {g for g, players in wards.items() if len(players) > 1}
    candidates = [c for c in candidates if c[2].guardian_id in families]
    if not candidates:
        return 0
    minutes = {_minute(push.fire_at) for _, _, push in candidates}
    here = {f.delivery.occurrence_id for f in firings}
    players = {p for g in families for p in wards[g]}
    rows = (
        Occurrence.objects.filter(
            fire_at__gte=min(minutes),
            fire_at__lt=max(minutes) + timedelta(minutes=1),
            status__in=_DUE,
            job__training_job__rule__kind__in=[code for code, _ in kinds.rule_choices()],
            job__training_job__training__team__reminds__in=[Reminds.GUARDIANS, Reminds.BOTH],
            job__training_job__training__invitations__player_id__in=players,
        )
        .exclude(pk__in=here)
        .values_list("fire_at", "job__training_job__training__invitations__player_id")
    )
    elsewhere: dict[tuple[int, datetime], datetime] = {}  # (player, minute) -> latest instant there
    for fire_at, player_id in rows:
        key = (player_id, _minute(fire_at))
        elsewhere[key] = max(fire_at, elsewhere.get(key, fire_at))
    window = timedelta(seconds=settings.TRAININGS_FAMILY_GATHER_SECONDS)
    now, held, releases = timezone.now(), 0, {}
    for f, i, push in candidates:
        minute = _minute(push.fire_at)
        others = [elsewhere[p, minute] for p in wards[push.guardian_id] if (p, minute) in elsewhere]
        if not others:
            continue
        mine = [c[2].fire_at for c in candidates if c[2].guardian_id == push.guardian_id]
        release_at = max(*others, *(at for at in mine if _minute(at) == minute)) + window
        if release_at <= now:  # the others' window is over: theirs went already
            continue
        f.pushes[i] = push._replace(
            status=str(PushStatus.HELD), release_at=release_at,
            status_reason=f"{GATHERED}, until {release_at:%H:%M:%S} UTC",
        )  # fmt: skip
        releases[push.guardian_id, minute] = release_at
        held += 1
    with transaction.atomic():
        for (guardian_id, minute), release_at in sorted(releases.items()):
            job_upsert(
                key=f"{KEY_PREFIX}{guardian_id}-{int(minute.timestamp()) // 60}",
                schedules=[release_at],
                callback=Callback(
                    type=CallbackType.HANDLER,
                    target=FAMILY_RELEASE_HANDLER,
                    payload={"guardian": guardian_id},
                ),
                priority=settings.TRAININGS_REMINDER_PRIORITY,
                deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
            )
        if releases:
            scan_kick_on_commit(min(releases.values()))
    return held


def family_release(*, delivery: Delivery) -> int:
    """The family's window is over: release the guardian's gathered pushes now due, every training's (each
    decided again as held pushes are), and publish them together: one push. Returns how many went."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    guardian_id = payload.get("guardian")
    if not isinstance(guardian_id, int):
        return 0
    at = max(timezone.now(), delivery.fire_at)
    only = gathered() & Q(guardian_id=guardian_id)
    waiting = Push.objects.filter(only, status=PushStatus.HELD, release_at__lte=at)
    trainings: list[uuid.UUID] = sorted(set(waiting.values_list("training_id", flat=True)))
    keys: list[str] = []
    released = 0
    for training_id in trainings:
        counts = held_pushes_release(
            training_id=training_id, at=at, delivery=delivery,
            only=only, published=keys,
        )  # fmt: skip
        released += counts["released"]
    if keys:
        by = delivery
        errors = pushes_publish(
            deliveries=[Delivery(by.occurrence_id, key, by.job_key, by.fire_at, by.attempt, "", None)
                        for key in dict.fromkeys(keys)]
        )  # fmt: skip
        if errors:
            raise next(iter(errors.values()))
    return released
