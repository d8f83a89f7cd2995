"""Making, removing and disabling a platform's subscriptions: the one place their rows are written.

Removing or disabling one cancels the deliveries still waiting for it (the engine's retries included),
so nothing more goes to a URL its owner took back or that has failed for a day.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from common.signing import secret_new
from reminders.api import occurrences_cancel
from reminders.models import Occurrence, OccurrenceStatus
from trainings.models import WebhookSubscription
from trainings.transitions import subscription_move
from trainings.webhooks.events import subscribers_forget


def subscription_create(*, owner: Any, url: str, events: Sequence[str]) -> WebhookSubscription:
    """A new subscription with its new secret (returned once, in the answer to this request)."""
    subscription = WebhookSubscription.objects.create(
        owner=owner, url=url, events=sorted(set(events)), secret=secret_new()
    )
    transaction.on_commit(subscribers_forget)
    return subscription


def subscription_delete(*, subscription: WebhookSubscription) -> None:
    """Remove it, and cancel its deliveries not yet made (in-flight ones complete)."""
    with transaction.atomic():
        _pending_cancel(subscription, reason="webhook subscription deleted")
        subscription.delete()
    transaction.on_commit(subscribers_forget)


def subscription_disable(*, subscription: WebhookSubscription, reason: str) -> None:
    with transaction.atomic():
        subscription_move(subscription, to="disabled", reason=reason)
        _pending_cancel(subscription, reason=f"webhook subscription disabled: {reason}"[:300])
    transaction.on_commit(subscribers_forget)


def _pending_cancel(subscription: WebhookSubscription, *, reason: str) -> int:
    return occurrences_cancel(
        Occurrence.objects.filter(job__webhook_job__subscription=subscription), reason=reason
    )


def subscriptions_failing_disable() -> list[int]:
    """Disable every active subscription none of whose deliveries succeeded for the last
    TRAININGS_WEBHOOK_DISABLE_AFTER_HOURS while some failed since: the first failure after the last
    success is that old. Returns the ids disabled. Run every 10 minutes (trainings.tasks)."""
    after = timedelta(hours=settings.TRAININGS_WEBHOOK_DISABLE_AFTER_HOURS)
    now = timezone.now()
    disabled = []
    for subscription in WebhookSubscription.objects.filter(active=True).order_by("pk"):
        failing_since = subscription_failing_since(subscription)
        if failing_since is not None and now - failing_since >= after:
            hours = settings.TRAININGS_WEBHOOK_DISABLE_AFTER_HOURS
            subscription_disable(
                subscription=subscription,
                reason=f"every delivery failed for {hours:g} h (since {failing_since:%Y-%m-%d %H:%M} UTC)",
            )
            disabled.append(subscription.pk)
    return disabled


def subscription_failing_since(subscription: WebhookSubscription) -> Any:
    """When its first delivery that failed after its last success was due, or None: not failing."""
    deliveries = Occurrence.objects.filter(job__webhook_job__subscription=subscription)
    last_ok = deliveries.filter(status=OccurrenceStatus.DELIVERED).aggregate(at=Max("delivered_at"))["at"]
    failed = deliveries.filter(attempts__gte=1).exclude(last_error="")
    failed = failed.exclude(status__in=[OccurrenceStatus.DELIVERED, OccurrenceStatus.CANCELLED])
    if last_ok is not None:
        failed = failed.filter(fire_at__gt=last_ok)
    return failed.aggregate(at=Min("fire_at"))["at"]


def subscription_enable(*, subscription: WebhookSubscription) -> None:
    """An operator's re-enabling after the endpoint is fixed: events from now on (none are replayed)."""
    subscription_move(subscription, to="enabled")
    transaction.on_commit(subscribers_forget)
