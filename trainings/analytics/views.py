"""The analytics API: thin views over trainings/analytics/figures.py, scoped like the rest of the API
(operators see every team, a coach the teams they coach)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainings.analytics.channels import answers_by_channel, channels_data
from trainings.analytics.figures import TooManyTeams, effectiveness, players
from trainings.analytics.serializers import (
    AnalyticsQuerySerializer,
    EffectivenessSerializer,
    PlayersSerializer,
    effectiveness_data,
    player_data,
)

_BAD = OpenApiResponse(description="A field and the reason: an inverted or too long period, a team you "
                                   "may not see, an unknown kind.")  # fmt: skip


def analytics_query(request: Request) -> dict[str, Any]:
    query = AnalyticsQuerySerializer(data=request.query_params, context={"user": request.user})
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class EffectivenessView(APIView):
    @extend_schema(
        parameters=[AnalyticsQuerySerializer],
        responses={200: EffectivenessSerializer, 400: _BAD},
        description="Per rule and offset over a period of training days (the training's local date): "
        "reminders sent and reached, answers credited to them (an answer counts for the last reminder "
        "the player received before it) within 15 and 60 minutes and before the window closed, the median "
        "time to answer and its curve; per kind the answers nobody was reminded for, and the answers by "
        "channel (notification, email, app, coach). From the daily "
        "summaries, refreshed every few minutes.",
    )
    def get(self, request: Request) -> Response:
        query = analytics_query(request)
        result = effectiveness(scope=query["scope"], since=query["since"], until=query["until"],
                               kind=query["kind"])  # fmt: skip
        body = effectiveness_data(result, query)
        by_channel = answers_by_channel(scope=query["scope"], since=query["since"], until=query["until"],
                                        kind=query["kind"])  # fmt: skip
        body["channels"] = channels_data(by_channel)
        return Response(EffectivenessSerializer(body).data)


class PlayersView(APIView):
    @extend_schema(
        parameters=[AnalyticsQuerySerializer],
        responses={200: PlayersSerializer, 400: _BAD},
        description="Per player over the period: answered before any reminder, after one, only after the "
        "rule's last, or never; the least responsive first, chronic non-responders flagged. Needs a team "
        "when you see more than 20.",
    )
    def get(self, request: Request) -> Response:
        query = analytics_query(request)
        try:
            rows = players(scope=query["scope"], since=query["since"], until=query["until"],
                           kind=query["kind"])  # fmt: skip
        except TooManyTeams as exc:
            raise ValidationError({"team": [str(exc)]}) from None
        body = {"since": query["since"], "until": query["until"], "teams": query["scope"].label,
                "players": [player_data(row) for row in rows]}  # fmt: skip
        return Response(PlayersSerializer(body).data)
