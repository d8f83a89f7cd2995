"""What an operator does with an experiment: start it, stop it, promote a variant.

Each is one transaction that changes the experiment and its rule together (the rule row is locked, so a
rule edit or a second start waits), then reschedules the rule's future trainings once committed, in
batches by a worker as for any rule change: starting adds the variants' instants to every job, stopping or
promoting leaves only the rule's. An occurrence already claimed for an instant no longer wanted reminds
nobody (firing sees it stale).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from trainings.experiments.adaptive_checks import adaptive_variants_check
from trainings.experiments.assignment import assignments_record_members
from trainings.models import Experiment, ExperimentStatus, ReminderRule, Variant, validate_offsets
from trainings.models.experiments import ExperimentMode
from trainings.planning import kinds
from trainings.planning.offsets import parse_offsets
from trainings.planning.writes import rule_reschedule_on_commit
from trainings.transitions import experiment_end

MAX_VARIANTS = 4


def experiment_start(
    *,
    rule: ReminderRule,
    name: str,
    variants: Sequence[tuple[str, list[str]]],
    mode: str = ExperimentMode.FIXED,
    now: datetime | None = None,
) -> Experiment:
    """Start comparing the rule's offsets with `variants` ((label, offsets) each); players are split
    evenly between the rule and the variants (`mode` "fixed"), or drawn per training by Thompson sampling
    ("adaptive": trainings/experiments/adaptive.py). ValidationError naming the field when it cannot
    start."""
    if mode not in ExperimentMode.values:
        raise ValidationError({"mode": f"{mode!r} is not one of {', '.join(ExperimentMode.values)}"})
    if kinds.of(rule.kind).to == "coaches":
        raise ValidationError({"rule": f"{rule.slug} tells the coaches (a digest, an alert): a timing "
                                       "experiment splits players between arms, and this rule reminds no "
                                       "player"})  # fmt: skip
    if not variants:
        raise ValidationError({"variants": "at least one variant to compare with the rule"})
    if len(variants) > MAX_VARIANTS:
        raise ValidationError({"variants": f"at most {MAX_VARIANTS} variants"})
    own = {str(o) for o in rule.parsed_offsets()}
    for label, offsets in variants:
        try:
            validate_offsets(offsets)
        except ValidationError as exc:
            raise ValidationError({"variants": f"{label or 'a variant'}: {' '.join(exc.messages)}"}) from None
        if {str(o) for o in parse_offsets(offsets)} == own:
            raise ValidationError({"variants": f"{label or 'a variant'}: the same offsets as the rule"})
    if mode == ExperimentMode.ADAPTIVE:
        adaptive_variants_check(rule, variants)
    now = now or timezone.now()
    with transaction.atomic():
        rule = ReminderRule.objects.select_for_update().get(pk=rule.pk)
        if rule.experiment_id is not None:
            raise ValidationError({"rule": f"{rule.slug} already runs an experiment; stop it first"})
        if not rule.active:
            raise ValidationError({"rule": f"{rule.slug} is inactive: it reminds nobody"})
        experiment = Experiment.objects.create(
            rule=rule, name=name, control_offsets=rule.offsets, started_at=now, mode=mode
        )
        stored = [
            Variant(experiment=experiment, arm=arm, label=label, offsets=[text.strip() for text in texts])
            for arm, (label, texts) in enumerate(variants, start=1)
        ]
        Variant.objects.bulk_create(stored)
        rule.experiment = experiment
        rule.variant_offsets = [variant.offsets for variant in stored]
        rule.save(update_fields=["experiment", "variant_offsets", "updated_at"])
        if mode == ExperimentMode.FIXED:  # adaptive arms are drawn per training (adaptive.py)
            assignments_record_members(experiment, arms=1 + len(stored), now=now)
        rule_reschedule_on_commit(rule=rule)
    return experiment


def experiment_stop(*, experiment: Experiment, now: datetime | None = None) -> Experiment:
    """Everyone back on the rule's offsets; the figures so far stay readable."""
    return _experiment_end(experiment, ExperimentStatus.STOPPED, None, now)


def experiment_promote(
    *, experiment: Experiment, variant: Variant, now: datetime | None = None
) -> Experiment:
    """The variant's offsets become the rule's, for everyone; the experiment ends."""
    if variant.experiment_id != experiment.pk:
        raise ValidationError({"variant": f"variant {variant.pk} is not one of experiment {experiment.pk}'s"})
    return _experiment_end(experiment, ExperimentStatus.PROMOTED, variant, now)


def _experiment_end(
    experiment: Experiment, status: ExperimentStatus, variant: Variant | None, now: datetime | None
) -> Experiment:
    now = now or timezone.now()
    with transaction.atomic():
        rule = ReminderRule.objects.select_for_update().get(pk=experiment.rule_id)
        experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
        experiment_end(experiment, status=status, variant=variant, now=now)
        fields = ["experiment", "variant_offsets", "updated_at"]
        if rule.experiment_id == experiment.pk:
            rule.experiment, rule.variant_offsets = None, []
        if variant is not None:
            rule.offsets = variant.offsets
            fields.append("offsets")
        rule.critical_offsets = rule.critical_within()  # an arm's offsets that are gone are critical no more
        fields.append("critical_offsets")
        rule.save(update_fields=fields)
        rule_reschedule_on_commit(rule=rule)
    return experiment
