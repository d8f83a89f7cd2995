"""Scenario 5: an HTTP callback that fails, then times out, then answers; and one that always fails.

The endpoints are a real HTTP server on 127.0.0.1 (allowed by REMINDERS_HTTP_ALLOW_PRIVATE for this test
only); the jobs are created through the API and inspected through the API and the admin, as a caller
and an operator would. Pass: the flaky one is retried with growing delays and delivered on its third
attempt, every attempt under the same Idempotency-Key; the broken one ends `failed` with its last error
after REMINDERS_MAX_ATTEMPTS, and both places show it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.engine import dispatch
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import UserFactory
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.django_db]

BASE = 0.4
MAX_ATTEMPTS = 4
READ_TIMEOUT = 0.5


@dataclass
class Endpoint:
    """Answers each path from a script (one answer per request, the last one repeating)."""

    scripts: dict[str, list[str]]
    port: int = 0
    seen: dict[str, list[tuple[float, str]]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint(scripts={"/flaky": ["500", "timeout", "200"], "/down": ["500"]})
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                seen = state.seen.setdefault(self.path, [])
                seen.append((time.monotonic(), self.headers.get("Idempotency-Key", "")))
                script = state.scripts[self.path]
                answer = script[min(len(seen), len(script)) - 1]
            if answer == "timeout":
                time.sleep(READ_TIMEOUT * 3)
                answer = "200"
            body = b"ok" if answer == "200" else b"database is down"
            self.send_response(int(answer))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _schedule(api: APIClient, key: str, url: str) -> None:
    response = api.post(
        "/api/jobs/",
        {
            "key": key,
            "schedules": [timezone.now().isoformat()],
            "callback": {"type": "http", "data": {"url": url, "payload": {"key": key}}},
        },
        format="json",
    )
    assert response.status_code == 201, response.content


def test_it_retries_a_failing_endpoint_with_growing_delays_then_delivers_or_fails(
    settings: Any, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    settings.REMINDERS_RETRY_BASE_SECONDS = BASE
    settings.REMINDERS_RETRY_MAX_SECONDS = 60
    settings.REMINDERS_MAX_ATTEMPTS = MAX_ATTEMPTS
    settings.REMINDERS_HTTP_CONNECT_TIMEOUT = 1
    settings.REMINDERS_HTTP_READ_TIMEOUT = READ_TIMEOUT
    # The instant each failure was marked from: the engine's reading of when the delivery call ended, the
    # instant its backoff counts from. Read where the engine hands it over, so a loaded machine's delay
    # between the delivery and this test's own clock reading cannot shorten the waits measured.
    marked_from: dict[tuple[int, int], datetime] = {}
    mark_failed = dispatch.occurrences_mark_failed

    def recorded(*, failures: Any, now: datetime, **kwargs: Any) -> Any:
        failures = list(failures)
        marked_from.update({(f.occurrence_id, f.attempts): now for f in failures})
        return mark_failed(failures=failures, now=now, **kwargs)

    monkeypatch.setattr(dispatch, "occurrences_mark_failed", recorded)
    owner = UserFactory(queues=["*"])
    api = APIClient()
    api.force_authenticate(owner)
    _schedule(api, "flaky-hook", endpoint.url("/flaky"))
    _schedule(api, "down-hook", endpoint.url("/down"))

    # delays[key][attempt] = the wait after that failed attempt, from the instant its failure was known.
    delays: dict[str, dict[int, float]] = {"flaky-hook": {}, "down-hook": {}}
    errors: dict[str, list[str]] = {"flaky-hook": [], "down-hook": []}
    known: dict[str, dict[int, tuple[datetime, datetime]]] = {"flaky-hook": {}, "down-hook": {}}
    deadline = time.monotonic() + 60
    while (
        Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).exists() and time.monotonic() < deadline
    ):
        started = timezone.now()
        occurrences_dispatch_batch()
        ended = timezone.now()
        for oid, key, attempts, status, next_attempt_at, error in Occurrence.objects.values_list(
            "id", "job__key", "attempts", "status", "next_attempt_at", "last_error"
        ):
            if status == OccurrenceStatus.SCHEDULED and attempts and attempts not in delays[key]:
                failed_at = marked_from[(oid, attempts)]
                delays[key][attempts] = _seconds(next_attempt_at, failed_at)
                known[key][attempts] = (started, ended)
                errors[key].append(error)
        time.sleep(0.02)

    flaky = Occurrence.objects.get(job__key="flaky-hook")
    down = Occurrence.objects.get(job__key="down-hook")
    assert (flaky.status, flaky.attempts) == (OccurrenceStatus.DELIVERED, 3)
    assert (down.status, down.attempts) == (OccurrenceStatus.FAILED, MAX_ATTEMPTS)
    assert down.last_error.startswith("HTTP 500: database is down")
    assert errors["flaky-hook"][0].startswith("HTTP 500") and "timed out" in errors["flaky-hook"][1].lower()

    # Every wait lies in the policy's window for its attempt (half to all of BASE * 2^(n-1)), so they grow;
    # and it counts from the end of the delivery call: an instant within the batch that made the attempt,
    # after the read timeout ran out for the timed-out one.
    for key, expected in (("flaky-hook", [1, 2]), ("down-hook", [1, 2, 3])):
        assert sorted(delays[key]) == expected
        waits = [delays[key][n] for n in expected]
        for attempt, wait in zip(expected, waits, strict=True):
            ceiling = BASE * 2 ** (attempt - 1)
            assert ceiling / 2 <= wait <= ceiling, (key, attempt, waits)
            started, ended = known[key][attempt]
            failed_at = marked_from[(flaky.id if key == "flaky-hook" else down.id, attempt)]
            timed_out = key == "flaky-hook" and attempt == 2
            assert started + dt.timedelta(seconds=READ_TIMEOUT if timed_out else 0) <= failed_at <= ended, (
                key,
                attempt,
            )
        assert all(later >= earlier for earlier, later in itertools.pairwise(waits)), (key, waits)
    # Requests as the endpoint saw them: one per attempt, each retry under the same Idempotency-Key.
    assert [key for _, key in endpoint.seen["/flaky"]] == [flaky.idempotency_key] * 3
    assert [key for _, key in endpoint.seen["/down"]] == [down.idempotency_key] * MAX_ATTEMPTS

    # The caller sees it in the API ...
    body = api.get("/api/jobs/down-hook/").json()
    (occurrence,) = body["occurrences"]
    assert (occurrence["status"], occurrence["attempts"]) == ("failed", MAX_ATTEMPTS)
    assert occurrence["last_error"] == down.last_error
    # ... and an operator in the admin's failed list.
    operator = UserFactory(is_staff=True, is_superuser=True)
    admin = Client()
    admin.force_login(operator)
    page = admin.get("/admin/reminders/occurrence/", {"status__exact": "failed"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "down-hook" in html and "HTTP 500: database is down" in html
    assert "flaky-hook" not in html

    harness.record(
        "5. failing endpoint",
        "HTTP callback answers 500, then times out, then 200; another always 500",
        f"first: delivered on attempt 3 after waits of {_fmt(delays['flaky-hook'])}; second: `failed` "
        f"after {MAX_ATTEMPTS} attempts (waits {_fmt(delays['down-hook'])}) with its last error in the API "
        "and admin",
    )


def _seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def _fmt(delays: dict[int, float]) -> str:
    return ", ".join(f"{wait:.2f} s" for _, wait in sorted(delays.items()))
