"""Every error under /api/ is JSON, a 500 included, and none shows a traceback; the admin keeps Django's
own pages."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.clients import api_as
from tests.factories import TeamFactory, TrainingFactory, UserFactory

pytestmark = pytest.mark.django_db

SECRET = "the-detail-only-the-log-may-hold"


def _boom(**kwargs: Any) -> None:
    raise RuntimeError(SECRET)


def test_it_answers_a_500_in_an_api_view_with_json_and_no_traceback(monkeypatch: Any) -> None:
    coach = UserFactory()
    training = TrainingFactory(team=TeamFactory(coaches=[coach]))
    monkeypatch.setattr("trainings.views.training_timeline", _boom)
    response = api_as(coach, raise_request_exception=False).get(f"/api/trainings/{training.pk}/timeline/")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Internal server error."}
    assert SECRET not in response.content.decode()
    assert "Traceback" not in response.content.decode()


def test_it_answers_a_request_django_refuses_with_json_under_the_api() -> None:
    client = APIClient()
    response = client.get("/api/jobs/", HTTP_HOST="evil.example")  # not in ALLOWED_HOSTS
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_it_keeps_django_s_pages_outside_the_api() -> None:
    response = APIClient().get("/admin/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
