"""Reads: what a user may see, who is still to be reminded, and a training's reminder timeline.

Who sees what: operators (superusers, or users with `trainings.manage_all_teams`) see every team; anyone
else sees the teams they coach. `is_staff` alone does not widen the scope, because coaches are staff
users too (that is what lets them into the admin).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from reminders.models import Occurrence
from trainings.models import (
    Invitation,
    InvitationStatus,
    Membership,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    RuleKind,
    Team,
    Training,
)

User = AbstractBaseUser | AnonymousUser


def user_sees_all_teams(user: User) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(getattr(user, "is_superuser", False)) or user.has_perm("trainings.manage_all_teams")  # type: ignore[union-attr]


def teams_visible_to(user: User) -> QuerySet[Team]:
    if user_sees_all_teams(user):
        return Team.objects.all()
    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    return Team.objects.filter(coaches=user.pk)


def trainings_visible_to(user: User) -> QuerySet[Training]:
    if user_sees_all_teams(user):
        return Training.objects.all()
    return Training.objects.filter(team__in=teams_visible_to(user))


def players_visible_to(user: User) -> QuerySet[Player]:
    if user_sees_all_teams(user):
        return Player.objects.all()
    return Player.objects.filter(memberships__team__in=teams_visible_to(user)).distinct()


def active_member_ids(team: Team) -> set[int]:
    return set(Membership.objects.filter(team=team, active=True).values_list("player_id", flat=True))


def reminder_recipients(*, training: Training, rule: ReminderRule) -> QuerySet[Player]:
    """Who this rule still has to chase for this training, asked of the database at fire time.

    INVITATION: players whose invitation is still PENDING. PRE/POST: players on the training's list who
    have not DENIED it and have no answer for that phase. Everyone must still be an active team member.
    """
    invited = Invitation.objects.filter(training=training)
    players = Player.objects.filter(memberships__team_id=training.team_id, memberships__active=True)
    if rule.kind == RuleKind.INVITATION:
        return players.filter(Exists(invited.filter(player=OuterRef("pk"), status=InvitationStatus.PENDING)))
    answered = QuestionnaireAnswer.objects.filter(training=training, player=OuterRef("pk"), phase=rule.kind)
    return players.filter(
        Exists(invited.filter(player=OuterRef("pk")).exclude(status=InvitationStatus.DENIED)),
        ~Exists(answered),
    )


# The namespace of the trainings app's job keys, reserved to it at the API (trainings/handlers.py).
JOB_KEY_NAMESPACE = r"training-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-"


def job_key(*, training_id: object, rule: ReminderRule) -> str:
    """The key a new job of this training and rule is created under. Only for creating it: a training
    finds its jobs through `TrainingJob`, never by key."""
    return f"training-{training_id}-{rule.slug}"


@dataclass(frozen=True)
class TimelineEntry:
    occurrence_id: int
    rule: str
    kind: str
    fire_at: datetime
    status: str
    attempts: int
    outcome: str | None
    recipients: int | None
    players_reached: int


def training_timeline(*, training: Training) -> list[TimelineEntry]:
    """Every occurrence of every rule's job for this training (history included), by fire time."""
    rules = {link.job_id: link.rule for link in training.reminder_jobs.select_related("rule")}
    occurrences = list(
        Occurrence.objects.filter(job_id__in=list(rules))
        .order_by("fire_at", "id")
        .only("id", "fire_at", "status", "attempts", "idempotency_key", "job_id")
    )
    keys = [o.idempotency_key for o in occurrences]
    runs = {run.occurrence_key: run for run in ReminderRun.objects.filter(occurrence_key__in=keys)}
    reached = dict(
        Push.objects.filter(training=training, occurrence_key__in=keys)
        .values("occurrence_key")
        .annotate(n=Count("id", filter=Q(status=PushStatus.SENT)))
        .values_list("occurrence_key", "n")
    )
    entries = []
    for occurrence in occurrences:
        rule = rules[occurrence.job_id]
        run = runs.get(occurrence.idempotency_key)
        entries.append(
            TimelineEntry(
                occurrence_id=occurrence.id,
                rule=rule.slug,
                kind=rule.kind,
                fire_at=occurrence.fire_at,
                status=occurrence.status,
                attempts=occurrence.attempts,
                outcome=run.outcome if run else None,
                recipients=run.recipients if run else None,
                players_reached=reached.get(occurrence.idempotency_key, 0),
            )
        )
    return entries
