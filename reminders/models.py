"""A job is a caller's unit (unique key, callback, priority); an occurrence is one instant it must fire.

The occurrence table is the scheduler's whole state: every future fire time is a row, the worker claims due
rows with a lease, delivers them outside the claiming transaction and marks them conditionally on its lease
token. Nothing about the future lives in the broker.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class CallbackType(models.TextChoices):
    RABBITMQ = "rabbitmq", "RabbitMQ queue"
    HTTP = "http", "HTTP URL"
    HANDLER = "handler", "In-process handler"


class OccurrenceStatus(models.TextChoices):
    SCHEDULED = "scheduled"
    CLAIMED = "claimed"
    DELIVERED = "delivered"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


TERMINAL_STATUSES = (
    OccurrenceStatus.DELIVERED,
    OccurrenceStatus.FAILED,
    OccurrenceStatus.CANCELLED,
    OccurrenceStatus.SKIPPED,
)
# Retention purges these; `failed` stays until an operator retries or deletes it.
PURGEABLE_STATUSES = (OccurrenceStatus.DELIVERED, OccurrenceStatus.CANCELLED, OccurrenceStatus.SKIPPED)

PRIORITY_MIN = 0
PRIORITY_MAX = 9
PRIORITY_DEFAULT = 5


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


class Job(models.Model):
    key = models.CharField(max_length=200, unique=True, help_text="Caller-chosen unique key.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reminder_jobs",
    )
    callback_type = models.CharField(max_length=10, choices=CallbackType.choices)
    target = models.CharField(max_length=2000, help_text="Queue name, URL or handler name.")
    payload = models.JSONField(default=dict, blank=True)
    http_secret = models.CharField(max_length=200, blank=True, help_text="HMAC key for HTTP callbacks.")
    priority = models.PositiveSmallIntegerField(default=PRIORITY_DEFAULT)
    deadline_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Skip an occurrence that is later than this when it is claimed."
    )
    version = models.PositiveIntegerField(default=1, help_text="Bumped on every update.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX), name="job_priority_range"
            ),
            models.CheckConstraint(
                condition=Q(callback_type__in=CallbackType.values), name="job_callback_type_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class Occurrence(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="occurrences", db_index=False)
    fire_at = models.DateTimeField(help_text="The instant this occurrence is for (never moved by retries).")
    next_attempt_at = models.DateTimeField(
        help_text="When the scan may next claim it (fire_at, then backoff)."
    )
    priority = models.PositiveSmallIntegerField(default=PRIORITY_DEFAULT, help_text="Copied from the job.")
    status = models.CharField(
        max_length=10, choices=OccurrenceStatus.choices, default=OccurrenceStatus.SCHEDULED
    )
    attempts = models.PositiveIntegerField(default=0)
    claimed_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True, help_text="Changes on every claim.")
    delivered_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    idempotency_key = models.CharField(max_length=255, unique=True, default=new_idempotency_key)
    job_version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The due scan: status='scheduled' AND priority=p AND next_attempt_at <= now ORDER BY
            # next_attempt_at, once per priority level (reminders/claiming.py). Future rows of other states
            # are not in it, and the range condition stops at `now`, so cost does not grow with future rows.
            models.Index(
                fields=["priority", "next_attempt_at"],
                condition=Q(status="scheduled"),
                name="occurrence_due_idx",
            ),
            # The lease reaper: status='claimed' AND claimed_until < now. Holds only in-flight rows.
            models.Index(
                fields=["claimed_until"], condition=Q(status="claimed"), name="occurrence_lease_idx"
            ),
            # Retention: status IN (delivered, cancelled, skipped) AND finished_at < cutoff.
            models.Index(
                fields=["finished_at"],
                condition=Q(status__in=["delivered", "cancelled", "skipped"]),
                name="occurrence_purge_idx",
            ),
            # A job's timeline (detail API, upsert, cancel).
            models.Index(fields=["job", "fire_at"], name="occurrence_job_fire_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=OccurrenceStatus.values), name="occurrence_status_valid"
            ),
            models.CheckConstraint(
                condition=~Q(status="claimed")
                | (Q(lease_token__isnull=False) & Q(claimed_until__isnull=False)),
                name="occurrence_claim_has_lease",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX),
                name="occurrence_priority_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}@{self.fire_at.isoformat()} ({self.status})"
