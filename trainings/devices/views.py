"""The API of someone's devices, a player's (`/api/players/<id>/devices/`), a guardian's
(`/api/guardians/<id>/devices/`) or the signed-in coach's (`/api/coach/devices/`): one implementation, the
person's kind of row given by the subclass.

A player's and a guardian's devices are registered and removed by that person's own login (the app), or
on their behalf by an integration caller (`trainings.use_integration_api`: a platform's service account,
one token for all its people) among the players and guardians it can read; a coach's only by the coach."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from delivery.api import device_register, device_remove
from delivery.models import Device
from trainings.models import Coach, Guardian, Player
from trainings.selectors import user_uses_integration_api
from trainings.serializers import DeviceInputSerializer, DeviceSerializer


class PersonDeviceViewSet(
    mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Whoever may read the person lists their devices (full tokens to the person only, shortened to the
    others); the person registers and removes their own, an integration caller anyone's it may read
    (`on_behalf`)."""

    serializer_class = DeviceSerializer
    pagination_class = None  # a person has a handful
    owner = ""  # Device's column for the person ("player", "guardian", "coach"); a URL names it `<owner>_pk`
    on_behalf = False  # an integration caller registers and removes the person's devices

    def person(self) -> Player | Guardian | Coach:
        """The person of the URL, or NotFound when the caller may not read them."""
        raise NotImplementedError

    def is_self(self, person: Any) -> bool:
        """The caller is this person."""
        raise NotImplementedError

    def _own(self, doing: str) -> Player | Guardian | Coach:
        person = self.person()
        if self.is_self(person) or (self.on_behalf and user_uses_integration_api(self.request.user)):
            return person
        if self.on_behalf:
            raise PermissionDenied(
                f"Only the {self.owner}, or an integration caller (trainings.use_integration_api), {doing} "
                f"the {self.owner}'s devices."
            )
        raise PermissionDenied(f"Only the {self.owner} {doing} their own devices.")

    def get_queryset(self) -> QuerySet[Device]:
        if getattr(self, "swagger_fake_view", False):
            return Device.objects.none()
        return Device.objects.filter(**{self.owner: self.person()}).order_by("created_at", "id")

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        if not getattr(self, "swagger_fake_view", False) and f"{self.owner}_pk" in self.kwargs:
            context["owner"] = self.is_self(self.person())
        return context

    def saved(self, person: Player | Guardian | Coach) -> Player | Guardian | Coach:
        """The person as a stored row, once the body is valid (a coach's profile is made on first use)."""
        return person

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        person = self._own("registers")
        data = DeviceInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        person = self.saved(person)
        device, created = device_register(
            player=person if isinstance(person, Player) else None,
            guardian=person if isinstance(person, Guardian) else None,
            coach=person if isinstance(person, Coach) else None,
            **data.validated_data,
        )
        body = DeviceSerializer(device, context={"owner": True}).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        person = self._own("removes")
        device_remove(device=get_object_or_404(Device, pk=kwargs["pk"], **{self.owner: person}))
        return Response(status=status.HTTP_204_NO_CONTENT)
