"""The Standard Webhooks signature (standardwebhooks.com) on every outgoing HTTP callback and webhook.

`webhook-id` is the message's idempotency key (the same on every retry), `webhook-timestamp` the Unix time
of this attempt, and `webhook-signature` is `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`. A
receiver verifies with the maintained library, `standardwebhooks.Webhook(secret_bytes).verify(body,
headers)`, which also refuses timestamps more than five minutes off, so a captured request cannot be
replayed later. The older single-header signatures stay beside it for one release.

A secret in the scheme's own format, `whsec_` + base64, signs with the bytes it encodes, as the scheme's
verifiers read it (`Webhook("whsec_...")`); any other secret signs with its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time

SECRET_PREFIX = "whsec_"  # noqa: S105 - the scheme's prefix, not a secret


def standard_webhook_headers(
    *, message_id: str, body: bytes, key: bytes, now: float | None = None
) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    signed = f"{message_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": f"v1,{signature}"}


def secret_key(secret: str) -> bytes:
    """The HMAC key a secret stands for: a `whsec_` secret's decoded bytes, else the text's bytes."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            pass  # not base64 after all: signed with its text, like any other secret
    return secret.encode()


def secret_new(size: int = 32) -> str:
    """A new Standard Webhooks secret: `whsec_` + base64 of `size` random bytes (the scheme asks 24-64)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(size)).decode()
