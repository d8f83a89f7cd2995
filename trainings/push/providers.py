"""Push providers: where the gateway sends one push to one device.

`await provider.send(push, device)` never raises for an answer of the service: it returns a `SendResult`
saying what the gateway must do (record it accepted, disable the device, retry later, give up on this
device, or stop: an authentication failure is the operator's to fix). `prepare()` runs before a batch,
outside the event loop (FCM refreshes its OAuth token there).

Which provider serves a device: `providers_from_settings()` gives APNs devices to `ApnsProvider` and FCM
devices to `FcmProvider` when their credentials are configured; otherwise the stand-in named by
TRAININGS_PUSH_PROVIDER (logging by default, or the webhook) takes them, so a development machine needs
no credentials. Credentials (keys, JWTs, access tokens) are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass, field

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from reminders.signing import standard_webhook_headers
from trainings.push.apns import ApnsProvider
from trainings.push.fcm import FcmProvider
from trainings.push.messages import (
    SCHEMAS,
    AuthFailure,
    PushMessage,
    PushProvider,
    SendResult,
    Target,
    Verdict,
    retry_after_seconds,
)

__all__ = [
    "SCHEMAS",
    "ApnsProvider",
    "AuthFailure",
    "FcmProvider",
    "LoggingProvider",
    "Providers",
    "PushMessage",
    "PushProvider",
    "SendResult",
    "Target",
    "Verdict",
    "WebhookProvider",
    "providers_from_settings",
    "retry_after_seconds",
    "standin_from_settings",
]

logger = logging.getLogger("trainings.push")

# --- stand-ins ------------------------------------------------------------------------------------------


class LoggingProvider:
    """Development default: the push is "delivered" to the log."""

    name = "logging"

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        logger.info(
            "PUSH player=%s device=%s/%s kind=%s training=%s key=%s title=%r body=%r",
            push.player, device.provider, device.device_id, push.kind, push.training, push.idempotency_key,
            push.title, push.body,
        )  # fmt: skip
        return SendResult(Verdict.ACCEPTED)

    async def aclose(self) -> None:
        pass


class WebhookProvider:
    """POST each (push, device) as JSON to a URL set by the operator, HMAC-SHA256 signed when a secret is
    set, with `Idempotency-Key: <push key>/<device id>`.

    2xx is accepted; 408, 429 and 5xx (and network errors) are retried; other 4xx are permanent.
    """

    name = "webhook"

    def __init__(self, url: str, *, secret: str = "", timeout: float = 10.0, in_flight: int = 10) -> None:
        if not url.startswith(("http://", "https://")):
            raise ImproperlyConfigured("TRAININGS_PUSH_WEBHOOK_URL must be an http(s) URL")
        self.url = url
        self.secret = secret
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=in_flight),
            trust_env=False,
        )

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        document = {**push.raw, **push.answer_fields,
                    "device": {"id": device.device_id, "provider": device.provider,
                               "platform": device.platform, "token": device.token}}  # fmt: skip
        body = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": device.send_key(push)}
        if self.secret:
            digest = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Push-Signature"] = f"sha256={digest}"
            key = self.secret.encode()
            # One message per (push, device): a receiver de-duplicating on webhook-id must not drop a
            # second device's send as a replay of the first's.
            headers.update(standard_webhook_headers(message_id=device.send_key(push), body=body, key=key))
        try:
            response = await self._http.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return SendResult(Verdict.RETRY, error=f"webhook unreachable: {type(exc).__name__}")
        if 200 <= response.status_code < 300:
            return SendResult(Verdict.ACCEPTED)
        error = f"webhook answered HTTP {response.status_code}"
        if response.status_code in (408, 429) or response.status_code >= 500:
            return SendResult(
                Verdict.RETRY,
                error=error,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )
        return SendResult(Verdict.FAILED, error=error)

    async def aclose(self) -> None:
        await self._http.aclose()


# --- which provider serves which device -----------------------------------------------------------------


@dataclass
class Providers:
    """The provider for each device provider name; `standin` serves those without credentials."""

    standin: PushProvider
    by_device: dict[str, PushProvider] = field(default_factory=dict)

    def for_device(self, device: Target) -> PushProvider:
        return self.by_device.get(device.provider, self.standin)

    def all(self) -> list[PushProvider]:
        unique: dict[int, PushProvider] = {id(p): p for p in [self.standin, *self.by_device.values()]}
        return list(unique.values())

    def describe(self) -> str:
        return ", ".join(
            f"{name}={self.for_device(Target(0, name, '', '')).name}" for name in ("apns", "fcm")
        )


def standin_from_settings(*, in_flight: int) -> PushProvider:
    name = settings.TRAININGS_PUSH_PROVIDER
    if name == "logging":
        return LoggingProvider()
    if name == "webhook":
        return WebhookProvider(
            settings.TRAININGS_PUSH_WEBHOOK_URL,
            secret=settings.TRAININGS_PUSH_WEBHOOK_SECRET,
            timeout=settings.TRAININGS_PUSH_WEBHOOK_TIMEOUT,
            in_flight=in_flight,
        )
    raise ImproperlyConfigured(f"TRAININGS_PUSH_PROVIDER={name!r}: use 'logging' or 'webhook'")


def providers_from_settings() -> Providers:
    """APNs and FCM where their credentials are set; the stand-in for the rest."""
    in_flight = settings.TRAININGS_GATEWAY_IN_FLIGHT
    providers = Providers(standin=standin_from_settings(in_flight=in_flight))
    if settings.PUSH_FCM_CREDENTIALS_FILE:
        providers.by_device["fcm"] = FcmProvider(
            credentials_file=settings.PUSH_FCM_CREDENTIALS_FILE,
            base_url=settings.PUSH_FCM_BASE_URL,
        )
    if settings.PUSH_APNS_KEY_FILE:
        providers.by_device["apns"] = ApnsProvider(
            key_file=settings.PUSH_APNS_KEY_FILE,
            key_id=settings.PUSH_APNS_KEY_ID,
            team_id=settings.PUSH_APNS_TEAM_ID,
            topic=settings.PUSH_APNS_TOPIC,
            base_url=settings.PUSH_APNS_BASE_URL,
        )
    return providers
