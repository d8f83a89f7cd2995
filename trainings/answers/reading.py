"""What a followed answer link is for: its training, the player's invitation, whether it may still be
answered, and the answer it already has (trainings/answers/recording.py writes one).

A link is refused (LinkGone, HTTP 410) when its training was deleted or cancelled, when the kind's window
has closed (the training's start for an invitation or the pre-training questionnaire, the questionnaire's
close after the end for the post-training one), when the player is no longer on the training's list or no
longer an active member of its team (a membership ended leaves the invitation and the links behind), or,
for a link sent to a guardian, when they are no longer the player's guardian. A refusal says why and
nothing of the training. The next reminder's fire-time re-check skips a player who answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_noop as _

from trainings import queries
from trainings.answers.links import AnswerLink, answer_link_read, expects_response
from trainings.answers.recording import invitation_answer, questionnaire_answer
from trainings.answers.statements import detached, fetch_one
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
from trainings.reminding.firing import push_expiry


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
    return target_open(answer_link_read(token), now or timezone.now())


def target_open(link: AnswerLink, now: datetime) -> LinkTarget:
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
    return target_checked(link, training, invitation, member, guardianship, now)


def _member(training: Training, player_id: int) -> bool:
    """Whether the player is an active member of the training's team now."""
    return Membership.objects.filter(team_id=training.team_id, player_id=player_id, active=True).exists()


def target_checked(
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
    return target_from_row(queries.LinkTargetRow(*row))


def target_from_row(row: queries.LinkTargetRow) -> tuple[Training, Invitation | None, bool]:
    """(training, invitation, member) from the target's columns (`queries.LinkTargetRow`, which every link
    statement's row begins with)."""
    team = detached(Team, id=row.team_id, name=row.team_name, time_zone=row.team_zone,
                    decline_alert_within=row.decline_alert_within)  # fmt: skip
    training = detached(Training, {"team": team}, id=row.training_id, team_id=row.team_id, title=row.title,
                        start=row.start, end=row.end, time_zone=row.training_zone, location=row.location,
                        cancelled=row.cancelled)  # fmt: skip
    if row.invitation_id is None:
        return training, None, row.member
    player = detached(Player, id=row.player_id, name=row.player_name, language=row.language,
                      time_zone=row.player_zone)  # fmt: skip
    invitation = detached(Invitation, {"training": training, "player": player}, id=row.invitation_id,
                          training_id=row.training_id, player_id=row.player_id, status=row.status,
                          responded_at=row.responded_at, response_source=row.response_source,
                          responded_by_id=row.responded_by_id)  # fmt: skip
    return training, invitation, row.member


def answer_link_current(target: LinkTarget) -> dict[str, Any] | None:
    """The answer already given for the link's kind, or None."""
    if expects_response(target.link.kind):
        invitation = target.invitation
        return None if invitation.status == InvitationStatus.PENDING else invitation_answer(invitation)
    answer = QuestionnaireAnswer.objects.filter(
        training_id=target.training.pk, player_id=target.link.player_id, phase=target.link.kind
    ).first()
    return questionnaire_answer(answer) if answer else None


SOURCES_FROM_BODY = (AnswerSource.APP,)  # a link's POST may say it came through the app's own screen
