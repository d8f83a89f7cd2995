"""Coaches as recipients: a coach's own profile (language, zone, channels, quiet hours) and the messages the
coach's digest kinds send them (models of the trainings app, re-exported by trainings.models).

A coach is a user with team access (trainings/access.py); `Coach` adds what a recipient needs, as
`Guardian` does for parents: their devices and email addresses are `Device` rows owned by the coach. A
`CoachPush` is one digest, morning summary or late-decline alert for one coach: unique on its `key`, so a
redelivered occurrence, a second training of the same morning or a second decline of the same player
never sends it twice (trainings/digest/).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from common.i18n import validate_spoken_language
from trainings.models.channels import ChannelChoice
from trainings.models.quiet_hours import quiet_hours_both_or_none
from trainings.planning import kinds
from trainings.planning.offsets import validate_offset, validate_time_zone


class DigestTimes(models.Model):
    """When a team's coaches hear of its trainings (trainings/digest/timing.py); empty: not that message."""

    digest_before = models.CharField(
        max_length=10,
        blank=True,
        validators=[validate_offset],
        help_text=_('Coaches get who still owes what this long before each training, e.g. "2h".'),
        verbose_name=_("digest before"),
    )
    digest_morning_at = models.TimeField(
        null=True,
        blank=True,
        help_text=_("Coaches get a summary of the day's trainings at this time (team's zone)."),
        verbose_name=_("digest morning at"),
    )
    decline_alert_within = models.CharField(
        max_length=10,
        blank=True,
        validators=[validate_offset],
        help_text=_('Coaches are alerted when a player declines this near the start, e.g. "3h".'),
        verbose_name=_("decline alert within"),
    )

    class Meta:
        abstract = True


class Coach(models.Model):
    """What a coach's digests need: a language, a zone, channels and quiet hours (else the team's)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="coach", verbose_name=_("user")
    )
    language = models.CharField(
        max_length=10,
        default="en",
        validators=[validate_spoken_language],
        help_text=_("Language of the coach's digests."),
        verbose_name=_("language"),
    )
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], verbose_name=_("time zone")
    )
    channels = models.CharField(
        max_length=8,
        choices=ChannelChoice.choices,
        default=ChannelChoice.DEFAULT,
        db_default="default",
        verbose_name=_("channels"),
    )
    quiet_start = models.TimeField(
        null=True,
        blank=True,
        help_text=_("The coach's own quiet hours (else the team's)."),
        verbose_name=_("quiet start"),
    )
    quiet_end = models.TimeField(null=True, blank=True, verbose_name=_("quiet end"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = gettext_lazy("coach")
        verbose_name_plural = gettext_lazy("coaches")
        constraints = [
            quiet_hours_both_or_none("coach"),
            models.CheckConstraint(
                condition=Q(channels__in=ChannelChoice.values), name="coach_channels_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.user.get_full_name() or self.user.get_username()


class CoachPushStatus(models.TextChoices):
    PENDING = "pending", _("Waiting to be published")
    SENT = "sent", _("Published to the push queue")
    HELD = "held", _("Held for the coach's quiet hours")
    SKIPPED = "skipped", _("Not sent (quiet hours end too late, or nobody owes anything any more)")


class CoachPush(models.Model):
    """One message to one coach: a digest before a training, a morning summary of a team's day, or a
    late-decline alert. Unique on `key` (what the gateway de-duplicates on too)."""

    key = models.CharField(max_length=300, help_text="Idempotency key: one message per coach and subject.")
    occurrence_key = models.CharField(max_length=255)
    coach = models.ForeignKey(Coach, on_delete=models.CASCADE, related_name="pushes")
    team = models.ForeignKey("trainings.Team", on_delete=models.CASCADE, related_name="coach_pushes")
    training = models.ForeignKey(
        "trainings.Training", on_delete=models.CASCADE, related_name="coach_pushes", db_index=False
    )
    rule = models.ForeignKey("trainings.ReminderRule", null=True, on_delete=models.SET_NULL)
    player = models.ForeignKey(
        "trainings.Player",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The player a late-decline alert is about.",
    )
    kind = models.CharField(max_length=kinds.CODE_MAX_LENGTH, choices=kinds.push_choices)
    language = models.CharField(max_length=10)
    title = models.CharField(max_length=300)
    body = models.TextField()
    owing = models.PositiveIntegerField(default=0, help_text="Players who still owed something.")
    fire_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=CoachPushStatus.choices)
    release_at = models.DateTimeField(null=True, blank=True, help_text="Held: when the quiet hours end.")
    status_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = gettext_lazy("coach's digest")
        verbose_name_plural = gettext_lazy("coaches' digests")
        constraints = [
            models.UniqueConstraint(fields=["key"], name="coachpush_unique_key"),
            models.CheckConstraint(
                condition=Q(status__in=CoachPushStatus.values), name="coachpush_status_valid"
            ),
        ]
        indexes = [
            # The training page's digests and the publish of an occurrence's messages.
            models.Index(fields=["training", "occurrence_key"], name="coachpush_training_occ_idx"),
            # Retention: fire_at < cutoff.
            models.Index(fields=["fire_at"], name="coachpush_fire_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{kinds.of(self.kind).label if self.kind in kinds.KINDS else self.kind} to {self.coach}"

    def message(self) -> dict[str, object]:
        """The JSON published to the push queue (`trainings.push/2` with `coach` in place of `player`)."""
        return {
            "schema": "trainings.push/2",
            "idempotency_key": self.key,
            "player": None,
            "coach": self.coach_id,
            "team": self.team_id,
            "title": self.title,
            "body": self.body,
            "language": self.language,
            "training": str(self.training_id),
            "kind": self.kind,
            "rule": self.rule.slug if self.rule else None,
            "fire_at": self.fire_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }
