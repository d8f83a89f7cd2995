"""The schedules and throttle-policies API: CRUD, pause/resume, preview, and 400s that name the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.jobs import Callback
from reminders.models import CallbackType, Occurrence, OccurrenceStatus, Schedule
from reminders.schedules.cron import MIN_EVERY_SECONDS
from reminders.schedules.lifecycle import ScheduleSpec, schedule_upsert
from tests.factories import ThrottlePolicyFactory

pytestmark = pytest.mark.django_db


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "key": "renewals",
        "expression": "30 2 * * *",
        "timezone": "Europe/Paris",
        "callback": {"type": "rabbitmq", "data": {"queue": "renewals", "payload": {"user": 1234}}},
    }
    body.update(overrides)
    return body


def _pending(key: str) -> list[Occurrence]:
    return list(
        Occurrence.objects.filter(job__schedule__key=key, status=OccurrenceStatus.SCHEDULED).order_by(
            "fire_at"
        )
    )


def test_it_creates_a_schedule_with_its_next_fire_materialised(api: APIClient) -> None:
    response = api.post("/api/schedules/", _body(), format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["version"] == 1
    assert data["timezone"] == "Europe/Paris"
    [pending] = _pending("renewals")
    local = pending.fire_at.astimezone(dt.UTC)
    assert data["next_fire_at"].startswith(local.isoformat()[:16])
    assert pending.idempotency_key == f"renewals-{int(pending.fire_at.timestamp())}"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"expression": "61 * * * *"}, "expression"),
        ({"expression": "* * *"}, "expression"),
        ({"expression": "@fortnightly"}, "expression"),
        ({"expression": f"@every {MIN_EVERY_SECONDS - 1}s"}, "expression"),
        ({"expression": "@every soon"}, "expression"),
        ({"expression": "@at yesterday"}, "expression"),
        ({"expression": "@at 1000"}, "expression"),
        # 9999-12-31T23:59:59Z is already year 10000 in Kiritimati (+14:00)
        ({"expression": "@at 253402300799", "timezone": "Pacific/Kiritimati"}, "expression"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"timezone": "/etc/passwd"}, "timezone"),
        ({"batch_size": 10**6}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"throttle": "no-such-policy"}, "throttle"),
        ({"misfire_policy": "catch_up_all"}, "misfire_policy"),
        ({"start_at": "2030-01-02T00:00:00"}, "start_at"),
        ({"start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}, "end_at"),
        ({"key": "bad key"}, "key"),
        ({"key": "k" * 191}, "key"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(api: APIClient, overrides: dict[str, Any], field: str) -> None:
    response = api.post("/api/schedules/", _body(**overrides), format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Schedule.objects.exists()
    assert not Occurrence.objects.exists()


@pytest.mark.parametrize("key", [" renewals", "renewals ", "renewals\n", "\trenewals"])
def test_a_key_with_whitespace_is_refused_not_trimmed(api: APIClient, key: str) -> None:
    """Issue 18: a key sent with surrounding whitespace was stored trimmed with a 201."""
    response = api.post("/api/schedules/", _body(key=key), format="json")
    assert response.status_code == 400, response.content
    assert "key" in response.json(), response.json()
    assert not Schedule.objects.exists() and not Occurrence.objects.exists()


def test_it_previews_upcoming_fires_in_utc_and_in_the_zone(api: APIClient) -> None:
    api.post("/api/schedules/", _body(), format="json")
    response = api.get("/api/schedules/renewals/preview/?count=5")
    assert response.status_code == 200
    fires = response.json()["fires"]
    assert len(fires) == 5
    for fire in fires:
        assert fire["utc"].endswith("Z")
        local = dt.datetime.fromisoformat(fire["local"])
        assert (local.hour, local.minute) in {(2, 30), (3, 0)}  # 03:00 only on a spring-forward day
        assert local == dt.datetime.fromisoformat(fire["utc"].replace("Z", "+00:00"))
    assert api.get("/api/schedules/renewals/preview/?count=101").status_code == 400
    assert "count" in api.get("/api/schedules/renewals/preview/?count=0").json()


def test_a_one_value_range_with_a_step_previews_that_value_and_is_shown_as_sent(api: APIClient) -> None:
    """Issue 19: ``0 0 1 6-6/2 *`` previewed June, August, October and December (Debian: June only)."""
    created = api.post("/api/schedules/", _body(expression="0 0 1 6-6/2 *", timezone="UTC"), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["expression"] == "0 0 1 6-6/2 *"
    fires = api.get("/api/schedules/renewals/preview/?count=3").json()["fires"]
    assert [fire["utc"][5:] for fire in fires] == ["06-01T00:00:00Z"] * 3
    assert len({fire["utc"][:4] for fire in fires}) == 3


def test_it_pauses_and_resumes(api: APIClient) -> None:
    api.post("/api/schedules/", _body(expression="@every 1h"), format="json")
    paused = api.post("/api/schedules/renewals/pause/")
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    assert paused.json()["next_fire_at"] is None
    assert _pending("renewals") == []
    resumed = api.post("/api/schedules/renewals/resume/").json()
    assert resumed["paused"] is False
    assert resumed["version"] == 3
    [pending] = _pending("renewals")
    assert pending.fire_at > timezone.now()


def test_it_patches_the_expression_and_replaces_the_pending_fire(api: APIClient) -> None:
    api.post("/api/schedules/", _body(), format="json")
    [old] = _pending("renewals")
    response = api.patch("/api/schedules/renewals/", {"expression": "0 9 * * *"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["version"] == 2
    [new] = _pending("renewals")
    assert new.fire_at.astimezone(dt.UTC) != old.fire_at
    old.refresh_from_db()
    assert old.status == OccurrenceStatus.CANCELLED
    assert new.job_version == 2
    assert "expression" in api.patch("/api/schedules/renewals/", {"expression": "nope"}, format="json").json()


def test_it_patches_a_callback_only_whole(api: APIClient) -> None:
    """A PATCH makes nested fields optional to DRF; a callback without its type was a KeyError (500)."""
    api.post("/api/schedules/", _body(), format="json")
    response = api.patch("/api/schedules/renewals/", {"callback": {"data": {"queue": "q"}}}, format="json")
    assert response.status_code == 400
    assert "type" in response.json()["callback"]
    assert Schedule.objects.get(key="renewals").version == 1


def test_it_takes_offsets_beyond_what_postgresql_stores_as_the_same_instant(api: APIClient) -> None:
    """ISO 8601 allows offsets up to +/-23:59; PostgreSQL refuses those past +/-15:59 (was a 500 there)."""
    response = api.post("/api/schedules/", _body(start_at="2030-01-02T20:00:00+20:00"), format="json")
    assert response.status_code == 201, response.json()
    assert Schedule.objects.get(key="renewals").start_at == dt.datetime(2030, 1, 2, tzinfo=dt.UTC)


def test_it_deletes_leaving_nothing_that_can_fire(api: APIClient) -> None:
    api.post("/api/schedules/", _body(), format="json")
    response = api.delete("/api/schedules/renewals/")
    assert response.status_code == 200
    assert response.json() == {"key": "renewals", "cancelled": 1}
    assert not Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).exists()
    assert api.get("/api/schedules/renewals/").status_code == 404


@pytest.mark.rabbitmq
def test_deleting_a_schedule_keeps_its_history_as_deleting_a_job_does(
    api: APIClient, user: Any, queue_name: str
) -> None:
    """Issue 18: the delete took the delivered rows with it; a job's delete keeps them (retention purges
    them later). What was pending is cancelled and stays on record too."""
    policy = ThrottlePolicyFactory(name="backups", max_per_second=100)
    spec = ScheduleSpec(
        expression="@every 1h",
        callback=Callback(type=CallbackType.RABBITMQ, target=queue_name, payload={}),
        throttle=policy,
    )
    # Set an hour and a minute ago: its first fire (a period after that) is due, the next one is not.
    schedule_upsert(
        key="renewals", spec=spec, owner=user, now=timezone.now() - dt.timedelta(hours=1, minutes=1)
    )
    while occurrences_dispatch_batch().claimed:
        pass
    [delivered] = Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED)
    [pending] = _pending("renewals")

    assert api.delete("/api/schedules/renewals/").json() == {"key": "renewals", "cancelled": 1}

    history = api.get("/api/occurrences/?job=schedule:renewals").json()["results"]
    assert {row["id"]: row["status"] for row in history} == {
        delivered.pk: "delivered",
        pending.pk: "cancelled",
    }
    assert api.get("/api/schedules/renewals/").status_code == 404
    assert api.get("/api/jobs/").json()["results"] == [], "a deleted schedule's job is not a job"
    assert api.delete("/api/throttle-policies/backups/").status_code == 204
    assert occurrences_dispatch_batch().claimed == 0


def test_a_schedule_created_again_under_a_deleted_key_continues_its_history(api: APIClient) -> None:
    api.post("/api/schedules/", _body(), format="json")
    [first] = _pending("renewals")
    api.delete("/api/schedules/renewals/")

    again = api.post("/api/schedules/", _body(), format="json")
    assert again.status_code == 201, again.json()
    # The same next point: the cancelled row comes back under the new version, and it chains as before.
    [revived] = _pending("renewals")
    assert (revived.pk, revived.job_version) == (first.pk, again.json()["version"])
    assert Schedule.objects.get(key="renewals").job_id == revived.job_id

    other = APIClient()
    from tests.factories import UserFactory

    other.force_authenticate(UserFactory(queues=["*"]))
    api.delete("/api/schedules/renewals/")
    assert other.post("/api/schedules/", _body(), format="json").status_code == 403, (
        "history stays its owner's"
    )


def test_it_hides_other_owners_schedules_and_their_backing_jobs(api: APIClient) -> None:
    api.post("/api/schedules/", _body(), format="json")
    assert api.get("/api/jobs/").json()["results"] == []
    other = APIClient()
    from tests.factories import UserFactory

    other.force_authenticate(UserFactory(queues=["*"]))
    assert other.get("/api/schedules/renewals/").status_code == 404
    assert other.post("/api/schedules/", _body(), format="json").status_code == 403


def test_it_crud_throttle_policies_and_refuses_deleting_one_in_use(api: APIClient) -> None:
    created = api.post("/api/throttle-policies/", {"name": "backups", "max_per_second": 100}, format="json")
    assert created.status_code == 201, created.json()
    assert "max_per_second" in api.post("/api/throttle-policies/", {"name": "empty"}, format="json").json()
    assert (
        api.post("/api/throttle-policies/", {"name": "neg", "max_per_second": -1}, format="json").status_code
        == 400
    )
    assert (
        api.patch("/api/throttle-policies/backups/", {"window_seconds": 60}, format="json").status_code == 200
    )
    api.post("/api/schedules/", _body(throttle="backups", batch_size=10), format="json")
    assert api.delete("/api/throttle-policies/backups/").status_code == 409
    api.delete("/api/schedules/renewals/")
    assert api.delete("/api/throttle-policies/backups/").status_code == 204


def test_a_throttle_policy_answers_the_burst_it_applies(api: APIClient) -> None:
    """Issue 18: created without `burst` it answered null, though the bucket holds rate/10 (at least 1)."""

    def burst(name: str, **body: Any) -> Any:
        created = api.post("/api/throttle-policies/", {"name": name, **body}, format="json")
        assert created.status_code == 201, created.json()
        assert api.get(f"/api/throttle-policies/{name}/").json()["burst"] == created.json()["burst"]
        return created.json()["burst"]

    assert burst("hundred", max_per_second=100) == 10
    assert burst("slow", max_per_second=5) == 1
    assert burst("fractional", max_per_second=25) == 2  # 2.5 tokens at most: never 3 at once
    assert burst("explicit", max_per_second=100, burst=7) == 7
    assert burst("window-only", window_seconds=60) is None  # no bucket at all
    # The default follows the rate; a burst that was set does not.
    assert (
        api.patch("/api/throttle-policies/hundred/", {"max_per_second": 300}, format="json").json()["burst"]
        == 30
    )
    assert (
        api.patch("/api/throttle-policies/explicit/", {"max_per_second": 300}, format="json").json()["burst"]
        == 7
    )
    listed = {p["name"]: p["burst"] for p in api.get("/api/throttle-policies/").json()["results"]}
    assert listed["hundred"] == 30


def test_jobs_take_batch_size_and_throttle_and_keep_seed_000_shape(api: APIClient) -> None:
    policy = ThrottlePolicyFactory(name="push", max_per_second=None, window_seconds=60)
    at = (timezone.now() + dt.timedelta(hours=1)).replace(microsecond=0)
    body = {
        "key": "training-1",
        "schedules": [at.isoformat()],
        "callback": {"type": "rabbitmq", "data": {"queue": "q", "payload": {"a": 1}}},
    }
    assert api.post("/api/jobs/", body, format="json").status_code == 201
    response = api.post("/api/jobs/", {**body, "batch_size": 4, "throttle": policy.name}, format="json")
    assert response.status_code == 200, response.json()
    rows = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).order_by("batch_index")
    assert [o.batch_index for o in rows] == [0, 1, 2, 3]
    assert len({o.idempotency_key for o in rows}) == 4
    assert [(o.next_attempt_at - at).total_seconds() for o in rows] == [0, 15, 30, 45]  # spread over 60 s
    assert all(o.throttle_id == policy.id for o in rows)
    assert "key" in api.post("/api/jobs/", {**body, "key": "schedule:x"}, format="json").json()
    assert "batch_size" in api.post("/api/jobs/", {**body, "batch_size": 10**6}, format="json").json()


@pytest.mark.parametrize(
    ("zone", "start_at", "next_fire_at"),
    [
        ("Europe/Paris", "9999-12-31T00:00:00Z", "9999-12-31T07:00:00Z"),  # 08:00 in Paris, the last one
        ("UTC", "9999-12-31T12:00:00Z", None),  # the next 08:00 would be in year 10000
        ("America/New_York", "9999-12-31T23:00:00Z", None),
    ],
)
def test_a_schedule_at_the_end_of_time_fires_while_it_can_and_then_ends(
    api: APIClient, zone: str, start_at: str, next_fire_at: str | None
) -> None:
    """A start in the last day a datetime holds is valid input: its fires stop where the calendar does."""
    response = api.post(
        "/api/schedules/", _body(expression="0 8 * * *", timezone=zone, start_at=start_at), format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["next_fire_at"] == next_fire_at
    preview = api.get("/api/schedules/renewals/preview/?count=5")
    assert preview.status_code == 200
    assert [fire["utc"] for fire in preview.json()["fires"]] == ([next_fire_at] if next_fire_at else [])


@pytest.mark.parametrize(
    ("expression", "zone", "start_at", "fires"),
    [
        ("@every 1d", "UTC", "9999-12-30T20:00:00Z", ["9999-12-30T20:00:00Z", "9999-12-31T20:00:00Z"]),
        (
            "@every 6h",
            "Pacific/Kiritimati",
            "9999-12-30T20:00:00Z",
            ["9999-12-30T20:00:00Z", "9999-12-31T02:00:00Z", "9999-12-31T08:00:00Z"],
        ),
        ("@at 253402300799", "Etc/GMT+12", None, ["9999-12-31T23:59:59Z"]),
    ],
)
def test_every_and_at_fire_while_the_zone_has_a_calendar_and_then_end(
    api: APIClient, expression: str, zone: str, start_at: str | None, fires: list[str]
) -> None:
    body = _body(expression=expression, timezone=zone, start_at=start_at)
    assert api.post("/api/schedules/", body, format="json").status_code == 201
    preview = api.get("/api/schedules/renewals/preview/?count=5")
    assert preview.status_code == 200, preview.content[:300]
    assert [fire["utc"] for fire in preview.json()["fires"]] == fires
