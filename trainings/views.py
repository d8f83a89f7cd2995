"""Trainings API: thin views that validate, call one service or selector, and serialise.

Scope: every lookup goes through `trainings_visible_to`, so another coach's training is a 404 and an
anonymous caller a 401 (the token authenticator comes first and sends the challenge).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from common.idempotency import idempotent
from reminders.models import OccurrenceStatus
from trainings.answers.questionnaires import AnswersRefused
from trainings.devices.registration import device_players_visible_to, player_of
from trainings.devices.views import PersonDeviceViewSet
from trainings.models import Guardian, Player, ReminderRule, Training
from trainings.planning.writes import (
    answer_record,
    invitation_respond,
    rule_update,
    training_create,
    training_delete,
    training_update,
)
from trainings.reminding.preferences import preferences_read, preferences_update
from trainings.selectors import training_timeline, trainings_visible_to, user_sees_all_teams
from trainings.serializers import (
    AnswerInputSerializer,
    AnswerSerializer,
    DeviceInputSerializer,
    DeviceSerializer,
    InvitationResponseSerializer,
    InvitationSerializer,
    PreferencesSerializer,
    ReminderRuleInputSerializer,
    ReminderRuleSerializer,
    TimelineEntrySerializer,
    TrainingInputSerializer,
    TrainingSerializer,
)


def _player_action(
    body: type[Serializer], responses: dict[int, Any], description: str
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """A POST about one player on a training's list (an answer, an invitation response), documented."""
    documented = extend_schema(
        request=body,
        responses={**responses, 400: OpenApiResponse(description="Field errors.")},
        description=description,
    )

    def decorate(view: Callable[..., Response]) -> Callable[..., Response]:
        return documented(action(detail=True, methods=["post"])(view))

    return decorate


def _as_drf(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(
        exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
    )


_WRITE: dict[str, Any] = {
    "request": TrainingInputSerializer,
    "responses": {200: TrainingSerializer, 400: OpenApiResponse(description="Field errors.")},
}


@extend_schema_view(
    create=extend_schema(
        request=TrainingInputSerializer,
        responses={201: TrainingSerializer, 400: OpenApiResponse(description="Field errors.")},
        description="Create a training and its player list; its reminders are scheduled in the same "
        "transaction. `players` defaults to the team's active members.",
    ),
    update=extend_schema(**_WRITE, description="Replace the training; pending reminders move with it."),
    partial_update=extend_schema(
        **_WRITE,
        description="Change some fields; pending reminders move with it. "
        "`cancelled: true` cancels every pending reminder and tells the players who accepted or were "
        "reminded (a `CANCELLED` push, once).",
    ),
    destroy=extend_schema(description="Delete the training and cancel every pending reminder."),
)
class TrainingViewSet(viewsets.ModelViewSet):
    serializer_class = TrainingSerializer

    def get_queryset(self) -> QuerySet[Training]:
        return (
            trainings_visible_to(self.request.user)
            .select_related("team")
            .prefetch_related("invitations")
            .order_by("start", "id")
        )

    def _input(self, instance: Training | None = None, *, partial: bool = False) -> dict[str, Any]:
        data = TrainingInputSerializer(
            instance, data=self.request.data, partial=partial, context=self.get_serializer_context()
        )
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def _output(self, training: Training, code: int = status.HTTP_200_OK) -> Response:
        training = self.get_queryset().get(pk=training.pk)
        return Response(TrainingSerializer(training, context=self.get_serializer_context()).data, status=code)

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = self._input()
        values.pop("cancelled", None)
        try:
            training = training_create(**values)
        except DjangoValidationError as exc:
            raise _as_drf(exc) from None
        return self._output(training, status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        training = self.get_object()
        values = self._input(training, partial=kwargs.get("partial", False))
        try:
            training = training_update(training=training, **values)
        except DjangoValidationError as exc:
            raise _as_drf(exc) from None
        except Training.DoesNotExist:  # deleted while this request waited for its lock
            raise NotFound() from None
        return self._output(training)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            training_delete(training=self.get_object())
        except Training.DoesNotExist:  # another DELETE went first while this one waited for the lock
            raise NotFound() from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _player_input(
        self, request: Request, serializer: type[Serializer]
    ) -> tuple[Training, dict[str, Any]]:
        """The URL's training, and the body validated by `serializer` against its player list."""
        training = self.get_object()
        data = serializer(data=request.data, context={"training": training})
        data.is_valid(raise_exception=True)
        return training, data.validated_data

    @_player_action(
        AnswerInputSerializer,
        {201: AnswerSerializer},
        "Record (or replace) a player's PRE or POST questionnaire answer. Later reminders for that phase "
        "skip the player.",
    )
    def answers(self, request: Request, pk: str | None = None) -> Response:
        training, values = self._player_input(request, AnswerInputSerializer)
        try:
            answer = answer_record(training=training, **values)
        except AnswersRefused as exc:  # the team's questionnaire refuses them: which question, and why
            raise ValidationError(exc.as_field_errors()) from None
        return Response(AnswerSerializer(answer).data, status=status.HTTP_201_CREATED)

    @_player_action(
        InvitationResponseSerializer,
        {200: InvitationSerializer},
        "Accept or deny the invitation on a player's behalf; later invitation reminders skip them.",
    )
    def invitation(self, request: Request, pk: str | None = None) -> Response:
        _, values = self._player_input(request, InvitationResponseSerializer)
        invitation = invitation_respond(invitation=values["player"], status=values["status"])
        return Response(InvitationSerializer(invitation).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=list(OccurrenceStatus.values),
                description="Only the occurrences in this status; repeat it (or separate with commas) for "
                "several.",
            )
        ],
        responses={200: TimelineEntrySerializer(many=True)},
        description="Every reminder occurrence of the training, by fire time: rule, status, and when it "
        "has fired, how many players were still pending and how many pushes went out. A deleted "
        "training's timeline goes with it (404); a cancelled one keeps it.",
    )
    @action(detail=True, methods=["get"], pagination_class=None)
    def timeline(self, request: Request, pk: str | None = None) -> Response:
        training = self.get_object()
        statuses = {s for value in request.query_params.getlist("status") for s in value.split(",") if s}
        unknown = sorted(statuses - set(OccurrenceStatus.values))
        if unknown:
            raise ValidationError(
                {"status": [f"{unknown[0]!r} is none of {', '.join(OccurrenceStatus.values)}."]}
            )
        entries = training_timeline(training=training, statuses=statuses)
        return Response(TimelineEntrySerializer(entries, many=True, context={"zone": training.zone}).data)


class IsOperatorOrReadOnly(BasePermission):
    """Rules are global: anyone signed in reads them, only operators change them."""

    message = "Only operators (superusers or trainings.manage_all_teams) change reminder rules."

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method in SAFE_METHODS or user_sees_all_teams(request.user)


@extend_schema_view(
    update=extend_schema(
        request=ReminderRuleInputSerializer,
        responses={200: ReminderRuleSerializer, 400: OpenApiResponse(description="Field errors.")},
        description="Change a rule (operators). Future trainings are rescheduled in batches after commit.",
    ),
    partial_update=extend_schema(
        request=ReminderRuleInputSerializer,
        responses={200: ReminderRuleSerializer, 400: OpenApiResponse(description="Field errors.")},
        description="Change some of a rule's fields (operators). Future trainings are rescheduled "
        "after commit.",
    ),
)
class ReminderRuleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, viewsets.GenericViewSet
):
    serializer_class = ReminderRuleSerializer
    permission_classes = [IsAuthenticated, IsOperatorOrReadOnly]
    lookup_field = "slug"
    pagination_class = None

    def get_queryset(self) -> QuerySet[ReminderRule]:
        return ReminderRule.objects.prefetch_related("templates").order_by("kind", "slug")

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        rule = self.get_object()
        data = ReminderRuleInputSerializer(data=request.data, partial=kwargs.get("partial", False))
        data.is_valid(raise_exception=True)
        try:
            rule = rule_update(rule=rule, **data.validated_data)
        except DjangoValidationError as exc:
            raise _as_drf(exc) from None
        return Response(ReminderRuleSerializer(self.get_queryset().get(pk=rule.pk)).data)


# --- Devices (trainings/devices/registration.py) ----------------------------------------------------------


@extend_schema_view(
    list=extend_schema(
        responses={200: DeviceSerializer(many=True)},
        description="The player's devices with their state (enabled, last success, why disabled). The "
        "player sees full tokens; coaches of their teams and operators see them shortened.",
    ),
    create=extend_schema(
        request=DeviceInputSerializer,
        responses={
            200: DeviceSerializer,
            201: DeviceSerializer,
            400: OpenApiResponse(description="Field errors."),
            403: OpenApiResponse(description="Neither the player nor an integration caller."),
        },
        description="Register a push token for the player: the player's own login (the app), or an "
        "integration caller (trainings.use_integration_api) on their behalf. 201 when new; 200 when the "
        "token was known: it is re-enabled and moves to this player.",
    ),
    destroy=extend_schema(
        responses={
            204: None,
            403: OpenApiResponse(description="Neither the player nor an integration caller."),
        },
        description="Remove one of the player's devices (the app signed out): the player, or an "
        "integration caller on their behalf.",
    ),
)
class PlayerDeviceViewSet(PersonDeviceViewSet):
    owner = "player"
    on_behalf = True

    def person(self) -> Player:
        return _device_player(self.request, self.kwargs["player_pk"])

    def is_self(self, person: Player | Guardian) -> bool:
        own = player_of(self.request.user)
        return own is not None and own == person


def _device_player(request: Request, pk: int) -> Player:
    """A player whose devices and preferences the caller may read (themself, their coaches, operators)."""
    player = device_players_visible_to(request.user).filter(pk=pk).first()
    if player is None:
        raise NotFound("No such player.")
    return player


# --- A player's own preferences (trainings/reminding/preferences.py) ----------------------------------------


class PlayerPreferencesView(APIView):
    """The player's channels and mute per reminder kind, and their own quiet hours: the app's settings
    screen. The player changes them; coaches of their teams and operators read them."""

    def _player(self) -> Player:
        return _device_player(self.request, self.kwargs["player_pk"])

    def _body(self, player: Player) -> Response:
        return Response(PreferencesSerializer(preferences_read(person=player)).data)

    @extend_schema(responses={200: PreferencesSerializer})
    def get(self, request: Request, player_pk: int) -> Response:
        return self._body(self._player())

    @extend_schema(
        request=PreferencesSerializer,
        responses={200: PreferencesSerializer, 400: OpenApiResponse(description="Field errors."),
                   403: OpenApiResponse(description="Only the player changes their preferences.")},
        description="Change what is given: `kinds` lists only the kinds to change; `quiet_start` and "
        "`quiet_end` together (both null: the team's quiet hours apply).",
    )  # fmt: skip
    def put(self, request: Request, player_pk: int) -> Response:
        player = self._player()
        own = player_of(request.user)
        if own is None or own.pk != player.pk:
            raise PermissionDenied("Only the player changes their preferences.")
        data = PreferencesSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        preferences_update(person=player, **data.validated_data)
        return self._body(player)

    patch = put
