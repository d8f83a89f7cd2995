"""The answer-link API: `GET` says what a link is for, `POST` records its answer. No session: the signed
token in the path is the credential for one player, training and kind (trainings/answers/links.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.http.parsers import StrictJSONParser
from reminders.api import Limit
from trainings.answers.following import answer_link_answer, answer_link_record
from trainings.answers.limits import link_limit
from trainings.answers.links import AnswerLink, LinkInvalid, answer_link_read, expects_response
from trainings.answers.questionnaires import AnswersRefused, learn, questions_body
from trainings.answers.questions import answer_question
from trainings.answers.reading import LinkGone, LinkTarget, answer_link_current, answer_link_open
from trainings.answers.recording import Recorded
from trainings.answers.serializers import AnswerLinkInputSerializer, AnswerLinkSerializer
from trainings.answers.values import answers_check

_LINK_ERRORS = {
    400: OpenApiResponse(description="Not a valid answer link (nothing more is said), or a field error."),
    410: OpenApiResponse(
        description="The link no longer works: `code` is `gone` (training deleted), `cancelled`, `closed` "
        "(the window to answer has passed), `not_invited` (no longer on the list), `not_member` (no "
        "longer an active member of the training's team) or `not_guardian` (a guardian's link, and they are "
        "no longer the player's guardian). Nothing of the training is said."
    ),
    429: OpenApiResponse(description="Followed too often; Retry-After says when to try again."),
}


class _JSONOnly(DefaultContentNegotiation):
    """DRF's choice of parser by content type; the view's one renderer whatever the Accept (an app asks
    for JSON, a browser for anything), so no Accept header is parsed per request."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


class AnswerLinkView(APIView):
    """An answer link: no session, the signed token is the credential for one player, training and kind."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    # No caller is authenticated, so no per-token count; the address's and the link's limits are counted
    # before the view runs, in one statement (`request_limits`).
    throttle_classes: list[Any] = []
    # JSON in, JSON out: one strict parser (another content type is a 415), one renderer whatever the
    # Accept (`_JSONOnly`): DRF's own hooks, so a POST pays little of DRF's request (docs/benchmarks.md).
    parser_classes = [StrictJSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JSONOnly

    def perform_authentication(self, request: Request) -> None:
        """Nothing to authenticate (no authentication classes): DRF's hook left lazy, so the request never
        gets an anonymous user it would not read."""

    @staticmethod
    def request_limits(request: HttpRequest, token: str) -> list[Limit]:
        """What a request is counted under beside its address: the link, once its signature holds (a
        forged token makes no count of its own)."""
        try:
            answer_link_read(token)
        except LinkInvalid:
            return []
        return [link_limit(token)]

    def _open(self, token: str) -> LinkTarget | Response:
        try:
            return answer_link_open(token)
        except LinkInvalid:
            return _not_a_link()
        except LinkGone as exc:
            return _gone(exc)

    @extend_schema(
        responses={200: AnswerLinkSerializer, **_LINK_ERRORS},
        description="What the link is for: the training (title, local start with its zone), the question "
        "in the player's language, what a POST carries, the answer already given, and for a questionnaire "
        "its `questions` (what `answers` may hold, in the reader's language).",
    )
    def get(self, request: Request, token: str) -> Response:
        target = self._open(token)
        if isinstance(target, Response):
            return target
        body = _link_body(target, answer_link_current(target))
        if body["expects"] == "answers":  # what to ask, for the app to render (GET only)
            definition = learn(target.training.pk, target.link.kind, target.training.team_id)
            body["questions"] = questions_body(definition, body["language"])
        return Response(body)

    @extend_schema(
        request=AnswerLinkInputSerializer,
        responses={200: AnswerLinkSerializer, **_LINK_ERRORS},
        description='Record the answer: `{"response": "accepted" | "denied"}` for an invitation, '
        '`{"answers": {"<question id>": value}}` for a questionnaire: every required question of the '
        "GET's `questions` answered, each in its range (400 naming the question and why otherwise, and for "
        "an empty answer). Idempotent: the same answer again changes nothing "
        "(`changed: false`); a different one replaces it until the window closes. The remaining "
        "reminders of that kind skip the player.",
    )
    def post(self, request: Request, token: str) -> Response:
        try:
            link = answer_link_read(token)
        except LinkInvalid:
            return _not_a_link()
        values = _plain_input(request.data, link.kind)
        if values is not None:  # the common body: the link is opened and answered in one go
            return _answered(link, values)
        opened = self._open(token)  # anything else: a link that no longer works says so first
        if isinstance(opened, Response):
            return opened
        data = AnswerLinkInputSerializer(data=request.data, context={"kind": link.kind})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            recorded = answer_link_record(
                target=opened, response=values.get("response"), answers=values.get("answers"),
                source=values.get("source"),
            )  # fmt: skip
        except AnswersRefused as exc:
            return _refused(exc)
        return _answer_response(opened, recorded)


def _answered(link: AnswerLink, values: dict[str, Any]) -> Response:
    """Open the link and record a plain body's answer, in one go; its response."""
    try:
        target, recorded = answer_link_answer(
            link, response=values.get("response"), answers=values.get("answers"), source=values.get("source")
        )
    except LinkGone as exc:
        return _gone(exc)
    except AnswersRefused as exc:
        return _refused(exc)
    return _answer_response(target, recorded)


def _refused(exc: AnswersRefused) -> Response:
    """400 naming each question and why (trainings/answers/questionnaires.py)."""
    return Response(exc.as_field_errors(), status=status.HTTP_400_BAD_REQUEST)


def _answer_response(target: LinkTarget, recorded: Recorded) -> Response:
    body = _link_body(target, recorded.answer)
    body["changed"] = recorded.changed
    return Response(body)


def _not_a_link() -> Response:
    return Response({"detail": "This is not a valid answer link."}, status=status.HTTP_400_BAD_REQUEST)


def _gone(exc: LinkGone) -> Response:
    return Response({"detail": exc.detail, "code": exc.code}, status=status.HTTP_410_GONE)


def _plain_input(data: Any, kind: str) -> dict[str, Any] | None:
    """The body's values when it is one of the shapes AnswerLinkInputSerializer accepts as they are, as
    the serializer would give them; None for anything else. Instantiating the serializer deep-copies its
    fields per request, which cost as much as recording the answer; tests/trainings/test_answer_links.py
    checks that both agree."""
    if type(data) is not dict or not 1 <= len(data) <= 2:
        return None
    source = data.get("source", _ABSENT)
    if source is not _ABSENT and source != "app":
        return None
    wanted = "response" if expects_response(kind) else "answers"
    if len(data) != (1 if source is _ABSENT else 2) or wanted not in data:
        return None
    value = data[wanted]
    if wanted == "response":
        if type(value) is not str or value not in ("accepted", "denied"):
            return None
    else:
        try:
            answers_check(value)
        except ValueError:
            return None
    return dict(data)


_ABSENT = object()


# The body is built in AnswerLinkSerializer's shape (the schema's) without running it: instantiating a
# nested serializer per request deep-copies all its fields, which cost more than recording the answer.
# tests/trainings/test_answer_links.py checks that both give the same JSON.
_WHEN = serializers.DateTimeField()


def _when(value: datetime | None) -> str | None:
    return None if value is None else _WHEN.to_representation(value)


def _link_body(target: LinkTarget, answer: dict[str, Any] | None) -> dict[str, Any]:
    training, player = target.training, target.invitation.player
    language, question = answer_question(target)
    invitation = expects_response(target.link.kind)
    body: dict[str, Any] = {
        "kind": target.link.kind,
        "expects": "response" if invitation else "answers",
    }
    if invitation:
        body["responses"] = ["accepted", "denied"]
    body.update({
        "question": question,
        "language": language,
        "training": {
            "id": str(training.pk), "title": training.title, "team": training.team.name,
            "location": training.location, "start": _when(training.start),
            "start_local": training.start.astimezone(training.zone).isoformat(),
            "time_zone": training.time_zone,
        },
        "player": {"id": player.pk, "name": player.name},
    })  # fmt: skip
    if target.guardianship is not None:  # the serializer's order: after `player`
        ship = target.guardianship
        body["guardian"] = {
            "guardian": ship.guardian_id,
            "name": ship.guardian.name,
            "relation": ship.relation,
        }
    body.update(closes_at=_when(target.closes_at), answer=None if answer is None else _answer_body(answer))
    return body


def _answer_body(answer: dict[str, Any]) -> dict[str, Any]:
    """As _LinkAnswerSerializer gives it: `response` always (null for a questionnaire), `answers` when
    there are some, and who gave it (`by`: the guardian, null for the player)."""
    body: dict[str, Any] = {"response": answer.get("response")}
    if "answers" in answer:
        body["answers"] = answer["answers"]
    body.update(at=_when(answer.get("at")), source=answer.get("source"), by=answer.get("by"))
    return body
