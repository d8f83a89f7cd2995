"""Teams, players, trainings and what players owe for each training (answers, invitation responses).

Reminder scheduling lives in the engine (`reminders.Job` per training and rule, see
trainings/planning/scheduling.py); this app keeps the rules as data, and one `Push` row per (occurrence,
player) so a redelivered occurrence never pushes twice.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from common.fields import validate_instant_range
from common.history import AuditedHistory
from trainings.models.analytics import OffsetDay as OffsetDay
from trainings.models.analytics import PlayerDay as PlayerDay
from trainings.models.analytics import SummaryMark as SummaryMark
from trainings.models.answers import AnswerSource as AnswerSource
from trainings.models.answers import Invitation as Invitation
from trainings.models.answers import InvitationStatus as InvitationStatus
from trainings.models.answers import QuestionnaireAnswer as QuestionnaireAnswer
from trainings.models.channels import ChannelChoice as ChannelChoice
from trainings.models.coaches import Coach as Coach
from trainings.models.coaches import CoachPush as CoachPush
from trainings.models.experiments import Experiment as Experiment
from trainings.models.experiments import ExperimentAssignment as ExperimentAssignment
from trainings.models.experiments import ExperimentStatus as ExperimentStatus
from trainings.models.experiments import Variant as Variant
from trainings.models.experiments import rule_change_check
from trainings.models.guardians import Guardian as Guardian
from trainings.models.guardians import Guardianship as Guardianship
from trainings.models.guardians import Reminds as Reminds
from trainings.models.preferences import ReminderPreference as ReminderPreference
from trainings.models.questionnaires import Question as Question
from trainings.models.questionnaires import Questionnaire as Questionnaire
from trainings.models.questionnaires import fresh_revision as fresh_revision
from trainings.models.roster import Membership as Membership
from trainings.models.roster import Player as Player
from trainings.models.roster import Team as Team
from trainings.models.webhooks import WebhookEvent as WebhookEvent
from trainings.models.webhooks import WebhookJob as WebhookJob
from trainings.models.webhooks import WebhookSubscription as WebhookSubscription
from trainings.planning import kinds
from trainings.planning.offsets import Offset, OffsetError, is_time_zone, parse_stored_offsets, shift
from trainings.planning.offsets import validate_offsets as validate_offsets
from trainings.planning.offsets import validate_time_zone as validate_time_zone
from trainings.reminding.critical import (
    CriticalOffsets,
    critical_at,
    critical_offsets_error,
    critical_offsets_normal,
    validate_critical_offsets,
)

PLACEHOLDERS = ("title", "team", "location", "start_time", "start_date", "time_zone", "offset")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def validate_template(value: str) -> None:
    unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
    if unknown:
        raise ValidationError(f"unknown placeholder(s) {unknown}; available: {list(PLACEHOLDERS)}.")


def render_template(text: str, values: dict[str, str]) -> str:
    """Replace `{name}` placeholders. Not str.format: a template must not reach attributes of values."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


class Training(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False, verbose_name=_("id"))
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="trainings", verbose_name=_("team"))
    title = models.CharField(max_length=200, verbose_name=_("title"))
    # Instants the service accepts (common/fields.py): each reminder and local day then fits a datetime.
    start = models.DateTimeField(validators=[validate_instant_range], verbose_name=_("start"))
    end = models.DateTimeField(validators=[validate_instant_range], verbose_name=_("end"))
    time_zone = models.CharField(
        max_length=64,
        validators=[validate_time_zone],
        help_text=_("IANA zone name."),
        verbose_name=_("time zone"),
    )
    location = models.CharField(max_length=200, blank=True, verbose_name=_("location"))
    cancelled = models.BooleanField(default=False, verbose_name=_("cancelled"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    history = AuditedHistory()

    class Meta:
        verbose_name = gettext_lazy("training")
        verbose_name_plural = gettext_lazy("trainings")
        ordering = ["start"]
        indexes = [
            # The rule-change rescan: trainings whose end is recent or ahead, walked by id in batches.
            models.Index(fields=["end"], name="training_end_idx"),
            # The analytics' refresh: trainings changed lately (a move leaves its old day's figures behind).
            models.Index(fields=["updated_at"], name="training_updated_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="training_ends_after_start")
        ]

    def __str__(self) -> str:
        local = self.start.astimezone(self.zone) if is_time_zone(self.time_zone) else self.start
        return f"{self.title} ({local:%Y-%m-%d %H:%M} {local.tzname()})"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


class ReminderRule(models.Model):
    """When to remind whom: its kind (trainings/planning/kinds.py) says from which training time and whom."""

    slug = models.SlugField(
        max_length=50,
        unique=True,
        help_text=_("Part of every job key; do not rename."),
        verbose_name=_("slug"),
    )
    kind = models.CharField(
        max_length=kinds.CODE_MAX_LENGTH, choices=kinds.any_rule_choices, verbose_name=_("kind")
    )
    offsets = models.JSONField(
        validators=[validate_offsets], help_text=_('e.g. ["90m", "6h", "3d"]'), verbose_name=_("offsets")
    )
    active = models.BooleanField(default=True, verbose_name=_("active"))
    critical_offsets = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_critical_offsets],
        help_text=_(
            'Reminders that players\' mute and quiet hours cannot hide: ["15m"] (only those offsets, '
            "among the rule's or a running experiment's), \"all\", or [] for none."
        ),
        verbose_name=_("critical offsets"),
    )
    # The running timing experiment and its variants' offsets (arm 1 first; arm 0 is `offsets`), set and
    # cleared by trainings/experiments/control.py only.
    experiment = models.ForeignKey(
        "trainings.Experiment",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The timing experiment running on this rule."),
        verbose_name=_("experiment"),
    )
    variant_offsets = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text=_("The running experiment's variants' offsets, arm 1 first (arm 0 is `offsets`)."),
        verbose_name=_("variant offsets"),
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    history = AuditedHistory()

    class Meta:
        ordering = ["kind", "slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        rule_change_check(self)  # not the kind or offsets an experiment compares with (experiments.py)
        if self.critical_offsets in (None, ""):  # the admin's empty box: none
            self.critical_offsets = []
        try:
            validate_critical_offsets(self.critical_offsets)
            offsets = self.all_offsets()
        except (OffsetError, ValidationError):
            return  # the fields' validators say why
        timed_by_team = (kind := kinds.KINDS.get(self.kind)) is not None and kind.instants is not None
        error = critical_offsets_error(self.critical_offsets, offsets, timed_by_team=timed_by_team)
        if error:
            raise ValidationError({"critical_offsets": error})
        self.critical_offsets = critical_offsets_normal(self.critical_offsets)

    def critical_at(self, offset: Offset | str | None) -> bool:
        """Whether the reminder at `offset` goes through players' mute and quiet hours."""
        return critical_at(self.critical_offsets, offset)

    def critical_within(self) -> CriticalOffsets:
        """`critical_offsets` less those no arm reminds at any more (after an experiment ends)."""
        if not isinstance(self.critical_offsets, list):
            return self.critical_offsets
        known = {str(offset) for offset in self.all_offsets()}
        return [text for text in self.critical_offsets if text in known]

    def parsed_offsets(self) -> list[Offset]:
        return parse_stored_offsets(self.offsets)

    def arm_offsets(self) -> list[list[Offset]]:
        """Each arm's offsets: the rule's own (arm 0), then a running experiment's variants'."""
        if self.experiment_id is None:
            return [self.parsed_offsets()]
        return [self.parsed_offsets(), *(parse_stored_offsets(offsets) for offsets in self.variant_offsets)]

    def all_offsets(self) -> list[Offset]:
        """Every offset some arm reminds at: what the rule's jobs hold."""
        return sorted({offset for arm in self.arm_offsets() for offset in arm}, key=lambda o: o.approximate())

    def arms_at(self, offset: Offset) -> frozenset[int]:
        """The arms that remind at `offset` (only arm 0 when no experiment runs)."""
        return frozenset(arm for arm, offsets in enumerate(self.arm_offsets()) if offset in offsets)

    def instants_for(self, training: Training) -> list[tuple[datetime, Offset]]:
        """Every instant this rule wants for `training` (any arm's), earliest first, with its offset."""
        kind = kinds.of(self.kind)
        if kind.instants is not None:  # a coaches' kind: the training's team says when
            return kind.instants(training)
        anchor, zone = kind.anchor_of(training), training.zone
        pairs = [(shift(anchor, offset, sign=kind.sign, zone=zone), offset) for offset in self.all_offsets()]
        return sorted(pairs)


class ReminderTemplate(models.Model):
    rule = models.ForeignKey(
        ReminderRule, on_delete=models.CASCADE, related_name="templates", verbose_name=_("rule")
    )
    language = models.CharField(max_length=10, verbose_name=_("language"))
    title = models.CharField(max_length=200, validators=[validate_template], verbose_name=_("title"))
    body = models.TextField(validators=[validate_template], verbose_name=_("body"))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "language"], name="template_unique_language")]

    def __str__(self) -> str:
        return f"{self.rule} [{self.language}]"


class TrainingJob(models.Model):
    """The engine job that holds one rule's reminders for one training.

    A training finds its jobs through this row, never by the job's key: a key says nothing about who made
    the row, and the trainings app must never take over a job an API caller created.
    """

    training = models.ForeignKey(Training, on_delete=models.CASCADE, related_name="reminder_jobs")
    rule = models.ForeignKey(ReminderRule, on_delete=models.CASCADE, related_name="training_jobs")
    job = models.OneToOneField("reminders.Job", on_delete=models.CASCADE, related_name="training_job")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["training", "rule"], name="training_job_unique_rule")]

    def __str__(self) -> str:
        return f"{self.training_id} {self.rule_id} -> {self.job_id}"


class RunOutcome(models.TextChoices):
    SENT = "sent", _("Pushes published")
    NOBODY_LEFT = "nobody_left", _("Everybody had answered")
    # An experiment's instant whose arm holds none of the players still owing (all are in other arms).
    NO_ARM_PLAYER = "no_arm", _("No player was in this instant's arm of the experiment")
    CANCELLED = "cancelled", _("Training cancelled")
    GONE = "gone", _("Training or rule deleted")
    STALE = "stale", _("Instant no longer wanted (training moved)")
    INACTIVE = "inactive", _("Rule deactivated")
    NO_COACH = "no_coach", _("The team has no coach to tell")
    SUMMARIZED = "summarized", _("In the coaches' summary of the day already")


class ReminderRun(models.Model):
    """What happened when one occurrence fired (the last attempt wins). Survives occurrence purges."""

    occurrence_key = models.CharField(max_length=255, unique=True, verbose_name=_("occurrence key"))
    occurrence_id = models.BigIntegerField(null=True, blank=True, verbose_name=_("occurrence id"))
    training = models.ForeignKey(
        Training,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="runs",
        verbose_name=_("training"),
    )
    rule = models.ForeignKey(
        ReminderRule, null=True, blank=True, on_delete=models.SET_NULL, verbose_name=_("rule")
    )
    fire_at = models.DateTimeField(verbose_name=_("fire at"))
    outcome = models.CharField(max_length=12, choices=RunOutcome.choices, verbose_name=_("outcome"))
    recipients = models.PositiveIntegerField(default=0, verbose_name=_("recipients"))
    attempts = models.PositiveIntegerField(default=1, verbose_name=_("attempts"))
    ran_at = models.DateTimeField(verbose_name=_("ran at"))

    class Meta:
        verbose_name = gettext_lazy("reminder run")
        verbose_name_plural = gettext_lazy("reminder runs")
        # Retention: ran_at < cutoff (trainings/retention.py).
        indexes = [models.Index(fields=["ran_at"], name="reminderrun_ran_at_idx")]

    def __str__(self) -> str:  # the admin's page title: words, not the occurrence's key
        rule, training = (
            self.rule.get_kind_display().split(" (")[0] if self.rule else "Reminder",
            self.training,
        )
        return (
            f"{rule} for {training.title if training else 'a deleted training'}: {self.get_outcome_display()}"
        )


class PushStatus(models.TextChoices):
    PENDING = "pending", _("Waiting to be published")
    SENT = "sent", _("Published to the push queue")
    WITHDRAWN = "withdrawn", _("Player answered before a retry published it")
    HELD = "held", _("Held for the player's quiet hours")
    SKIPPED = "skipped", _("Not sent: quiet hours end after it is of any use")


class Push(models.Model):
    """One push for one player from one occurrence. The unique pair is what makes redelivery harmless."""

    # Unique by a constraint rather than `unique=True`: no second, LIKE-only index on it, which nothing reads
    # and every push would write. Likewise the training's lookups use push_training_occ_idx.
    key = models.CharField(
        max_length=300, help_text=_("Idempotency key sent to the gateway."), verbose_name=_("key")
    )
    occurrence_key = models.CharField(max_length=255, verbose_name=_("occurrence key"))
    occurrence_id = models.BigIntegerField(null=True, blank=True, verbose_name=_("occurrence id"))
    training = models.ForeignKey(
        Training, on_delete=models.CASCADE, related_name="pushes", db_index=False, verbose_name=_("training")
    )
    player = models.ForeignKey(
        Player, on_delete=models.CASCADE, related_name="pushes", verbose_name=_("player")
    )
    guardian = models.ForeignKey(
        Guardian,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pushes",
        help_text=_("Sent to this guardian of the player (none: to the player)."),
        verbose_name=_("guardian"),
    )
    # No index of its own: only the re-check reads pushes by rule, and it also names the trainings
    # (push_training_occ_idx; needs current statistics, autovacuum's ANALYZE). A rule's deletion scans.
    rule = models.ForeignKey(
        ReminderRule, null=True, on_delete=models.SET_NULL, db_index=False, verbose_name=_("rule")
    )
    kind = models.CharField(
        max_length=kinds.CODE_MAX_LENGTH, choices=kinds.push_choices, verbose_name=_("kind")
    )
    offset = models.CharField(
        max_length=10,
        blank=True,
        help_text=_("The rule's offset it reminded at, e.g. 90m."),
        verbose_name=_("offset"),
    )
    language = models.CharField(max_length=10, verbose_name=_("language"))
    title = models.CharField(max_length=300, verbose_name=_("title"))
    body = models.TextField(verbose_name=_("body"))
    fire_at = models.DateTimeField(verbose_name=_("fire at"))
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_("After this the push is stale (training started, questionnaire closed)."),
        verbose_name=_("expires at"),
    )
    status = models.CharField(
        max_length=10, choices=PushStatus.choices, default=PushStatus.PENDING, verbose_name=_("status")
    )
    release_at = models.DateTimeField(
        null=True, blank=True, help_text=_("Held: when the quiet hours end."), verbose_name=_("release at")
    )
    status_reason = models.CharField(max_length=200, blank=True, verbose_name=_("status reason"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    sent_at = models.DateTimeField(null=True, blank=True, verbose_name=_("sent at"))

    class Meta:
        verbose_name = gettext_lazy("push")
        verbose_name_plural = gettext_lazy("pushes")
        constraints = [
            models.UniqueConstraint(fields=["key"], name="push_unique_key"),
            # One push per occurrence and recipient: the player (no guardian), or one of their guardians.
            models.UniqueConstraint(
                fields=["occurrence_key", "player", "guardian"],
                name="push_unique_per_occurrence",
                nulls_distinct=False,
            ),
            models.CheckConstraint(condition=Q(status__in=PushStatus.values), name="push_status_valid"),
        ]
        indexes = [
            # The timeline's "players reached": training = t AND occurrence_key IN (...), grouped by key.
            # (The fire path's occurrence_key = k uses the unique (occurrence_key, player) index.)
            models.Index(fields=["training", "occurrence_key"], name="push_training_occ_idx"),
            # Retention: fire_at < cutoff (trainings/retention.py).
            models.Index(fields=["fire_at"], name="push_fire_at_idx"),
            # Held pushes only: "held behind" at fire time (training = t), the hourly check (release_at <).
            models.Index(fields=["training", "release_at"], name="push_held_idx", condition=Q(status="held")),
            # The analytics' refresh: pushes released from quiet hours lately (release_at stays set).
            models.Index(
                fields=["release_at"], name="push_released_idx", condition=Q(release_at__isnull=False)
            ),
        ]

    def __str__(self) -> str:  # the admin's page title: whose push for which training, not its key
        to = f"{self.guardian.name} (for {self.player.name})" if self.guardian else self.player.name
        return f"{self.get_kind_display().split(' (')[0]} to {to} for {self.training.title}"

    def message(self) -> dict[str, object]:
        """The JSON published to the push queue (schema `trainings.push/2`, documented in handlers.py)."""
        return {
            "schema": "trainings.push/2",
            "idempotency_key": self.key,
            "player": self.player_id,
            **({"guardian": self.guardian_id} if self.guardian_id is not None else {}),
            "title": self.title,
            "body": self.body,
            "language": self.language,
            "training": str(self.training_id),
            "kind": self.kind,
            "rule": self.rule.slug if self.rule else None,
            **({"offset": self.offset} if self.offset else {}),
            "fire_at": self.fire_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }
