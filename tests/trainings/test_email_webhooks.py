"""The email provider's tracking webhook disables addresses, so it is served only where its events are
signed with a key the site holds: with the key unset (the default, every SMTP deployment) it is a 404 and a
forged bounce disables nothing; a provider configured without its key fails `check --deploy`; every call
meets the per-address limit."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from delivery.models import Device
from tests.factories import DeviceFactory

pytestmark = pytest.mark.django_db

MAILGUN = "/email/anymail/mailgun/tracking/"
BOUNCE = {"event": "failed", "severity": "permanent", "reason": "bounce", "recipient": "anna@example.com"}


def _signed(key: bytes, event: dict[str, Any]) -> bytes:
    timestamp, token = str(int(time.time())), "b" * 50
    signature = hmac.new(key, f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"timestamp": timestamp, "token": token, "signature": signature},
                       "event-data": {"timestamp": time.time(), "id": "e1", **event}}).encode()  # fmt: skip


def _address() -> Device:
    return DeviceFactory(provider="email", platform="email", token="anna@example.com")


def _disabled(device: Device) -> bool:
    device.refresh_from_db()
    return device.disabled_at is not None


def test_without_a_signing_key_a_bounce_signed_with_the_empty_key_is_a_404_and_disables_nothing(
    client: Client, settings: Any
) -> None:
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": ""}
    device = _address()
    response = client.post(MAILGUN, data=_signed(b"", BOUNCE), content_type="application/json")
    assert response.status_code == 404
    assert not _disabled(device)


@pytest.mark.parametrize("provider", ["postmark", "sendgrid", "brevo", "mailjet", "sparkpost", "mailgun"])
def test_no_other_providers_webhook_is_served(client: Client, settings: Any, provider: str) -> None:
    """anymail's other tracking webhooks accept any caller unless a shared WEBHOOK_SECRET is set: a
    Postmark-shaped hard bounce disabled the address."""
    device = _address()
    postmark = {"RecordType": "Bounce", "Type": "HardBounce", "Email": "anna@example.com", "ID": 1,
                "MessageID": "m1", "BouncedAt": "2030-01-01T00:00:00Z", "Description": "forged"}  # fmt: skip
    response = client.post(
        f"/email/anymail/{provider}/tracking/", data=json.dumps(postmark), content_type="application/json"
    )
    assert response.status_code == 404
    for inbound in ("mailgun/inbound/", "postmark/inbound/"):
        assert (
            client.post(f"/email/anymail/{inbound}", data="{}", content_type="application/json").status_code
            == 404
        )
    assert not _disabled(device)


def test_with_its_key_set_the_signature_is_checked(client: Client, settings: Any) -> None:
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": "key-signing-secret"}
    device = _address()
    for forged in (b"", b"someone-else"):
        response = client.post(MAILGUN, data=_signed(forged, BOUNCE), content_type="application/json")
        assert response.status_code == 400
        assert not _disabled(device)
    signed = _signed(b"key-signing-secret", BOUNCE)
    assert client.post(MAILGUN, data=signed, content_type="application/json").status_code == 200
    assert _disabled(device)


def test_the_webhook_meets_the_per_address_limit(settings: Any) -> None:
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": "key-signing-secret"}
    settings.API_THROTTLE_RATES = {"token": "1000000/s", "ip": "3/m"}
    device = _address()
    caller = Client(REMOTE_ADDR="203.0.113.77")
    forged = [
        caller.post(MAILGUN, data=_signed(b"x", BOUNCE), content_type="application/json") for _ in range(3)
    ]
    assert [r.status_code for r in forged] == [400, 400, 400]
    refused = caller.post(
        MAILGUN, data=_signed(b"key-signing-secret", BOUNCE), content_type="application/json"
    )
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert not _disabled(device)  # refused before anymail saw it
    provider = Client(REMOTE_ADDR="198.51.100.20")
    signed = provider.post(
        MAILGUN, data=_signed(b"key-signing-secret", BOUNCE), content_type="application/json"
    )
    assert signed.status_code == 200
    assert _disabled(device)


@pytest.mark.parametrize(
    ("backend", "api_key"),
    [("anymail.backends.mailgun.EmailBackend", ""), ("django.core.mail.backends.smtp.EmailBackend", "key-1")],
)
def test_a_provider_configured_without_its_signing_key_fails_the_deploy_check(
    settings: Any, backend: str, api_key: str
) -> None:
    settings.EMAIL_BACKEND = backend
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_API_KEY": api_key, "MAILGUN_WEBHOOK_SIGNING_KEY": ""}
    with pytest.raises(SystemCheckError, match=r"trainings\.E001.*MAILGUN_WEBHOOK_SIGNING_KEY is empty"):
        call_command("check", "--deploy", "--tag", "security")
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": "key-signing-secret"}
    call_command("check", "--deploy", "--tag", "security", "--fail-level", "ERROR")


def test_an_smtp_deployment_without_a_provider_passes_it(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_API_KEY": "", "MAILGUN_WEBHOOK_SIGNING_KEY": ""}
    call_command("check", "--deploy", "--tag", "security", "--fail-level", "ERROR")
