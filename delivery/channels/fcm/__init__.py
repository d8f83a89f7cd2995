"""The FCM channel: Firebase Cloud Messaging HTTP v1 over HTTP/2 (`provider.py`).

On when PUSH_FCM_CREDENTIALS_FILE (a service account's JSON) is set; its row is in
`delivery/channels/registry.py`."""

from __future__ import annotations

from django.conf import settings

from delivery.channels.fcm.provider import FcmProvider
from delivery.messages import PushProvider

__all__ = ["FcmProvider", "address_error", "from_settings"]


def from_settings(*, in_flight: int) -> PushProvider | None:
    if not settings.PUSH_FCM_CREDENTIALS_FILE:
        return None
    return FcmProvider(
        credentials_file=settings.PUSH_FCM_CREDENTIALS_FILE, base_url=settings.PUSH_FCM_BASE_URL
    )


def address_error(address: str) -> str | None:
    return None  # registration tokens are opaque; FCM itself calls a bad one INVALID_ARGUMENT
