"""The experiments API: operators read each experiment and its results (the admin starts, stops and
promotes them)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from trainings.experiments.adaptive_api import ProbabilitiesSerializer, probabilities_data
from trainings.experiments.results import experiment_results
from trainings.experiments.serializers import (
    ExperimentResultSerializer,
    ExperimentSerializer,
    ResultsQuerySerializer,
    result_data,
)
from trainings.models import Experiment
from trainings.models.experiments import ExperimentMode
from trainings.selectors import user_sees_all_teams


class IsOperator(BasePermission):
    message = (
        "Only operators (superusers or trainings.manage_all_teams) see experiments: they span every team."
    )

    def has_permission(self, request: Request, view: Any) -> bool:
        return user_sees_all_teams(request.user)


class ExperimentViewSet(viewsets.ReadOnlyModelViewSet):
    """Timing experiments on reminder rules (trainings/experiments/), newest first."""

    serializer_class = ExperimentSerializer
    permission_classes = [IsAuthenticated, IsOperator]
    pagination_class = None

    def get_queryset(self) -> QuerySet[Experiment]:
        return Experiment.objects.select_related("rule", "promoted").prefetch_related("variants")

    @extend_schema(
        parameters=[ResultsQuerySerializer],
        responses={
            200: ExperimentResultSerializer,
            400: OpenApiResponse(
                description="The field and the reason: a confidence not offered, an unknown team."
            ),
        },
        description="Each arm's answer-in-time rate (answered before the kind's window closed: the start, "
        "for reminders before it) with its Wilson interval and sample size, the median time from the first "
        "reminder to the answer, and each variant's difference from the rule (Newcombe's interval), said "
        "plainly: significant, or not yet. Only trainings the experiment covered whole and whose window "
        "has closed count.",
    )
    @action(detail=True, methods=["get"])
    def results(self, request: Request, pk: str | None = None) -> Response:
        experiment = self.get_object()
        query = ResultsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        result = experiment_results(experiment, confidence=q["confidence"], team=q.get("team"))
        return Response(ExperimentResultSerializer(result_data(experiment, result)).data)

    @extend_schema(
        responses={
            200: ProbabilitiesSerializer,
            400: OpenApiResponse(description="mode: the experiment is not adaptive."),
        },
        description="An adaptive experiment's (mode \"adaptive\") probabilities: each arm's probability of "
        "being best over Beta posteriors of its answer-in-time rate, the leader's chance that no arm beats "
        "it by more than the margin, the stopping rule, and every stored snapshot, oldest first "
        "(docs/operations/adaptive-timing.md).",
    )
    @action(detail=True, methods=["get"])
    def probabilities(self, request: Request, pk: str | None = None) -> Response:
        experiment = self.get_object()
        if experiment.mode != ExperimentMode.ADAPTIVE:
            raise ValidationError({"mode": f"experiment {experiment.pk} is {experiment.mode}, not adaptive"})
        result = experiment_results(experiment)
        return Response(ProbabilitiesSerializer(probabilities_data(experiment, result)).data)
