"""Firebase Cloud Messaging, HTTP v1, over one HTTP/2 connection."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.compact_json import json_compact
from common.wire.h2client import H2BadRequest, H2Error, H2Response
from delivery.messages import (
    AuthFailure,
    PushMessage,
    SendResult,
    Target,
    Verdict,
    as_strings,
    first_line,
    h2_connect,
    json_object,
    retry_after_seconds,
    status_verdict,
)

logger = logging.getLogger("trainings.push")

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
_FCM_DEAD = {"UNREGISTERED", "SENDER_ID_MISMATCH"}


class FcmProvider:
    """Firebase Cloud Messaging, HTTP v1 (`POST {base}/v1/projects/<id>/messages:send`) over one HTTP/2
    connection, as Google recommends for sending many messages.

    The OAuth 2 access token comes from the service account through google-auth, which signs the JWT grant
    and posts it to the account's own `token_uri`; it is reused until google-auth says it expired. FCM may
    refuse a cached token before then (revoked, rotated keys): a 401 on it has the token refreshed once, by
    the next `prepare()`, and the sends retried; a 401 on the token that refresh got stops the gateway.
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
        # The project's sending quota, shared by every gateway (delivery/gateway/quota.py).
        self.quota_key, self.quota_per_minute = f"fcm:{self.project_id}", settings.PUSH_FCM_QUOTA_PER_MINUTE
        ca_file = settings.PUSH_TLS_CA_FILE
        timeout = urllib3.Timeout(settings.PUSH_HTTP_TIMEOUT)
        pool = (
            urllib3.PoolManager(timeout=timeout, ca_certs=ca_file)
            if ca_file
            else urllib3.PoolManager(timeout=timeout)
        )
        self._token_request = google.auth.transport.urllib3.Request(pool)
        self._path = f"/v1/projects/{self.project_id}/messages:send"
        self._http = h2_connect(base_url)
        self._refused: str | None = None  # a token FCM answered 401 to: `prepare()` gets another
        self._after_refusal: str | None = None  # the token got in its place: a 401 on it is final

    def prepare(self) -> None:
        """Fetch or refresh the access token when google-auth says it is missing or about to expire."""
        from google.auth.exceptions import RefreshError, TransportError

        refused = self._refused is not None and self._refused == self.credentials.token
        if self.credentials.valid and not refused:
            return
        try:
            self.credentials.refresh(self._token_request)
        except RefreshError as exc:
            if getattr(exc, "retryable", False):
                raise ConnectionError("FCM token endpoint failed (retryable)") from None
            raise AuthFailure(
                f"FCM service account refused by its token endpoint: {first_line(exc)}"
            ) from None
        except TransportError:
            raise ConnectionError("FCM token endpoint unreachable") from None
        if refused:
            self._refused, self._after_refusal = None, self.credentials.token

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        ttl = push.ttl_seconds(time.time())
        message: dict[str, Any] = {
            "token": device.token,
            "notification": {"title": push.title, "body": push.body},
            "data": {**push.data, **as_strings(push.answer_fields)},
        }
        if device.platform == "web":
            message["webpush"] = {"headers": {"TTL": str(ttl), "Urgency": "high"},
                                  "notification": {"tag": push.collapse_id}}  # fmt: skip
        else:
            message["android"] = {"collapse_key": push.collapse_id, "priority": "HIGH", "ttl": f"{ttl}s",
                                  "notification": {"tag": push.collapse_id}}  # fmt: skip
        token = self.credentials.token
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        try:
            response = await self._http.post(
                self._path, headers=headers, body=json_compact({"message": message})
            )
        except H2BadRequest as exc:  # this device's data cannot go in a request: not worth retrying
            return SendResult(Verdict.FAILED, error=f"FCM request not sent: {exc}")
        except H2Error as exc:
            return SendResult(Verdict.RETRY, error=f"FCM unreachable: {exc}")
        if response.status == 200:
            return SendResult(Verdict.ACCEPTED, message_id=str(json_object(response.body).get("name", "")))
        if response.status == 401 and token != self._after_refusal:
            self._refused = token  # the next round's prepare() refreshes it, once
            return SendResult(
                Verdict.RETRY, error="FCM 401 on a cached access token: refreshing it", retry_after=0.0
            )
        return self._refusal(response)

    def _refusal(self, response: H2Response) -> SendResult:
        error = json_object(response.body).get("error") or {}
        status = str(error.get("status", ""))
        codes = {str(d.get("errorCode")) for d in error.get("details") or [] if isinstance(d, dict)}
        code = next(iter(codes - {"None"}), status) or status
        text = f"FCM {response.status} {code}".strip()
        retry_after = retry_after_seconds(response.header("retry-after"))
        if response.status == 429 and _project_quota(error):  # not one device's rate: the whole project's
            return SendResult(Verdict.RETRY, error=text, retry_after=retry_after, quota=True)
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
        return status_verdict(response.status, text, retry_after, auth="THIRD_PARTY_AUTH_ERROR" in codes)

    async def aclose(self) -> None:
        await self._http.aclose()


def _project_quota(error: dict[str, Any]) -> bool:
    """A 429 about the project's quota (Google's `ErrorInfo` reason RATE_LIMIT_EXCEEDED, or a quota metric
    named), rather than one device's message rate (QUOTA_EXCEEDED, "Device message rate exceeded")."""
    for detail in error.get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            metadata = detail.get("metadata") if isinstance(detail.get("metadata"), dict) else {}
            if detail.get("reason") == "RATE_LIMIT_EXCEEDED" or "quota_metric" in (metadata or {}):
                return True
    return "quota metric" in str(error.get("message", "")).lower()
