"""Timing experiments: the arm a player is in, the reminders each arm gets, stopping and promoting, and the
comparison of the arms on data whose answering is known."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus
from tests.clients import api_as
from tests.factories import TeamFactory, UserFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.experiment_data import VARIANT, known_training, squad
from trainings.experiments.assignment import arm_of
from trainings.experiments.control import experiment_promote, experiment_start, experiment_stop
from trainings.experiments.results import Arm, Outcome, arms_compare, experiment_results
from trainings.experiments.statistics import rate_difference, wilson
from trainings.models import (
    Experiment,
    ExperimentAssignment,
    ExperimentStatus,
    Push,
    PushStatus,
    ReminderRule,
    Team,
    Training,
)
from trainings.planning.scheduling import rule_reschedule_batch
from trainings.selectors import job_key

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
MINUTE = dt.timedelta(minutes=1)


# --- The arm: stable and fair --------------------------------------------------------------------------


def test_a_players_arm_is_the_same_every_time_and_differs_between_experiments() -> None:
    assert [arm_of(7, p, 2) for p in range(1, 200)] == [arm_of(7, p, 2) for p in range(1, 200)]
    assert [arm_of(7, p, 2) for p in range(1, 200)] != [arm_of(8, p, 2) for p in range(1, 200)]


@pytest.mark.parametrize("arms", [2, 3, 5])
def test_the_split_is_even_within_two_percent_of_10000_players(arms: int) -> None:
    counts = [0] * arms
    for player in range(1, 10_001):
        counts[arm_of(42, player, arms)] += 1
    assert all(abs(count - 10_000 / arms) < 200 for count in counts), counts


# --- Intervals: the published examples --------------------------------------------------------------------


def test_wilson_interval_matches_newcombes_worked_example() -> None:
    low, high = wilson(81, 263, 0.95)  # Newcombe (1998), Statistics in Medicine 17: 0.2553 to 0.3662
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    assert wilson(0, 0, 0.95) == (0.0, 1.0)


def test_newcombes_difference_interval_matches_his_worked_example() -> None:
    difference = rate_difference((48, 80), (56, 70), 0.95)  # 56/70 - 48/80: 0.0524 to 0.3339 (method 10)
    assert difference is not None
    assert (round(difference.estimate, 4), round(difference.low, 4), round(difference.high, 4)) == (
        0.2,
        0.0524,
        0.3339,
    )
    assert difference.significant


# --- Detection, on seeded answer behaviour ------------------------------------------------------------------

ARMS = [Arm(0, "rule", ["90m"]), Arm(1, "early", ["120m"])]


def _seeded(rates: tuple[float, float], n: int, seed: int) -> list[Outcome]:
    draw = random.Random(seed)
    return [Outcome(player, arm, draw.random() < rates[arm], None) for arm in (0, 1) for player in range(n)]


def test_a_built_in_difference_of_12_points_is_detected_at_95_percent() -> None:
    arms = arms_compare(_seeded((0.60, 0.72), 600, seed=2026), ARMS, 0.95)
    variant = arms[1]
    assert variant.difference is not None and variant.difference.significant
    assert variant.difference.low > 0
    assert "Significant at 95%: more players answer in time" in variant.verdict
    assert (arms[0].asked, arms[1].asked) == (600, 600)


def test_no_built_in_difference_is_reported_as_not_yet_significant() -> None:
    arms = arms_compare(_seeded((0.60, 0.60), 600, seed=2026), ARMS, 0.95)
    variant = arms[1]
    assert variant.difference is not None and not variant.difference.significant
    assert variant.difference.low < 0 < variant.difference.high
    assert "Not yet significant at 95%" in variant.verdict


def _significant(rates: tuple[float, float], seed: int) -> bool:
    difference = arms_compare(_seeded(rates, 300, seed=seed), ARMS, 0.95)[1].difference
    assert difference is not None
    return difference.significant


def test_over_many_seeds_the_null_is_called_significant_about_as_often_as_the_confidence_allows() -> None:
    false_alarms = sum(_significant((0.6, 0.6), seed) for seed in range(200))
    detected = sum(_significant((0.6, 0.72), seed) for seed in range(200))
    assert false_alarms <= 20  # 5 % expected: 10 of 200
    assert detected >= 120  # power about 0.85 at this size


# --- Scheduling and firing: each arm gets its own offsets ---------------------------------------------------


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


def _started(rule: ReminderRule, variants: list[tuple[str, list[str]]] | None = None) -> Experiment:
    experiment = experiment_start(rule=rule, name="Earlier first", variants=variants or [("early", VARIANT)])
    rule_reschedule_batch(rule_id=rule.pk)  # what the worker does once the start commits
    return experiment


def _pending(training: Training, rule: ReminderRule) -> list[int]:
    """Minutes before the start of the rule's pending instants for the training."""
    rows = Occurrence.objects.filter(
        job__key=job_key(training_id=training.pk, rule=rule), status=OccurrenceStatus.SCHEDULED
    ).values_list("fire_at", flat=True)
    return sorted(int((training.start - at) / MINUTE) for at in rows)


def test_a_running_experiment_schedules_every_arms_instants_and_reminds_each_player_at_their_own(
    rules: dict[str, ReminderRule],
) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    team = TeamFactory()
    arms = squad(team, experiment, per_arm=2)
    training = training_made(team, START)
    assert _pending(training, pre) == [15, 30, 45, 60, 75, 90, 120]

    def pushed(minutes: int) -> set[int]:
        occurrence = Occurrence.objects.get(
            job__key=job_key(training_id=training.pk, rule=pre), fire_at=START - minutes * MINUTE
        )
        assert fire(occurrence).delivered == 1
        return set(
            Push.objects.filter(
                occurrence_key=occurrence.idempotency_key, status=PushStatus.SENT
            ).values_list("player_id", flat=True)
        )

    rule_arm, variant_arm = {p.pk for p in arms[0]}, {p.pk for p in arms[1]}
    assert pushed(120) == variant_arm  # the variant's alone
    assert pushed(90) == rule_arm  # the rule's alone
    assert pushed(45) == rule_arm | variant_arm  # both have 45 min
    # The players it met are recorded in the arm the hash gives.
    recorded = dict(
        ExperimentAssignment.objects.filter(experiment=experiment).values_list("player_id", "arm")
    )
    assert recorded == {p: arm_of(experiment.pk, p, 2) for p in rule_arm | variant_arm}


def test_starting_records_every_active_members_arm(rules: dict[str, ReminderRule], team: Team) -> None:
    experiment = _started(rules["pre-questionnaire"])
    members = set(team.memberships.filter(active=True).values_list("player_id", flat=True))
    recorded = dict(
        ExperimentAssignment.objects.filter(experiment=experiment).values_list("player_id", "arm")
    )
    assert recorded == {p: arm_of(experiment.pk, p, 2) for p in members}


def test_stopping_returns_everyone_to_the_rule(rules: dict[str, ReminderRule], team: Team) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    training = training_made(team, START)
    assert _pending(training, pre) == [15, 30, 45, 60, 75, 90, 120]
    experiment = experiment_stop(experiment=experiment)
    rule_reschedule_batch(rule_id=pre.pk)
    pre.refresh_from_db()
    assert (experiment.status, pre.experiment_id, pre.variant_offsets) == (ExperimentStatus.STOPPED, None, [])
    assert _pending(training, pre) == [15, 30, 45, 60, 75, 90]
    with pytest.raises(ValidationError) as error:
        experiment_stop(experiment=experiment)
    assert "experiment" in error.value.message_dict


def test_promoting_makes_the_variants_offsets_the_rules(rules: dict[str, ReminderRule], team: Team) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    training = training_made(team, START)
    experiment = experiment_promote(experiment=experiment, variant=experiment.variants.get(arm=1))
    rule_reschedule_batch(rule_id=pre.pk)
    pre.refresh_from_db()
    assert pre.offsets == VARIANT and pre.experiment_id is None
    assert experiment.status == ExperimentStatus.PROMOTED
    assert experiment.promoted is not None and experiment.promoted.arm == 1
    assert _pending(training, pre) == [15, 45, 120]


@pytest.mark.parametrize(
    ("variants", "field"),
    [
        ([], "variants"),
        ([("same", ["15m", "30m", "45m", "60m", "75m", "90m"])], "variants"),
        ([("bad", ["soon"])], "variants"),
    ],
)
def test_a_start_that_cannot_be_is_refused_naming_the_field(
    rules: dict[str, ReminderRule], variants: list[tuple[str, list[str]]], field: str
) -> None:
    with pytest.raises(ValidationError) as error:
        experiment_start(rule=rules["pre-questionnaire"], name="x", variants=variants)
    assert field in error.value.message_dict
    assert not Experiment.objects.exists()


def test_a_second_experiment_on_a_running_rule_is_refused(rules: dict[str, ReminderRule]) -> None:
    _started(rules["pre-questionnaire"])
    with pytest.raises(ValidationError) as error:
        experiment_start(rule=rules["pre-questionnaire"], name="again", variants=[("late", ["10m"])])
    assert "rule" in error.value.message_dict


# --- Results on data with known answering -------------------------------------------------------------------

# Per arm, each player's behaviour (tests/trainings/experiment_data.py).
BEHAVIOUR = {0: ["before", "second", "never", "second", "late"], 1: ["before", "never", "never", "second"]}
# arm: (asked, in time, median minutes from the first reminder, answers timed)
EXPECTED = {0: (5, 3, 20.0, 2), 1: (4, 2, 80.0, 1)}  # 90 -> 75+5 min: 20; 120 -> 45+5 min: 80


def _known(experiment: Experiment, rule: ReminderRule, start: dt.datetime = START) -> Training:
    return known_training(experiment, rule, start, BEHAVIOUR)


def test_the_reported_rates_and_medians_equal_the_constructed_ones(rules: dict[str, ReminderRule]) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    _known(experiment, pre)
    result = experiment_results(experiment, now=START + dt.timedelta(hours=2))
    assert result.trainings == 1
    got = {arm.arm: (arm.asked, arm.in_time, arm.median_minutes, arm.timed) for arm in result.arms}
    assert got == EXPECTED
    rule_arm, variant = result.arms
    assert rule_arm.rate == 3 / 5 and variant.rate == 2 / 4
    assert (rule_arm.low, rule_arm.high) == wilson(3, 5, 0.95)
    assert variant.difference == rate_difference((3, 5), (2, 4), 0.95)
    assert "Not yet significant at 95%" in variant.verdict


def test_trainings_the_experiment_did_not_cover_whole_or_still_open_do_not_count(
    rules: dict[str, ReminderRule],
) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    _known(experiment, pre)
    assert experiment_results(experiment, now=START - MINUTE).trainings == 0  # window still open
    Experiment.objects.filter(pk=experiment.pk).update(started_at=START - 119 * MINUTE)
    experiment.refresh_from_db()
    assert experiment_results(experiment, now=START + MINUTE).trainings == 0  # its 120 min came before


# --- The API ------------------------------------------------------------------------------------------------


def test_the_api_gives_the_results_and_names_a_bad_field(rules: dict[str, ReminderRule]) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    yesterday = timezone.now().replace(microsecond=0) - dt.timedelta(days=1)
    Experiment.objects.filter(pk=experiment.pk).update(started_at=yesterday - dt.timedelta(days=1))
    _known(experiment, pre, yesterday)
    api = api_as(UserFactory(is_staff=True, is_superuser=True))
    listed = api.get("/api/experiments/").json()
    assert [(e["id"], e["rule"], e["status"]) for e in listed] == [(experiment.pk, pre.slug, "running")]
    assert listed[0]["arms"][1] == {"arm": 1, "name": "early", "offsets": VARIANT}
    body: dict[str, Any] = api.get(f"/api/experiments/{experiment.pk}/results/", {"confidence": 0.9}).json()
    assert body["confidence"] == 0.9
    assert [(a["asked"], a["in_time"], a["median_minutes"]) for a in body["arms"]] == [
        (5, 3, 20.0),
        (4, 2, 80.0),
    ]
    for query, field in (({"confidence": 0.5}, "confidence"), ({"confidence": "high"}, "confidence"),
                         ({"team": 999_999}, "team"), ({"team": 0}, "team")):  # fmt: skip
        response = api.get(f"/api/experiments/{experiment.pk}/results/", query)
        assert response.status_code == 400 and field in response.json(), (query, response.content)


def test_a_coach_may_not_read_experiments(rules: dict[str, ReminderRule], coach: Any) -> None:
    _started(rules["pre-questionnaire"])
    assert api_as(coach).get("/api/experiments/").status_code == 403


# --- The admin ----------------------------------------------------------------------------------------------


def test_an_operator_starts_reads_and_stops_an_experiment_in_the_admin(
    rules: dict[str, ReminderRule], operator: Any
) -> None:
    pre = rules["pre-questionnaire"]
    form = {
        "rule": pre.pk,
        "name": "Earlier first",
        "variant_1_label": "early",
        "variant_1_offsets": "120m, 45m 15m",
    }
    response = operator.post("/admin/trainings/experiment/add/", form)
    assert response.status_code == 302, response.content
    experiment = Experiment.objects.get()
    assert [v.offsets for v in experiment.variants.all()] == [VARIANT]
    page = operator.get(f"/admin/trainings/experiment/{experiment.pk}/change/").content.decode()
    assert 'id="experiment-results"' in page and 'id="stop-form"' in page and 'id="promote-form"' in page
    assert operator.get(f"/admin/trainings/experiment/{experiment.pk}/stop/").status_code == 403  # POST only
    assert operator.post(f"/admin/trainings/experiment/{experiment.pk}/stop/").status_code == 302
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.STOPPED
    assert (
        'id="stop-form"'
        not in operator.get(f"/admin/trainings/experiment/{experiment.pk}/change/").content.decode()
    )


@pytest.mark.parametrize(
    ("offsets", "field", "reason"),
    [("soon", "variant_1_offsets", "is not an offset"),
     ("90m 75m 60m 45m 30m 15m", "variant_1_offsets", "The same offsets as the rule")],
)  # fmt: skip
def test_the_start_form_names_the_bad_field(
    rules: dict[str, ReminderRule], operator: Any, offsets: str, field: str, reason: str
) -> None:
    form = {"rule": rules["pre-questionnaire"].pk, "name": "x", "variant_1_offsets": offsets}
    response = operator.post("/admin/trainings/experiment/add/", form)
    assert response.status_code == 200
    assert reason in str(response.context["adminform"].form.errors[field])
    assert not Experiment.objects.exists()


def test_a_rules_offsets_do_not_change_under_a_running_experiment(rules: dict[str, ReminderRule]) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _started(pre)
    api = api_as(UserFactory(is_staff=True, is_superuser=True))
    response = api.patch(f"/api/reminder-rules/{pre.slug}/", {"offsets": ["10m"]}, format="json")
    assert response.status_code == 400 and "offsets" in response.json(), response.content
    path = f"/api/reminder-rules/{pre.slug}/"
    response = api.patch(path, {"critical_offsets": ["120m", "5m"]}, format="json")
    assert response.status_code == 400 and "5m" in response.json()["critical_offsets"][0], response.content
    # A variant's offset may be critical while the experiment runs (its arm's reminder at 120 min).
    assert api.patch(path, {"critical_offsets": ["120m", "15m"]}, format="json").status_code == 200
    experiment_stop(experiment=experiment)
    pre.refresh_from_db()
    assert pre.critical_offsets == ["15m"]  # nobody is reminded at 120 min any more
    response = api.patch(path, {"offsets": ["10m"]}, format="json")
    assert response.status_code == 400 and "critical_offsets" in response.json()  # 15m would be gone
    assert (
        api.patch(path, {"offsets": ["10m"], "critical_offsets": ["10m"]}, format="json").status_code == 200
    )


def test_only_operators_stop_or_promote(rules: dict[str, ReminderRule]) -> None:
    from tests.clients import logged_in
    from trainings.access import coach_group_ensure

    experiment = _started(rules["pre-questionnaire"])
    coach = UserFactory(is_staff=True)  # in the admin, as coaches are
    coach.groups.add(coach_group_ensure())
    client = logged_in(coach)
    for action in ("stop", "promote"):
        response = client.post(f"/admin/trainings/experiment/{experiment.pk}/{action}/", {"arm": 1})
        assert response.status_code == 403
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.RUNNING
