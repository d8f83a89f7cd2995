"""HTTP API: thin views that validate, call one service or selector, and serialise."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from common.idempotency import idempotent
from reminders.http.permissions import SCHEDULER_PERMISSIONS, caller_context
from reminders.http.scopes import jobs_visible_to, occurrences_visible_to
from reminders.http.serializers import (
    KEY_PATTERN,
    BulkJobsInputSerializer,
    BulkResultSerializer,
    JobInputSerializer,
    JobSerializer,
    JobSummarySerializer,
    OccurrenceSerializer,
)
from reminders.jobs import (
    ConcurrentCreate,
    JobSpec,
    OwnershipError,
    job_cancel,
    job_upsert,
    jobs_bulk_upsert,
)
from reminders.models import Job, Occurrence, OccurrenceStatus


class KeyedViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """List, read and delete by the caller-chosen key (jobs, schedules); creating is a keyed upsert."""

    permission_classes = SCHEDULER_PERMISSIONS
    lookup_field = "key"
    lookup_value_regex = KEY_PATTERN


class JobViewSet(KeyedViewSet):
    serializer_class = JobSerializer

    def get_queryset(self) -> QuerySet[Job]:
        return jobs_visible_to(self.request.user).order_by("key")

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action == "list":
            return JobSummarySerializer
        if self.action == "create":
            return JobInputSerializer
        if self.action == "bulk":
            return BulkJobsInputSerializer
        return JobSerializer

    @extend_schema(
        request=JobInputSerializer,
        responses={201: JobSerializer, 200: JobSerializer, 400: OpenApiResponse(description="Field errors.")},
        description="Create the job, or replace it if the key exists (its pending occurrences are replaced "
        "atomically; delivered history stays). 201 on create, 200 on replace.",
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = JobInputSerializer(data=request.data, context=caller_context(request))
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            job, created = job_upsert(
                key=values["key"],
                schedules=values["schedules"],
                callback=values["callback"],
                priority=values["priority"],
                deadline_seconds=values["deadline_seconds"],
                owner=request.user,  # type: ignore[arg-type]
                batch_size=values["batch_size"],
                throttle=values["throttle"],
            )
        except OwnershipError as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(
            JobSerializer(job).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )

    @extend_schema(
        request=BulkJobsInputSerializer,
        responses={
            200: BulkResultSerializer,
            400: OpenApiResponse(description="Field errors by job index."),
            409: OpenApiResponse(
                description="Another request created one of these keys at the same moment; nothing was "
                "stored: retry."
            ),
        },
        description="Create or replace many jobs in one transaction: all of them or none. Each job follows "
        "the rules of POST /api/jobs/. Errors are reported under jobs.<index>.",
    )
    @idempotent
    @action(detail=False, methods=["post"], url_path="bulk")
    def bulk(self, request: Request) -> Response:
        data = BulkJobsInputSerializer(data=request.data, context=caller_context(request))
        data.is_valid(raise_exception=True)
        specs = [
            JobSpec(
                key=job["key"],
                schedules=job["schedules"],
                callback=job["callback"],
                priority=job["priority"],
                deadline_seconds=job["deadline_seconds"],
                batch_size=job["batch_size"],
                throttle=job["throttle"],
            )
            for job in data.validated_data["jobs"]
        ]
        try:
            result = jobs_bulk_upsert(specs=specs, owner=request.user)  # type: ignore[arg-type]
        except OwnershipError as exc:
            raise PermissionDenied(str(exc)) from None
        except ConcurrentCreate:
            return Response(
                {"detail": "another request created one of these keys at the same moment; nothing was "
                 "stored, retry the request."},
                status=status.HTTP_409_CONFLICT,
            )  # fmt: skip
        return Response(BulkResultSerializer(result).data)

    @extend_schema(
        responses={
            200: inline_serializer(
                "JobCancelled", {"key": serializers.CharField(), "cancelled": serializers.IntegerField()}
            )
        },
        description="Cancel every occurrence of the job that has not fired. One being delivered right now "
        "(claimed) completes.",
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        job = self.get_object()
        cancelled = job_cancel(job=job)
        return Response({"key": job.key, "cancelled": cancelled})


class OccurrencePagination(CursorPagination):
    ordering = "-id"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


@extend_schema(
    parameters=[
        OpenApiParameter("status", OpenApiTypes.STR, enum=OccurrenceStatus.values),
        OpenApiParameter("job", OpenApiTypes.STR, description="A job key."),
    ]
)
class OccurrenceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    permission_classes = SCHEDULER_PERMISSIONS
    serializer_class = OccurrenceSerializer
    pagination_class = OccurrencePagination

    def get_queryset(self) -> QuerySet[Occurrence]:
        queryset = occurrences_visible_to(self.request.user).select_related("job")
        params = self.request.query_params
        errors: dict[str, str] = {}
        if "status" in params:
            if params["status"] not in OccurrenceStatus.values:
                errors["status"] = f"must be one of {', '.join(OccurrenceStatus.values)}."
            queryset = queryset.filter(status=params["status"])
        if "job" in params:
            if "\x00" in params["job"]:
                errors["job"] = "must not contain the NUL character."  # PostgreSQL text cannot hold it
            queryset = queryset.filter(job__key=params["job"])
        if errors:
            raise ValidationError(errors)
        return queryset
