"""The webhook stand-in (TRAININGS_PUSH_PROVIDER=webhook): each (push, device) is POSTed to
TRAININGS_PUSH_WEBHOOK_URL (`provider.py`). Its row is in `delivery/channels/registry.py`."""

from __future__ import annotations

from django.conf import settings

from delivery.channels.webhook.provider import WebhookProvider
from delivery.messages import PushProvider

__all__ = ["WebhookProvider", "address_error", "from_settings"]


def from_settings(*, in_flight: int) -> PushProvider | None:
    return WebhookProvider(
        settings.TRAININGS_PUSH_WEBHOOK_URL,
        secret=settings.TRAININGS_PUSH_WEBHOOK_SECRET,
        timeout=settings.TRAININGS_PUSH_WEBHOOK_TIMEOUT,
        in_flight=in_flight,
    )


def address_error(address: str) -> str | None:
    return None  # a stand-in has no addresses of its own
