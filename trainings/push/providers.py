"""Push providers: where the gateway hands a push. One small interface, chosen by a setting.

`PushProvider.send(push)` returns when the provider accepted the push and raises `PushProviderError`
otherwise (`permanent=True` when retrying cannot help, e.g. the provider rejected the payload). FCM and
APNs backends fit the same interface: map `device_tokens` to their API and raise on a refused request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from reminders.signing import standard_webhook_headers

logger = logging.getLogger("trainings.push")


class PushProviderError(Exception):
    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class PushMessage:
    """A parsed `trainings.push/1` message (schema in trainings/handlers.py)."""

    idempotency_key: str
    player: int
    device_tokens: list[str]
    title: str
    body: str
    training: str
    kind: str
    raw: dict[str, Any]

    @classmethod
    def from_body(cls, body: Any) -> PushMessage:
        if not isinstance(body, dict):
            raise ValueError("push message is not a JSON object")
        try:
            return cls(
                idempotency_key=str(body["idempotency_key"]),
                player=int(body["player"]),
                device_tokens=[str(token) for token in body.get("device_tokens") or []],
                title=str(body["title"]),
                body=str(body["body"]),
                training=str(body["training"]),
                kind=str(body["kind"]),
                raw=body,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"push message is missing or has a bad field: {exc}") from None


class PushProvider(Protocol):
    name: str

    def send(self, push: PushMessage) -> None: ...


class LoggingProvider:
    """Development default: the push is "delivered" to the log."""

    name = "logging"

    def send(self, push: PushMessage) -> None:
        logger.info(
            "PUSH player=%s tokens=%d kind=%s training=%s key=%s title=%r body=%r",
            push.player, len(push.device_tokens), push.kind, push.training, push.idempotency_key,
            push.title, push.body,
        )  # fmt: skip


class WebhookProvider:
    """POST the push JSON to a URL set by the operator, signed with HMAC-SHA256 when a secret is set.

    2xx is accepted; 408, 429 and 5xx (and network errors) are retried; other 4xx are permanent.
    """

    name = "webhook"

    def __init__(self, url: str, *, secret: str = "", timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ImproperlyConfigured("TRAININGS_PUSH_WEBHOOK_URL must be an http(s) URL")
        self.url = url
        self.secret = secret
        self._pool = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False
        )

    def send(self, push: PushMessage) -> None:
        body = json.dumps(push.raw, separators=(",", ":"), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": push.idempotency_key}
        if self.secret:
            digest = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Push-Signature"] = f"sha256={digest}"
            key = self.secret.encode()
            headers.update(standard_webhook_headers(message_id=push.idempotency_key, body=body, key=key))
        try:
            response = self._pool.request("POST", self.url, body=body, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            raise PushProviderError(f"webhook unreachable: {exc}") from None
        if 200 <= response.status < 300:
            return
        permanent = 400 <= response.status < 500 and response.status not in (408, 429)
        raise PushProviderError(f"webhook answered HTTP {response.status}", permanent=permanent)


def get_provider() -> PushProvider:
    name = settings.TRAININGS_PUSH_PROVIDER
    if name == "logging":
        return LoggingProvider()
    if name == "webhook":
        return WebhookProvider(
            settings.TRAININGS_PUSH_WEBHOOK_URL,
            secret=settings.TRAININGS_PUSH_WEBHOOK_SECRET,
            timeout=settings.TRAININGS_PUSH_WEBHOOK_TIMEOUT,
        )
    raise ImproperlyConfigured(f"TRAININGS_PUSH_PROVIDER={name!r}: use 'logging' or 'webhook'")
