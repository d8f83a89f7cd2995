"""A timing experiment says what is true: an instant of an arm that none of the training's owing players is
in reads "No player was in this instant's arm", never "Everybody had answered" while the grid shows them
owing; and an experiment on a coaches' rule (digest, alert), which reminds no player, is refused."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from reminders.models import Occurrence
from tests.clients import api_as
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.experiment_data import VARIANT
from trainings.access import coach_group_ensure
from trainings.experiments.assignment import arm_of
from trainings.experiments.control import experiment_start
from trainings.models import Experiment, Push, ReminderRule, ReminderRun, RunOutcome
from trainings.planning.scheduling import rule_reschedule_batch
from trainings.selectors import job_key

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


def test_an_instant_of_an_arm_nobody_is_in_says_so(rules: dict[str, ReminderRule]) -> None:
    pre = rules["pre-questionnaire"]
    experiment = experiment_start(rule=pre, name="Earlier first", variants=[("early", VARIANT)])
    rule_reschedule_batch(rule_id=pre.pk)
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(coaches=[coach])
    # Two players, both on the rule's arm (0): nobody in the variant's (1), whose 120 min is its own.
    made = 0

    while made < 2:
        player = PlayerFactory()
        if arm_of(experiment.pk, player.pk, 2) == 0:
            MembershipFactory(team=team, player=player)
            made += 1
    training = training_made(team, START)
    occurrence = Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=pre), fire_at=START - 120 * MINUTE
    )
    fire(occurrence)
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert run.outcome == RunOutcome.NO_ARM_PLAYER
    assert not Push.objects.filter(occurrence_key=occurrence.idempotency_key).exists()
    client = Client()
    client.force_login(coach)
    page = client.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert "No player was in this instant&#x27;s arm of the experiment" in page
    assert "Everybody had answered" not in page
    body = api_as(coach).get(f"/api/trainings/{training.pk}/timeline/").json()
    assert RunOutcome.NO_ARM_PLAYER.value in str(body)


@pytest.mark.parametrize("slug", ["coach-late-decline", "coach-digest"])
def test_an_experiment_on_a_coaches_rule_is_refused_with_a_form_error(
    rules: dict[str, ReminderRule], operator: Any, slug: str
) -> None:
    rule = ReminderRule.objects.get(slug=slug)
    form = {"rule": rule.pk, "name": "x", "variant_1_offsets": "30m"}
    response = operator.post("/admin/trainings/experiment/add/", form)
    assert response.status_code == 200
    assert "reminds no player" in str(response.context["adminform"].form.errors["rule"])
    assert not Experiment.objects.exists()
    with pytest.raises(ValidationError) as refused:
        experiment_start(rule=rule, name="x", variants=[("a", ["30m"])])
    assert "rule" in refused.value.message_dict
    assert not Experiment.objects.exists()
