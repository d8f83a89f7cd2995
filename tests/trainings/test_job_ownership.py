"""A training's jobs are the ones linked to it (`TrainingJob`), never a row found by its key.

Issue 19: a user who created `training-<uuid>-pre-questionnaire` before the trainings app did had that row
taken over when the coach moved the training (owner still the user, who could then read and cancel the
training's reminders). The API now refuses such keys; these tests make the row directly, as a job made
before that check (or in the admin) would be, and prove the trainings app leaves it alone.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.jobs import Callback, job_upsert
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from tests.factories import UserFactory
from trainings.models import ReminderRule, Team, Training, TrainingJob
from trainings.planning.scheduling import HANDLER_NAME, JobKeyTaken
from trainings.planning.writes import (
    rule_delete,
    training_cancel,
    training_create,
    training_delete,
    training_update,
)
from trainings.selectors import job_key, training_timeline

pytestmark = pytest.mark.django_db


def _training_with_only_post_reminders(team: Team) -> Training:
    """Starts in 10 minutes: every pre-questionnaire and invitation offset is already past, so the app
    has no job for those rules yet (the window the squatter used)."""
    start = timezone.now().replace(microsecond=0) + dt.timedelta(minutes=10)
    return training_create(
        team=team, title="Speed", start=start, end=start + dt.timedelta(hours=1), time_zone="Europe/Paris"
    )


def _squat(training: Training, rule: ReminderRule, owner: Any, **callback: Any) -> Job:
    spec = {"type": CallbackType.RABBITMQ, "target": "q.mallory", "payload": {"mine": True}, **callback}
    job, created = job_upsert(
        key=job_key(training_id=training.pk, rule=rule),
        schedules=[timezone.now() + dt.timedelta(days=1)],
        callback=Callback(**spec),
        owner=owner,
    )
    assert created
    return job


def _job_state(job: Job) -> tuple[Any, ...]:
    job.refresh_from_db()
    statuses = list(job.occurrences.order_by("id").values_list("id", "status", "fire_at"))
    return (job.owner_id, job.callback_type, job.target, job.payload, job.version, statuses)


def _scheduled(training: Training, rule: ReminderRule) -> list[dt.datetime]:
    link = TrainingJob.objects.get(training=training, rule=rule)
    pending = link.job.occurrences.filter(status=OccurrenceStatus.SCHEDULED).order_by("fire_at")
    return list(pending.values_list("fire_at", flat=True))


def test_a_user_owned_job_under_the_trainings_key_is_never_taken_over(team, rules) -> None:
    mallory = UserFactory(username="mallory", queues=["*"])
    training = _training_with_only_post_reminders(team)
    pre = rules["pre-questionnaire"]
    assert not TrainingJob.objects.filter(training=training, rule=pre).exists()
    squatted = _squat(training, pre, mallory)
    before = _job_state(squatted)

    moved = training.start + dt.timedelta(hours=3)  # now every pre-questionnaire offset is ahead
    training_update(training=training, start=moved, end=moved + dt.timedelta(hours=1))

    assert _job_state(squatted) == before  # not adopted: same owner, callback, version and occurrences
    link = TrainingJob.objects.select_related("job").get(training=training, rule=pre)
    assert link.job != squatted and link.job.key.startswith(f"{squatted.key}.")
    assert (link.job.owner_id, link.job.target) == (None, HANDLER_NAME)
    assert _scheduled(training, pre) == [moved - dt.timedelta(minutes=m) for m in (90, 75, 60, 45, 30, 15)]

    # Nothing in the trainings namespace is reachable through the engine's API, the training's job least.
    api = APIClient()
    api.force_authenticate(mallory)
    assert api.get("/api/jobs/").json()["results"] == []
    for key in (link.job.key, squatted.key):
        assert api.get(f"/api/jobs/{key}/").status_code == 404
        assert api.delete(f"/api/jobs/{key}/").status_code == 404
    assert len(_scheduled(training, pre)) == 6
    timeline = [e for e in training_timeline(training=training) if e.rule == pre.slug]
    assert [e.status for e in timeline] == ["scheduled"] * 6


def test_a_row_squatted_with_the_trainings_handler_is_not_the_trainings_either(team, rules) -> None:
    """Even a row whose callback already names the trainings handler and this training is not adopted: who
    made it decides, not what it says."""
    mallory = UserFactory(username="mallory", queues=["*"])
    training = _training_with_only_post_reminders(team)
    pre = rules["pre-questionnaire"]
    payload = {"training": str(training.pk), "rule": pre.pk}
    squatted = _squat(training, pre, mallory, type=CallbackType.HANDLER, target=HANDLER_NAME, payload=payload)
    before = _job_state(squatted)

    moved = training.start + dt.timedelta(hours=3)
    training_update(training=training, start=moved, end=moved + dt.timedelta(hours=1))
    training_cancel(training=training)
    assert _job_state(squatted) == before
    assert TrainingJob.objects.get(training=training, rule=pre).job != squatted


def test_lookups_go_through_the_link_not_the_key(team, rules) -> None:
    """Rename every job of the training: moving, the timeline, cancelling and deleting still find them."""
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
    training = training_create(
        team=team, title="Speed", start=start, end=start + dt.timedelta(hours=1), time_zone="Europe/Paris"
    )
    for link in TrainingJob.objects.filter(training=training).select_related("job"):
        Job.objects.filter(pk=link.job_id).update(key=f"renamed-{link.rule.slug}")
    assert len(training_timeline(training=training)) == 22

    training_update(training=training, start=start + dt.timedelta(minutes=30))
    pre = rules["pre-questionnaire"]
    assert _scheduled(training, pre)[0] == start + dt.timedelta(minutes=30 - 90)
    assert TrainingJob.objects.get(training=training, rule=pre).job.key == "renamed-pre-questionnaire"
    # no second job under the usual key (the move's "training moved" notice is a job of its own)
    assert Job.objects.exclude(key__startswith="trainings-moved-notice-").count() == 3

    assert training_delete(training=training) == 22
    assert not Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).exists()


def test_deleting_a_rule_cancels_only_the_jobs_linked_to_it(team, rules) -> None:
    """A user's row that merely looks like the rule's (same key shape, the trainings handler) is not
    cancelled with the rule."""
    mallory = UserFactory(username="mallory", queues=["*"])
    training = _training_with_only_post_reminders(team)
    pre = rules["pre-questionnaire"]
    payload = {"training": str(training.pk), "rule": pre.pk}
    squatted = _squat(training, pre, mallory, type=CallbackType.HANDLER, target=HANDLER_NAME, payload=payload)
    other = training_create(
        team=team,
        title="Later",
        start=dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC),
        end=dt.datetime(2030, 6, 11, 17, tzinfo=dt.UTC),
        time_zone="Europe/Paris",
    )
    before = _job_state(squatted)
    assert rule_delete(rule=pre) == 6  # the other training's six, and nothing of the user's row
    assert _job_state(squatted) == before
    assert not other.reminder_jobs.filter(rule__slug="pre-questionnaire").exists()


@pytest.mark.postgres  # the insert-time refusal is PostgreSQL's ON CONFLICT; SQLite raises IntegrityError
def test_a_row_inserted_under_the_key_after_the_check_rolls_the_save_back(team, rules, monkeypatch) -> None:
    """The race the key check cannot see (an insert between the check and the upsert): the save fails
    rather than adopt the row, and the row is as it was."""
    mallory = UserFactory(username="mallory", queues=["*"])
    training = _training_with_only_post_reminders(team)
    pre = rules["pre-questionnaire"]
    squatted = _squat(training, pre, mallory)
    before = _job_state(squatted)
    monkeypatch.setattr(
        "trainings.planning.scheduling._keys_taken", lambda keys: set()
    )  # it looked before the insert

    moved = training.start + dt.timedelta(hours=3)
    with pytest.raises(JobKeyTaken), transaction.atomic():
        training_update(training=training, start=moved, end=moved + dt.timedelta(hours=1))
    assert _job_state(squatted) == before
    training.refresh_from_db()
    assert training.start == moved - dt.timedelta(hours=3)
    assert not TrainingJob.objects.filter(rule=pre).exists()


def test_a_job_someone_else_pointed_at_the_trainings_handler_reaches_nobody(team, rules, push_queue) -> None:
    """Rows made before the API refused the handler (or in the admin) may still name it with a training
    in the payload: when they fire, the handler finds no link from that job to the training and pushes
    to nobody, while the training's own job still reaches its players."""
    from tests.trainings.conftest import fire
    from trainings.models import Push, ReminderRun, RunOutcome

    mallory = UserFactory(username="mallory", queues=["*"])
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(pk=rules["invitation"].pk).update(active=False)
    start = timezone.now().replace(microsecond=0) + dt.timedelta(minutes=15, seconds=30)
    training = training_create(
        team=team, title="Speed", start=start, end=start + dt.timedelta(hours=1), time_zone="Europe/Paris"
    )
    pre = rules["pre-questionnaire"]
    payload = {"training": str(training.pk), "rule": pre.pk}
    replay, _ = job_upsert(
        key="replay-1",
        schedules=[start - dt.timedelta(minutes=15)],  # the very instant the training's rule wants
        callback=Callback(type=CallbackType.HANDLER, target=HANDLER_NAME, payload=payload),
        owner=mallory,
    )
    assert fire(replay.occurrences.get()).delivered == 1
    run = ReminderRun.objects.get(occurrence_key=replay.occurrences.get().idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.GONE, 0)
    assert not Push.objects.exists()

    ours = TrainingJob.objects.get(training=training, rule=pre).job.occurrences.get()
    assert fire(ours).delivered == 1
    assert Push.objects.filter(occurrence_key=ours.idempotency_key).count() == 3


def test_another_teams_occurrences_are_not_listed_to_a_coach(team, coach) -> None:
    """Coaches are staff, and staff list every occurrence of the engine; a training's rows (their payload
    names the training) are the trainings app's to show, scoped to the coach's own teams. (A coach needs
    the scheduler API's permission to list any: this one integrates too.)"""
    from tests.factories import TeamFactory, scheduler_caller_grant

    coach.is_staff = True  # as dev_admin and the admin make coaches
    coach.save(update_fields=["is_staff"])
    scheduler_caller_grant(coach)
    other_coach = UserFactory(username="other-coach", is_staff=True)
    other_team = TeamFactory(name="Rivals", coaches=[other_coach])
    start = timezone.now().replace(microsecond=0) + dt.timedelta(days=4)
    training_create(
        team=other_team, title="Secret", start=start, end=start + dt.timedelta(hours=1), time_zone="UTC"
    )
    assert Occurrence.objects.filter(job__key__startswith="training-").count() > 0
    own = Callback(type=CallbackType.RABBITMQ, target="q", payload={})
    job_upsert(key="coach-own", schedules=[start], callback=own, owner=coach)

    api = APIClient()
    api.force_authenticate(coach)
    listed = api.get("/api/occurrences/", {"page_size": 1000}).json()["results"]
    assert [row["job"] for row in listed] == ["coach-own"]
    training_row = Occurrence.objects.filter(job__key__startswith="training-").first()
    assert training_row is not None
    assert api.get(f"/api/occurrences/{training_row.pk}/").status_code == 404
