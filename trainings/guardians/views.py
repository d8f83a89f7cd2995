"""The guardians API: thin views over trainings/guardians/services.py.

Scope: a coach reads and manages the guardians of their teams' players, an operator everyone; a guardian
reads themself, registers their own devices (an integration caller may, on their behalf), sets their own
preferences and lists their own players' trainings. Anyone else's guardian is a 404; a write that is not
the caller's to make is a 403.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainings.devices.registration import guardian_of
from trainings.devices.views import PersonDeviceViewSet
from trainings.guardians.serializers import (
    GuardianInputSerializer,
    GuardianSerializer,
    GuardianTrainingSerializer,
)
from trainings.guardians.services import (
    guardian_manages,
    guardian_players_for,
    guardian_save,
    guardian_trainings,
    guardians_readable_by,
)
from trainings.models import Guardian, Player
from trainings.reminding.preferences import preferences_read, preferences_update
from trainings.roster.services import ExternalIdTaken, external_filter
from trainings.selectors import team_zone_of_players
from trainings.serializers import DeviceInputSerializer, DeviceSerializer, PreferencesSerializer

_ERRORS = {400: OpenApiResponse(description="Field errors."), 403: OpenApiResponse(description="Not yours.")}
_NOT_BEHALF = OpenApiResponse(description="Neither the guardian nor an integration caller.")
_BEHALF_ERRORS = {**_ERRORS, 403: _NOT_BEHALF}


def _is_self(request: Request, guardian: Guardian) -> bool:
    own = guardian_of(request.user)
    return own is not None and own.pk == guardian.pk


@extend_schema_view(
    list=extend_schema(parameters=[OpenApiParameter("external_id", str, description="Only the guardian "
                       "with this external id (yours).")],
                       description="The guardians you manage (a coach: your players'; an operator: all), or "
                       "yourself when you are a guardian."),
    create=extend_schema(request=GuardianInputSerializer, responses={201: GuardianSerializer, **_ERRORS},
                         description="A coach or an operator adds a guardian to their players."),
    update=extend_schema(request=GuardianInputSerializer, responses={200: GuardianSerializer, **_ERRORS}),
    partial_update=extend_schema(request=GuardianInputSerializer,
                                 responses={200: GuardianSerializer, **_ERRORS}),
)  # fmt: skip
class GuardianViewSet(viewsets.ModelViewSet):
    serializer_class = GuardianSerializer

    def get_queryset(self) -> Any:
        guardians = guardians_readable_by(self.request.user).order_by("name", "pk")
        external_id = self.request.query_params.get("external_id") if self.action == "list" else None
        return external_filter(guardians, external_id)

    def _input(self, *, partial: bool) -> dict[str, Any]:
        data = GuardianInputSerializer(
            data=self.request.data,
            partial=partial,
            context={"players": guardian_players_for(self.request.user), "owner": self.request.user},
        )
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        if "players" in values:
            values["wards"] = [(item["player"], item["relation"]) for item in values.pop("players")]
        return values

    def _save(self, guardian: Guardian | None, *, partial: bool) -> Guardian:
        if guardian is not None and not guardian_manages(self.request.user, guardian):
            raise PermissionDenied("Coaches of the guardian's players and operators change guardians.")
        values = self._input(partial=partial)
        if guardian is None and not values.get("wards"):
            raise ValidationError({"players": "a new guardian guards at least one of your players."})
        if guardian is None and "time_zone" not in values:
            values["time_zone"] = team_zone_of_players([player for player, _ in values["wards"]]) or "UTC"
        try:
            return guardian_save(guardian=guardian, owner=self.request.user, **values)
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        except ExternalIdTaken:
            raise ValidationError(
                {"external_id": ["already the external id of another of your rows."]}
            ) from None

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        guardian = self._save(None, partial=False)
        return Response(GuardianSerializer(guardian).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        guardian = self._save(self.get_object(), partial=kwargs.get("partial", False))
        return Response(GuardianSerializer(guardian).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        guardian = self.get_object()
        if not guardian_manages(request.user, guardian):
            raise PermissionDenied("Coaches of the guardian's players and operators remove guardians.")
        guardian.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


def _guardian(request: Request, pk: int) -> Guardian:
    guardian = guardians_readable_by(request.user).filter(pk=pk).first()
    if guardian is None:
        raise NotFound("No such guardian.")
    return guardian


@extend_schema_view(
    list=extend_schema(responses={200: DeviceSerializer(many=True)},
                       description="The guardian's devices and email addresses (full tokens to them)."),
    create=extend_schema(request=DeviceInputSerializer,
                         responses={200: DeviceSerializer, 201: DeviceSerializer, **_BEHALF_ERRORS},
                         description="Register a push token (or an email address) for the guardian: their "
                         "own login, or an integration caller (trainings.use_integration_api) on their "
                         "behalf."),
    destroy=extend_schema(responses={204: None, 403: _BEHALF_ERRORS[403]},
                          description="Remove one of the guardian's devices: the guardian, or an "
                          "integration caller on their behalf."),
)  # fmt: skip
class GuardianDeviceViewSet(PersonDeviceViewSet):
    """A guardian's devices: the same as a player's (`/api/players/<id>/devices/`)."""

    owner = "guardian"
    on_behalf = True

    def person(self) -> Guardian:
        return _guardian(self.request, self.kwargs["guardian_pk"])

    def is_self(self, person: Player | Guardian) -> bool:
        return isinstance(person, Guardian) and _is_self(self.request, person)


class GuardianPreferencesView(APIView):
    """The guardian's channels and mute per reminder kind and their own quiet hours: the same shape as a
    player's (`/api/players/<id>/preferences/`). The guardian changes them; their managers read them."""

    @extend_schema(responses={200: PreferencesSerializer})
    def get(self, request: Request, guardian_pk: int) -> Response:
        return Response(PreferencesSerializer(preferences_read(person=_guardian(request, guardian_pk))).data)

    @extend_schema(request=PreferencesSerializer, responses={200: PreferencesSerializer, **_ERRORS})
    def put(self, request: Request, guardian_pk: int) -> Response:
        guardian = _guardian(request, guardian_pk)
        if not _is_self(request, guardian):
            raise PermissionDenied("Only the guardian changes their preferences.")
        data = PreferencesSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        preferences_update(person=guardian, **data.validated_data)
        return Response(PreferencesSerializer(preferences_read(person=guardian)).data)

    patch = put


class GuardianTrainingsView(APIView):
    """The guardian's players' trainings not over yet, each with what may still be answered and the answer
    link (minted for the guardian: it records that they answered). Only their own players' trainings."""

    @extend_schema(
        responses={200: GuardianTrainingSerializer(many=True), 404: OpenApiResponse(description="Not yours.")}
    )
    def get(self, request: Request, guardian_pk: int) -> Response:
        guardian = _guardian(request, guardian_pk)
        trainings = guardian_trainings(guardian=guardian)
        return Response(GuardianTrainingSerializer(trainings, many=True).data)
