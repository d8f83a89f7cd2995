"""Push rows to the push queue: the one place that publishes pushes and marks them sent."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.utils import timezone

from reminders import metrics
from reminders.models import CallbackType
from reminders.transports import Delivery, TransportError, get_transport
from trainings.models import Push, PushStatus


def pushes_publish(*, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
    """Publish the pending pushes of these occurrences in one AMQP transaction; mark the accepted ones sent.

    Returns a TransportError per occurrence (keyed by its id) that has a push the broker did not take.
    """
    by_key = {d.idempotency_key: d for d in deliveries}
    pending = list(
        Push.objects.filter(occurrence_key__in=by_key, status=PushStatus.PENDING)
        .select_related("rule")
        .order_by("pk")
    )
    if not pending:
        return {}
    messages = [
        Delivery(
            occurrence_id=push.pk,
            idempotency_key=push.key,
            job_key=by_key[push.occurrence_key].job_key,
            fire_at=push.fire_at,
            attempt=by_key[push.occurrence_key].attempt,
            target=settings.TRAININGS_PUSH_QUEUE,
            payload=push.message(),
        )
        for push in pending
    ]
    refused = get_transport(CallbackType.RABBITMQ).deliver(messages)
    accepted = [push.pk for push in pending if push.pk not in refused]
    Push.objects.filter(pk__in=accepted, status=PushStatus.PENDING).update(
        status=PushStatus.SENT, sent_at=timezone.now()
    )
    metrics.pushes_queued(push.kind for push in pending if push.pk not in refused)
    per_occurrence: dict[str, list[Push]] = {}
    for push in pending:
        per_occurrence.setdefault(push.occurrence_key, []).append(push)
    errors: dict[int, TransportError] = {}
    for key, pushes in per_occurrence.items():
        failed = [refused[push.pk] for push in pushes if push.pk in refused]
        if failed:
            errors[by_key[key].occurrence_id] = TransportError(
                f"{len(failed)} of {len(pushes)} pushes not published: {failed[0]}"
            )
    return errors
