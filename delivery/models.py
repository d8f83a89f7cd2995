"""Delivery's tables: devices and what the push gateway did with each push on each of them (the send
records, which also say which pushes are finished; the per-minute counts; the gateway's heartbeat).

Moved here from the trainings app with their rows (delivery/migrations/0001_tables_from_trainings.py renames
the tables); only the gateway and device hygiene (delivery/devices.py) write them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from delivery.channels.registry import (
    PLATFORMS,
    address_channels,
    device_platform_choices,
    device_provider_choices,
)


def channel_constraints() -> list[models.CheckConstraint]:
    """The device checks the channel table (delivery/channels/registry.py) makes: the platforms and providers
    a device may have, and a channel whose addresses live on some platforms only (APNs: Apple's) refuses a
    device elsewhere. A new channel changes them: `manage.py makemigrations` writes that migration."""
    platforms = [value for value, _ in device_platform_choices()]
    providers = [value for value, _ in device_provider_choices()]
    return [
        models.CheckConstraint(condition=Q(platform__in=platforms), name="device_platform_valid"),
        models.CheckConstraint(condition=Q(provider__in=providers), name="device_provider_valid"),
        *(
            models.CheckConstraint(
                condition=~Q(provider=c.name) | Q(platform__in=[p for p in PLATFORMS if p in c.platforms]),
                name=f"device_{c.name}_platforms",
            )
            for c in address_channels()
            if not set(platforms) <= set(c.platforms)
        ),
    ]


class DeviceQuerySet(models.QuerySet["Device"]):
    def enabled(self) -> DeviceQuerySet:
        return self.filter(disabled_at__isnull=True)


class Device(models.Model):
    """One app install that can receive pushes. A token the provider calls dead is disabled, never deleted,
    so the admin can say why a player stopped getting reminders; registering it again re-enables it."""

    # The person it reaches: a player, or a guardian (trainings/models/guardians.py); exactly one.
    player = models.ForeignKey(
        "trainings.Player",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="devices",
        verbose_name=_("player"),
    )
    guardian = models.ForeignKey(
        "trainings.Guardian",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="devices",
        verbose_name=_("guardian"),
    )
    coach = models.ForeignKey(
        "trainings.Coach",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="devices",
        verbose_name=_("coach"),
    )
    # Read from the channels' table when asked (callables: the choices need no migration of their own).
    platform = models.CharField(max_length=10, choices=device_platform_choices, verbose_name=_("platform"))
    provider = models.CharField(max_length=10, choices=device_provider_choices, verbose_name=_("provider"))
    token = models.CharField(max_length=4096, verbose_name=_("token"))
    app_id = models.CharField(
        max_length=255,
        blank=True,
        help_text=_("APNs topic (the app's bundle id) or FCM app id; empty means the configured default."),
        verbose_name=_("app id"),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    last_success_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_("When a provider last accepted a push for it (to within an hour)."),
        verbose_name=_("last success at"),
    )
    disabled_at = models.DateTimeField(null=True, blank=True, verbose_name=_("disabled at"))
    disabled_reason = models.CharField(max_length=200, blank=True, verbose_name=_("disabled reason"))

    objects = DeviceQuerySet.as_manager()

    class Meta:
        verbose_name = gettext_lazy("device")
        verbose_name_plural = gettext_lazy("devices")
        constraints = [
            models.UniqueConstraint(fields=["provider", "token"], name="device_unique_token_per_provider"),
            *channel_constraints(),
            models.CheckConstraint(
                condition=Q(disabled_at__isnull=True, disabled_reason="")
                | Q(disabled_at__isnull=False) & ~Q(disabled_reason=""),
                name="device_disabled_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(player__isnull=False, guardian__isnull=True, coach__isnull=True)
                | Q(player__isnull=True, guardian__isnull=False, coach__isnull=True)
                | Q(player__isnull=True, guardian__isnull=True, coach__isnull=False),
                name="device_one_owner",
            ),
        ]
        indexes = [
            # The gateway's fan-out: player_id IN (...) AND disabled_at IS NULL.
            models.Index(
                fields=["player"], condition=Q(disabled_at__isnull=True), name="device_enabled_player_idx"
            ),
            # The same for guardians' pushes: guardian_id IN (...) AND disabled_at IS NULL.
            models.Index(
                fields=["guardian"],
                condition=Q(disabled_at__isnull=True, guardian__isnull=False),
                name="device_enabled_guardian_idx",
            ),
            # The same for coaches' digests: coach_id IN (...) AND disabled_at IS NULL.
            models.Index(
                fields=["coach"],
                condition=Q(disabled_at__isnull=True, coach__isnull=False),
                name="device_enabled_coach_idx",
            ),
        ]

    def __str__(self) -> str:
        owner = (
            self.player_id
            if self.player_id is not None
            else f"guardian {self.guardian_id}"
            if self.guardian_id is not None
            else f"coach {self.coach_id}"
        )
        return f"{self.provider}:{self.token[:12]}… ({owner})"

    @property
    def enabled(self) -> bool:
        return self.disabled_at is None


class SendStatus(models.TextChoices):
    ACCEPTED = "accepted", "Accepted by the provider"
    TOKEN_DEAD = "token_dead", "Token dead: device disabled"
    FAILED = "failed", "Failed (refused payload, or retries exhausted)"
    NO_DEVICE = "no_device", "Player has no enabled device"
    STALE = "stale", "Dropped: sat in the queue past its use"
    MUTED = "muted", "Not sent: the player muted this kind of reminder"
    GIVEN_UP = "given_up", "Given up: dead-lettered (its devices without an outcome failed)"


# The statuses of a push as a whole (a row without a device, once per push): each says the push is finished.
PUSH_FINISHED = (SendStatus.NO_DEVICE, SendStatus.STALE, SendStatus.MUTED, SendStatus.GIVEN_UP)


class PushSend(models.Model):
    """What the gateway did with one push on one device, one row per (push, device) outcome; or, without a
    device, with the push as a whole (no device, stale, muted, given up). Written before the AMQP ack.

    It is also the record of finished pushes (the `DeliveredPush` table it replaced): a device with a row
    is never sent that push again, a push with a push-level row is done, and a push whose every enabled
    device has a row has nothing left to send (delivery/gateway/records.py `sends_recorded`).
    """

    push_key = models.CharField(max_length=300, help_text="The push's idempotency key (Push.key).")
    # No database constraint: its check locked the device's row for every send recorded (a row lock and
    # WAL per push), and a device deleted while its push was in flight failed the recorder's whole commit
    # (every outcome in it sent again). The ORM still sets it to null when a device goes.
    device = models.ForeignKey(
        Device, null=True, blank=True, on_delete=models.SET_NULL, related_name="sends", db_constraint=False
    )
    player_id = models.BigIntegerField(
        null=True, blank=True, help_text="The push's player (kept when the device row goes); none: a coach's."
    )
    coach_id = models.BigIntegerField(null=True, blank=True, help_text="The coach a coach's digest went to.")
    guardian_id = models.BigIntegerField(
        null=True, blank=True, help_text="The push's guardian, when it went to one of the player's."
    )
    provider = models.CharField(
        max_length=10,
        help_text="The channel that served it (delivery/channels/registry.py), e.g. apns or logging.",
    )
    status = models.CharField(max_length=10, choices=SendStatus.choices)
    provider_message_id = models.CharField(max_length=300, blank=True)
    error = models.CharField(max_length=500, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    recorded_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["push_key", "device"], name="pushsend_unique_per_device"),
            # The push-level outcomes (no device, stale) once per push; a removed device's rows also lose
            # their device, hence the status in the condition.
            models.UniqueConstraint(
                fields=["push_key"],
                condition=Q(device__isnull=True, status__in=[str(s) for s in PUSH_FINISHED]),
                name="pushsend_unique_push_outcome",
            ),
            models.CheckConstraint(condition=Q(status__in=SendStatus.values), name="pushsend_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.push_key} -> {self.device_id}: {self.status}"


class PushMinute(models.Model):
    """Device sends per minute, added by the gateway in the transaction that records them (one upsert per
    round): the status page's "pushes reaching phones" reads at most 60 rows, however many sends there are.
    """

    minute = models.DateTimeField(primary_key=True)
    accepted = models.PositiveIntegerField(default=0)
    not_reached = models.PositiveIntegerField(default=0, help_text="Dead token or failed.")
    standin = models.PositiveIntegerField(
        default=0, help_text="Of the accepted, those a stand-in (logging, webhook) took: no phone got them."
    )

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M}: {self.accepted} accepted"


class GatewayHeartbeat(models.Model):
    """One row per gateway process, touched every few seconds while its consumer loop runs (idle or not):
    the status page's liveness and `/health/ready`'s gateway check read the newest."""

    name = models.CharField(max_length=200, unique=True, help_text="host:pid of the gateway process.")
    seen_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["-seen_at"], name="gatewayheartbeat_latest_idx")]

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at:%H:%M:%S}"
