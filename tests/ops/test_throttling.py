"""API throttling: per token and per client address, rates from settings, 429 with Retry-After; windows
that end let their caller in again and are purged."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from reminders.http import counts
from reminders.models import RequestCount
from reminders.tasks import purge_old
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db]


def _client(address: str = "10.0.0.1") -> APIClient:
    token = Token.objects.create(user=UserFactory(queues=["*"]))
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def test_a_token_past_its_rate_gets_429_with_retry_after_and_others_go_on(
    settings: pytest.FixtureRequest,
) -> None:
    settings.API_THROTTLE_RATES = {"token": "3/min", "ip": "1000/s"}
    first, second = _client(), _client()

    answers = [first.get("/api/jobs/").status_code for _ in range(4)]
    refused = first.get("/api/jobs/")

    assert answers == [200, 200, 200, 429]
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    assert second.get("/api/jobs/").status_code == 200  # another token has its own budget


def test_an_address_past_its_rate_gets_429_whatever_token_it_uses(settings: pytest.FixtureRequest) -> None:
    settings.API_THROTTLE_RATES = {"token": "1000/s", "ip": "5/min"}
    same_host = [_client("10.0.0.7") for _ in range(3)]

    answers = [same_host[i % 3].get("/api/jobs/").status_code for i in range(6)]

    assert answers == [200] * 5 + [429]
    assert _client("10.0.0.8").get("/api/jobs/").status_code == 200


def test_anonymous_requests_count_against_their_address(settings: pytest.FixtureRequest) -> None:
    settings.API_THROTTLE_RATES = {"token": "1000/s", "ip": "2/min"}
    anonymous = APIClient(REMOTE_ADDR="10.0.0.9")

    answers = [anonymous.get("/api/schema/").status_code for _ in range(3)]

    assert answers == [200, 200, 429]


def test_forwarded_for_counts_only_behind_the_configured_proxies(settings: pytest.FixtureRequest) -> None:
    settings.API_THROTTLE_RATES = {"token": "1000/s", "ip": "1/min"}
    proxy = APIClient(REMOTE_ADDR="10.0.0.2")

    # No proxies configured: a client cannot dodge its limit by inventing X-Forwarded-For.
    assert proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 200
    assert proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 429

    settings.API_NUM_PROXIES = 1
    assert proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="198.51.100.3").status_code == 200
    assert proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.4").status_code == 200
    assert proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="198.51.100.3").status_code == 429


@pytest.mark.parametrize("path", ["/api/jobs/", "/api/schedules/", "/api/trainings/", "/api/occurrences/"])
def test_a_flood_of_bad_or_missing_tokens_from_one_address_gets_429_past_the_address_rate(
    settings: pytest.FixtureRequest, path: str
) -> None:
    """Authentication refuses these with 401, but only after the address has been counted: DRF's own
    throttles run after authentication, so a token-guessing flood was never slowed down."""
    settings.API_THROTTLE_RATES = {"token": "1000/s", "ip": "20/min"}
    attacker = APIClient(REMOTE_ADDR="10.0.0.66")

    answers = []
    for i in range(30):
        headers = {"HTTP_AUTHORIZATION": f"Token {secrets.token_hex(20)}"} if i % 3 else {}
        answers.append(attacker.post(path, {}, format="json", **headers))

    assert [a.status_code for a in answers[:20]] == [401] * 20
    assert {a.status_code for a in answers[20:]} == {429}
    assert all(0 < int(a["Retry-After"]) <= 60 for a in answers[20:])
    assert "throttled" in answers[-1].json()["detail"].lower()
    # The address is refused whatever it sends next, a valid token included; another address is not.
    assert _client("10.0.0.66").get(path).status_code == 429
    assert _client("10.0.0.67").get(path).status_code == 200


def test_a_refused_caller_is_let_in_again_when_its_window_ends(
    settings: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minute's window, its end reached by the counts' clock (a one-second window raced a loaded machine:
    the requests themselves outlasted it)."""
    settings.API_THROTTLE_RATES = {"token": "1000/s", "ip": "2/m"}
    caller = APIClient(REMOTE_ADDR="10.0.0.70")
    assert [caller.get("/api/schema/").status_code for _ in range(3)] == [200, 200, 429]
    later = time.time() + 61
    monkeypatch.setattr(counts, "time", SimpleNamespace(time=lambda: later))
    assert caller.get("/api/schema/").status_code == 200


def test_the_hourly_purge_deletes_the_windows_that_ended() -> None:
    now_ms = int(time.time() * 1000)
    for ident, expires in (("ended", now_ms - 1), ("current", now_ms + 60_000)):
        RequestCount.objects.create(
            scope="ip", ident=ident, window_start=expires - 60_000, expires=expires, ceiling=5, hits=5
        )
    purge_old()
    assert list(RequestCount.objects.values_list("ident", flat=True)) == ["current"]


@pytest.mark.postgres
def test_on_postgresql_the_counts_write_no_wal() -> None:
    with connection.cursor() as cursor:
        table = RequestCount._meta.db_table
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = %s", [table])
        assert cursor.fetchone() == ("u",)  # UNLOGGED
