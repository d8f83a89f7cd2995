"""The platform's webhook subscriptions in the admin, for operators: whose, where, which events, and
whether each is active, failing (since when) or disabled (why). An operator may re-enable a disabled
one (Action) or delete one; subscriptions are made through the API, which shows their secret once.

The engine's admin pages name each delivery job "Webhook answer.recorded → https://…" (`job_labels`).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from reminders.api import job_describer_register
from trainings.admin.operators import _OperatorsOnly
from trainings.models import WebhookJob, WebhookSubscription
from trainings.webhooks.subscriptions import (
    subscription_delete,
    subscription_enable,
    subscription_failing_since,
)


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(_OperatorsOnly, admin.ModelAdmin):
    list_display = ["url", "owner", "events_shown", "state", "created_at"]
    list_filter = ["active"]
    list_select_related = ["owner"]
    fields = ["url", "owner", "events_shown", "state", "created_at", "disabled_at", "disabled_reason"]
    readonly_fields = fields  # type: ignore[assignment]
    actions = ["enable"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # through the API, whose answer holds the secret

    @admin.display(description="events")
    def events_shown(self, subscription: WebhookSubscription) -> str:
        return ", ".join(subscription.events)

    @admin.display(description="status")
    def state(self, subscription: WebhookSubscription) -> str:
        if not subscription.active:
            return f"disabled: {subscription.disabled_reason}" if subscription.disabled_reason else "disabled"
        since = subscription_failing_since(subscription)
        return f"failing since {since:%Y-%m-%d %H:%M} UTC" if since is not None else "active"

    @admin.action(description="Enable the selected subscriptions again")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset.filter(active=False):
            subscription_enable(subscription=subscription)

    def delete_model(self, request: HttpRequest, obj: WebhookSubscription) -> None:
        subscription_delete(subscription=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            subscription_delete(subscription=subscription)


def _webhook_jobs_described(job_ids: list[int]) -> dict[int, str]:
    """The engine admin's names for event deliveries: "Webhook answer.recorded → https://…"."""
    links = WebhookJob.objects.filter(job_id__in=job_ids).select_related("subscription")
    return {link.job_id: f"Webhook {link.event} → {link.subscription.url}" for link in links}


job_describer_register(_webhook_jobs_described)
