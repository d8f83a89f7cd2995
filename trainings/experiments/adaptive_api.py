"""The adaptive experiment's probabilities in the API (`GET /api/experiments/{id}/probabilities/`): the
posterior now, the stopping rule's parameters, and every stored snapshot, oldest first."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from trainings.experiments.adaptive_page import live_report
from trainings.experiments.bandit import MARGIN, MIN_TRAININGS, THRESHOLD
from trainings.experiments.results import ExperimentResult
from trainings.models import Experiment
from trainings.models.experiments import AdaptiveSnapshot


class SnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = AdaptiveSnapshot
        fields = ["taken_at", "trainings", "asked", "in_time", "best", "leader", "leader_within", "decided"]
        read_only_fields = fields
        extra_kwargs = {
            "asked": {"help_text": "Units per arm (arm 0 first): (training, player) answers owed."},
            "in_time": {"help_text": "Answers in time per arm."},
            "best": {"help_text": "Each arm's probability of being best (Beta posteriors, flat prior)."},
            "leader": {"help_text": "The arm most often best."},
            "leader_within": {"help_text": "P(no arm beats the leader by more than the margin)."},
            "decided": {"help_text": "This snapshot met the stopping rule and ended the experiment."},
        }


class StoppingRuleSerializer(serializers.Serializer):
    threshold = serializers.FloatField(help_text="leader_within needed to stop (0.95).")
    margin = serializers.FloatField(help_text="The margin, as a rate (0.01: one percentage point).")
    min_trainings = serializers.IntegerField(help_text="Trainings covered before the rule may stop it.")


class CurrentSerializer(serializers.Serializer):
    trainings = serializers.IntegerField()
    asked = serializers.ListField(child=serializers.IntegerField())
    in_time = serializers.ListField(child=serializers.IntegerField())
    best = serializers.ListField(child=serializers.FloatField())
    leader = serializers.IntegerField()
    leader_within = serializers.FloatField()
    met = serializers.BooleanField(help_text="The stopping rule is met by these figures.")


class ProbabilitiesSerializer(serializers.Serializer):
    experiment = serializers.IntegerField()
    mode = serializers.CharField()
    stopping_rule = StoppingRuleSerializer()
    current = CurrentSerializer(help_text="From the results now (what the next snapshot would store).")
    snapshots = SnapshotSerializer(many=True)


def probabilities_data(experiment: Experiment, result: ExperimentResult) -> dict[str, Any]:
    figures = live_report(experiment, result)
    return {
        "experiment": experiment.pk,
        "mode": experiment.mode,
        "stopping_rule": {"threshold": THRESHOLD, "margin": MARGIN, "min_trainings": MIN_TRAININGS},
        "current": {
            "trainings": result.trainings,
            "asked": [a.asked for a in result.arms],
            "in_time": [a.in_time for a in result.arms],
            "best": figures.best,
            "leader": figures.leader,
            "leader_within": figures.within,
            "met": figures.decided(result.trainings),
        },
        "snapshots": AdaptiveSnapshot.objects.filter(experiment=experiment).order_by("taken_at", "id"),
    }
