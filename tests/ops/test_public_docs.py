"""The README's promise: the schema and docs pages are public, every data endpoint needs authentication."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db]


def test_the_schema_and_docs_answer_anonymous_callers_and_the_data_endpoints_do_not() -> None:
    anonymous = APIClient()

    assert anonymous.get("/api/schema/").status_code == 200
    assert anonymous.get("/api/docs/").status_code == 200
    for path in ("/api/jobs/", "/api/occurrences/", "/api/schedules/", "/api/trainings/"):
        assert anonymous.get(path).status_code == 401, path
