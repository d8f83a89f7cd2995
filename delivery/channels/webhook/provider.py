"""POST each (push, device) as JSON to a URL the operator sets, signed when a secret is set."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
from django.core.exceptions import ImproperlyConfigured

from common.signing import standard_webhook_headers
from delivery.messages import PushMessage, SendResult, Target, Verdict, retry_after_seconds


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
        said = {key: value for key, value in push.raw.items() if key != "answer"}  # its push fields, flat
        document = {**said, **push.answer_fields,
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
