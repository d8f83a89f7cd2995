"""An answer link's way in: what its answer means for the training, then its write through
trainings/answers/recording.py, the one writer of an answer.

An RSVP on a training with a squad size is decided by trainings/squads/places.py under the training's row
lock (an accept may come out WAITLISTED); any other answer is written as the link carries it. A changed
decline may alert the coaches at once (trainings/digest/).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_noop as _

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
    invitation = expects_response(link.kind)
    if invitation:
        if response not in RESPONSES:
            raise ValueError("response")
        row = link_response_write({**params, "status": RESPONSES[response]})
    else:  # checked against the questions last read for the training: written only if they still hold
        check = questionnaires.guessed_check(link.training_id, link.kind, answers_check(answers))
        written = {"phase": link.kind, "team": check.team, "revision": check.revision,
                   "answers": json.dumps(check.checked)}  # fmt: skip
        row = link_answers_write({**params, **written})
    if row is None:
        raise LinkGone("gone", _("This training no longer exists."))
    training, found, member = target_from_row(row)
    target = target_checked(link, training, found, member, None, now)
    if not row[21]:  # open, as the statement saw it: refused above for a reason, never written
        raise LinkGone("closed", _("The time to answer this has passed."))
    if not invitation and not check.holds(row[1], row[26]):  # not written: checked as any other way is
        questionnaires.learn(link.training_id, link.kind, row[1])
        return target, answer_link_record(target=target, answers=answers, source=source, now=now)
    changed = bool(row[-5])
    if invitation:
        assert response is not None  # checked above
        if not changed and found is not None and found.status != RESPONSES[response]:
            # Not written: the training has a squad size, decided under its lock (trainings/squads/).
            return target, answer_link_record(target=target, response=response, source=source, now=now)
        if changed:
            answer = invitation_answer(
                detached(Invitation, status=row[-4], responded_at=row[-3], response_source=row[-2],
                          player_id=link.player_id, responded_by_id=None)
            )  # fmt: skip
            recorded = Recorded(True, {**answer, "by": None})
        else:
            recorded = Recorded(False, invitation_answer(target.invitation))
        _decline_alert_if_wanted(target, response, recorded)
        return target, recorded
    stored, answered_at, stored_source, by = row[-4:] if changed else row[22:26]
    value = json.loads(stored) if isinstance(stored, str) else stored
    who = None if changed else guardian_by(link.player_id, by)
    return target, Recorded(
        changed, {"answers": value, "at": answered_at, "source": stored_source, "by": who}
    )
