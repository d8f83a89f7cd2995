"""The experiments API's query and response shapes (trainings/experiments/views.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from trainings.experiments.results import CONFIDENCES, ExperimentResult, arms_of
from trainings.models import Experiment, Team


class ResultsQuerySerializer(serializers.Serializer):
    confidence = serializers.FloatField(
        required=False,
        default=0.95,
        help_text=f"Confidence of the intervals, one of {', '.join(map(str, CONFIDENCES))} (default 0.95).",
    )
    team = serializers.IntegerField(
        required=False, min_value=1, help_text="Only this team's trainings (default: every team)."
    )

    def validate_confidence(self, value: float) -> float:
        if value not in CONFIDENCES:
            raise serializers.ValidationError(f"{value} is not one of {', '.join(map(str, CONFIDENCES))}.")
        return value

    def validate_team(self, value: int) -> Team:
        team = Team.objects.filter(pk=value).first()
        if team is None:
            raise serializers.ValidationError("No team with this id.")
        return team


class ArmSerializer(serializers.Serializer):
    arm = serializers.IntegerField(help_text="0: the rule's own offsets; 1 and up: the variants.")
    name = serializers.CharField(source="label", help_text="The variant's label; the rule's arm is 'rule'.")
    offsets = serializers.ListField(child=serializers.CharField())


class ExperimentSerializer(serializers.ModelSerializer):
    rule = serializers.CharField(source="rule.slug", read_only=True, help_text="The rule's slug.")
    arms = serializers.SerializerMethodField()
    promoted_arm = serializers.SerializerMethodField()

    class Meta:
        model = Experiment
        fields = ["id", "name", "rule", "mode", "status", "started_at", "stopped_at", "promoted_arm", "arms"]
        read_only_fields = fields

    @extend_schema_field(ArmSerializer(many=True))
    def get_arms(self, experiment: Experiment) -> list[dict[str, Any]]:
        return [ArmSerializer(arm).data for arm in arms_of(experiment)]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_promoted_arm(self, experiment: Experiment) -> int | None:
        return experiment.promoted.arm if experiment.promoted else None


class DifferenceSerializer(serializers.Serializer):
    estimate = serializers.FloatField(help_text="This arm's rate minus the rule's.")
    low = serializers.FloatField()
    high = serializers.FloatField()
    significant = serializers.BooleanField(help_text="The interval leaves out zero.")


class ArmResultSerializer(serializers.Serializer):
    arm = serializers.IntegerField()
    name = serializers.CharField(source="label")
    offsets = serializers.ListField(child=serializers.CharField())
    players = serializers.IntegerField(help_text="Distinct players in the sample.")
    asked = serializers.IntegerField(help_text="Sample size: (training, player) answers owed.")
    in_time = serializers.IntegerField(help_text="Answered before the kind's window closed.")
    rate = serializers.FloatField(allow_null=True, help_text="in_time / asked")
    low = serializers.FloatField(help_text="Wilson interval of the rate, at the confidence asked.")
    high = serializers.FloatField()
    timed = serializers.IntegerField(help_text="Answers in time after a reminder: the median's sample.")
    median_minutes = serializers.FloatField(
        allow_null=True, help_text="Median minutes from the first reminder sent to the answer."
    )
    difference = DifferenceSerializer(allow_null=True, help_text="Against the rule (null for arm 0).")
    verdict = serializers.CharField(help_text="The comparison in words: significant or not yet.")


class ExperimentResultSerializer(serializers.Serializer):
    experiment = ExperimentSerializer()
    confidence = serializers.FloatField()
    trainings = serializers.IntegerField(help_text="Trainings the experiment covered whole, window closed.")
    arms = ArmResultSerializer(many=True)


def result_data(experiment: Experiment, result: ExperimentResult) -> dict[str, Any]:
    return {"experiment": experiment, "confidence": result.confidence, "trainings": result.trainings,
            "arms": result.arms}  # fmt: skip
