"""An answer link's way in: what its answer means for the training, then its write through
trainings/answers/recording.py, the one writer of an answer.

An RSVP on a training with a squad size is decided by trainings/squads/places.py under the training's row
lock (an accept may come out WAITLISTED); any other answer is written as the link carries it. A changed
decline may alert the coaches at once (trainings/digest/).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_noop as _

from trainings import queries
from trainings.answers import questionnaires
from trainings.answers.events import answer_events
from trainings.answers.links import AnswerLink, expects_response
from trainings.answers.reading import LinkGone, LinkTarget, target_checked, target_from_row, target_open
from trainings.answers.recording import (
    RESPONSES,
    Recorded,
    by_guardian,
    guardian_by,
    invitation_answer,
    invitation_link_write,
    link_answers_write,
    link_response_write,
    questionnaire_link_write,
)
from trainings.answers.statements import detached
from trainings.answers.values import answers_check
from trainings.digest.alerts import decline_alert_on_commit
from trainings.models import Invitation, InvitationStatus
from trainings.planning import kinds
from trainings.squads.places import squad_respond


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
    if expects_response(target.link.kind):
        if response not in RESPONSES:
            raise ValueError("response")
        recorded = _invitation_respond(target, response, now, source)
        _decline_alert_if_wanted(target, response, recorded)
        return recorded
    definition = questionnaires.definition_of(target.training.team_id, target.link.kind)
    answers = questionnaires.answers_valid(definition, answers_check(answers))
    return questionnaire_link_write(target, answers, now, source)


def _decline_alert_if_wanted(target: LinkTarget, response: str, recorded: Recorded) -> None:
    """The coaches may want to know now, if their team asks for late-decline alerts at all (the first
    check of decline_alert_schedule, made on the team already read: no query per decline otherwise)."""
    wanted = target.training.team.decline_alert_within
    if recorded.changed and RESPONSES[response] == InvitationStatus.DENIED and wanted:
        decline_alert_on_commit(training_id=target.training.pk, player_id=target.link.player_id)


def _invitation_respond(target: LinkTarget, response: str, now: datetime, source: str) -> Recorded:
    status, by = RESPONSES[response], target.link.guardian_id
    squad = squad_respond(training_id=target.training.pk, invitation_id=target.invitation.pk, status=status,
                          now=now, source=source, by=by)  # fmt: skip
    if squad is not None:  # a training with a squad size: decided under its lock (trainings/squads/)
        answer = invitation_answer(squad.invitation(player_id=target.link.player_id))
        return Recorded(squad.changed, {**answer, "by": by_guardian(target)} if squad.changed else answer)
    return invitation_link_write(target, response, now, source)


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
        target = target_open(link, now)
        return target, answer_link_record(target=target, response=response, answers=answers, source=source,
                                          now=now)  # fmt: skip
    source = source or link.source
    params: dict[str, Any] = {"training": link.training_id, "player": link.player_id, "now": now,
                              "from_end": closes.anchor == "end", "span": closes.span(),
                              "source": source}  # fmt: skip
    if expects_response(link.kind):
        if response not in RESPONSES:
            raise ValueError("response")
        responded = _statement_row(link_response_write, {**params, "status": RESPONSES[response]},
                                   queries.LinkResponseRow)  # fmt: skip
        return _response_recorded(link, response, responded, now, source)
    # Checked against the questions last read for the training: written only if they still hold.
    check = questionnaires.guessed_check(link.training_id, link.kind, answers_check(answers))
    answered = _statement_row(link_answers_write, {**params, "phase": link.kind,
                              "team": check.team, "revision": check.revision,
                              "answers": json.dumps(check.checked)}, queries.LinkAnswersRow)  # fmt: skip
    return _answers_recorded(link, check, answered, now, source, answers)


_Row = TypeVar("_Row", bound=queries.LinkOpenRow)


def _statement_row(
    write: Callable[[dict[str, Any]], tuple[Any, ...] | None], params: dict[str, Any], row_type: type[_Row]
) -> _Row:
    """The row of a one-statement POST (`write`: recording.py's), its columns named by `row_type`;
    LinkGone when the training is gone (no row)."""
    raw = write(params)
    if raw is None:
        raise LinkGone("gone", _("This training no longer exists."))
    return row_type(*raw)


def _opened(link: AnswerLink, row: queries.LinkOpenRow, now: datetime) -> LinkTarget:
    """The target a one-statement POST read, if the link may be answered; LinkGone saying why otherwise
    (the statement then wrote nothing)."""
    training, found, member = target_from_row(row)
    target = target_checked(link, training, found, member, None, now)
    if not row.open:  # as the statement saw it: refused above for a reason, never written
        raise LinkGone("closed", _("The time to answer this has passed."))
    return target


def _response_recorded(
    link: AnswerLink, response: str, row: queries.LinkResponseRow, now: datetime, source: str
) -> tuple[LinkTarget, Recorded]:
    """An invitation link's answer from LINK_RESPONSE_RECORD's row."""
    target = _opened(link, row, now)
    if row.changed:
        answer = invitation_answer(
            detached(Invitation, status=row.new_status, responded_at=row.new_responded_at,
                     response_source=row.new_response_source, player_id=link.player_id, responded_by_id=None)
        )  # fmt: skip
        recorded = Recorded(True, {**answer, "by": None})
    elif target.invitation.status != RESPONSES[response]:
        # Not written: the training has a squad size, decided under its lock (trainings/squads/).
        return target, answer_link_record(target=target, response=response, source=source, now=now)
    else:
        recorded = Recorded(False, invitation_answer(target.invitation))
    _decline_alert_if_wanted(target, response, recorded)
    return target, recorded


def _answers_recorded(
    link: AnswerLink,
    check: questionnaires.Guessed,
    row: queries.LinkAnswersRow,
    now: datetime,
    source: str,
    answers: dict[str, Any] | None,
) -> tuple[LinkTarget, Recorded]:
    """A questionnaire link's answers from LINK_ANSWERS_RECORD's row: written only when they were checked
    against the team's questionnaire as the statement found it; otherwise checked as any other way is."""
    target = _opened(link, row, now)
    if not check.holds(row.team_id, row.revision):
        questionnaires.learn(link.training_id, link.kind, row.team_id)
        return target, answer_link_record(target=target, answers=answers, source=source, now=now)
    if row.changed:
        stored, answered_at, stored_source, who = row.new_answers, row.new_answered_at, row.new_source, None
    else:
        stored, answered_at, stored_source = row.answers, row.answered_at, row.source
        who = guardian_by(link.player_id, row.answered_by_id)
    value = json.loads(stored) if isinstance(stored, str) else stored
    return target, Recorded(
        row.changed, {"answers": value, "at": answered_at, "source": stored_source, "by": who}
    )
