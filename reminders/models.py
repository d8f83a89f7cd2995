"""A job is a caller's unit (unique key, callback, priority); an occurrence is one instant it must fire.

The occurrence table is the scheduler's whole state: every future fire time is a row, the worker claims due
rows with a lease, delivers them outside the claiming transaction and marks them conditionally on its lease
token. Nothing about the future lives in the broker.
"""

from __future__ import annotations

import re
import uuid
from functools import cache
from zoneinfo import available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from common.history import AuditedHistory
from common.lookups import AnyOf


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


# Every move an occurrence may make; reminders/engine/occurrences.py makes them all and refuses any other.
# scheduled -> claimed (a claim), cancelled (cancel), skipped (its fire point was superseded), scheduled
#   (retry now); claimed -> delivered, failed, skipped (deadline, misfire), scheduled (a retry after a
#   backoff, a release, an expired lease); failed -> scheduled (retry now); cancelled -> scheduled (a
#   schedule's fire point materialised again under the same id). Made in SQL: OCCURRENCE_SQL_MOVES, named
#   statements of reminders/engine/occurrences.py.
OCCURRENCE_TRANSITIONS: dict[str, frozenset[str]] = {
    OccurrenceStatus.SCHEDULED: frozenset(
        {
            OccurrenceStatus.CLAIMED,
            OccurrenceStatus.CANCELLED,
            OccurrenceStatus.SKIPPED,
            OccurrenceStatus.SCHEDULED,
        }
    ),
    OccurrenceStatus.CLAIMED: frozenset(
        {
            OccurrenceStatus.DELIVERED,
            OccurrenceStatus.FAILED,
            OccurrenceStatus.SKIPPED,
            OccurrenceStatus.SCHEDULED,
        }
    ),
    OccurrenceStatus.FAILED: frozenset({OccurrenceStatus.SCHEDULED}),
    OccurrenceStatus.CANCELLED: frozenset({OccurrenceStatus.SCHEDULED}),
    OccurrenceStatus.DELIVERED: frozenset(),
    OccurrenceStatus.SKIPPED: frozenset(),
}
OCCURRENCE_SQL_MOVES = dict(CLAIM_DUE=("scheduled", "claimed"), INSERT_IDEMPOTENT=("cancelled", "scheduled"))

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
RETRYING = Q(status="scheduled", attempts__gt=0)  # scheduled again after a failed attempt or expired lease


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


class ThrottlePolicy(models.Model):
    """A named limit shared by every job and schedule that names it (seed 002).

    `max_per_second` is a token bucket refilled at that rate and holding at most `burst` tokens (default:
    a tenth of a second's worth, at least 1), so a backlog drains at the rate instead of in one burst. The
    bucket lives in `tokens`/`refilled_at`, changed only under SELECT ... FOR UPDATE in the transaction that
    claims (reminders/engine/throttling.py). `window_seconds` spreads the n events of one trigger evenly over
    that window (event i is due at fire time + i * window / n). Either or both may be set.
    """

    name = models.SlugField(max_length=100, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    max_per_second = models.FloatField(
        null=True, blank=True, help_text="Events per second, all users together."
    )
    burst = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most events at once (default rate/10)."
    )
    window_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Spread the n events of one trigger over this many seconds."
    )
    tokens = models.FloatField(default=0, help_text="Token bucket state.")
    refilled_at = models.DateTimeField(null=True, blank=True, help_text="Token bucket state.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = AuditedHistory(bookkeeping=["tokens", "refilled_at"])

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(max_per_second__isnull=False) | Q(window_seconds__isnull=False),
                name="throttle_has_a_limit",
            ),
            models.CheckConstraint(
                condition=Q(max_per_second__isnull=True) | Q(max_per_second__gt=0),
                name="throttle_rate_positive",
            ),
        ]
        verbose_name = "throttle policy"
        verbose_name_plural = "throttle policies"

    def __str__(self) -> str:
        return self.name

    @property
    def capacity(self) -> float:
        if self.burst:
            return float(self.burst)
        return max(1.0, (self.max_per_second or 0) / 10)


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
    batch_size = models.PositiveIntegerField(
        default=1, db_default=1, help_text="Events per instant (seed 002)."
    )
    throttle = models.ForeignKey(
        ThrottlePolicy, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = AuditedHistory(private=["http_secret"])

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX), name="job_priority_range"
            ),
            models.CheckConstraint(condition=Q(batch_size__gte=1), name="job_batch_size_positive"),
            models.CheckConstraint(
                condition=Q(callback_type__in=CallbackType.values), name="job_callback_type_valid"
            ),
        ]
        # The scheduler API (jobs, bulk, schedules, occurrences, throttle policies) is for integration
        # callers: a user without this permission (a player's, a guardian's, a coach's login) gets 403.
        permissions = [
            ("use_scheduler_api", "Can use the scheduler API (jobs, schedules, occurrences, throttles)")
        ]

    def __str__(self) -> str:
        return self.key


class OccurrenceQuerySet(models.QuerySet["Occurrence"]):
    def held_by(self, token: uuid.UUID) -> OccurrenceQuerySet:
        """The rows this lease still holds: claimed under `token` (a newer claim changed the token)."""
        return self.filter(lease_token=token, status=OccurrenceStatus.CLAIMED)


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
    batch_index = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Which of the n events of its instant."
    )
    # Copied from the job so the claim can tell throttled rows apart without a join.
    throttle = models.ForeignKey(
        ThrottlePolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OccurrenceQuerySet.as_manager()

    class Meta:
        indexes = [
            # The due scan: status='scheduled' AND throttle IS NULL AND priority=p AND next_attempt_at <= now
            # ORDER BY next_attempt_at, once per priority level (reminders/queries.py). Future rows
            # of other
            # states are not in it, and the range condition stops at `now`, so cost does not grow with future
            # rows. Throttled rows are not in it either, so a throttled backlog never slows unthrottled jobs.
            models.Index(
                fields=["priority", "next_attempt_at"],
                condition=Q(status="scheduled", throttle__isnull=True),
                name="occurrence_due_idx",
            ),
            # The same scan for one throttle policy (reminders/engine/throttling.py).
            models.Index(
                fields=["throttle", "priority", "next_attempt_at"],
                condition=Q(status="scheduled", throttle__isnull=False),
                name="occurrence_throttled_due_idx",
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
            # The status page (reminders/ops/figures.py): failures, status='failed' AND finished_at >= 24 h
            # ago (failed rows only: retention never purges them, operators retry or delete them); retrying.
            models.Index(fields=["finished_at"], condition=Q(status="failed"), name="occurrence_failed_idx"),
            models.Index(fields=["next_attempt_at"], condition=RETRYING, name="occurrence_retrying_idx"),
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


class MisfirePolicy(models.TextChoices):
    FIRE_ONCE = "fire_once", "Fire once for the missed runs, then continue"
    SKIP = "skip", "Skip to the next future fire"


class Schedule(models.Model):
    """A recurring timeline (seed 001) backed by a `Job` that holds its callback, priority, batch size and
    throttle, so its occurrences share the whole delivery path.

    Only the next fire point is materialised (`next_fire_at`, as `batch_size` occurrences). When one of
    them ends (delivered, skipped or failed), the fire after `next_fire_at` on the schedule's own timeline
    is materialised in the same transaction (reminders/schedules/lifecycle.py). The schedule's version is
    its job's.
    """

    # 190 so that the backing job's key, "schedule:<key>", fits Job.key.
    key = models.CharField(max_length=190, unique=True, help_text="Caller-chosen unique key.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reminder_schedules",
    )
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="schedule")
    expression = models.CharField(
        max_length=200, help_text="Crontab, @nickname, @every <duration>, @at <unix>."
    )
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA zone the crontab is read in.")
    anchor_at = models.DateTimeField(help_text="What @every counts from: the start, else when it was set.")
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    misfire_policy = models.CharField(
        max_length=10, choices=MisfirePolicy.choices, default=MisfirePolicy.FIRE_ONCE
    )
    paused = models.BooleanField(default=False)
    next_fire_at = models.DateTimeField(
        null=True, blank=True, help_text="The materialised fire point, if any."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = AuditedHistory(bookkeeping=["next_fire_at"])

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(misfire_policy__in=MisfirePolicy.values), name="schedule_misfire_policy_valid"
            ),
            models.CheckConstraint(
                condition=Q(start_at__isnull=True) | Q(end_at__isnull=True) | Q(end_at__gt=F("start_at")),
                name="schedule_end_after_start",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def version(self) -> int:
        return self.job.version


@cache
def _time_zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def validate_time_zone_name(value: str) -> None:
    if value not in _time_zone_names():
        raise ValidationError(f"{value!r} is not an IANA time zone name (e.g. Europe/Paris).")


# What a queue grant may hold: a queue name's characters, with `*` for any run of them.
QUEUE_GRANT_PATTERN = r"[A-Za-z0-9*][A-Za-z0-9._:*-]{0,254}"


def validate_queue_grant_pattern(value: str) -> None:
    if not re.fullmatch(QUEUE_GRANT_PATTERN, value):
        raise ValidationError(
            "use a queue name's letters, digits, '.', '_', ':' or '-', and '*' for any run."
        )


class QueueGrant(models.Model):
    """A queue-name pattern one API caller may publish `rabbitmq` callbacks to (`*`: any run of characters).

    A caller publishes only to queues one of its grants matches, and never to the service's own
    (reminders/transports/queue_access.py), whatever its grants say: those are refused to every caller.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="queue_grants")
    pattern = models.CharField(
        max_length=255,
        validators=[validate_queue_grant_pattern],
        help_text="A queue name, or a pattern with '*' for any run of characters (e.g. billing.*).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "pattern"], name="queue_grant_unique")]

    def __str__(self) -> str:
        return f"{self.user}: {self.pattern}"


class UserPreference(models.Model):
    """A person's admin settings: the zone their times are shown and typed in (default UTC).

    The middleware (reminders/admin/middleware.py) activates it for each request; a training's own page uses
    the training's zone instead, since that is the zone its coach and players think in.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reminders_preference"
    )
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone_name])

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone}"


class ScanMinute(models.Model):
    """What the scans did in one UTC minute, added to by every scan run with one upsert.

    The status page's deliveries-per-minute chart and "last scan" read the last 60 of these rows (primary
    key range) instead of counting a million delivered occurrences an hour.
    """

    minute = models.DateTimeField(primary_key=True)
    scans = models.PositiveIntegerField(default=0)
    claimed = models.PositiveIntegerField(default=0)
    delivered = models.PositiveIntegerField(default=0)
    retried = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    last_scan_at = models.DateTimeField()
    last_worker = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M}: {self.delivered} delivered"


class RequestCount(models.Model):
    """One limit's count of one caller's requests in its current window: (scope, who) -> hits since when.

    Every limit of the site (per address, per API token, per answer or unsubscribe link) counts here with
    one upsert per request (reminders/http/counts.py), so every process and host shares one count and no
    count is ever pushed out by others'. A window starts with the first request after the last one ended;
    the hourly purge deletes rows whose window ended.
    """

    pk = models.CompositePrimaryKey("scope", "ident")
    scope = models.CharField(max_length=16)
    # An address, or a digest of the credential counted (a token or a link is never stored as it is).
    ident = models.CharField(max_length=64)
    window_start = models.BigIntegerField()  # unix milliseconds
    expires = models.BigIntegerField()  # unix milliseconds: the window's end
    ceiling = models.PositiveIntegerField()  # the limit the hits are counted against (its rate's n)
    hits = models.PositiveIntegerField()

    class Meta:
        indexes = [
            # The clean-up of ended windows (queries.REQUEST_COUNTS_PURGE: expires < now).
            models.Index(fields=["expires"], name="requestcount_expires_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.ident}: {self.hits} since {self.window_start}"


# Batch marks and the dispatcher's job lookup filter by `id__any=[...]` (common/lookups.py).
Occurrence._meta.get_field("id").register_lookup(AnyOf)
Job._meta.get_field("id").register_lookup(AnyOf)


class WorkerHeartbeat(models.Model):
    """When each worker last finished a due scan: what `/health/ready` and the last-scan metric read.

    One row per Celery worker node (its nodename, shared by its prefork children), written by the scan task
    at most once a second per process with the database's clock, so hosts with skewed clocks agree.
    """

    worker = models.CharField(max_length=255, primary_key=True)
    scan_finished_at = models.DateTimeField()

    class Meta:
        indexes = [
            # Readiness: the newest scan_finished_at (ORDER BY scan_finished_at DESC LIMIT 1).
            models.Index(fields=["-scan_finished_at"], name="heartbeat_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.worker} @ {self.scan_finished_at.isoformat()}"
