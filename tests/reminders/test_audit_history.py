"""Audit history of jobs, schedules and throttle policies (issue 16.7): who changed what, through the
admin or the API with a real token, visible on the admin's History page; engine bookkeeping records
nothing; retention purges old rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from common.history import history_purge_old
from reminders.models import Job, Schedule, ThrottlePolicy
from reminders.tasks import purge_old
from tests.factories import ThrottlePolicyFactory, UserFactory, schedule_create

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def operator_user(db: None) -> Any:
    return UserFactory(username="olga", is_staff=True, is_superuser=True, queues=["*"])


@pytest.fixture
def operator(operator_user: Any) -> Client:
    client = Client()
    client.force_login(operator_user)
    return client


@pytest.fixture
def caller() -> Any:
    return UserFactory(username="api-caller", queues=["*"])


@pytest.fixture
def token_api(caller: Any) -> APIClient:
    """Authenticated the way callers are: `Authorization: Token <key>` through DRF's TokenAuthentication."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=caller).key}")
    return client


def _iso(instant: dt.datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def _job_body(key: str, **overrides: Any) -> dict[str, Any]:
    soon = timezone.now() + dt.timedelta(hours=1)
    body = {
        "key": key,
        "schedules": [_iso(soon)],
        "callback": {"type": "rabbitmq", "data": {"queue": "q.audit", "payload": {"id": 1}}},
    }
    return {**body, **overrides}


def _changed(record: Any) -> set[str]:
    return set(record.diff_against(record.prev_record).changed_fields)


def test_an_admin_change_is_recorded_with_its_user_and_field_and_shown_on_the_history_page(
    operator: Client, operator_user: Any
) -> None:
    policy = ThrottlePolicyFactory(name="sms", max_per_second=10)
    response = operator.post(
        f"/admin/reminders/throttlepolicy/{policy.pk}/change/",
        {"name": "sms", "max_per_second": "25", "burst": "", "window_seconds": "", "owner": ""},
    )
    assert response.status_code == 302, response.content

    latest = policy.history.latest()
    assert (latest.history_type, latest.history_user) == ("~", operator_user)
    assert _changed(latest) == {"max_per_second"}
    page = operator.get(f"/admin/reminders/throttlepolicy/{policy.pk}/history/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "olga" in text and "max_per_second" in text.replace("Max per second", "max_per_second")


def test_an_api_change_with_a_token_is_attributed_to_the_tokens_user(
    token_api: APIClient, caller: Any
) -> None:
    assert token_api.post("/api/jobs/", _job_body("audit-1"), format="json").status_code == 201
    assert token_api.post("/api/jobs/", _job_body("audit-1", priority=8), format="json").status_code == 200

    job = Job.objects.get(key="audit-1")
    created, changed = job.history.order_by("history_date")
    assert (created.history_type, created.history_user) == ("+", caller)
    assert (changed.history_type, changed.history_user) == ("~", caller)
    assert _changed(changed) == {"priority", "version"}
    assert not hasattr(changed, "http_secret")  # the callback's secret is not copied into history


def test_a_cancel_through_the_api_is_recorded_with_its_reason(token_api: APIClient, caller: Any) -> None:
    token_api.post("/api/jobs/", _job_body("audit-cancel"), format="json")
    assert token_api.delete("/api/jobs/audit-cancel/").json()["cancelled"] == 1

    latest = Job.objects.get(key="audit-cancel").history.latest()
    assert (latest.history_user, latest.history_change_reason) == (caller, "cancelled")
    assert _changed(latest) == {"version"}


def test_a_bulk_call_records_each_new_job_once_for_its_caller(token_api: APIClient, caller: Any) -> None:
    soon = _iso(timezone.now() + dt.timedelta(hours=1))
    jobs = [{**_job_body(f"bulk-{i}"), "schedules": [soon]} for i in range(5)]
    assert token_api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json").status_code == 200

    history = Job.history.filter(key__startswith="bulk-")
    assert history.count() == 5
    assert {(h.history_type, h.history_user_id) for h in history} == {("+", caller.pk)}


def test_throttle_policy_and_schedule_changes_through_the_api_are_recorded(
    token_api: APIClient, caller: Any
) -> None:
    created = token_api.post("/api/throttle-policies/", {"name": "push", "max_per_second": 5}, format="json")
    assert created.status_code == 201, created.content
    token_api.patch("/api/throttle-policies/push/", {"max_per_second": 50}, format="json")
    policy = ThrottlePolicy.objects.get(name="push")
    assert [(h.history_type, h.history_user) for h in policy.history.order_by("history_date")] == [
        ("+", caller),
        ("~", caller),
    ]

    schedule_create(key="daily", expression="0 9 * * *")
    Schedule.objects.filter(key="daily").update(owner=caller)
    response = token_api.patch("/api/schedules/daily/", {"paused": True}, format="json")
    assert response.status_code == 200, response.content
    latest = Schedule.objects.get(key="daily").history.latest()
    assert latest.history_user == caller and "paused" in _changed(latest)


def test_the_engines_bookkeeping_records_nothing() -> None:
    """A fire moves `next_fire_at` (save with update_fields) and a claim spends tokens: neither is a change
    anyone made, and neither may cost a history row on the dispatch path."""
    schedule = schedule_create(key="every-minute", expression="* * * * *")
    policy = ThrottlePolicyFactory()
    before = (schedule.history.count(), policy.history.count())

    schedule.next_fire_at = timezone.now() + dt.timedelta(minutes=5)
    schedule.save(update_fields=["next_fire_at", "updated_at"])
    ThrottlePolicy.objects.filter(pk=policy.pk).update(tokens=3)

    assert (schedule.history.count(), policy.history.count()) == before


def test_history_is_read_only_in_the_admin(operator: Client) -> None:
    policy = ThrottlePolicyFactory(name="sms", max_per_second=10)
    version = policy.history.latest()
    url = f"/admin/reminders/throttlepolicy/{policy.pk}/history/{version.history_id}/"
    assert operator.get(url).status_code == 200
    refused = operator.post(url, {"name": "sms", "max_per_second": "99"})
    assert refused.status_code == 403
    policy.refresh_from_db()
    assert policy.max_per_second == 10


def test_retention_purges_history_past_its_age_only(settings: Any) -> None:
    settings.REMINDERS_HISTORY_RETENTION_DAYS = 30
    old, recent = ThrottlePolicyFactory(name="old"), ThrottlePolicyFactory(name="recent")
    ThrottlePolicy.history.filter(name="old").update(history_date=timezone.now() - dt.timedelta(days=31))
    ThrottlePolicy.history.filter(name="recent").update(history_date=timezone.now() - dt.timedelta(days=29))

    assert history_purge_old() == {"reminders.HistoricalThrottlePolicy": 1}
    assert (old.history.count(), recent.history.count()) == (0, 1)

    settings.REMINDERS_HISTORY_RETENTION_DAYS = 28  # the hourly purge task runs it too
    purge_old()
    assert recent.history.count() == 0


def test_every_audited_model_has_a_history_page_and_version_pages_for_operators(
    operator: Client, token_api: APIClient
) -> None:
    token_api.post("/api/jobs/", _job_body("paged"), format="json")
    schedule = schedule_create(key="paged-schedule", expression="0 9 * * *")
    policy = ThrottlePolicyFactory()
    for model, obj in (
        ("job", Job.objects.get(key="paged")),
        ("schedule", schedule),
        ("throttlepolicy", policy),
    ):
        base = f"/admin/reminders/{model}/{obj.pk}/history/"
        assert operator.get(base).status_code == 200, model
        assert operator.get(f"{base}{obj.history.latest().history_id}/").status_code == 200, model
        assert operator.get(f"/admin/reminders/{model}/{obj.pk}/change/").status_code == 200, model
