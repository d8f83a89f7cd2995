"""Apple Push Notification service over one HTTP/2 connection, with token-based (ES256 JWT) auth."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.compact_json import json_compact
from common.wire.h2client import H2BadRequest, H2Error
from delivery.messages import (
    PushMessage,
    SendResult,
    Target,
    Verdict,
    h2_connect,
    json_object,
    retry_after_seconds,
    status_verdict,
)

logger = logging.getLogger("trainings.push")

_APNS_DEAD = {"BadDeviceToken", "Unregistered", "DeviceTokenNotForTopic"}
_APNS_AUTH = {"InvalidProviderToken", "MissingProviderToken", "BadCertificate", "BadCertificateEnvironment",
              "Forbidden"}  # fmt: skip
# Apple refuses a provider token older than 60 minutes (ExpiredProviderToken) and one renewed more often than
# every 20 (TooManyProviderTokenUpdates): one token serves every request for 50 minutes.
APNS_TOKEN_SECONDS = 50 * 60


class ApnsProvider:
    """Apple Push Notification service over HTTP/2 with token-based auth (ES256 JWT from a .p8 key).

    One HTTP/2 connection carries every request as its own stream (the gateway bounds how many at once).
    """

    name = "apns"

    def __init__(self, *, key_file: str, key_id: str, team_id: str, topic: str, base_url: str) -> None:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            with open(key_file, "rb") as handle:
                self._key = load_pem_private_key(handle.read(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ImproperlyConfigured(f"PUSH_APNS_KEY_FILE={key_file!r}: {type(exc).__name__}") from None
        if not (key_id and team_id and topic):
            raise ImproperlyConfigured("APNs needs PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID and PUSH_APNS_TOPIC")
        self.key_id = key_id
        self.team_id = team_id
        self.topic = topic
        # A rate of our own for the team's sends, shared by every gateway (0: none; gateway/quota.py).
        self.quota_key, self.quota_per_minute = f"apns:{team_id}", settings.PUSH_APNS_QUOTA_PER_MINUTE
        self._jwt = ""
        self._jwt_at = (
            0.0  # time.monotonic() when it was signed (a wall-clock step neither ages nor renews it)
        )
        self.token_seconds = float(APNS_TOKEN_SECONDS)
        # A send's id is new on every request; its collapse id and expiration are its training's, and a
        # storm interleaves thousands of trainings: indexed, they would churn the HPACK table (h2client.py).
        self._http = h2_connect(
            base_url, per_request_headers=("apns-id", "apns-collapse-id", "apns-expiration")
        )

    def prepare(self) -> None:
        pass

    def provider_token(self, *, renew: bool = False) -> str:
        """The signed provider JWT, signed again only when `token_seconds` old (or APNs said it expired).

        Reused as is, the `authorization` header is one HPACK-indexed byte per request after the first
        (common/wire/h2client.py) and no ES256 signature is computed per push."""
        now = time.monotonic()
        if renew or not self._jwt or now - self._jwt_at >= self.token_seconds:
            import jwt

            self._jwt = jwt.encode(
                {"iss": self.team_id, "iat": int(time.time())},
                self._key,  # type: ignore[arg-type]
                algorithm="ES256",
                headers={"kid": self.key_id},
            )
            self._jwt_at = now
        return self._jwt

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        answer = dict(push.answer_fields)
        aps = {
            "alert": {"title": push.title, "body": push.body},
            "sound": "default",
            "thread-id": push.training,
        }
        if "category" in answer:  # the app registers TRAINING_INVITATION's actions (docs/app-contract.md)
            aps["category"] = answer.pop("category")
        payload = {"aps": aps, **push.data, **answer}
        expires = int(push.expires_at.timestamp()) if push.expires_at else int(time.time()) + 86400
        token = self.provider_token()
        headers = {
            "authorization": f"bearer {token}",
            "apns-topic": device.app_id or self.topic,
            "apns-push-type": "alert",
            "apns-priority": "10",
            "apns-expiration": str(max(expires, 0)),
            "apns-collapse-id": push.collapse_id,
            "apns-id": device.send_uuid(push),
            "content-type": "application/json",
        }
        try:
            response = await self._http.post(
                f"/3/device/{device.token}", headers=headers, body=json_compact(payload)
            )
        except H2BadRequest as exc:  # this device's data cannot go in a request: not worth retrying
            return SendResult(Verdict.FAILED, error=f"APNs request not sent: {exc}")
        except H2Error as exc:
            return SendResult(Verdict.RETRY, error=f"APNs unreachable: {exc}")
        if response.status == 200:
            return SendResult(Verdict.ACCEPTED, message_id=response.header("apns-id") or "")
        reason = str(json_object(response.body).get("reason", ""))
        text = f"APNs {response.status} {reason}".strip()
        retry_after = retry_after_seconds(response.header("retry-after"))
        if response.status == 410 or reason in _APNS_DEAD:
            return SendResult(Verdict.TOKEN_DEAD, error=text)
        if reason == "ExpiredProviderToken":  # sign a new one, once for all the streams that carried it
            self.provider_token(renew=token == self._jwt)
            return SendResult(Verdict.RETRY, error=text, retry_after=0.0)
        if response.status == 429:  # TooManyRequests: too many to this device token, not to APNs
            return SendResult(Verdict.RETRY, error=text, retry_after=retry_after, per_address=True)
        return status_verdict(response.status, text, retry_after, auth=reason in _APNS_AUTH)

    async def aclose(self) -> None:
        await self._http.aclose()
