"""The one writer of an answer: an invitation's response (the RSVP, a squad's WAITLISTED and its waiting
list's promotions included) and a questionnaire's answers, whatever the way in: a link's
(trainings/answers/following.py), a coach's (trainings/planning/writes.py), a squad's decision under the
training's lock (trainings/squads/places.py). Writing the same answer twice changes nothing, not even its
time; a different one replaces it. A guardian's answer is the player's and records who gave it
(`responded_by`, `answered_by`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import connection, transaction

from trainings import queries
from trainings.answers.statements import fetch_one
from trainings.models import Guardianship, Invitation, InvitationStatus, QuestionnaireAnswer

if TYPE_CHECKING:
    from trainings.answers.reading import LinkTarget

RESPONSES = {"accepted": InvitationStatus.ACCEPTED, "denied": InvitationStatus.DENIED}


@dataclass(frozen=True)
class Recorded:
    changed: bool
    answer: dict[str, Any]


def invitation_link_write(target: LinkTarget, response: str, now: datetime, source: str) -> Recorded:
    """Write a link's RSVP on a training without a squad size (trainings/answers/following.py decided
    that): unchanged when it already stands. `response` is "accepted" or "denied"."""
    status = RESPONSES[response]
    if connection.vendor == "postgresql":
        return _invitation_record(target, status, now, source)
    by = target.link.guardian_id
    changed = (
        Invitation.objects.filter(pk=target.invitation.pk)
        .exclude(status=status)
        .update(status=status, responded_at=now, response_source=source, responded_by=by)
    )
    if changed:
        answer = {"response": response, "at": now, "source": source, "by": by_guardian(target)}
        return Recorded(True, answer)
    current = Invitation.objects.get(pk=target.invitation.pk)
    return Recorded(False, invitation_answer(current))


def invitation_status_write(
    invitation: Invitation, *, status: str, now: datetime, source: str, by: int | None
) -> None:
    """Write a decided response (a coach's, or a squad's under the training's and the invitation's locks,
    trainings/squads/places.py), and keep `invitation` in step."""
    Invitation.objects.filter(pk=invitation.pk).update(
        status=status, responded_at=now, response_source=source, responded_by=by
    )
    invitation.status, invitation.responded_at = status, now
    invitation.response_source, invitation.responded_by_id = source, by


def waitlisted_accept(invitation_ids: list[int]) -> None:
    """Promote these waiting-list invitations to ACCEPTED (the squad chose them under the training's lock)."""
    if invitation_ids:
        Invitation.objects.filter(pk__in=invitation_ids).update(status=InvitationStatus.ACCEPTED)


def questionnaire_link_write(
    target: LinkTarget, answers: dict[str, Any], now: datetime, source: str
) -> Recorded:
    """Write a link's checked questionnaire answers: unchanged when the same ones stand."""
    if connection.vendor == "postgresql":
        return _questionnaire_record(target, answers, now, source)
    by = target.link.guardian_id
    with transaction.atomic():
        answer, created = QuestionnaireAnswer.objects.select_for_update().get_or_create(
            training_id=target.training.pk,
            player_id=target.link.player_id,
            phase=target.link.kind,
            defaults={"answers": answers, "answered_at": now, "source": source, "answered_by_id": by},
        )
        changed = created or answer.answers != answers
        if changed and not created:
            answer.answers, answer.answered_at = answers, now
            answer.source, answer.answered_by_id = source, by
            answer.save(update_fields=["answers", "answered_at", "source", "answered_by"])
    return Recorded(changed, questionnaire_answer(answer))


def questionnaire_write(
    *, training_id: UUID, player_id: int, phase: str, answers: Any, now: datetime, source: str
) -> QuestionnaireAnswer:
    """Write a coach's checked questionnaire answers for the player (the API or the admin): they replace
    any standing ones, and no guardian gave them."""
    answer, _ = QuestionnaireAnswer.objects.update_or_create(
        training_id=training_id, player_id=player_id, phase=phase,
        defaults={"answers": answers, "answered_at": now, "source": source, "answered_by": None},
    )  # fmt: skip
    return answer


def link_response_write(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Open a player's invitation link and write its RSVP in one statement (`queries.LINK_RESPONSE_RECORD`,
    which checks the link may still be answered before it writes): its row, or None when the training is
    gone."""
    return fetch_one(queries.LINK_RESPONSE_RECORD, params)


def link_answers_write(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Open a player's questionnaire link and write its answers in one statement
    (`queries.LINK_ANSWERS_RECORD`, written only if the questions it was checked against still hold)."""
    return fetch_one(queries.LINK_ANSWERS_RECORD, params)


def _invitation_record(target: LinkTarget, status: str, now: datetime, source: str) -> Recorded:
    params: dict[str, Any] = {"status": status, "now": now, "source": source, "id": target.invitation.pk,
              "by": target.link.guardian_id}  # fmt: skip
    changed, status, responded_at, response_source, by = _recorded(queries.INVITATION_ANSWER_RECORD, params)
    if changed:  # given now, by this link's reader: no query for their name
        answer = invitation_answer(Invitation(status=status, responded_at=responded_at,
                                               response_source=response_source))  # fmt: skip
        return Recorded(changed, {**answer, "by": by_guardian(target)})
    invitation = Invitation(player_id=target.link.player_id, status=status, responded_at=responded_at,
                            response_source=response_source, responded_by_id=by)  # fmt: skip
    return Recorded(changed, invitation_answer(invitation))


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
    who = by_guardian(target) if changed else guardian_by(link.player_id, by)
    return Recorded(changed, {"answers": value, "at": answered_at, "source": stored_source, "by": who})


def invitation_answer(invitation: Invitation) -> dict[str, Any]:
    if invitation.status == InvitationStatus.PENDING:
        return {"response": None, "at": None, "source": None, "by": None}
    return {"response": invitation.response, "at": invitation.responded_at,
            "source": invitation.response_source or None,
            "by": guardian_by(invitation.player_id, invitation.responded_by_id)}  # fmt: skip


def questionnaire_answer(answer: QuestionnaireAnswer) -> dict[str, Any]:
    return {"answers": answer.answers, "at": answer.answered_at, "source": answer.source,
            "by": guardian_by(answer.player_id, answer.answered_by_id)}  # fmt: skip


def by_guardian(target: LinkTarget) -> dict[str, Any] | None:
    """Who gave the answer, when a guardian did: their id, name and what they are to the player."""
    ship = target.guardianship
    if ship is None:
        return None
    return {"guardian": ship.guardian_id, "name": ship.guardian.name, "relation": ship.relation}


def guardian_by(player_id: int, guardian_id: int | None) -> dict[str, Any] | None:
    if guardian_id is None:
        return None
    ship = Guardianship.objects.select_related("guardian").filter(
        player_id=player_id, guardian_id=guardian_id
    )
    found = ship.first()
    if found is None:  # no longer their guardian: still who answered
        return {"guardian": guardian_id, "name": "", "relation": ""}
    return {"guardian": guardian_id, "name": found.guardian.name, "relation": found.relation}
