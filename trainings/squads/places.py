"""Who has a place on a training with a squad size: the decisions on an invitation's response there
(trainings/answers/recording.py writes them).

- An accept when `max_players` have accepted puts the player on the waiting list (`WAITLISTED`); one who
  is on it already stays there (in turn), an accepted player stays accepted.
- A decline by an accepted player frees a place: the first on the waiting list (by when they accepted)
  is promoted and told by a "you're in" notice (trainings/squads/notices.py); a decline that leaves fewer
  than `min_players` accepted within the short-squad rule's offset alerts the coaches at once
  (trainings/squads/short.py).
- A promotion is an `answer.recorded` event (response `accepted`) for the platform's webhooks, as the
  accept that put the player on the list was (response `waitlisted`).
- Waiting players go before a newcomer: a free place (a maximum raised, a decline not yet followed up) is
  filled from the waiting list before an accept is decided.

Every decision runs under the training's row lock (FOR UPDATE; the lock order of trainings.planning.writes.
training_lock: the training, then its invitations), so two accepts racing for the last place take turns and
the second finds the squad full. A training without either limit is none of this module's business
(`squad_respond` returns None and the caller writes as before).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from trainings.answers.recording import invitation_status_write, waitlisted_accept
from trainings.models import Invitation, InvitationStatus, Training
from trainings.planning import kinds
from trainings.squads.notices import squad_in_notices_schedule
from trainings.squads.short import short_alert_on_commit
from trainings.webhooks.events import answer_recorded

ACCEPTED, WAITLISTED, DENIED = InvitationStatus.ACCEPTED, InvitationStatus.WAITLISTED, InvitationStatus.DENIED


@dataclass(frozen=True)
class SquadAnswer:
    """An invitation's response as it now stands, and whether this call changed it."""

    changed: bool
    status: str
    responded_at: datetime | None
    response_source: str
    responded_by_id: int | None

    def invitation(self, *, player_id: int) -> Invitation:
        """The response as an unsaved invitation of `player_id` (what readers of an answer take)."""
        return Invitation(
            player_id=player_id,
            status=self.status,
            responded_at=self.responded_at,
            response_source=self.response_source,
            responded_by_id=self.responded_by_id,
        )


def _answer(invitation: Invitation, changed: bool) -> SquadAnswer:
    return SquadAnswer(
        changed,
        invitation.status,
        invitation.responded_at,
        invitation.response_source,
        invitation.responded_by_id,
    )


def squad_limited(*, training_id: uuid.UUID | str) -> bool:
    """Whether the training has a minimum or a maximum (a response then goes through `squad_respond`)."""
    limits = Training.objects.filter(pk=training_id).values_list("min_players", "max_players").first()
    return limits is not None and limits != (None, None)


def squad_respond(
    *,
    training_id: uuid.UUID | str,
    invitation_id: int,
    status: str,
    now: datetime | None = None,
    source: str,
    by: int | None = None,
) -> SquadAnswer | None:
    """Record ACCEPTED or DENIED for a training with a squad size, as the module docstring says: an accept
    may come out WAITLISTED. None when the training has neither limit (or is gone)."""
    if status not in (ACCEPTED, DENIED):
        raise ValueError("a response is ACCEPTED or DENIED")
    now = now or timezone.now()
    if not squad_limited(training_id=training_id):  # read without a lock: most trainings have no limits
        return None
    with transaction.atomic():
        limits = (
            Training.objects.select_for_update()
            .filter(pk=training_id)
            .values_list("min_players", "max_players")
            .first()
        )
        if limits is None or limits == (None, None):
            return None
        minimum, maximum = limits
        invitation = Invitation.objects.select_for_update().get(pk=invitation_id)
        before = invitation.status
        if before == status or (status == ACCEPTED and before == WAITLISTED):
            return _answer(invitation, False)
        promoted: list[int] = []
        if status == ACCEPTED:
            promoted = waiting_list_promote(training_id=training_id, maximum=maximum)
            full = maximum is not None and _accepted(training_id) >= maximum
            status = WAITLISTED if full else ACCEPTED
        invitation_status_write(invitation, status=status, now=now, source=source, by=by)
        if before == ACCEPTED:  # a place freed
            promoted += waiting_list_promote(training_id=training_id, maximum=maximum)
            if minimum is not None and _accepted(training_id) < minimum:
                short_alert_on_commit(training_id=training_id)
        squad_in_notices_schedule(training_id=training_id, player_ids=promoted, now=now)
    return _answer(invitation, True)


def _accepted(training_id: uuid.UUID | str) -> int:
    return Invitation.objects.filter(training_id=training_id, status=ACCEPTED).count()


def waiting_list_promote(*, training_id: uuid.UUID | str, maximum: int | None) -> list[int]:
    """Give the free places (all of the waiting list when there is no maximum any more) to the first on
    the waiting list, by when they accepted; returns their player ids. The caller holds the training's
    lock."""
    waiting = Invitation.objects.filter(training_id=training_id, status=WAITLISTED)
    waiting = waiting.order_by("responded_at", "pk")
    if maximum is not None:
        free = maximum - _accepted(training_id)
        if free <= 0:
            return []
        waiting = waiting[:free]
    rows = list(waiting.values_list("pk", "player_id", "response_source", "responded_at"))
    waitlisted_accept([row[0] for row in rows])
    for _, player_id, source, at in rows:  # the platform's copy of the response follows (trainings/webhooks/)
        answer_recorded(training=lambda: Training.objects.get(pk=training_id), player_id=player_id,
                        guardian_id=None, kind=kinds.INVITATION.code, answer={"response": "accepted"},
                        source=source, at=at)  # fmt: skip
    return [row[1] for row in rows]


def squad_fill(*, training: Training) -> list[int]:
    """After a training's limits changed (the caller's transaction holds its lock): promote as many as
    now have a place, and tell them. Returns their player ids."""
    if (
        training.max_players is not None
        and not Invitation.objects.filter(training=training, status=WAITLISTED).exists()
    ):
        return []
    promoted = waiting_list_promote(training_id=training.pk, maximum=training.max_players)
    squad_in_notices_schedule(training_id=training.pk, player_ids=promoted, now=timezone.now())
    return promoted
