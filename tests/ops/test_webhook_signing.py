"""HTTP callbacks and push webhooks carry Standard Webhooks signatures that the scheme's maintained verifier
accepts; a changed body, another key or a replayed old request is refused; the old header stays."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from common.signing import secret_new, standard_webhook_headers
from delivery.channels.providers import PushMessage, Target
from delivery.channels.webhook import WebhookProvider
from reminders.transports.base import Delivery
from reminders.transports.http import HTTPTransport
from tests.http_receiver import QuietHandler, serving

SECRET = "receiver-shared-secret"


@pytest.fixture
def received(settings: pytest.FixtureRequest) -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    requests: list[tuple[dict[str, str], bytes]] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.answer(200)

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}/hook", requests


def test_an_http_callback_verifies_with_the_standard_webhooks_library_and_keeps_the_old_header(
    received: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, requests = received
    delivery = Delivery(1, "idem-1", "job-1", datetime(2030, 1, 1, tzinfo=UTC), 1, url, {"a": 1}, SECRET)

    assert HTTPTransport().deliver([delivery]) == {}
    assert HTTPTransport().deliver([delivery]) == {}  # a retry of the same occurrence

    (first, body), (second, _) = requests
    assert Webhook(SECRET.encode()).verify(body, first) == {"a": 1}
    assert first["webhook-id"] == second["webhook-id"] == "idem-1"  # stable across retries
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET.encode()).verify(body.replace(b"1", b"2"), first)
    with pytest.raises(WebhookVerificationError):
        Webhook(b"another key").verify(body, first)
    legacy = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert first["x-reminders-signature"] == legacy


def test_a_replayed_request_is_refused_by_its_timestamp() -> None:
    old = standard_webhook_headers(message_id="m", body=b"{}", key=SECRET.encode(), now=1_700_000_000)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(SECRET.encode()).verify(b"{}", old)


def test_the_push_webhook_is_signed_the_same_way(
    received: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, requests = received
    body = {
        "idempotency_key": "occ.7",
        "player": 7,
        "title": "t",
        "body": "b",
        "training": "x",
        "kind": "PRE",
    }
    device = Target(device_id=3, provider="fcm", platform="android", token="tok")

    async def send_once() -> None:
        provider = WebhookProvider(url=url, secret=SECRET)
        try:
            await provider.send(PushMessage.from_body(body), device)
        finally:
            await provider.aclose()

    # Its own thread: a browser test's Playwright may leave an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, send_once()).result()

    ((headers, sent),) = requests
    assert Webhook(SECRET.encode()).verify(sent, headers)["idempotency_key"] == "occ.7"
    assert headers["webhook-id"] == "occ.7/3"  # one message per (push, device)
    assert headers["x-push-signature"].startswith("sha256=")


def test_a_secret_in_the_schemes_format_signs_with_the_bytes_it_encodes(
    received: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    """`whsec_` + base64: the scheme's verifiers decode it (`Webhook("whsec_...")`), so the engine does."""
    url, requests = received
    secret = secret_new()
    delivery = Delivery(2, "idem-2", "job-2", datetime(2030, 1, 1, tzinfo=UTC), 1, url, {"b": 2}, secret)

    assert HTTPTransport().deliver([delivery]) == {}

    ((headers, body),) = requests
    assert Webhook(secret).verify(body, headers) == {"b": 2}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret.encode()).verify(body, headers)  # its text is not the key
