"""Writes on trainings, players' responses and rules; each reschedules the reminders it affects.

Scheduling runs inside the write's own transaction (trainings.planning.scheduling). A rule change is
rescheduled after commit by a worker, batch after batch (trainings.tasks.rule_reschedule).

The lock order of every writer of a training (`training_lock` says why): the training rows first, in
id order when there are several, then the rule they touch, then its engine jobs, then their occurrences.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from common.history import audited_history
from common.rows_insert import insert_values, mark_saved
from reminders.api import occurrences_cancel
from reminders.models import Occurrence
from trainings import queries
from trainings.answers.questionnaires import answers_valid, definition_of
from trainings.answers.recording import invitation_status_write, questionnaire_write
from trainings.answers.values import answers_check
from trainings.digest.alerts import decline_alert_on_commit
from trainings.models import (
    AnswerSource,
    Invitation,
    InvitationStatus,
    Player,
    QuestionnaireAnswer,
    ReminderRule,
    Team,
    Training,
    TrainingJob,
)
from trainings.planning import kinds
from trainings.planning.scheduling import rules_from_rows, rules_query, training_reminders_schedule
from trainings.reminding.critical import CriticalOffsets
from trainings.reminding.notices import (
    cancelled_notice_key,
    moved_notice_key,
    training_cancelled_notice_schedule,
    training_moved_notice_schedule,
)
from trainings.squads.places import squad_fill, squad_respond
from trainings.tasks import rule_reschedule
from trainings.webhooks.events import answer_recorded


def _invitations_set(*, training: Training, players: Sequence[Player]) -> None:
    """Make the training's player list exactly `players`; kept players keep their response."""
    wanted = {player.pk for player in players}
    training.invitations.exclude(player_id__in=wanted).delete()
    existing = set(training.invitations.values_list("player_id", flat=True))
    Invitation.objects.bulk_create(
        [Invitation(training=training, player_id=pk) for pk in sorted(wanted - existing)],
        ignore_conflicts=True,
    )


def training_create(
    *,
    team: Team,
    title: str,
    start: datetime,
    end: datetime,
    time_zone: str,
    location: str = "",
    players: Sequence[Player] | None = None,
    min_players: int | None = None,
    max_players: int | None = None,
) -> Training:
    """Create a training, invite its players (default: the team's active members), schedule reminders.

    Two statements and a COPY whatever the team's size, on PostgreSQL: the training with its history row
    (audit), its invitations (an INSERT ... SELECT of the members, or an INSERT of `players`) and the rules
    read back, all in one (`_training_insert`); its jobs with their links (one statement); their
    occurrences (one COPY). Elsewhere the training, its history row, the invitations and the rules take
    a statement each.
    """
    with transaction.atomic():
        training = Training(team=team, title=title, start=start, end=end, time_zone=time_zone,
                            location=location, min_players=min_players, max_players=max_players)  # fmt: skip
        _training_validate(training)
        rules = None
        if connection.vendor == "postgresql":
            rules = _training_insert(training, players)
        else:
            training.save(force_insert=True)
            if players is None:
                _members_invite(training)
            else:
                Invitation.objects.bulk_create(
                    [Invitation(training=training, player_id=pk) for pk in sorted({p.pk for p in players})]
                )
        training_reminders_schedule(training=training, rules=rules, new=True)
    return training


def training_members_invite(*, training: Training) -> None:
    """Invite the team's active members to a training that has no invitation yet (the admin's add form
    with an empty player list does what the API does without `players`)."""
    if not Invitation.objects.filter(training=training).exists():
        _members_invite(training)


def _members_invite(training: Training) -> None:
    """Invite the team's active members in one statement (INSERT ... SELECT): no round trip to read them
    first. The same rows `bulk_create` would write (status PENDING, no response), in player order."""
    with connection.cursor() as cursor:
        cursor.execute(queries.MEMBERS_INVITE, _members_params(training))


def _members_params(training: Training) -> list[Any]:
    pk = Training._meta.pk.get_db_prep_value(training.pk, connection)
    return [pk, InvitationStatus.PENDING.value, training.team_id]


def _training_insert(training: Training, players: Sequence[Player] | None) -> list[ReminderRule]:
    """Write the training, its history row and its invitations, and read the rules, in one statement.

    What `save(force_insert=True)` and its history receiver write (the same values, simple-history's
    signals around it; a test checks nothing else listens to a training's save), without the ORM's
    compiler or three more round trips: they cost more than the rest of the training's creation. The
    invitations' foreign key to the training is checked at commit (Django makes them deferrable).
    """
    parts, params = [], []
    sql, values = insert_values([training])
    parts.append(f"training AS ({sql})")
    params += values
    audit = audited_history(Training)
    creation = audit.creation_record(training) if audit is not None else None
    if creation is not None:
        sql, values = insert_values([creation.record])
        parts.append(f"history AS ({sql} RETURNING history_id)")
        params += values
    if players is None:
        parts.append(f"invitations AS ({queries.MEMBERS_INVITE})")
        params += _members_params(training)
    elif players:
        invitations = [Invitation(training=training, player_id=pk) for pk in sorted({p.pk for p in players})]
        sql, values = insert_values(invitations)
        parts.append(f"invitations AS ({sql})")
        params += values
    # The rules are read back by the statement that writes the training, with its history row's id.
    extra = queries.HISTORY_ID if creation is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(queries.training_insert_reading_rules(parts, rules_query(extra)[0]), params)
        rows = cursor.fetchall()
    mark_saved([training])
    if creation is not None:
        creation.record.pk = rows[0][-1] if rows else None  # no rule to read it with: not known
        creation.sent()
    return rules_from_rows(rows, extra)


def _training_validate(training: Training) -> None:
    """`full_clean` without its three queries: the team is a saved row (its auto_now_add `created_at` is
    set; the FOREIGN KEY holds it), the id a fresh uuid4, and the one constraint (end after start) is
    checked here; only when it fails is it asked of the database, for Django's usual message."""
    saved_team = training.team_id is not None and training.team.created_at is not None
    training.full_clean(
        exclude=["team"] if saved_team else None, validate_unique=False, validate_constraints=False
    )
    if not training.end > training.start:
        training.validate_constraints()
        raise ValidationError({"end": "must be after start."})  # not reached while the constraint holds


_UNSET: Any = object()


def training_update(
    *,
    training: Training,
    team: Team = _UNSET,
    title: str = _UNSET,
    start: datetime = _UNSET,
    end: datetime = _UNSET,
    time_zone: str = _UNSET,
    location: str = _UNSET,
    cancelled: bool = _UNSET,
    players: Sequence[Player] = _UNSET,
    min_players: int | None = _UNSET,
    max_players: int | None = _UNSET,
) -> Training:
    """Change what is given (omitted arguments stay) and replace the pending reminders to match.

    The row is locked first (`training_lock`), so a concurrent rule rescan cannot schedule from the old
    times after us. Training.DoesNotExist when it was deleted meanwhile (the caller's 404).
    """
    changes = {
        "team": team,
        "title": title,
        "start": start,
        "end": end,
        "time_zone": time_zone,
        "location": location,
        "min_players": min_players,
        "max_players": max_players,
    }
    changes["cancelled"] = cancelled
    with transaction.atomic():
        training = training_lock(training_id=training.pk)
        moved_from, was_cancelled = training.start, training.cancelled
        for name, value in changes.items():
            if value is not _UNSET:
                setattr(training, name, value)
        training.full_clean()
        training.save()
        if players is not _UNSET:
            _invitations_set(training=training, players=players)
        if max_players is not _UNSET:  # raised or cleared: the waiting list's first get the places
            squad_fill(training=training)
        training_reminders_schedule(training=training)
        if training.start != moved_from and not training.cancelled:
            training_moved_notice_schedule(training=training)  # players already reminded hear of it
        if training.cancelled and not was_cancelled:
            training_cancelled_notice_schedule(training=training)  # those coming, or reminded, hear of it
    return training


def training_cancel(*, training: Training) -> Training:
    """Cancel the training: every pending reminder is cancelled, the row stays for the record, and the
    players who accepted or were reminded are told (trainings/reminding/notices.py)."""
    return training_update(training=training, cancelled=True)


def training_lock(*, training_id: uuid.UUID | str) -> Training:
    """Lock the training's row (FOR UPDATE) and return it as it is now; Training.DoesNotExist if gone.

    Every writer of a training takes this lock before anything else of the training's: its jobs, their
    occurrences, its invitations, its history. One order for all of them (training, then the rule's row
    when a rule is written too, then jobs, then occurrences) is what keeps a DELETE racing a PATCH from
    deadlocking: an update used to hold the training and wait for its occurrences while a delete held the
    occurrences and waited for the training. Several trainings are locked in id order (a rule's rescan,
    a team's digests, a rule's deletion), so two of those cannot deadlock either.
    """
    return Training.objects.select_for_update().get(pk=training_id)


def training_delete(*, training: Training) -> int:
    """Delete the training and cancel every pending reminder in the same transaction. Returns how many.

    Training.DoesNotExist when someone else deleted it first (the lock waited for them)."""
    with transaction.atomic():
        training = training_lock(training_id=training.pk)
        cancelled = occurrences_cancel(
            Occurrence.objects.filter(job__training_job__training=training), reason="training deleted"
        )
        # Its held pushes' releases and a pending "training moved" notice go with it (not counted: they
        # are not reminders of a rule).
        occurrences_cancel(
            Occurrence.objects.filter(
                Q(job__key__startswith=f"trainings-quiet-release-{training.pk}-")
                | Q(job__key=moved_notice_key(training_id=training.pk))
                | Q(job__key=cancelled_notice_key(training_id=training.pk))
            ),
            reason="training deleted",
        )
        training.delete()
    return cancelled


# --- Players' responses ---------------------------------------------------------------------------------


def answer_record(
    *,
    training: Training,
    player: Player,
    phase: str,
    answers: Any,
    answered_at: datetime | None = None,
    source: AnswerSource = AnswerSource.ADMIN,
) -> QuestionnaireAnswer:
    """Record (or replace) a player's questionnaire answer; later reminders for that phase skip them.

    `source`: how it came in (a coach through the API or the admin, unless said otherwise). `answers` is
    what an answer link accepts too: checked against the team's questionnaire for `phase`
    (trainings/answers/questionnaires.py: AnswersRefused, a ValueError, naming the question otherwise)."""
    answers = answers_valid(definition_of(training.team_id, phase), answers_check(answers))
    with transaction.atomic():  # the answer and its events (trainings/webhooks/) together
        now = answered_at or timezone.now()
        answer = questionnaire_write(training_id=training.pk, player_id=player.pk, phase=phase,
                                     answers=answers, now=now, source=source)  # fmt: skip
        answer_recorded(training=training, player_id=player.pk, guardian_id=None, kind=phase,
                        answer={"answers": answers}, source=source, at=answer.answered_at)  # fmt: skip
    return answer


def invitation_respond(
    *,
    invitation: Invitation,
    status: InvitationStatus,
    responded_at: datetime | None = None,
    source: AnswerSource = AnswerSource.ADMIN,
) -> Invitation:
    """ACCEPTED or DENIED: later invitation reminders skip the player. On a training with a squad size an
    accept may come out WAITLISTED (trainings/squads/places.py decides, under the training's lock)."""
    if status not in (InvitationStatus.ACCEPTED, InvitationStatus.DENIED):
        raise ValueError("a response is ACCEPTED or DENIED")
    when = responded_at or timezone.now()
    with transaction.atomic():  # the response and its events (trainings/webhooks/) together
        squad = squad_respond(training_id=invitation.training_id, invitation_id=invitation.pk, status=status,
                              now=when, source=source)  # fmt: skip
        if squad is None:  # a coach, not a guardian
            invitation_status_write(invitation, status=status, now=when, source=source, by=None)
        else:  # written under the training's lock: the response as it now stands
            invitation.refresh_from_db(fields=["status", "responded_at", "response_source", "responded_by"])
        response = invitation.response
        answer_recorded(training=lambda: invitation.training, player_id=invitation.player_id,
                        guardian_id=None, kind=kinds.INVITATION.code, answer={"response": response},
                        source=source, at=invitation.responded_at)  # fmt: skip
    if status == InvitationStatus.DENIED:  # the coaches may want to know now (trainings/digest/)
        decline_alert_on_commit(training_id=invitation.training_id, player_id=invitation.player_id)
    return invitation


def rule_reschedule_on_commit(*, rule: ReminderRule) -> None:
    """After the rule's change commits, reschedule its trainings from a worker, batch after batch."""
    rule_id = rule.pk
    transaction.on_commit(lambda: rule_reschedule.delay(rule_id))


def rule_update(
    *,
    rule: ReminderRule,
    kind: str = _UNSET,
    offsets: list[str] = _UNSET,
    active: bool = _UNSET,
    critical_offsets: CriticalOffsets = _UNSET,
    escalate: list[str] = _UNSET,
) -> ReminderRule:
    """Change a rule; once committed, its future trainings are rescheduled in batches by a worker.

    `critical_offsets`: the reminders players' mute and quiet hours cannot hide ("all", or some of the
    rule's offsets; trainings/reminding/critical.py); `escalate`: the offsets that go on every channel (push
    and email; docs/escalation.md)."""
    with transaction.atomic():
        rule = ReminderRule.objects.select_for_update().get(pk=rule.pk)
        values = {"kind": kind, "offsets": offsets, "active": active, "critical_offsets": critical_offsets,
                  "escalate": escalate}  # fmt: skip
        for name, value in values.items():
            if value is not _UNSET:
                setattr(rule, name, value)
        rule.full_clean()
        rule.save()
        rule_reschedule_on_commit(rule=rule)
    return rule


def rule_delete(*, rule: ReminderRule) -> int:
    """Delete a rule and cancel everything it still had pending. Returns how many occurrences.

    The trainings the rule has jobs for are locked first, in id order, then the rule (the lock order of
    `training_lock`): a training's update links a new job to the rule while holding its training."""
    with transaction.atomic():
        list(
            Training.objects.filter(pk__in=TrainingJob.objects.filter(rule=rule).values("training_id"))
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        rule = ReminderRule.objects.select_for_update().get(pk=rule.pk)
        pending = Occurrence.objects.filter(job__training_job__rule=rule)
        cancelled = occurrences_cancel(pending, reason=f"rule {rule.slug} deleted")
        rule.delete()
    return cancelled


def training_copy(*, training: Training, days: int = 7) -> Training:
    """The same training `days` later at the same local time (wall clock in its zone, across DST), with
    the same player list, every invitation pending again."""
    zone = training.zone

    def later(instant: datetime) -> datetime:
        local = instant.astimezone(zone).replace(tzinfo=None) + timedelta(days=days)
        return local.replace(tzinfo=zone, fold=0).astimezone(UTC)

    players = list(Player.objects.filter(invitations__training=training).order_by("pk"))
    return training_create(
        team=training.team,
        title=training.title,
        start=later(training.start),
        end=later(training.end),
        time_zone=training.time_zone,
        location=training.location,
        players=players,
    )
