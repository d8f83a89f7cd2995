"""Guardians: who may see whom, and the writes (named `guardian_<action>`).

A coach sees and manages the guardians of their teams' players, an operator everyone's; a guardian sees
themself. A guardian sees their own players' trainings only, and answers them through answer links minted
for them (trainings/answers/links.py), which record who answered.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from trainings.answers.links import answer_token, answer_url
from trainings.devices.registration import guardian_of
from trainings.models import (
    Guardian,
    Guardianship,
    Invitation,
    InvitationStatus,
    Player,
    QuestionnaireAnswer,
    Training,
)
from trainings.planning import kinds
from trainings.roster.services import ExternalIdTaken
from trainings.selectors import guardians_visible_to, players_visible_to, user_sees_all_teams


def guardians_readable_by(user: Any) -> QuerySet[Guardian]:
    """Whom a user may read: the guardians they manage, and themself when they are a guardian."""
    own = guardian_of(user)
    managed = guardians_visible_to(user)
    if own is None:
        return managed
    return Guardian.objects.filter(Q(pk=own.pk) | Q(pk__in=managed.values("pk")))


def guardian_manages(user: Any, guardian: Guardian) -> bool:
    """Whether `user` (a coach or an operator) may change `guardian`: a coach, a guardian of one of their
    players (a guardian is not their own to change: the guardian's app manages devices and preferences)."""
    if user_sees_all_teams(user):
        return True
    return guardians_visible_to(user).filter(pk=guardian.pk).exists()


def guardian_save(
    *,
    guardian: Guardian | None = None,
    wards: Iterable[tuple[Player, str]] | None = None,
    owner: Any = None,
    **fields: Any,
) -> Guardian:
    """Create or change a guardian; `wards`, when given, replaces whose guardian they are (player,
    relation). A new guardian is `owner`'s (the caller's): its `external_id` is unique among theirs
    (ExternalIdTaken otherwise)."""
    with transaction.atomic():
        guardian = guardian or Guardian(owner=owner)
        if guardian.owner_id is None and fields.get("external_id") is not None:
            guardian.owner = owner  # an unowned guardian keyed: the key is its caller's
        for name, value in fields.items():
            setattr(guardian, name, value)
        guardian.full_clean(exclude=["user", "owner"])
        key = fields.get("external_id")
        if (
            key is not None
            and Guardian.objects.filter(owner=guardian.owner, external_id=key)
            .exclude(pk=guardian.pk)
            .exists()
        ):
            raise ExternalIdTaken()
        guardian.save()
        if wards is not None:
            wanted = {player.pk: relation for player, relation in wards}
            guardian.guardianships.exclude(player_id__in=wanted).delete()
            for player_id, relation in wanted.items():
                Guardianship.objects.update_or_create(
                    guardian=guardian, player_id=player_id, defaults={"relation": relation}
                )
    return guardian


def guardian_players_for(user: Any) -> QuerySet[Player]:
    """The players a user may link a guardian to: those of their teams (every player, for operators)."""
    return players_visible_to(user)


def guardian_trainings(*, guardian: Guardian, now: datetime | None = None) -> list[dict[str, Any]]:
    """The guardian's players' trainings not over yet, by start, each with what every one of the guardian's
    players on it still owes and the answer link (minted for this guardian) that gives it. Never another
    player's: the invitations read are those of the guardian's own players."""
    now = now or timezone.now()
    relation = dict(guardian.guardianships.values_list("player_id", "relation"))
    invitations = (
        Invitation.objects.filter(player_id__in=relation, training__end__gt=now, training__cancelled=False)
        .select_related("training__team", "player")
        .order_by("training__start", "training_id", "player__name")
    )
    answered = _answered(invitations)
    trainings: dict[Any, dict[str, Any]] = {}
    for invitation in invitations:
        training: Training = invitation.training
        entry = trainings.setdefault(
            training.pk,
            {"id": training.pk, "title": training.title, "team": training.team.name,
             "start": training.start, "end": training.end, "time_zone": training.time_zone,
             "location": training.location, "players": []},
        )  # fmt: skip
        entry["players"].append(
            {
                "id": invitation.player_id,
                "name": invitation.player.name,
                "relation": relation[invitation.player_id],
                "invitation": invitation.status,
                "open": _open_links(guardian, invitation, answered, now),
            }
        )
    return list(trainings.values())


def _answered(invitations: QuerySet[Invitation]) -> set[tuple[Any, int, str]]:
    pairs = invitations.values("training_id", "player_id")
    rows = QuestionnaireAnswer.objects.filter(
        training_id__in=pairs.values("training_id"), player_id__in=pairs.values("player_id")
    ).values_list("training_id", "player_id", "phase")
    return set(rows)


def _open_links(
    guardian: Guardian, invitation: Invitation, answered: set[tuple[Any, int, str]], now: datetime
) -> list[dict[str, Any]]:
    """The kinds the player may still answer on this training (window open), with the guardian's link, in
    the kinds table's order."""
    links = []
    training = invitation.training
    for kind in kinds.rule_kinds():
        if kind.answer is None or now >= kind.closes(training):
            continue
        done = (
            invitation.status != InvitationStatus.PENDING
            if kind.answer.expects == "response"
            else (training.pk, invitation.player_id, kind.code) in answered
        )
        token = answer_token(
            player_id=invitation.player_id, training_id=training.pk, kind=kind.code, guardian_id=guardian.pk
        )
        links.append({"kind": kind.code, "answered": done, "answer_url": answer_url(token)})
    return links
