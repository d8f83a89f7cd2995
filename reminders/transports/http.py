"""POST a job's payload as JSON to its callback URL, signed with the Standard Webhooks scheme.

Every request carries the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
`webhook-signature`; common/signing.py) and, for one more release, `X-Reminders-Signature:
sha256=<hex HMAC-SHA256 of the body>`. The key is the job's `secret`, else REMINDERS_HTTP_SIGNING_SECRET,
else one derived from SECRET_KEY (so a request is never unsigned, though only the first two can be
verified outside). A secret in the scheme's `whsec_` format signs with the bytes it encodes
(`common.signing.secret_key`), so the scheme's verifiers take it as is. The host is resolved and vetted
by `reminders.transports.netguard` here, at send time, and the connection pinned to the vetted address
(DNS rebinding); redirects are never followed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import urllib3
from django.conf import settings
from django.utils.crypto import salted_hmac
from rest_framework import serializers
from urllib3.exceptions import ConnectTimeoutError, HTTPError

import reminders.transports.netguard as netguard
from common.signing import secret_key, standard_webhook_headers
from reminders.transports.base import CallbackDataSerializer, Delivery, InFlight, Settled, TransportError

logger = logging.getLogger(__name__)

USER_AGENT = "reminders/0.1"
SIGNATURE_HEADER = "X-Reminders-Signature"
EXCERPT_CHARS = 200
# Up to four bytes per character of UTF-8; the rest of a large error page is not worth waiting for.
_EXCERPT_BYTES = 4 * EXCERPT_CHARS
_DERIVED_KEY_SALT = "reminders.transports.http.HTTPTransport.signing-key"


@dataclass(frozen=True)
class _Options:
    """Settings read once per batch, on the calling thread, and shared read-only with the workers."""

    allow_private: bool
    signing_secret: str
    derived_key: bytes
    timeout: urllib3.Timeout

    @classmethod
    def from_settings(cls) -> _Options:
        return cls(
            allow_private=settings.REMINDERS_HTTP_ALLOW_PRIVATE,
            signing_secret=settings.REMINDERS_HTTP_SIGNING_SECRET,
            derived_key=salted_hmac(_DERIVED_KEY_SALT, "callback signing key", algorithm="sha256")
            .hexdigest()
            .encode(),
            timeout=urllib3.Timeout(
                connect=settings.REMINDERS_HTTP_CONNECT_TIMEOUT, read=settings.REMINDERS_HTTP_READ_TIMEOUT
            ),
        )

    def signing_key(self, delivery: Delivery) -> bytes:
        if delivery.secret:
            return secret_key(delivery.secret)
        if self.signing_secret:
            return secret_key(self.signing_secret)
        return self.derived_key


class HTTPDataSerializer(CallbackDataSerializer):
    target_field = "url"
    url = serializers.CharField(max_length=2000, trim_whitespace=False)  # refused, never trimmed
    payload = serializers.JSONField()
    secret = serializers.CharField(max_length=200, required=False, allow_blank=True, write_only=True)

    def validate_url(self, value: str) -> str:
        refusal = callback_url_refusal(value)
        if refusal is not None:
            raise serializers.ValidationError(refusal)
        return value


def callback_url_refusal(url: str) -> str | None:
    """Why an HTTP callback may not go to `url` (scheme, credentials, a private or loopback host unless
    REMINDERS_HTTP_ALLOW_PRIVATE), or None: the check a job's URL meets when it is stored. The address
    it resolves to is checked again at each delivery."""
    try:
        netguard.validate_callback_url(url, allow_private=settings.REMINDERS_HTTP_ALLOW_PRIVATE)
    except netguard.UnsafeURL as exc:
        return str(exc)
    return None


class HTTPTransport:
    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        return Settled(self.deliver(deliveries))

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        """POST every delivery concurrently; one slow receiver must not hold up the rest of the batch."""
        if not deliveries:
            return {}
        try:
            options = _Options.from_settings()
            workers = min(settings.REMINDERS_HTTP_CONCURRENCY, len(deliveries))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reminders-http") as executor:
                outcomes = list(executor.map(lambda d: _deliver_safely(d, options), deliveries))
        except Exception as exc:
            # Could not even start (no threads left, broken settings): every outcome is unknown, retry all.
            # Any that did go out are repeated with the same Idempotency-Key.
            logger.exception("HTTP batch of %d deliveries failed", len(deliveries))
            error = TransportError(f"{type(exc).__name__}: {exc}")
            return {d.occurrence_id: error for d in deliveries}
        return {
            delivery.occurrence_id: error
            for delivery, error in zip(deliveries, outcomes, strict=True)
            if error is not None
        }


def sign(body: bytes, key: bytes) -> str:
    """The X-Reminders-Signature value for `body`."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def _deliver_safely(delivery: Delivery, options: _Options) -> TransportError | None:
    try:
        return _deliver(delivery, options)
    except Exception as exc:
        logger.exception("HTTP delivery of occurrence %s failed", delivery.occurrence_id)
        return TransportError(f"{type(exc).__name__}: {exc}")


def _deliver(delivery: Delivery, options: _Options) -> TransportError | None:
    try:
        target = netguard.parse_callback_url(delivery.target)
    except netguard.UnsafeURL as exc:
        return TransportError(str(exc), permanent=True)
    try:
        body = json.dumps(
            delivery.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return TransportError(f"payload is not JSON-serialisable: {exc}", permanent=True)
    try:
        addresses = netguard.resolve_public_addresses(
            target.host, target.port, allow_private=options.allow_private
        )
    except netguard.UnresolvedHost as exc:
        return TransportError(str(exc))  # DNS may be back by the next attempt
    except netguard.UnsafeURL as exc:
        return TransportError(str(exc), permanent=True)
    headers = {
        **delivery.headers(),
        "Host": target.host_header,
        "Content-Type": "application/json",
        "Idempotency-Key": delivery.idempotency_key,
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: sign(body, options.signing_key(delivery)),
        **standard_webhook_headers(
            message_id=delivery.idempotency_key, body=body, key=options.signing_key(delivery)
        ),
    }
    return _post(target, addresses, body, headers, options.timeout)


def _post(
    target: netguard.CallbackTarget,
    addresses: Sequence[str],
    body: bytes,
    headers: Mapping[str, str],
    timeout: urllib3.Timeout,
) -> TransportError | None:
    """Send to the first vetted address that accepts a connection; never to anything else."""
    connect_error: Exception | None = None
    for address in addresses:
        pool = _connection_pool(target, address, timeout)
        try:
            response = pool.urlopen(
                "POST",
                target.path,
                body=body,
                headers=dict(headers),
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except ConnectTimeoutError as exc:
            # Includes NewConnectionError (refused, unreachable): nothing was sent, so trying the host's
            # next address cannot duplicate the request. An IPv6-less worker gets past AAAA records here.
            pool.close()
            connect_error = exc
            continue
        except HTTPError as exc:
            # The request may have arrived (read timeout, reset mid-response): retry, Idempotency-Key dedups.
            pool.close()
            return TransportError(f"{target.host_header}: {type(exc).__name__}: {exc}")
        try:
            return _outcome(response)
        finally:
            response.close()
            pool.close()
    return TransportError(f"could not connect to {target.host_header}: {connect_error}")


def _connection_pool(
    target: netguard.CallbackTarget, address: str, timeout: urllib3.Timeout
) -> urllib3.HTTPConnectionPool:
    """A pool bound to the vetted IP, so urllib3 has no name to look up again."""
    if target.scheme == "https":
        return urllib3.HTTPSConnectionPool(
            address,
            target.port,
            timeout=timeout,
            retries=False,
            maxsize=1,
            cert_reqs="CERT_REQUIRED",
            server_hostname=target.host,
            assert_hostname=target.host,
        )
    return urllib3.HTTPConnectionPool(address, target.port, timeout=timeout, retries=False, maxsize=1)


def _outcome(response: urllib3.BaseHTTPResponse) -> TransportError | None:
    """2xx is delivered; 408, 429 and 5xx may pass on a later attempt; anything else will not."""
    status = response.status
    if 200 <= status < 300:
        return None
    excerpt = _excerpt(response)
    if 300 <= status < 400:
        location = _shorten(response.headers.get("Location", ""))
        return TransportError(
            f"HTTP {status}: redirects are not followed (Location: {location}): {excerpt}", permanent=True
        )
    retryable = status in (408, 429) or 500 <= status < 600
    return TransportError(f"HTTP {status}: {excerpt}", permanent=not retryable)


def _excerpt(response: urllib3.BaseHTTPResponse) -> str:
    try:
        data = response.read(_EXCERPT_BYTES)
    except (HTTPError, OSError):
        return ""
    return _shorten(data.decode("utf-8", errors="replace"))


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
