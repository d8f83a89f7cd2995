"""What a newcomer tripped on in a fresh clone (issue 15, item 4), one test each."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from reminders.models import OccurrenceStatus
from tests.factories import OccurrenceFactory, UserFactory

pytestmark = pytest.mark.django_db


def _manager(**extra: Any) -> Client:
    """An operator who is not a superuser: staff with the manage-all-teams permission."""
    from django.contrib.auth.models import Permission

    user = UserFactory(is_staff=True, **extra)
    user.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    client = Client()
    client.force_login(user)
    return client


def test_the_root_redirects_to_the_admin() -> None:
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_swagger_ui_is_served_from_our_static_files(operator: Client) -> None:
    page = operator.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "unpkg" not in page


def test_the_file_brokers_control_folder_lives_under_var() -> None:
    if not settings.CELERY_BROKER_URL.startswith("filesystem"):
        from config.settings import BROKER_DIR

        assert str(BROKER_DIR).startswith(str(settings.VAR_DIR))
        return
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["control_folder"].startswith(str(settings.VAR_DIR))


def test_dev_admin_prints_the_address_make_run_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADDR", "127.0.0.1:8010")
    settings_debug = settings.DEBUG
    try:
        settings.DEBUG = True
        out = StringIO()
        call_command("dev_admin", stdout=out)
    finally:
        settings.DEBUG = settings_debug
    assert "http://127.0.0.1:8010/admin/" in out.getvalue() and ":8000" not in out.getvalue()


def test_occurrences_list_what_fires_next_to_the_second_with_lateness_and_a_retrying_state(
    operator: Client,
) -> None:
    now = timezone.now().replace(microsecond=0)
    later = OccurrenceFactory(
        fire_at=now + dt.timedelta(hours=2), next_attempt_at=now + dt.timedelta(hours=2)
    )
    sooner = OccurrenceFactory(
        fire_at=now + dt.timedelta(hours=1), next_attempt_at=now + dt.timedelta(hours=1)
    )
    retrying = OccurrenceFactory(
        fire_at=now - dt.timedelta(minutes=5), next_attempt_at=now + dt.timedelta(minutes=5), attempts=2,
        last_error="HTTP 503",
    )  # fmt: skip
    OccurrenceFactory(
        status=OccurrenceStatus.DELIVERED, fire_at=now - dt.timedelta(hours=1),
        next_attempt_at=now - dt.timedelta(hours=1), delivered_at=now - dt.timedelta(hours=1) + dt.timedelta(
            milliseconds=42), finished_at=now,
    )  # fmt: skip
    first = operator.get("/admin/reminders/occurrence/")
    assert first.status_code == 302 and first["Location"].endswith("?state=upcoming")
    page = operator.get(first["Location"]).content.decode()
    assert page.index(f"{retrying.fire_at:%H:%M:%S}") < page.index(f"{sooner.fire_at:%H:%M:%S}")
    assert page.index(f"{sooner.fire_at:%H:%M:%S}") < page.index(f"{later.fire_at:%H:%M:%S}")
    assert "retrying (after 2 attempts)" in page
    only = operator.get("/admin/reminders/occurrence/", {"state": "retrying"}).content.decode()
    assert f"{retrying.fire_at:%H:%M:%S}" in only and f"{sooner.fire_at:%H:%M:%S}" not in only
    delivered = operator.get("/admin/reminders/occurrence/", {"state": "all"}).content.decode()
    assert "42 ms" in delivered  # the lateness column


def test_beat_tasks_are_hidden_from_operators_who_are_not_superusers(operator: Client) -> None:
    manager = _manager()
    assert "Periodic tasks" not in manager.get("/admin/").content.decode()
    assert manager.get("/admin/django_celery_beat/periodictask/").status_code == 403
    assert "Periodic tasks" in operator.get("/admin/").content.decode()


def test_plurals_and_offsets_read_as_english(operator: Client) -> None:
    index = operator.get("/admin/").content.decode()
    assert "Pushes" in index and "Pushs" not in index and "Push sends" in index
    rules = operator.get("/admin/trainings/reminderrule/").content.decode()
    assert "90 min, 75 min, 60 min, 45 min, 30 min, 15 min before the start" in rules
    assert "[&quot;90m&quot;" not in rules


def test_pushes_can_be_filtered_by_training(operator: Client) -> None:
    from tests.factories import PlayerFactory, TrainingFactory
    from trainings.models import Push

    player = PlayerFactory(name="Alice")
    trainings = [TrainingFactory(title="Monday drills"), TrainingFactory(title="Friday match")]
    for training in trainings:
        Push.objects.create(
            key=f"k-{training.pk}", occurrence_key=f"o-{training.pk}", training=training, player=player,
            kind="PRE", language="en", title=f"push for {training.title}", body="", fire_at=timezone.now(),
        )  # fmt: skip
    page = operator.get("/admin/trainings/push/").content.decode()
    assert "By training" in page
    only = operator.get("/admin/trainings/push/", {"training__id__exact": str(trainings[0].pk)})
    assert "push for Monday drills" in only.content.decode()
    assert "push for Friday match" not in only.content.decode()
