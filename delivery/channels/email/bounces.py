"""Hard bounces and complaints, from a django-anymail provider's tracking webhook (its signature checked
by anymail: Mailgun's HMAC with ANYMAIL["MAILGUN_WEBHOOK_SIGNING_KEY"]), disable the address like a dead
token: the gateway never sends to it again until it is registered anew."""

from __future__ import annotations

import logging
from typing import Any

from delivery.devices import devices_disable
from delivery.models import Device

logger = logging.getLogger("trainings.push")

# anymail's normalized event types that mean "never send here again" (a soft bounce is `deferred`).
DISABLING = {"bounced": "email bounced", "complained": "recipient complained (spam report)",
             "rejected": "email provider rejected the address"}  # fmt: skip


def tracking_received(sender: Any, event: Any, esp_name: str, **kwargs: Any) -> None:
    """anymail's `tracking` signal: disable the email addresses a bounce or a complaint names."""
    reason = DISABLING.get(str(getattr(event, "event_type", "")))
    recipient = str(getattr(event, "recipient", "") or "")
    if reason is None or not recipient:
        return
    detail = str(getattr(event, "description", "") or getattr(event, "reject_reason", "") or "")
    ids = list(Device.objects.filter(provider="email", token__iexact=recipient).values_list("pk", flat=True))
    disabled = devices_disable(
        device_ids=ids, reason=f"{reason} ({esp_name}){': ' + detail if detail else ''}"
    )
    logger.info("email %s: %d address(es) disabled", reason, disabled)
