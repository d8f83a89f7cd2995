"""The OpenAPI schema still generates cleanly with the trainings views in it."""

from __future__ import annotations

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema


@pytest.mark.django_db
def test_it_generates_the_schema_for_the_trainings_views_without_warnings_or_errors() -> None:
    GENERATOR_STATS.reset()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    assert not GENERATOR_STATS, str(GENERATOR_STATS)
    paths = schema["paths"]
    for path in (
        "/api/trainings/",
        "/api/trainings/{id}/",
        "/api/trainings/{id}/answers/",
        "/api/trainings/{id}/invitation/",
        "/api/trainings/{id}/timeline/",
    ):
        assert path in paths
    assert set(paths["/api/trainings/{id}/"]) >= {"get", "put", "patch", "delete"}
    assert "TimelineEntry" in schema["components"]["schemas"]


@pytest.mark.django_db
def test_the_schema_endpoint_serves_it(admin_client) -> None:
    response = admin_client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/trainings/{id}/timeline/" in response.content
