"""Following an answer link: what it is for, and recording the answer it carries.

A link is refused (LinkGone, HTTP 410) when its training was deleted or cancelled, when the kind's window
has closed (the training's start for an invitation or the pre-training questionnaire, the questionnaire's
close after the end for the post-training one), when the player is no longer on the training's list or no
longer an active member of its team (a membership ended leaves the invitation and the links behind), or,
for a link sent to a guardian, when they are no longer the player's guardian. A refusal says why and
nothing of the training. A guardian's answer is the
player's (one invitation, one answer per phase) and records who gave it (`responded_by`, `answered_by`).
Recording is idempotent: the same answer twice changes nothing (not even its time); a different one
replaces it while the window is open. The next reminder's fire-time re-check then skips the player.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.models import Model
from django.db.models.base import ModelState
from django.utils import timezone
from django.utils.translation import gettext_noop as _

from trainings import queries
from trainings.answers import questionnaires
from trainings.answers.events import answer_events
from trainings.answers.links import AnswerLink, answer_link_read, expects_response
from trainings.answers.statements import fetch_one
from trainings.answers.values import answers_check
from trainings.digest.alerts import decline_alert_on_commit
from trainings.models import (
    AnswerSource,
    Guardianship,
    Invitation,
    InvitationStatus,
    Membership,
    Player,
    QuestionnaireAnswer,
    Team,
    Training,
)
from trainings.planning import kinds
from trainings.reminding.firing import push_expiry

RESPONSES = {"accepted": InvitationStatus.ACCEPTED, "denied": InvitationStatus.DENIED}


class LinkGone(Exception):
    """The link was valid and no longer is (HTTP 410); `code` says why, for the app."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class LinkTarget:
    """What a followed link is about: its training (with the team), the player's invitation, the close."""

    link: AnswerLink
    training: Training
    invitation: Invitation
    closes_at: datetime
    guardianship: Guardianship | None = None  # a link sent to a guardian of the player's

    @property
    def reader(self) -> Any:
        """Who follows the link: the guardian it was sent to, or the player (their language and zone)."""
        return self.guardianship.guardian if self.guardianship else self.invitation.player


def answer_link_open(token: str, *, now: datetime | None = None) -> LinkTarget:
    """The link's target if it may still be answered: LinkInvalid (400) or LinkGone (410) otherwise.

    One query: the training with its team, and the player's invitation with the player when they are on
    its list (on PostgreSQL one plain statement: a link is followed once per tap, and building the ORM's
    query cost more than running it)."""
    return _target_open(answer_link_read(token), now or timezone.now())


def _target_open(link: AnswerLink, now: datetime) -> LinkTarget:
    if connection.vendor == "postgresql":
        training, invitation, member = _target_read(link)
    else:
        invitation = (
            Invitation.objects.select_related("training__team", "player")
            .filter(training_id=link.training_id, player_id=link.player_id)
            .first()
        )
        training = invitation.training if invitation else Training.objects.filter(pk=link.training_id).first()
        member = training is not None and _member(training, link.player_id)
    if training is None:
        raise LinkGone("gone", _("This training no longer exists."))
    guardianship = None
    if link.guardian_id is not None and not training.cancelled and invitation is not None:
        guardianship = (
            Guardianship.objects.select_related("guardian")
            .filter(guardian_id=link.guardian_id, player_id=link.player_id)
            .first()
        )
    return _target_checked(link, training, invitation, member, guardianship, now)


def _member(training: Training, player_id: int) -> bool:
    """Whether the player is an active member of the training's team now."""
    return Membership.objects.filter(team_id=training.team_id, player_id=player_id, active=True).exists()


def _target_checked(
    link: AnswerLink,
    training: Training,
    invitation: Invitation | None,
    member: bool,
    guardianship: Guardianship | None,
    now: datetime,
) -> LinkTarget:
    """The target, if the link may still be answered at `now`; LinkGone saying why otherwise. `member`:
    the link's player is an active member of the training's team."""
    if training.cancelled:
        raise LinkGone("cancelled", _("This training was cancelled."))
    closes_at = push_expiry(training=training, kind=link.kind)
    if now >= closes_at:
        raise LinkGone("closed", _("The time to answer this has passed."))
    if invitation is None:
        raise LinkGone("not_invited", _("You are no longer on this training's list."))
    if not member:
        raise LinkGone("not_member", _("You are no longer a member of this team."))
    if link.guardian_id is not None and guardianship is None:
        raise LinkGone("not_guardian", _("You are no longer this player's guardian."))
    return LinkTarget(link, training, invitation, closes_at, guardianship)


def _target_read(link: AnswerLink) -> tuple[Training | None, Invitation | None, bool]:
    """(training, invitation, member) of a link, the first two as detached model instances, from
    `queries.ANSWER_LINK_TARGET`."""
    row = fetch_one(queries.ANSWER_LINK_TARGET, {"player": link.player_id, "training": link.training_id})
    if row is None:
        return None, None, False
    return _target_from_row(row)


def _target_from_row(row: tuple[Any, ...]) -> tuple[Training, Invitation | None, bool]:
    """(training, invitation, member) from the target's first 21 columns (`queries.ANSWER_LINK_TARGET`)."""
    (training_id, team_id, title, start, end, zone, location, cancelled, team_name, team_zone,
     decline_alert_within, invitation_id, status, responded_at, source, responded_by, player_id,
     player_name, language, player_zone, member) = row[:21]  # fmt: skip
    team = _detached(Team, id=team_id, name=team_name, time_zone=team_zone,
                     decline_alert_within=decline_alert_within)  # fmt: skip
    training = _detached(Training, {"team": team}, id=training_id, team_id=team_id, title=title, start=start,
                         end=end, time_zone=zone, location=location, cancelled=cancelled)  # fmt: skip
    if invitation_id is None:
        return training, None, bool(member)
    player = _detached(Player, id=player_id, name=player_name, language=language, time_zone=player_zone)
    invitation = _detached(Invitation, {"training": training, "player": player}, id=invitation_id,
                           training_id=training_id, player_id=player_id, status=status,
                           responded_at=responded_at, response_source=source,
                           responded_by_id=responded_by)  # fmt: skip
    return training, invitation, bool(member)


_M = TypeVar("_M", bound=Model)


def _detached(model: type[_M], related: dict[str, Model] | None = None, /, **values: Any) -> _M:
    """An instance of `model` as the database would give it, with only these fields (attribute names) and
    these related objects, built without `Model.__init__`: that fills every other field's default and
    sends pre_init and post_init, and for a link's four objects cost more than its statement. A field not
    given is deferred: reading it loads it from the database rather than inventing a value."""
    instance = model.__new__(model)
    state = ModelState()
    state.adding, state.db = False, DEFAULT_DB_ALIAS
    if related:
        state.fields_cache = dict(related)
    instance._state = state
    instance.__dict__.update(values)
    return instance


@dataclass(frozen=True)
class Recorded:
    changed: bool
    answer: dict[str, Any]


@answer_events
def answer_link_record(
    *,
    target: LinkTarget,
    response: str | None = None,
    answers: dict[str, Any] | None = None,
    source: str | None = None,
    now: datetime | None = None,
) -> Recorded:
    """Record the link's answer: `response` ("accepted"/"denied") for an invitation, `answers` for a
    questionnaire; `source` defaults to the link's channel. Returns whether anything changed, and the
    answer as it now stands."""
    now = now or timezone.now()
    source = source or target.link.source
    by = target.link.guardian_id  # None: the player themself
    if expects_response(target.link.kind):
        if response not in RESPONSES:
            raise ValueError("response")
        recorded = _invitation_respond(target, response, now, source)
        _decline_alert_if_wanted(target, response, recorded)
        return recorded
    definition = questionnaires.definition_of(target.training.team_id, target.link.kind)
    answers = questionnaires.answers_valid(definition, answers_check(answers))
    if connection.vendor == "postgresql":
        return _questionnaire_record(target, answers, now, source)
    with transaction.atomic():
        answer, created = QuestionnaireAnswer.objects.select_for_update().get_or_create(
            training_id=target.training.pk,
            player_id=target.link.player_id,
            phase=target.link.kind,
            defaults={"answers": answers, "answered_at": now, "source": source, "answered_by_id": by},
        )
        changed = created or answer.answers != answers
        if changed and not created:
            answer.answers, answer.answered_at, answer.source, answer.answered_by_id = (
                answers,
                now,
                source,
                by,
            )
            answer.save(update_fields=["answers", "answered_at", "source", "answered_by"])
    return Recorded(changed, _questionnaire_answer(answer))


def _decline_alert_if_wanted(target: LinkTarget, response: str, recorded: Recorded) -> None:
    """The coaches may want to know now, if their team asks for late-decline alerts at all (the first
    check of decline_alert_schedule, made on the team already read: no query per decline otherwise)."""
    wanted = target.training.team.decline_alert_within
    if recorded.changed and RESPONSES[response] == InvitationStatus.DENIED and wanted:
        decline_alert_on_commit(training_id=target.training.pk, player_id=target.link.player_id)


def _invitation_respond(target: LinkTarget, response: str, now: datetime, source: str) -> Recorded:
    status, by = RESPONSES[response], target.link.guardian_id
    if connection.vendor == "postgresql":
        return _invitation_record(target, status, now, source)
    changed = (
        Invitation.objects.filter(pk=target.invitation.pk)
        .exclude(status=status)
        .update(status=status, responded_at=now, response_source=source, responded_by=by)
    )
    if changed:
        return Recorded(True, {"response": response, "at": now, "source": source, "by": _by(target)})
    current = Invitation.objects.get(pk=target.invitation.pk)
    return Recorded(False, _invitation_answer(current))


def _invitation_record(target: LinkTarget, status: str, now: datetime, source: str) -> Recorded:
    params: dict[str, Any] = {"status": status, "now": now, "source": source, "id": target.invitation.pk,
              "by": target.link.guardian_id}  # fmt: skip
    changed, status, responded_at, response_source, by = _recorded(queries.INVITATION_ANSWER_RECORD, params)
    if changed:  # given now, by this link's reader: no query for their name
        answer = _invitation_answer(Invitation(status=status, responded_at=responded_at,
                                               response_source=response_source))  # fmt: skip
        return Recorded(changed, {**answer, "by": _by(target)})
    invitation = Invitation(player_id=target.link.player_id, status=status, responded_at=responded_at,
                            response_source=response_source, responded_by_id=by)  # fmt: skip
    return Recorded(changed, _invitation_answer(invitation))


def _recorded(sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """The row a recording statement returns: (changed, the answer as it now stands)."""
    row = fetch_one(sql, params)
    assert row is not None  # the target was read: the row exists, written now or before
    return row


def _questionnaire_record(
    target: LinkTarget, answers: dict[str, Any], now: datetime, source: str
) -> Recorded:
    link = target.link
    params: dict[str, Any] = {"training": target.training.pk, "player": link.player_id, "phase": link.kind,
                              "answers": json.dumps(answers), "now": now, "source": source,
                              "by": link.guardian_id}  # fmt: skip
    changed, stored, answered_at, stored_source, by = _recorded(queries.QUESTIONNAIRE_ANSWER_RECORD, params)
    value = json.loads(stored) if isinstance(stored, str) else stored
    who = _by(target) if changed else _guardian_by(link.player_id, by)
    return Recorded(changed, {"answers": value, "at": answered_at, "source": stored_source, "by": who})


@answer_events
def answer_link_answer(
    link: AnswerLink,
    *,
    response: str | None = None,
    answers: dict[str, Any] | None = None,
    source: str | None = None,
    now: datetime | None = None,
) -> tuple[LinkTarget, Recorded]:
    """Open the link and record its answer (`answer_link_open`, then `answer_link_record`): the same
    refusals (LinkGone) and the same result. On PostgreSQL, for a player's own link of a kind whose close
    is `kinds.Closes`, in one statement that checks the link may still be answered before it writes; a
    followed link is one round trip, where two cost the worker and the database as much as the rest of
    the request."""
    now = now or timezone.now()
    closes = kinds.of(link.kind).closes
    if (
        connection.vendor != "postgresql"
        or link.guardian_id is not None
        or not isinstance(closes, kinds.Closes)
    ):
        target = _target_open(link, now)
        return target, answer_link_record(target=target, response=response, answers=answers, source=source,
                                          now=now)  # fmt: skip
    source = source or link.source
    params: dict[str, Any] = {"training": link.training_id, "player": link.player_id, "now": now,
                              "from_end": closes.anchor == "end", "span": closes.span(),
                              "source": source}  # fmt: skip
    invitation = expects_response(link.kind)
    if invitation:
        if response not in RESPONSES:
            raise ValueError("response")
        row = fetch_one(queries.LINK_RESPONSE_RECORD, {**params, "status": RESPONSES[response]})
    else:  # checked against the questions last read for the training: written only if they still hold
        check = questionnaires.guessed_check(link.training_id, link.kind, answers_check(answers))
        row = fetch_one(queries.LINK_ANSWERS_RECORD, {**params, "phase": link.kind, "team": check.team,
                        "revision": check.revision, "answers": json.dumps(check.checked)})  # fmt: skip
    if row is None:
        raise LinkGone("gone", _("This training no longer exists."))
    training, found, member = _target_from_row(row)
    target = _target_checked(link, training, found, member, None, now)
    if not row[21]:  # open, as the statement saw it: refused above for a reason, never written
        raise LinkGone("closed", _("The time to answer this has passed."))
    if not invitation and not check.holds(row[1], row[26]):  # not written: checked as any other way is
        questionnaires.learn(link.training_id, link.kind, row[1])
        return target, answer_link_record(target=target, answers=answers, source=source, now=now)
    changed = bool(row[-5])
    if invitation:
        if changed:
            answer = _invitation_answer(
                _detached(Invitation, status=row[-4], responded_at=row[-3], response_source=row[-2],
                          player_id=link.player_id, responded_by_id=None)
            )  # fmt: skip
            recorded = Recorded(True, {**answer, "by": None})
        else:
            recorded = Recorded(False, _invitation_answer(target.invitation))
        assert response is not None  # checked above
        _decline_alert_if_wanted(target, response, recorded)
        return target, recorded
    stored, answered_at, stored_source, by = row[-4:] if changed else row[22:26]
    value = json.loads(stored) if isinstance(stored, str) else stored
    who = None if changed else _guardian_by(link.player_id, by)
    return target, Recorded(
        changed, {"answers": value, "at": answered_at, "source": stored_source, "by": who}
    )


def answer_link_current(target: LinkTarget) -> dict[str, Any] | None:
    """The answer already given for the link's kind, or None."""
    if expects_response(target.link.kind):
        invitation = target.invitation
        return None if invitation.status == InvitationStatus.PENDING else _invitation_answer(invitation)
    answer = QuestionnaireAnswer.objects.filter(
        training_id=target.training.pk, player_id=target.link.player_id, phase=target.link.kind
    ).first()
    return _questionnaire_answer(answer) if answer else None


def _invitation_answer(invitation: Invitation) -> dict[str, Any]:
    if invitation.status == InvitationStatus.PENDING:
        return {"response": None, "at": None, "source": None, "by": None}
    response = "accepted" if invitation.status == InvitationStatus.ACCEPTED else "denied"
    return {"response": response, "at": invitation.responded_at, "source": invitation.response_source or None,
            "by": _guardian_by(invitation.player_id, invitation.responded_by_id)}  # fmt: skip


def _questionnaire_answer(answer: QuestionnaireAnswer) -> dict[str, Any]:
    return {"answers": answer.answers, "at": answer.answered_at, "source": answer.source,
            "by": _guardian_by(answer.player_id, answer.answered_by_id)}  # fmt: skip


def _by(target: LinkTarget) -> dict[str, Any] | None:
    """Who gave the answer, when a guardian did: their id, name and what they are to the player."""
    ship = target.guardianship
    if ship is None:
        return None
    return {"guardian": ship.guardian_id, "name": ship.guardian.name, "relation": ship.relation}


def _guardian_by(player_id: int, guardian_id: int | None) -> dict[str, Any] | None:
    if guardian_id is None:
        return None
    ship = Guardianship.objects.select_related("guardian").filter(
        player_id=player_id, guardian_id=guardian_id
    )
    found = ship.first()
    if found is None:  # no longer their guardian: still who answered
        return {"guardian": guardian_id, "name": "", "relation": ""}
    return {"guardian": guardian_id, "name": found.guardian.name, "relation": found.relation}


SOURCES_FROM_BODY = (AnswerSource.APP,)  # a link's POST may say it came through the app's own screen
