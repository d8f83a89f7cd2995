"""Adaptive timing experiments (issue 46.6): the draws are deterministic and stored, each player gets only
their arm's reminders and never more than the rule's, the reported probabilities are the Beta posteriors'
(against numerical integration), and a simulation of players whose answering depends on the arm ends with
the better arm promoted within the documented number of trainings (docs/operations/adaptive-timing.md)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from reminders.models import Occurrence
from tests.clients import api_as
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.trainings.adaptive_data import simulated
from tests.trainings.adaptive_truth import truth
from tests.trainings.conftest import fire
from trainings.access import coach_group_ensure
from trainings.experiments.adaptive import snapshot_take
from trainings.experiments.bandit import DRAWS, MIN_TRAININGS, report, seeded, thompson_arm
from trainings.experiments.control import experiment_start, experiment_stop
from trainings.models import (
    Experiment,
    ExperimentAssignment,
    ExperimentStatus,
    Push,
    PushStatus,
    ReminderRule,
)
from trainings.models.experiments import AdaptiveAssignment, AdaptiveSnapshot, ExperimentMode
from trainings.planning.scheduling import rule_reschedule_batch
from trainings.selectors import job_key

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
VARIANT = ["120m", "45m", "15m"]  # three reminders against the seeded rule's six
TOLERANCE = 0.012  # 3.4 Monte Carlo standard errors at 20,000 draws (0.5 / sqrt(20,000) = 0.0035)
WITHIN_TRAININGS = 20  # the documented bound: 40 players a training, 40 % against 60 % (300 runs: at most 16)


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


def _adaptive(rule: ReminderRule, variants: list[tuple[str, list[str]]] | None = None) -> Experiment:
    experiment = experiment_start(
        rule=rule, name="Tuning", variants=variants or [("early", VARIANT)], mode=ExperimentMode.ADAPTIVE
    )
    rule_reschedule_batch(rule_id=rule.pk)
    rule.refresh_from_db()  # it names the experiment now
    return experiment


# --- The sampler and the report: pure -------------------------------------------------------------------


def test_a_draw_depends_only_on_its_seed_and_the_counts() -> None:
    counts = ([10, 30], [50, 50])
    first = [thompson_arm(seeded("adaptive", 1, "t", p), *counts) for p in range(500)]
    assert first == [thompson_arm(seeded("adaptive", 1, "t", p), *counts) for p in range(500)]
    # With no data both arms are drawn about evenly; with 30/50 against 10/50 the better one nearly always.
    flat = [thompson_arm(seeded("adaptive", 2, "t", p), [0, 0], [0, 0]) for p in range(2000)]
    assert 900 < sum(flat) < 1100
    assert flat != [thompson_arm(seeded("adaptive", 2, "u", p), [0, 0], [0, 0]) for p in range(2000)]
    assert sum(first) > 490


@pytest.mark.parametrize(
    "in_time, asked",
    [
        ([12, 19], [40, 40]),  # a clear leader
        ([20, 21], [40, 40]),  # close: P(best) near one half
        ([0, 0], [0, 0]),  # the flat prior
        ([30, 45, 41], [100, 100, 100]),  # three arms
        ([400, 455], [1000, 1000]),  # large samples: narrow posteriors
        ([5, 60], [10, 120]),  # unequal samples, as Thompson sampling makes them
    ],
)
def test_the_reported_probabilities_are_the_beta_posteriors(in_time: list[int], asked: list[int]) -> None:
    reported = report(in_time, asked, rng=seeded("test", *in_time, *asked))
    best, within = truth(in_time, asked)
    assert sum(reported.best) == pytest.approx(1.0)
    assert reported.best == pytest.approx(best, abs=TOLERANCE)
    if max(best) - sorted(best)[-2] > 2 * TOLERANCE:  # the leader is not a coin toss: same leader
        assert reported.leader == best.index(max(best))
        assert reported.within == pytest.approx(within, abs=TOLERANCE)


def test_the_stopping_rule_needs_the_threshold_and_the_minimum_of_trainings() -> None:
    clear = report([10, 30], [50, 50], rng=seeded("clear"))
    assert clear.leader == 1 and clear.within >= 0.95
    assert clear.decided(MIN_TRAININGS) and not clear.decided(MIN_TRAININGS - 1)
    close = report([24, 25], [50, 50], rng=seeded("close"))
    assert close.within < 0.95 and not close.decided(100)


def _simulated(rates: list[float], players: int, seed: int) -> tuple[int | None, int]:
    """Trainings until the stopping rule is met and the arm it promotes, as the service counts them."""
    rng, in_time, asked = random.Random(seed), [0] * len(rates), [0] * len(rates)
    for trainings in range(40):
        if trainings:
            figures = report(in_time, asked, rng=seeded("report", seed, *in_time, *asked), draws=DRAWS // 4)
            if figures.decided(trainings):
                return trainings, figures.leader
        for player in range(players):
            arm = thompson_arm(seeded("adaptive", seed, trainings, player), in_time, asked)
            asked[arm] += 1
            in_time[arm] += rng.random() < rates[arm]
    return None, -1


def test_over_many_seeded_runs_the_better_arm_is_promoted_within_the_documented_trainings() -> None:
    runs = [_simulated([0.4, 0.6], 40, seed) for seed in range(20)]
    assert all(trainings is not None and trainings <= WITHIN_TRAININGS for trainings, _ in runs), runs
    assert all(arm == 1 for _, arm in runs), runs


# --- Starting: no more pushes than the rule, inside the window ----------------------------------------------


def test_an_adaptive_variant_may_not_remind_more_often_than_the_rule(rules: dict[str, ReminderRule]) -> None:
    seven = [f"{m}m" for m in (120, 100, 80, 60, 40, 20, 10)]
    with pytest.raises(ValidationError) as caught:
        experiment_start(
            rule=rules["pre-questionnaire"], name="x", variants=[("many", seven)], mode="adaptive"
        )
    assert "variants" in caught.value.message_dict
    assert "more than the rule's 6" in caught.value.message_dict["variants"][0]
    # The same variant in a fixed experiment is the operator's choice, as before.
    experiment_start(rule=rules["pre-questionnaire"], name="x", variants=[("many", seven)])


def test_an_adaptive_variant_reminds_inside_the_kinds_window(rules: dict[str, ReminderRule]) -> None:
    post = rules["post-questionnaire"]  # its window closes 24 h after the end (the setting's default)
    with pytest.raises(ValidationError) as caught:
        experiment_start(rule=post, name="late", variants=[("late", ["1h", "30h"])], mode="adaptive")
    assert "after the answer window closes" in caught.value.message_dict["variants"][0]
    with pytest.raises(ValidationError) as caught:
        experiment_start(rule=post, name="x", variants=[("a", ["1h"])], mode="bandit")
    assert "mode" in caught.value.message_dict


# --- Firing: each player on their drawn arm, stored, never redrawn -----------------------------------------


def test_each_player_is_drawn_once_per_training_and_gets_only_the_arms_reminders(
    rules: dict[str, ReminderRule],
) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _adaptive(pre)
    assert not ExperimentAssignment.objects.filter(experiment=experiment).exists()  # no split by player
    team = TeamFactory()
    for _ in range(20):
        MembershipFactory(team=team, player=PlayerFactory())
    training = training_made(team, START)
    occurrences = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=pre))
    minutes = sorted((int((START - o.fire_at) / MINUTE) for o in occurrences), reverse=True)
    assert minutes == [120, 90, 75, 60, 45, 30, 15]  # both arms' instants
    drawn: dict[int, int] = {}
    for at in minutes:
        assert fire(occurrences.get(fire_at=START - at * MINUTE)).delivered == 1
        now = dict(
            AdaptiveAssignment.objects.filter(experiment=experiment, training=training).values_list(
                "player_id", "arm"
            )
        )
        assert now.items() >= drawn.items()  # a drawn arm never changes
        drawn = now
    assert len(drawn) == 20 and set(drawn.values()) == {0, 1}
    arm_minutes = {0: {90, 75, 60, 45, 30, 15}, 1: {120, 45, 15}}
    for player, arm in drawn.items():
        got = set(
            Push.objects.filter(training=training, player_id=player, status=PushStatus.SENT).values_list(
                "offset", flat=True
            )
        )
        assert got == {f"{m}m" for m in arm_minutes[arm]}
        assert len(got) <= len(pre.parsed_offsets())
    # The same seed and the same (flat) posterior: the stored arms are the ones the sampler gives.
    assert drawn == {p: thompson_arm(seeded("adaptive", experiment.pk, training.pk, p), [0, 0], [0, 0])
                     for p in drawn}  # fmt: skip


# --- The simulation: players who answer better on one arm -------------------------------------------------


def test_simulation_the_better_arm_wins_and_the_snapshots_are_the_posteriors(
    rules: dict[str, ReminderRule],
) -> None:
    """40 players a training; on the rule's offsets 40 % answer in time, on the variant's 60 %. Each
    training's players are drawn as firing draws them, three hours before its start, then answer."""
    pre = rules["pre-questionnaire"]
    experiment = _adaptive(pre)
    made = simulated(experiment, pre, {0: 0.4, 1: 0.6}, players=40, trainings=WITHIN_TRAININGS + 1, seed=46)
    assert made <= WITHIN_TRAININGS
    experiment.refresh_from_db()
    snapshots = list(AdaptiveSnapshot.objects.filter(experiment=experiment).order_by("taken_at"))
    assert experiment.status == ExperimentStatus.PROMOTED, [
        (s.trainings, s.best, s.leader_within) for s in snapshots
    ]
    assert experiment.promoted is not None and experiment.promoted.arm == 1
    pre.refresh_from_db()
    assert pre.offsets == VARIANT and pre.experiment_id is None
    decided = snapshots[-1]
    assert decided.decided and decided.leader == 1 and decided.trainings <= WITHIN_TRAININGS
    assert decided.leader_within >= 0.95 and decided.trainings >= MIN_TRAININGS
    assert [s.trainings for s in snapshots] == list(range(len(snapshots)))  # one a training
    assert sum(decided.asked) == 40 * decided.trainings  # every drawn player is a unit
    assert decided.asked[1] > decided.asked[0]  # the sampler sent more players to the better arm
    for snapshot in snapshots:
        best, within = truth(snapshot.in_time, snapshot.asked)
        assert snapshot.best == pytest.approx(best, abs=TOLERANCE)
        if snapshot.trainings and max(best) - min(best) > 2 * TOLERANCE:
            assert snapshot.leader_within == pytest.approx(within, abs=TOLERANCE)
    # Taking another changes nothing: the experiment has ended.
    assert snapshot_take(experiment).decided is False


# --- The API and the admin page ---------------------------------------------------------------------------


def test_the_api_reports_the_mode_the_probabilities_and_the_snapshots(rules: dict[str, ReminderRule]) -> None:
    pre = rules["pre-questionnaire"]
    experiment = _adaptive(pre)
    snapshot_take(experiment)
    operator = api_as(UserFactory(is_superuser=True, is_staff=True))
    detail = operator.get(f"/api/experiments/{experiment.pk}/")
    assert detail.status_code == 200 and detail.json()["mode"] == "adaptive"
    body = operator.get(f"/api/experiments/{experiment.pk}/probabilities/").json()
    assert body["mode"] == "adaptive"
    assert body["stopping_rule"] == {"threshold": 0.95, "margin": 0.01, "min_trainings": MIN_TRAININGS}
    assert body["current"]["asked"] == [0, 0] and body["current"]["met"] is False
    assert sum(body["current"]["best"]) == pytest.approx(1.0)
    assert [s["trainings"] for s in body["snapshots"]] == [0]
    experiment_stop(experiment=experiment)
    fixed = experiment_start(rule=pre, name="fixed", variants=[("early", VARIANT)])
    refused = operator.get(f"/api/experiments/{fixed.pk}/probabilities/")
    assert refused.status_code == 400 and "mode" in refused.json()


def test_the_experiment_page_shows_the_probabilities_and_their_charts(
    rules: dict[str, ReminderRule], client: Any
) -> None:
    experiment = _adaptive(rules["pre-questionnaire"])
    snapshot_take(experiment)
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    page = client.get(f"/admin/trainings/experiment/{experiment.pk}/change/").content.decode()
    assert 'id="adaptive"' in page and "probability of being best" in page
    assert page.count('<svg class="chart adaptive"') == 2
    assert "Not decided yet." in page


def test_the_effectiveness_page_shows_adaptive_experiments_to_operators_only(
    rules: dict[str, ReminderRule], client: Any
) -> None:
    experiment = _adaptive(rules["pre-questionnaire"])
    snapshot_take(experiment)
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    page = client.get("/admin/analytics/").content.decode()
    assert 'id="adaptive-experiments"' in page and experiment.name in page
    assert page.count('<svg class="chart adaptive"') == 2
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    TeamFactory(coaches=[coach])
    client.force_login(coach)
    page = client.get("/admin/analytics/")
    assert page.status_code == 200
    assert 'id="adaptive-experiments"' not in client.get("/admin/analytics/").content.decode()
