"""Who may read /metrics: loopback and private addresses by default, only the bearer token once it is set."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db]


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.9", "172.16.5.5", "::1", "fd00::1"])
def test_it_serves_loopback_and_private_addresses_without_a_token(address: str) -> None:
    assert Client(REMOTE_ADDR=address).get("/metrics").status_code == 200


@pytest.mark.parametrize("address", ["203.0.113.7", "8.8.8.8", "2001:4860::8888"])
def test_it_refuses_public_addresses_without_a_token(address: str) -> None:
    response = Client(REMOTE_ADDR=address).get("/metrics")
    assert response.status_code == 403
    assert "loopback and private" in response.json()["detail"]


def test_it_refuses_a_request_a_proxy_forwarded_without_a_token() -> None:
    response = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert response.status_code == 403


def test_with_a_token_set_only_the_token_opens_it(settings: pytest.FixtureRequest) -> None:
    settings.METRICS_BEARER_TOKEN = "s3cret-scrape-token"
    local, remote = Client(REMOTE_ADDR="127.0.0.1"), Client(REMOTE_ADDR="203.0.113.7")

    assert local.get("/metrics").status_code == 401
    assert local.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    refused = remote.get("/metrics", HTTP_AUTHORIZATION="Token s3cret-scrape-token")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    allowed = remote.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert allowed.status_code == 200
    assert b"reminders_due_backlog" in allowed.content
