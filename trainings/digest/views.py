"""The coach's own digest settings in the API: their profile (language, zone, channels, quiet hours) and
their devices. Only a coach (a user who coaches a team) has one; anyone else gets a 404. The team's
digest times are the team's settings (the admin)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.models import Device
from trainings.devices.views import PersonDeviceViewSet
from trainings.digest.profiles import coach_profile_ensure
from trainings.digest.serializers import CoachInputSerializer, CoachSerializer
from trainings.models import Coach, Team
from trainings.serializers import DeviceInputSerializer, DeviceSerializer

_ERRORS = {
    400: OpenApiResponse(description="Field errors."),
    404: OpenApiResponse(description="Not a coach."),
}


def coach_of(user: Any, *, create: bool = False) -> Coach:
    """The signed-in coach's profile (made with the first team's zone when `create`, as
    `coach_profile_ensure` makes one); 404 for anyone who coaches no team."""
    coach = Coach.objects.filter(user=user.pk).select_related("user").first()
    if coach is not None:
        return coach
    team = Team.objects.filter(coaches=user.pk).order_by("pk").first()
    if team is None:
        raise NotFound("You coach no team.")
    if not create:
        return Coach(user=user, time_zone=team.time_zone)
    return coach_profile_ensure(user, time_zone=team.time_zone)


class CoachProfileView(APIView):
    """Your coach's profile: how your digests reach you (their times are your teams' settings)."""

    @extend_schema(responses={200: CoachSerializer, 404: _ERRORS[404]})
    def get(self, request: Request) -> Response:
        return Response(CoachSerializer(coach_of(request.user)).data)

    @extend_schema(request=CoachInputSerializer, responses={200: CoachSerializer, **_ERRORS})
    def patch(self, request: Request) -> Response:
        coach_of(request.user)  # a 404 before a 400: nobody but a coach learns the fields
        data = CoachInputSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        coach = coach_of(request.user, create=True)
        for name, value in data.validated_data.items():
            setattr(coach, name, value)
        coach.save()
        return Response(CoachSerializer(coach).data)

    put = patch


@extend_schema_view(
    list=extend_schema(responses={200: DeviceSerializer(many=True)},
                       description="Your devices and email addresses for your digests."),
    create=extend_schema(request=DeviceInputSerializer,
                         responses={200: DeviceSerializer, 201: DeviceSerializer, **_ERRORS},
                         description="Register a push token (or an email address) for your digests."),
    destroy=extend_schema(responses={204: None, 404: _ERRORS[404]},
                          description="Remove one of your devices."),
)  # fmt: skip
class CoachDeviceViewSet(PersonDeviceViewSet):
    """The signed-in coach's devices: the same shapes as a player's (`/api/players/<id>/devices/`); the
    first registration makes the coach's profile."""

    owner = "coach"

    def person(self) -> Coach:
        return coach_of(self.request.user)

    def saved(self, person: Any) -> Coach:
        return coach_of(self.request.user, create=True)  # only for a valid body: a refused one writes nothing

    def is_self(self, person: Any) -> bool:
        return True  # the URL names nobody: it is the caller's own

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False) or self.person().pk is None:
            return Device.objects.none()  # no profile yet: no device either
        return super().get_queryset()

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "owner": True}
