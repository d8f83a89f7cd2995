"""Form-encoded bodies reach the serializers without the JSON parser's checks: a NUL in a looked-up name must
be a 400 naming the field, not a 500 from PostgreSQL (found by Schemathesis on /api/schedules/)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from reminders.models import Job, Schedule


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/schedules/", "/api/jobs/"])
def test_it_refuses_a_nul_in_the_throttle_name_of_a_form_body(api: APIClient, path: str) -> None:
    response = api.post(
        path, data="key=form-1&throttle=a%00b", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert "throttle" in response.json()
    assert not Job.objects.exists() and not Schedule.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/schedules/", "/api/jobs/", "/api/trainings/"])
def test_a_form_with_more_fields_than_django_parses_gets_a_json_400(api: APIClient, path: str) -> None:
    """Django refuses a body of more than DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000) fields; the API answers
    that in JSON, as it does the 413, not with Django's HTML error page."""
    body = "&".join(f"f{i}=x" for i in range(1001))
    response = api.post(path, data=body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "fields" in response.json()["detail"]
    assert not Job.objects.exists() and not Schedule.objects.exists()
