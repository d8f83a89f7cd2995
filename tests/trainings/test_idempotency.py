"""`Idempotency-Key` on the creating POSTs (common/idempotency.py): a retry gets the first answer and creates
nothing, another body under the key is a 422, an error answer spends no key, keys are the caller's own and
expire, and two requests with one key at the same moment make one training."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from common.idempotency import idempotency_purge_expired
from common.models import IdempotentRequest
from reminders.models import Job, Occurrence
from reminders.tasks import purge_old
from tests.clients import api_as
from tests.concurrency import run_together
from tests.factories import UserFactory
from trainings.models import ReminderRule, Team, Training

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _body(team: Team, title: str = "Speed session") -> dict[str, Any]:
    return {
        "team": team.pk,
        "title": title,
        "start": START.isoformat(),
        "end": (START + dt.timedelta(minutes=90)).isoformat(),
        "time_zone": "Europe/Paris",
    }


def _post(api: Any, body: dict[str, Any], key: str | None, url: str = "/api/trainings/") -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return api.post(url, body, format="json", headers=headers)


def _training_reminders() -> int:
    return Occurrence.objects.filter(job__key__startswith="training-").count()


@pytest.mark.django_db
def test_a_retry_with_the_key_gets_the_first_answer_and_creates_nothing(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    api = api_as(coach)
    first = _post(api, _body(team), "create-speed-1")
    assert first.status_code == 201, first.content
    assert "Idempotent-Replayed" not in first.headers
    reminders = _training_reminders()
    assert reminders > 0

    # The same body with its keys in another order is the same request.
    again = _post(api, dict(reversed(_body(team).items())), "create-speed-1")
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Training.objects.count() == 1
    assert _training_reminders() == reminders

    # Without a key, the same body is another training (as before the header existed).
    assert _post(api, _body(team), None).status_code == 201
    assert Training.objects.count() == 2


@pytest.mark.django_db
def test_the_key_with_another_body_is_a_422_and_runs_nothing(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    api = api_as(coach)
    assert _post(api, _body(team), "k-1").status_code == 201
    other = _post(api, _body(team, title="Another session"), "k-1")
    assert other.status_code == 422
    assert "'k-1' was used with another request" in other.json()["detail"]
    assert list(Training.objects.values_list("title", flat=True)) == ["Speed session"]


@pytest.mark.django_db
def test_an_error_answer_spends_no_key(coach: Any, team: Team, rules: dict[str, ReminderRule]) -> None:
    api = api_as(coach)
    bad = _post(api, {**_body(team), "end": START.isoformat()}, "k-2")
    assert bad.status_code == 400
    assert not IdempotentRequest.objects.exists()
    good = _post(api, _body(team), "k-2")
    assert good.status_code == 201
    assert "Idempotent-Replayed" not in good.headers


@pytest.mark.django_db
def test_keys_are_each_callers_own(coach: Any, team: Team, rules: dict[str, ReminderRule]) -> None:
    other_coach = UserFactory(username="coach-b")
    team.coaches.add(other_coach)
    assert _post(api_as(coach), _body(team), "shared").status_code == 201
    theirs = _post(api_as(other_coach), _body(team, title="Theirs"), "shared")
    assert theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs.headers
    assert Training.objects.count() == 2


@pytest.mark.django_db
def test_a_header_that_is_no_key_is_a_400_naming_it(coach: Any, team: Team) -> None:
    for key in ("", "x" * 256, "caf\u00e9"):
        answer = api_as(coach).post("/api/trainings/", _body(team), format="json", HTTP_IDEMPOTENCY_KEY=key)
        assert answer.status_code == 400, key
        assert "Idempotency-Key" in answer.json()
    assert not Training.objects.exists()


@pytest.mark.django_db
def test_keys_expire_and_the_hourly_purge_deletes_them(
    coach: Any, team: Team, rules: dict[str, ReminderRule], settings: Any
) -> None:
    assert settings.IDEMPOTENCY_KEY_TTL_HOURS == 24
    api = api_as(coach)
    before = timezone.now()
    assert _post(api, _body(team), "old").status_code == 201
    row = IdempotentRequest.objects.get()
    assert before + timedelta(hours=24) <= row.expires_at <= timezone.now() + timedelta(hours=24)

    # Past its time the key is new again: the same request creates a second training.
    IdempotentRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = _post(api, _body(team), "old")
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again.headers
    assert Training.objects.count() == 2
    assert IdempotentRequest.objects.get().expires_at > timezone.now()

    assert _post(api, _body(team), "other").status_code == 201
    IdempotentRequest.objects.filter(key="other").update(expires_at=timezone.now() - timedelta(seconds=1))
    purge_old()  # beat's hourly "reminders: purge old occurrences"
    assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["old"]
    assert idempotency_purge_expired() == 0


@pytest.mark.django_db
def test_jobs_and_bulk_jobs_replay_too() -> None:
    caller = UserFactory(queues=["billing.*"])
    api = api_as(caller)
    job = {
        "key": "invoice-7",
        "schedules": ["2030-12-24T14:00:00Z"],
        "callback": {"type": "rabbitmq", "data": {"queue": "billing.invoices", "payload": {"id": 7}}},
    }
    first = _post(api, job, "job-1", url="/api/jobs/")
    assert first.status_code == 201, first.content
    # Without the key the same POST is a replace (200, version 2); with it, the first answer (201, version 1).
    replay = _post(api, job, "job-1", url="/api/jobs/")
    assert (replay.status_code, replay.json()["version"]) == (201, 1)
    assert Job.objects.get(key="invoice-7").version == 1
    assert _post(api, {**job, "priority": 9}, "job-1", url="/api/jobs/").status_code == 422
    # The key on another route is another request too.
    elsewhere = _post(api, {"jobs": [job]}, "job-1", url="/api/jobs/bulk/")
    assert (elsewhere.status_code, "POST /api/jobs/" in elsewhere.json()["detail"]) == (422, True)

    bulk = {"jobs": [{**job, "key": f"invoice-{n}"} for n in range(8, 11)]}
    created = _post(api, bulk, "bulk-1", url="/api/jobs/bulk/")
    assert created.json()["created"] == 3
    replayed = _post(api, bulk, "bulk-1", url="/api/jobs/bulk/")
    assert replayed.json() == created.json()
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(key__startswith="invoice-").count() == 4


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_creates_with_one_key_at_once_make_one_training(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    """The second request's insert of the key waits on the first one's uncommitted row, then replays it."""
    for round_ in range(5):
        key = f"race-{round_}"

        def create(slot: int, key: str = key) -> tuple[int, int, bool]:
            answer = _post(api_as(coach, raise_request_exception=False), _body(team), key)
            return answer.status_code, answer.json()["id"], "Idempotent-Replayed" in answer.headers

        results = run_together(create, 2)
        assert [code for code, _, _ in results] == [201, 201]
        assert len({training for _, training, _ in results}) == 1
        assert sorted(replayed for _, _, replayed in results) == [False, True]
    assert Training.objects.count() == 5
