"""HTTP API for schedules and throttle policies: thin views that validate, call one service, serialise."""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError, QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from common.serializers import NoBody
from reminders.http.permissions import SCHEDULER_PERMISSIONS, caller_context
from reminders.http.schedule_serializers import (
    PreviewQuerySerializer,
    PreviewSerializer,
    ScheduleInputSerializer,
    ScheduleSerializer,
    ThrottlePolicySerializer,
    preview_data,
)
from reminders.http.scopes import schedules_visible_to
from reminders.http.views import KeyedViewSet
from reminders.jobs import OwnershipError
from reminders.models import Schedule, ThrottlePolicy
from reminders.schedules.lifecycle import (
    ScheduleSpec,
    schedule_delete,
    schedule_pause,
    schedule_preview,
    schedule_resume,
    schedule_update,
    schedule_upsert,
)


class ScheduleViewSet(KeyedViewSet):
    serializer_class = ScheduleSerializer

    def get_queryset(self) -> QuerySet[Schedule]:
        return schedules_visible_to(self.request.user).order_by("key")

    @extend_schema(
        request=ScheduleInputSerializer,
        responses={
            201: ScheduleSerializer,
            200: ScheduleSerializer,
            400: OpenApiResponse(description="Field errors."),
        },
        description="Create the schedule, or replace it if the key exists (the version is bumped and the "
        "pending fire point replaced at once). 201 on create, 200 on replace.",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = ScheduleInputSerializer(data=request.data, context=caller_context(request))
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        key = values.pop("key")
        try:
            schedule, created = schedule_upsert(key=key, spec=ScheduleSpec(**values), owner=request.user)  # type: ignore[arg-type]
        except OwnershipError as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(
            ScheduleSerializer(schedule).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(request=ScheduleInputSerializer, responses={200: ScheduleSerializer})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change some fields; any change bumps the version and replaces the pending fire point."""
        schedule = self.get_object()
        data = ScheduleInputSerializer(
            data=request.data, partial=True, instance_schedule=schedule, context=caller_context(request)
        )
        data.is_valid(raise_exception=True)
        schedule = schedule_update(schedule=schedule, changes=dict(data.validated_data), owner=request.user)  # type: ignore[arg-type]
        return Response(ScheduleSerializer(schedule).data)

    @extend_schema(
        responses={
            200: inline_serializer(
                "ScheduleDeleted", {"key": serializers.CharField(), "cancelled": serializers.IntegerField()}
            )
        },
        description="Delete the schedule and its occurrences: nothing of it can fire afterwards.",
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        schedule = self.get_object()
        cancelled = schedule_delete(schedule=schedule)
        return Response({"key": schedule.key, "cancelled": cancelled})

    @extend_schema(request=None, responses={200: ScheduleSerializer})
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, key: str) -> Response:
        """Cancel the pending fire point; nothing fires until resumed."""
        schedule = self.get_object()
        NoBody(data=request.data).is_valid(raise_exception=True)
        return Response(ScheduleSerializer(schedule_pause(schedule=schedule)).data)

    @extend_schema(request=None, responses={200: ScheduleSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, key: str) -> Response:
        """Continue from now (runs missed while paused are not fired)."""
        schedule = self.get_object()
        NoBody(data=request.data).is_valid(raise_exception=True)
        return Response(ScheduleSerializer(schedule_resume(schedule=schedule)).data)

    @extend_schema(
        parameters=[OpenApiParameter("count", int, description="How many fire times (default 10).")],
        responses={200: PreviewSerializer},
    )
    @action(detail=True, methods=["get"])
    def preview(self, request: Request, key: str) -> Response:
        """The upcoming fire times, in UTC and in the schedule's zone."""
        query = PreviewQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        schedule = self.get_object()
        fires = schedule_preview(schedule, count=query.validated_data["count"])
        return Response(preview_data(schedule, fires))


class ThrottlePolicyViewSet(viewsets.ModelViewSet):
    """Named throttle policies, shared: every user may read and name them; the owner or staff change them."""

    permission_classes = SCHEDULER_PERMISSIONS
    lookup_field = "name"
    serializer_class = ThrottlePolicySerializer
    queryset = ThrottlePolicy.objects.order_by("name")

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.save(owner=self.request.user)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        self._check_owner(serializer.instance)
        serializer.save()

    @extend_schema(
        responses={
            204: None,
            409: OpenApiResponse(description="In use by jobs or schedules: change those first."),
        }
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        policy = self.get_object()
        self._check_owner(policy)
        try:
            policy.delete()
        except ProtectedError:
            detail = f"throttle policy {policy.name!r} is in use by jobs or schedules; change those first."
            return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _check_owner(self, policy: Any) -> None:
        user = self.request.user
        if policy.owner_id not in (None, user.pk) and not getattr(user, "is_staff", False):
            raise PermissionDenied("this throttle policy belongs to another user.")
