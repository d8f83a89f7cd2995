"""Reads: what a user may see, who is still to be reminded, and a training's reminder timeline.

Who sees what: operators (superusers, or `trainings.manage_all_teams`) see every team; integration callers
(`trainings.use_integration_api`) also the roster rows they created; anyone else the teams they coach.
`is_staff` alone does not widen the scope: coaches are staff users too (that lets them into the admin).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, IntegerField, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from delivery.api import standin_names
from delivery.models import PushSend, SendStatus
from reminders.models import Occurrence, OccurrenceStatus
from trainings.models import (
    AnswerSource,
    Guardian,
    Guardianship,
    Invitation,
    InvitationStatus,
    Membership,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    Team,
    Training,
    TrainingJob,
)
from trainings.planning import kinds
from trainings.planning.offsets import Offset
from trainings.reminding.outcomes import STANDIN, push_outcomes

User = AbstractBaseUser | AnonymousUser


def user_sees_all_teams(user: User) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(getattr(user, "is_superuser", False)) or user.has_perm("trainings.manage_all_teams")  # type: ignore[union-attr]


def user_uses_integration_api(user: User) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and user.has_perm("trainings.use_integration_api")  # type: ignore[union-attr]


def teams_visible_to(user: User) -> QuerySet[Team]:
    """Operators: every team; an integration caller: those it created or coaches; others: those coached."""
    if user_sees_all_teams(user):
        return Team.objects.all()
    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    if user_uses_integration_api(user):
        return Team.objects.filter(Q(coaches=user.pk) | Q(owner=user.pk)).distinct()
    return Team.objects.filter(coaches=user.pk)


def trainings_visible_to(user: User) -> QuerySet[Training]:
    if user_sees_all_teams(user):
        return Training.objects.all()
    return Training.objects.filter(team__in=teams_visible_to(user))


def players_visible_to(user: User) -> QuerySet[Player]:
    """The players of the teams a user sees; an integration caller's own too (on no team yet, say)."""
    if user_sees_all_teams(user):
        return Player.objects.all()
    on_teams = Q(memberships__team__in=teams_visible_to(user))
    if user_uses_integration_api(user):
        return Player.objects.filter(on_teams | Q(owner=user.pk)).distinct()
    return Player.objects.filter(on_teams).distinct()


def guardians_visible_to(user: User) -> QuerySet[Guardian]:
    """Operators see every guardian; a coach, the guardians of their teams' players."""
    if user_sees_all_teams(user):
        return Guardian.objects.all()
    return Guardian.objects.filter(players__in=players_visible_to(user)).distinct()


def team_zone_of_players(players: list[Player] | QuerySet[Player]) -> str | None:
    """The zone a person added for these players starts with: the team of the first one that plays in
    one (active membership, oldest first), else that player's own zone; None for no player."""
    ids = [player.pk for player in players]
    if not ids:
        return None
    zone = (
        Membership.objects.filter(player_id__in=ids, active=True)
        .order_by("joined_at", "pk")
        .values_list("team__time_zone", flat=True)
        .first()
    )
    return (
        zone or Player.objects.filter(pk__in=ids).order_by("pk").values_list("time_zone", flat=True).first()
    )


def active_member_ids(team: Team) -> set[int]:
    return set(Membership.objects.filter(team=team, active=True).values_list("player_id", flat=True))


# The namespace of the trainings app's job keys, reserved to it at the API (trainings/handlers.py).
JOB_KEY_NAMESPACE = r"training-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-"


def job_key(*, training_id: object, rule: ReminderRule) -> str:
    """The key a new job of this training and rule is created under. Only for creating it: a training
    finds its jobs through `TrainingJob`, never by key."""
    return f"training-{training_id}-{rule.slug}"


@dataclass(frozen=True)
class TimelineEntry:
    occurrence_id: int
    occurrence_key: str
    rule: str
    kind: str
    fire_at: datetime
    status: str
    attempts: int
    outcome: str | None
    recipients: int | None
    players_reached: int  # a device accepted their push
    players_standin: int  # of those, only a stand-in (logging, webhook) accepted it: no phone got it
    pushes_published: int  # put on the push queue (not yet "reached")


def training_timeline(*, training: Training, statuses: Collection[str] = ()) -> list[TimelineEntry]:
    """Every occurrence of every rule's job for this training (history included), by fire time; only those
    in `statuses` when given (the API's `?status=`)."""
    rules = {link.job_id: link.rule for link in training.reminder_jobs.select_related("rule")}
    rows = Occurrence.objects.filter(job_id__in=list(rules))
    if statuses:
        rows = rows.filter(status__in=list(statuses))
    occurrences = list(
        rows.order_by("fire_at", "id").only(
            "id", "fire_at", "status", "attempts", "idempotency_key", "job_id"
        )
    )
    keys = [o.idempotency_key for o in occurrences]
    runs = {run.occurrence_key: run for run in ReminderRun.objects.filter(occurrence_key__in=keys)}
    accepted_sends = PushSend.objects.filter(push_key=OuterRef("key"), status=SendStatus.ACCEPTED)
    accepted = Exists(accepted_sends)
    by_phone = Exists(accepted_sends.exclude(provider__in=standin_names()))
    counts = {
        key: (reached, standin, published)
        for key, reached, standin, published in Push.objects.filter(
            training=training, occurrence_key__in=keys
        )
        .values("occurrence_key")
        .annotate(
            reached=Count("id", filter=Q(accepted)),
            standin=Count("id", filter=Q(accepted) & ~Q(by_phone)),
            published=Count("id", filter=Q(status="sent")),
        )
        .values_list("occurrence_key", "reached", "standin", "published")
    }
    entries = []
    for occurrence in occurrences:
        rule = rules[occurrence.job_id]
        run = runs.get(occurrence.idempotency_key)
        entries.append(
            TimelineEntry(
                occurrence_id=occurrence.id,
                occurrence_key=occurrence.idempotency_key,
                rule=rule.slug,
                kind=rule.kind,
                fire_at=occurrence.fire_at,
                status=occurrence.status,
                attempts=occurrence.attempts,
                outcome=run.outcome if run else None,
                recipients=run.recipients if run else None,
                players_reached=counts.get(occurrence.idempotency_key, (0, 0, 0))[0],
                players_standin=counts.get(occurrence.idempotency_key, (0, 0, 0))[1],
                pushes_published=counts.get(occurrence.idempotency_key, (0, 0, 0))[2],
            )
        )
    return entries


# --- Coach views (admin list columns, player grid, timeline names) ---------------------------------------


def _count(queryset: QuerySet[Any]) -> Coalesce:
    """A correlated COUNT(*) of `queryset` (already filtered on training=OuterRef("pk")), 0 when none."""
    counted = queryset.order_by().values("training").annotate(n=Count("pk")).values("n")[:1]
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _owed(kind: kinds.Kind) -> Coalesce:
    """Invitations whose player the kind still chases (its recipient rule, team membership aside)."""
    return _count(Invitation.objects.filter(training=OuterRef("pk")).filter(kind.pending()))


def trainings_with_counts(queryset: QuerySet[Training]) -> QuerySet[Training]:
    """The coach's list columns as correlated subqueries: one query for the page, whatever its length.

    The invitations' three counts, then answered and owed for each questionnaire kind of the kinds table
    (`answered_owed` reads them). Each count runs on the (training, player) unique indexes of invitations
    and answers.
    """
    invitations = Invitation.objects.filter(training=OuterRef("pk"))
    answers = QuestionnaireAnswer.objects.filter(training=OuterRef("pk"))
    per_kind: dict[str, Coalesce] = {}
    for kind in kinds.questionnaire_kinds():
        per_kind[f"n_{kind.code}_answered"] = _count(answers.filter(phase=kind.code))
        per_kind[f"n_{kind.code}_owed"] = _owed(kind)
    return queryset.annotate(
        n_accepted=_count(invitations.filter(status=InvitationStatus.ACCEPTED)),
        n_declined=_count(invitations.filter(status=InvitationStatus.DENIED)),
        n_pending=_count(invitations.filter(status=InvitationStatus.PENDING)),
        **per_kind,
    )


def answered_owed(training: Training, kind: kinds.Kind) -> tuple[int, int]:
    """A kind's (answered, owed) on a training read through `trainings_with_counts` (0, 0 otherwise)."""
    return getattr(training, f"n_{kind.code}_answered", 0), getattr(training, f"n_{kind.code}_owed", 0)


@dataclass(frozen=True)
class Answered:
    """One questionnaire kind's cell of a player's row: when it was answered (None: not yet) and how."""

    at: datetime | None
    how: str = ""  # "from the notification, 3 min after the 60-min reminder" ("" when none)
    values: dict[str, Any] = field(default_factory=dict)  # the answers, by question id


@dataclass(frozen=True)
class PlayerRow:
    player: str
    invitation: str
    responded_at: datetime | None
    declined: bool
    reminders_received: int  # a phone or an inbox accepted them
    last_push: str
    last_push_at: datetime | None
    # How the invitation's answer came: "from the notification, 3 min after the 60-min reminder" or "".
    invitation_how: str = ""
    # One cell per questionnaire kind (`kinds.questionnaire_kinds()`), by its code.
    answers: dict[str, Answered] = field(default_factory=dict)
    reminders_standin: int = 0  # accepted by a stand-in only (logging, webhook): nothing sent to a phone


def training_player_grid(*, training: Training) -> list[PlayerRow]:
    """One row per invited player, by name: RSVP, each questionnaire kind's answer (and how it came),
    reminders that reached a device and the last push's outcome on the phone side.

    Five queries: invitations with players, answers, pushes (the training's indexes), their send rows,
    and the guardians who answered (one, when any did).
    """
    invitations = list(training.invitations.select_related("player").order_by("player__name"))
    stored = list(training.answers.values_list(
        "player_id", "phase", "answered_at", "source", "answered_by_id", "answers"))  # fmt: skip
    answered = {(player_id, phase): (at, source, by) for player_id, phase, at, source, by, _ in stored}
    values = {(player_id, phase): given for player_id, phase, *_, given in stored}
    by_guardian = _answered_by(
        {(i.player_id, i.responded_by_id) for i in invitations if i.responded_by_id is not None}
        | {(player_id, by) for (player_id, _), (_, _, by) in answered.items() if by is not None},
        names={i.player_id: i.player.name for i in invitations},
    )
    pushes = list(
        training.pushes.order_by("created_at", "pk").only(
            "training",  # read by push_outcomes: deferred, it cost a statement per push
            "key",
            "player_id",
            "status",
            "status_reason",
            "release_at",
            "created_at",
            "sent_at",
            "kind",
            "offset",
        )
    )
    outcomes = push_outcomes(pushes, zone=training.zone)  # what reached a phone, not what was published
    received: dict[int, int] = {}
    standin: dict[int, int] = {}
    last: dict[int, tuple[str, datetime | None]] = {}
    sent_of: dict[tuple[int, str], list[tuple[datetime, str]]] = {}
    for push in pushes:
        outcome = outcomes[push.key]
        if outcome.code == STANDIN:
            standin[push.player_id] = standin.get(push.player_id, 0) + 1
        elif outcome.reached:
            received[push.player_id] = received.get(push.player_id, 0) + 1
        if push.status == PushStatus.SENT and push.sent_at is not None:
            sent_of.setdefault((push.player_id, push.kind), []).append((push.sent_at, push.offset))
        last[push.player_id] = (outcome.text, outcome.at)
    questionnaires = kinds.questionnaire_kinds()

    def cell(pid: int, code: str) -> Answered:
        at, source, by = answered.get((pid, code), (None, "", None))
        how = answer_how(source, at, sent_of.get((pid, code)), by=by_guardian.get((pid, by), ""))
        return Answered(at, how, values.get((pid, code)) or {})

    rows = []
    for invitation in invitations:
        pid = invitation.player_id
        last_text, outcome_at = last.get(pid, ("", None))
        rows.append(
            PlayerRow(
                player=invitation.player.name,
                invitation=invitation.get_status_display(),
                responded_at=invitation.responded_at,
                declined=invitation.status == InvitationStatus.DENIED,
                reminders_received=received.get(pid, 0),
                reminders_standin=standin.get(pid, 0),
                last_push=last_text,
                last_push_at=outcome_at,
                invitation_how=answer_how(
                    invitation.response_source,
                    invitation.responded_at,
                    sent_of.get((pid, kinds.INVITATION.code)),
                    by=by_guardian.get((pid, invitation.responded_by_id), ""),
                ),
                answers={kind.code: cell(pid, kind.code) for kind in questionnaires},
            )
        )
    return rows


def _answered_by(pairs: set[tuple[int, int | None]], *, names: dict[int, str]) -> dict[tuple[int, Any], str]:
    """ "Alice's mother (Maria)" per (player, guardian) who answered for them (one query, none when no
    guardian answered). A guardian no longer the player's is still named, as "a guardian"."""
    wanted = {(player, guardian) for player, guardian in pairs if guardian is not None}
    if not wanted:
        return {}
    found = {
        (g.player_id, g.guardian_id): g.answered_by(names.get(g.player_id, "the player"))
        for g in Guardianship.objects.select_related("guardian").filter(
            player_id__in={p for p, _ in wanted}, guardian_id__in={g for _, g in wanted}
        )
    }
    return {pair: found.get(pair, f"{names.get(pair[0], 'the player')}'s guardian") for pair in wanted}


def answer_how(
    source: str, at: datetime | None, sent: list[tuple[datetime, str]] | None, *, by: str = ""
) -> str:
    """How an answer came, for a coach: its source, how long after which reminder (the last one of its kind
    published before it), and who gave it when a guardian did, e.g. "from the notification, 3 min after the
    60-min reminder, answered by Alice's mother (Maria)"."""
    if at is None or not source:
        return ""
    text = AnswerSource(source).label
    who = f", answered by {by}" if by else ""
    before = [(when, offset) for when, offset in sent or () if when <= at]
    if not before:
        return text + who
    when, offset = max(before)
    minutes = int((at - when).total_seconds() // 60)
    after = (
        f"{minutes} min"
        if minutes < 120
        else f"{minutes // 60} h"
        if minutes < 2880
        else f"{minutes // 1440} d"
    )
    reminder = f"the {Offset.parse(offset).human().replace(' ', '-')} reminder" if offset else "a reminder"
    return f"{text}, {after} after {reminder}{who}"


def trainings_next_reminder(trainings: list[Training]) -> dict[object, datetime]:
    """The next scheduled reminder of each training: two queries for a page of them (the trainings' jobs
    through TrainingJob, then the first scheduled fire of each job on occurrence_job_fire_idx)."""
    training_of = dict(
        TrainingJob.objects.filter(training__in=[t.pk for t in trainings]).values_list(
            "job_id", "training_id"
        )
    )
    rows = (
        Occurrence.objects.filter(job_id__in=list(training_of), status=OccurrenceStatus.SCHEDULED)
        .values("job_id")
        .annotate(first=Min("fire_at"))
        .values_list("job_id", "first")
    )
    earliest: dict[object, datetime] = {}
    for key, first in rows:
        pk = training_of[key]
        if pk not in earliest or first < earliest[pk]:
            earliest[pk] = first
    return earliest
