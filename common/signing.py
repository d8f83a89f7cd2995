"""The Standard Webhooks signature (standardwebhooks.com) on every outgoing HTTP callback and webhook.

`webhook-id` is the message's idempotency key (the same on every retry), `webhook-timestamp` the Unix time
of this attempt, and `webhook-signature` is `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`. A
receiver verifies with the maintained library, `standardwebhooks.Webhook(secret_bytes).verify(body,
headers)`, which also refuses timestamps more than five minutes off, so a captured request cannot be
replayed later. The older single-header signatures stay beside it for one release.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time


def standard_webhook_headers(
    *, message_id: str, body: bytes, key: bytes, now: float | None = None
) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    signed = f"{message_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": f"v1,{signature}"}
