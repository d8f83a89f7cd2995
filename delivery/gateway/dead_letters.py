"""The push dead-letter queue's records: a push given up on (its devices without an outcome are `failed`,
the push finished by its `given_up` row) and a push an operator replays (its failures forgotten, so its
devices are tried again). `manage.py push_dead_letters` lists and replays the queue."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from delivery.channels.providers import PushMessage
from delivery.models import Device, PushSend, SendStatus

DEAD_LETTER_SCHEMA = "trainings.push-dead/1"


def push_dead_lettered(*, push: PushMessage, error: str, sends: dict[int, int]) -> None:
    """After the dead-letter queue has the push: its devices without an outcome are `failed` (with the
    requests each was sent, `sends`), and the push's row without a device says it is finished (`given_up`:
    a redelivery of the original is a duplicate)."""
    now = timezone.now()
    recorded = set(PushSend.objects.filter(push_key=push.idempotency_key).values_list("device_id", flat=True))
    owner = (
        Q(coach_id=push.coach)
        if push.coach is not None
        else Q(guardian_id=push.guardian)
        if push.guardian is not None
        else Q(player_id=push.player)
    )
    left = Device.objects.enabled().filter(owner).exclude(pk__in=[r for r in recorded if r])
    rows = [
        PushSend(push_key=push.idempotency_key, device=device, player_id=push.player,
                 guardian_id=push.guardian, coach_id=push.coach,
                 provider=device.provider, status=SendStatus.FAILED, error=f"dead-lettered: {error}"[:500],
                 attempts=sends.get(device.pk, 0), recorded_at=now)
        for device in left
    ]  # fmt: skip
    rows.append(PushSend(push_key=push.idempotency_key, device=None, player_id=push.player,
                         guardian_id=push.guardian, coach_id=push.coach, provider="",
                         status=SendStatus.GIVEN_UP, error=f"dead-lettered: {error}"[:500],
                         attempts=max(sends.values(), default=0), recorded_at=now))  # fmt: skip
    with transaction.atomic():  # a second dead-lettering of the push adds nothing (the unique keys)
        PushSend.objects.bulk_create(rows, ignore_conflicts=True)


def push_replay_forget(*, key: str) -> int:
    """Before a dead-lettered push is replayed: forget its failures and its push-level row (`given_up`) so
    its devices are tried again."""
    forgotten = PushSend.objects.filter(Q(status=SendStatus.FAILED) | Q(device__isnull=True), push_key=key)
    return forgotten.delete()[0]
