"""The roster API: thin views over trainings/roster/services.py and sync.py.

Who may do what (docs/operations/security.md, tests/trainings_faults/test_authorization_matrix.py):
- reading: the teams one sees (trainings/selectors.py: a coach their own teams, an integration caller the
  teams it created, operators all) and their players; another's team or player is a 404;
- creating and deleting teams, deleting players, the bulk sync: integration callers
  (`trainings.use_integration_api`) and operators (`trainings.manage_all_teams`), 403 to others;
- changing a team, its members, a player: anyone who sees it (a coach on their own teams, as in the
  admin); a coach adds a player onto one of their teams (`team`).
A row created here is its caller's (`owner`): its `external_id` is unique among that caller's rows.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.idempotency import idempotent
from trainings.models import Membership, Player, Team
from trainings.roster.emails import email_held_elsewhere, emails_of
from trainings.roster.serializers import (
    MembersResultSerializer,
    MembersSerializer,
    PlayerInputSerializer,
    PlayerSerializer,
    RosterResultSerializer,
    RosterSyncSerializer,
    TeamInputSerializer,
    TeamSerializer,
)
from trainings.roster.services import (
    ExternalIdTaken,
    HeldByHistory,
    active_members,
    external_filter,
    members_set,
    player_delete,
    player_save,
    team_delete,
    team_save,
)
from trainings.roster.sync import RosterRowError, errors_flattened, roster_sync
from trainings.selectors import (
    players_visible_to,
    teams_visible_to,
    user_sees_all_teams,
    user_uses_integration_api,
)

_EXTERNAL_ID = OpenApiParameter(
    "external_id", OpenApiTypes.STR, description="Only the row with this external id (yours)."
)
_HELD = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "held_by": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "What keeps it, with how many rows: trainings, invitations, answers, pushes.",
        },
    },
    "required": ["detail", "held_by"],
}
_CONFLICT = OpenApiResponse(
    _HELD,
    description="It has history (named in `held_by`) and is kept: take a player "
    "off the team (PUT members) instead of deleting them.",
)
_FIELDS = OpenApiResponse(description="Field errors.")
_TAKEN = "already the external id of another of your rows."
MANAGERS_ONLY = "Only integration callers (trainings.use_integration_api) and operators do this."


def manages_roster(user: Any) -> bool:
    """Integration callers and operators create and delete teams, delete players and sync rosters."""
    return user_sees_all_teams(user) or user_uses_integration_api(user)


def _managers_only(request: Request) -> None:
    if not manages_roster(request.user):
        raise PermissionDenied(MANAGERS_ONLY)


def _held(exc: HeldByHistory) -> Response:
    return Response({"detail": str(exc), "held_by": exc.held_by}, status=status.HTTP_409_CONFLICT)


@extend_schema_view(
    list=extend_schema(
        parameters=[_EXTERNAL_ID],
        description="The teams you see: a coach their own, an "
        "integration caller the teams it created, operators every team.",
    ),
    retrieve=extend_schema(description="One team with its quiet hours and reminder settings."),
    create=extend_schema(
        request=TeamInputSerializer,
        responses={201: TeamSerializer, 400: _FIELDS},
        description="Create a team (integration callers and operators); it is yours: "
        "`external_id` is unique among your teams. A new team's quiet hours are 22:00-07:00.",
    ),
    partial_update=extend_schema(
        request=TeamInputSerializer,
        responses={200: TeamSerializer, 400: _FIELDS},
        description="Change some of a team's fields. New digest times (or zone) "
        "reschedule its coaches' digests.",
    ),
    destroy=extend_schema(
        responses={204: None, 409: _CONFLICT},
        description="Delete a team without trainings (its memberships go with it); one "
        "with trainings is kept: 409 naming them.",
    ),
)
class TeamViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """No PUT: a team changes by PATCH (a PUT would have to restate every setting)."""

    serializer_class = TeamSerializer

    def get_queryset(self) -> QuerySet[Team]:
        teams = teams_visible_to(self.request.user).prefetch_related("coaches").order_by("pk")
        if self.action == "list":
            teams = external_filter(teams, self.request.query_params.get("external_id"))
        return teams

    def _input(self, team: Team | None) -> dict[str, Any]:
        data = TeamInputSerializer(team, data=self.request.data, partial=team is not None)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def _save(self, team: Team | None) -> Team:
        try:
            return team_save(team=team, owner=self.request.user, **self._input(team))
        except ExternalIdTaken:
            raise ValidationError({"external_id": [_TAKEN]}) from None

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _managers_only(request)
        team = self._save(None)
        return Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        team = self._save(self.get_object())
        return Response(TeamSerializer(self.get_queryset().get(pk=team.pk)).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        team = self.get_object()
        _managers_only(request)
        try:
            team_delete(team=team)
        except HeldByHistory as exc:
            return _held(exc)
        except Team.DoesNotExist:  # another DELETE went first
            raise NotFound() from None
        return Response(status=status.HTTP_204_NO_CONTENT)


def _players_body(players: list[Player], *, many: bool) -> Any:
    """Players with their email address and active teams: two queries for the lot."""
    teams: dict[int, list[int]] = {}
    for player_id, team_id in (
        Membership.objects.filter(player__in=[p.pk for p in players], active=True)
        .order_by("team_id")
        .values_list("player_id", "team_id")
    ):
        teams.setdefault(player_id, []).append(team_id)
    context = {"emails": emails_of(players), "teams": teams}
    data = PlayerSerializer(players, many=True, context=context).data
    return data if many else data[0]


@extend_schema_view(
    list=extend_schema(
        parameters=[_EXTERNAL_ID],
        description="The players you see: your teams' (an "
        "integration caller also those it created), every player for operators.",
    ),
    create=extend_schema(
        request=PlayerInputSerializer,
        responses={201: PlayerSerializer, 400: _FIELDS},
        description="Create a player; with `team` they join it (a coach must name one of "
        "theirs) and live in its zone unless `time_zone` says otherwise.",
    ),
    partial_update=extend_schema(
        request=PlayerInputSerializer,
        responses={200: PlayerSerializer, 400: _FIELDS},
        description="Change some of a player's fields. `email` replaces their email address (null: none).",
    ),
    destroy=extend_schema(
        responses={204: None, 409: _CONFLICT},
        description="Delete a player with no history (integration callers and operators); "
        "one invited, answering or reminded is kept: 409 naming what holds them.",
    ),
)
class PlayerViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = PlayerSerializer

    def get_queryset(self) -> QuerySet[Player]:
        players = players_visible_to(self.request.user).order_by("pk")
        if self.action == "list":
            players = external_filter(players, self.request.query_params.get("external_id"))
        return players

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # the API paginates every list
        return self.get_paginated_response(_players_body(list(page), many=True))

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(_players_body([self.get_object()], many=False))

    def _save(self, player: Player | None) -> Player:
        data = PlayerInputSerializer(
            data=self.request.data, partial=player is not None, context={"request": self.request}
        )
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = values.pop("team", None)
        if player is not None and team is not None:
            raise ValidationError({"team": ["on create only: PUT /api/teams/{id}/members/ changes teams."]})
        if player is None and team is None and not manages_roster(self.request.user):
            raise ValidationError({"team": ["a coach's new player joins one of their teams."]})
        address = values.get("email")
        visible = players_visible_to(self.request.user)
        if address and email_held_elsewhere(address=address, person=player, visible=visible):
            raise ValidationError({"email": ["the address of someone outside your roster."]})
        try:
            return player_save(player=player, owner=self.request.user, team=team, **values)
        except ExternalIdTaken:
            raise ValidationError({"external_id": [_TAKEN]}) from None

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        player = self._save(None)
        return Response(_players_body([player], many=False), status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        player = self._save(self.get_object())
        return Response(_players_body([player], many=False))

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        player = self.get_object()
        _managers_only(request)
        try:
            player_delete(player=player)
        except HeldByHistory as exc:
            return _held(exc)
        except Player.DoesNotExist:
            raise NotFound() from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamMembersView(APIView):
    """A team's active roster: who plays in it now. Former members stay, inactive, with their history."""

    def _team(self, pk: int) -> Team:
        team = teams_visible_to(self.request.user).filter(pk=pk).first()
        if team is None:
            raise NotFound("No such team.")
        return team

    @extend_schema(responses={200: MembersResultSerializer})
    def get(self, request: Request, team_pk: int) -> Response:
        return Response({"players": active_members(self._team(team_pk))})

    @extend_schema(
        request=MembersSerializer,
        responses={200: MembersResultSerializer, 400: _FIELDS},
        description="Set the team's active members: those listed join (or are active again), those left "
        "out become inactive. Idempotent: the same list again changes nothing.",
    )
    def put(self, request: Request, team_pk: int) -> Response:
        team = self._team(team_pk)
        data = MembersSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        result = members_set(team=team, players=data.validated_data["players"])
        return Response({"players": result.active})


class RosterSyncView(APIView):
    """The bulk sync (trainings/roster/sync.py): a club's whole roster in one call, by external ids."""

    @extend_schema(
        request=RosterSyncSerializer,
        responses={
            200: RosterResultSerializer,
            400: OpenApiResponse(
                description="Bad rows by path, e.g. `teams[3].players[2].time_zone`; nothing was written."
            ),
        },
        description="Upsert your teams, players, memberships and guardians by your external ids, all or "
        "nothing; answers how many of each were created, updated and deactivated. The same roster again "
        "changes nothing (all counts 0). Integration callers and operators.",
    )
    @idempotent
    def post(self, request: Request) -> Response:
        _managers_only(request)
        data = RosterSyncSerializer(data=request.data)
        if not data.is_valid():
            raise ValidationError(errors_flattened(data.errors))
        try:
            result = roster_sync(owner=request.user, **data.validated_data)
        except RosterRowError as exc:
            raise ValidationError(exc.errors) from None
        except IntegrityError:
            raise ValidationError(
                {"non_field_errors": ["another write took these rows meanwhile: retry."]}
            ) from None
        return Response(RosterResultSerializer(result).data)
