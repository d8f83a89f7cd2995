"""A platform's subscriptions to the service's events (trainings/webhooks/), and the engine job that
carries each event to each subscriber.

A subscription belongs to the integration caller that made it; its secret signs every delivery (Standard
Webhooks) and is shown once, in the answer to its creation. One `WebhookJob` per (subscription, event)
links the event's HTTP callback job of the engine to its subscription: what the failing check reads, and
what the engine's admin pages name in words.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from reminders.models import Job


class WebhookEvent(models.TextChoices):
    ANSWER_RECORDED = "answer.recorded", "an answer was recorded"
    PUSH_OUTCOME = "push.outcome", "a push reached its final outcome"


class WebhookSubscription(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_subscriptions"
    )
    url = models.URLField(max_length=2000)
    events = models.JSONField(help_text="The event types sent to this URL.")
    # Standard Webhooks: "whsec_" + base64 of 32 random bytes. The engine job of each delivery holds it
    # in its private `http_secret` (never in its payload, history or logs).
    secret = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)
    active = models.BooleanField(default=True)
    # When and why it was disabled (a day of failed deliveries): trainings/webhooks/subscriptions.py.
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        indexes = [models.Index(fields=["active"], name="webhook_active_idx")]

    def __str__(self) -> str:
        return self.url


class WebhookJob(models.Model):
    """The engine job (one HTTP callback, one occurrence) delivering one event to one subscription."""

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="jobs")
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="webhook_job")
    event = models.CharField(max_length=40, choices=WebhookEvent.choices)

    def __str__(self) -> str:
        return f"{self.event} to {self.subscription_id}"
