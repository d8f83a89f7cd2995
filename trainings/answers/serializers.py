"""API shapes of the answer links (trainings/answers/views.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.serializers import StrictSerializer
from trainings.answers.links import expects_response
from trainings.answers.values import AnswersField


class AnswerLinkInputSerializer(StrictSerializer):
    """`response` for an invitation's link, `answers` for a questionnaire's; never both."""

    response = serializers.ChoiceField(
        choices=["accepted", "denied"], required=False, help_text="An invitation link's answer."
    )
    answers = AnswersField(
        required=False,
        help_text="A questionnaire link's answers: question id to value (the GET's `questions`).",
    )
    # The body's key is `source`; DRF's metaclass takes the field out of the class attributes.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["app"],
        required=False,
        help_text="`app` when the player answered on the app's own screen; otherwise the link's channel "
        "(`push_action` or `email_link`) is recorded.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        invitation = expects_response(self.context["kind"])
        wanted, other = ("response", "answers") if invitation else ("answers", "response")
        if other in attrs:
            raise serializers.ValidationError({other: f"this link takes `{wanted}`, not `{other}`."})
        if wanted not in attrs:
            what = '"accepted" or "denied"' if invitation else "a JSON object of the answers"
            raise serializers.ValidationError({wanted: f"this field is required: {what}."})
        return attrs


class _LinkTrainingSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    team = serializers.CharField()
    location = serializers.CharField(allow_blank=True)
    start = serializers.DateTimeField()
    start_local = serializers.CharField(help_text="The start in `time_zone`, ISO 8601 with its offset.")
    time_zone = serializers.CharField(help_text="The training's IANA zone.")


class _LinkPlayerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class _LinkGuardianSerializer(serializers.Serializer):
    guardian = serializers.IntegerField(help_text="The guardian's id.")
    name = serializers.CharField(allow_blank=True)
    relation = serializers.CharField(allow_blank=True, help_text='What they are to the player: "mother".')


class _LinkAnswerSerializer(serializers.Serializer):
    response = serializers.CharField(required=False, allow_null=True)
    answers = serializers.JSONField(required=False)
    at = serializers.DateTimeField(allow_null=True)
    source = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    by = _LinkGuardianSerializer(
        allow_null=True, required=False, help_text="The guardian who gave it; null: the player (or a coach)."
    )


class _QuestionLabelSerializer(serializers.Serializer):
    value = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]


class QuestionSerializer(serializers.Serializer):
    """One question of a questionnaire link (trainings/answers/presets.py has the built-in ones)."""

    id = serializers.CharField(help_text="The key of its answer in `answers`.")
    text = serializers.CharField(help_text="The question, in the reader's language (a coach's own as typed).")
    short = serializers.CharField(help_text="A short name of it, for a chart or a list.")
    type = serializers.ChoiceField(
        choices=["scale", "text"], help_text="`scale`: a whole number of minimum..maximum; `text`: a note."
    )
    minimum = serializers.IntegerField(allow_null=True)
    maximum = serializers.IntegerField(allow_null=True)
    labels = _QuestionLabelSerializer(many=True, help_text="The words at some values of a scale.")
    required = serializers.BooleanField(  # type: ignore[assignment]
        help_text="Whether an answer without it is refused."
    )


class AnswerLinkSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="INVITATION, PRE or POST.")
    expects = serializers.ChoiceField(choices=["response", "answers"], help_text="What a POST carries.")
    responses = serializers.ListField(child=serializers.CharField(), required=False)
    question = serializers.CharField(
        help_text="What is asked, in the reader's (player's or guardian's) language and zone."
    )
    language = serializers.CharField()
    training = _LinkTrainingSerializer()
    player = _LinkPlayerSerializer()
    guardian = _LinkGuardianSerializer(
        required=False, help_text="A link sent to a guardian: they answer for `player`."
    )
    closes_at = serializers.DateTimeField(help_text="After this the link answers 410.")
    answer = _LinkAnswerSerializer(allow_null=True, help_text="The answer already given, if any.")
    questions = QuestionSerializer(
        many=True, required=False, help_text="GET of a questionnaire link: what `answers` may hold, in order."
    )
    changed = serializers.BooleanField(
        required=False, help_text="POST: whether this answer changed anything."
    )
