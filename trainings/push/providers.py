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
import ssl
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from reminders.signing import standard_webhook_headers
from trainings.push.h2client import H2Client, H2Error, H2Response

logger = logging.getLogger("trainings.push")

SCHEMAS = ("trainings.push/1", "trainings.push/2")


@dataclass(frozen=True)
class PushMessage:
    """A parsed push message (schema in trainings/handlers.py)."""

    idempotency_key: str
    player: int
    title: str
    body: str
    training: str
    kind: str
    raw: dict[str, Any]
    rule: str | None = None
    fire_at: datetime | None = None
    expires_at: datetime | None = None

    @classmethod
    def from_body(cls, body: Any) -> PushMessage:
        if not isinstance(body, dict):
            raise ValueError("push message is not a JSON object")
        try:
            return cls(
                idempotency_key=str(body["idempotency_key"]),
                player=int(body["player"]),
                title=str(body["title"]),
                body=str(body["body"]),
                training=str(body["training"]),
                kind=str(body["kind"]),
                raw=body,
                rule=str(body["rule"]) if body.get("rule") else None,
                fire_at=_aware(body.get("fire_at")),
                expires_at=_aware(body.get("expires_at")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"push message is missing or has a bad field: {exc}") from None

    @property
    def collapse_id(self) -> str:
        """A newer reminder for the same training and phase replaces the older one on the device."""
        return f"{self.training}:{self.kind.lower()}"[:64]  # APNs allows 64 bytes

    @property
    def data(self) -> dict[str, str]:
        """What the app needs to open the right questionnaire or invitation (FCM data values are strings)."""
        values = {"training": self.training, "kind": self.kind, "push": self.idempotency_key}
        if self.rule:
            values["rule"] = self.rule
        return values

    def ttl_seconds(self, now: float) -> int:
        return max(0, int(self.expires_at.timestamp() - now)) if self.expires_at else 86400


def _aware(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}")
    return parsed


@dataclass(frozen=True)
class Target:
    """One device as the providers see it (a `trainings.Device` row, detached from the ORM)."""

    device_id: int
    provider: str  # apns | fcm
    platform: str
    token: str
    app_id: str = ""

    def send_key(self, push: PushMessage) -> str:
        """Stable per (push, device): the same on every retry and redelivery."""
        return f"{push.idempotency_key}/{self.device_id}"

    def send_uuid(self, push: PushMessage) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"trainings-push:{self.send_key(push)}"))


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    TOKEN_DEAD = "token_dead"  # noqa: S105 (disable the device, never try it again)
    FAILED = "failed"  # this push cannot go to this device (refused payload); the device stays
    RETRY = "retry"  # throttled, server error, network: try again later
    AUTH = "auth"  # our credentials are refused: stop consuming


@dataclass(frozen=True)
class SendResult:
    verdict: Verdict
    message_id: str = ""
    error: str = ""
    retry_after: float | None = None


class AuthFailure(Exception):
    """Credentials refused or unusable: an operator error; the gateway stops and leaves the queue alone."""


class PushProvider(Protocol):
    name: str

    def prepare(self) -> None: ...

    async def send(self, push: PushMessage, device: Target) -> SendResult: ...

    async def aclose(self) -> None: ...


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds (the header may also be an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _h2(base_url: str) -> H2Client:
    """One HTTP/2 connection to the provider, trusting PUSH_TLS_CA_FILE too when it is set."""
    ca_file = settings.PUSH_TLS_CA_FILE
    context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    return H2Client(base_url, ssl_context=context, timeout=settings.PUSH_HTTP_TIMEOUT)


def _dumps(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


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
        document = {**push.raw, "device": {"id": device.device_id, "provider": device.provider,
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


# --- FCM HTTP v1 ----------------------------------------------------------------------------------------

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
_FCM_DEAD = {"UNREGISTERED", "SENDER_ID_MISMATCH"}


class FcmProvider:
    """Firebase Cloud Messaging, HTTP v1 (`POST {base}/v1/projects/<id>/messages:send`) over one HTTP/2
    connection, as Google recommends for sending many messages.

    The OAuth 2 access token comes from the service account through google-auth, which signs the JWT grant
    and posts it to the account's own `token_uri`; it is reused until google-auth says it expired.
    """

    name = "fcm"

    def __init__(self, *, credentials_file: str, base_url: str) -> None:
        import google.auth.transport.urllib3
        import urllib3
        from google.oauth2 import service_account

        try:
            with open(credentials_file, encoding="utf-8") as handle:
                info = json.load(handle)
            self.credentials = service_account.Credentials.from_service_account_info(info, scopes=[FCM_SCOPE])
        except (OSError, ValueError, KeyError) as exc:
            # The message names the file and the problem, never its content.
            raise ImproperlyConfigured(
                f"PUSH_FCM_CREDENTIALS_FILE={credentials_file!r}: {type(exc).__name__}"
            ) from None
        self.project_id = info.get("project_id") or ""
        if not self.project_id:
            raise ImproperlyConfigured(f"PUSH_FCM_CREDENTIALS_FILE={credentials_file!r} has no project_id")
        ca_file = settings.PUSH_TLS_CA_FILE
        timeout = urllib3.Timeout(settings.PUSH_HTTP_TIMEOUT)
        pool = (
            urllib3.PoolManager(timeout=timeout, ca_certs=ca_file)
            if ca_file
            else urllib3.PoolManager(timeout=timeout)
        )
        self._token_request = google.auth.transport.urllib3.Request(pool)
        self._path = f"/v1/projects/{self.project_id}/messages:send"
        self._http = _h2(base_url)

    def prepare(self) -> None:
        """Fetch or refresh the access token when google-auth says it is missing or about to expire."""
        from google.auth.exceptions import RefreshError, TransportError

        if self.credentials.valid:
            return
        try:
            self.credentials.refresh(self._token_request)
        except RefreshError as exc:
            if getattr(exc, "retryable", False):
                raise ConnectionError("FCM token endpoint failed (retryable)") from None
            raise AuthFailure(
                f"FCM service account refused by its token endpoint: {_first_line(exc)}"
            ) from None
        except TransportError:
            raise ConnectionError("FCM token endpoint unreachable") from None

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        ttl = push.ttl_seconds(time.time())
        message: dict[str, Any] = {
            "token": device.token,
            "notification": {"title": push.title, "body": push.body},
            "data": push.data,
        }
        if device.platform == "web":
            message["webpush"] = {"headers": {"TTL": str(ttl), "Urgency": "high"},
                                  "notification": {"tag": push.collapse_id}}  # fmt: skip
        else:
            message["android"] = {"collapse_key": push.collapse_id, "priority": "HIGH", "ttl": f"{ttl}s",
                                  "notification": {"tag": push.collapse_id}}  # fmt: skip
        headers = {"authorization": f"Bearer {self.credentials.token}", "content-type": "application/json"}
        try:
            response = await self._http.post(self._path, headers=headers, body=_dumps({"message": message}))
        except H2Error as exc:
            return SendResult(Verdict.RETRY, error=f"FCM unreachable: {exc}")
        if response.status == 200:
            return SendResult(Verdict.ACCEPTED, message_id=str(_json(response.body).get("name", "")))
        return self._refusal(response)

    def _refusal(self, response: H2Response) -> SendResult:
        error = _json(response.body).get("error") or {}
        status = str(error.get("status", ""))
        codes = {str(d.get("errorCode")) for d in error.get("details") or [] if isinstance(d, dict)}
        code = next(iter(codes - {"None"}), status) or status
        text = f"FCM {response.status} {code}".strip()
        retry_after = retry_after_seconds(response.header("retry-after"))
        if codes & _FCM_DEAD or status == "NOT_FOUND":
            return SendResult(Verdict.TOKEN_DEAD, error=text)
        if response.status == 400 or "INVALID_ARGUMENT" in (codes | {status}):
            violations = [
                str(v.get("field", ""))
                for d in error.get("details") or [] if isinstance(d, dict)
                for v in d.get("fieldViolations") or [] if isinstance(v, dict)
            ]  # fmt: skip
            on_token = (
                any("token" in v for v in violations) or "token" in str(error.get("message", "")).lower()
            )
            return SendResult(Verdict.TOKEN_DEAD if on_token else Verdict.FAILED, error=text)
        if response.status in (401, 403) or "THIRD_PARTY_AUTH_ERROR" in codes:
            return SendResult(Verdict.AUTH, error=text)
        if response.status == 429 or response.status >= 500:
            return SendResult(Verdict.RETRY, error=text, retry_after=retry_after)
        return SendResult(Verdict.FAILED, error=text)

    async def aclose(self) -> None:
        await self._http.aclose()


# --- APNs -----------------------------------------------------------------------------------------------

_APNS_DEAD = {"BadDeviceToken", "Unregistered", "DeviceTokenNotForTopic"}
_APNS_AUTH = {"InvalidProviderToken", "MissingProviderToken", "BadCertificate", "BadCertificateEnvironment",
              "Forbidden"}  # fmt: skip
APNS_TOKEN_SECONDS = 50 * 60  # Apple: refresh no more than every 20 min, a token older than 60 min is refused


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
        self._jwt = ""
        self._jwt_at = 0.0
        self._http = _h2(base_url)

    def prepare(self) -> None:
        pass

    def provider_token(self, *, renew: bool = False) -> str:
        import jwt

        now = time.time()
        if renew or not self._jwt or now - self._jwt_at > APNS_TOKEN_SECONDS:
            self._jwt = jwt.encode(
                {"iss": self.team_id, "iat": int(now)},
                self._key,  # type: ignore[arg-type]
                algorithm="ES256",
                headers={"kid": self.key_id},
            )
            self._jwt_at = now
        return self._jwt

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        payload = {"aps": {"alert": {"title": push.title, "body": push.body}, "sound": "default",
                           "thread-id": push.training}, **push.data}  # fmt: skip
        expires = int(push.expires_at.timestamp()) if push.expires_at else int(time.time()) + 86400
        headers = {
            "authorization": f"bearer {self.provider_token()}",
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
                f"/3/device/{device.token}", headers=headers, body=_dumps(payload)
            )
        except H2Error as exc:
            return SendResult(Verdict.RETRY, error=f"APNs unreachable: {exc}")
        if response.status == 200:
            return SendResult(Verdict.ACCEPTED, message_id=response.header("apns-id") or "")
        reason = str(_json(response.body).get("reason", ""))
        text = f"APNs {response.status} {reason}".strip()
        retry_after = retry_after_seconds(response.header("retry-after"))
        if response.status == 410 or reason in _APNS_DEAD:
            return SendResult(Verdict.TOKEN_DEAD, error=text)
        if reason == "ExpiredProviderToken":
            self.provider_token(renew=True)
            return SendResult(Verdict.RETRY, error=text, retry_after=0.0)
        if response.status in (401, 403) or reason in _APNS_AUTH:
            return SendResult(Verdict.AUTH, error=text)
        if response.status == 429 or response.status >= 500:
            return SendResult(Verdict.RETRY, error=text, retry_after=retry_after)
        return SendResult(Verdict.FAILED, error=text)

    async def aclose(self) -> None:
        await self._http.aclose()


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _first_line(exc: BaseException) -> str:
    """An exception's summary without what a token endpoint may have echoed back."""
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.splitlines()[0][:200]


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
