"""The APNs channel: Apple Push Notification service over HTTP/2 with token-based auth (`provider.py`).

On when PUSH_APNS_KEY_FILE is set (with PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID, PUSH_APNS_TOPIC); its row is
in `delivery/channels/registry.py`."""

from __future__ import annotations

from django.conf import settings

from delivery.channels.apns.provider import ApnsProvider
from delivery.messages import PushProvider

__all__ = ["ApnsProvider", "address_error", "from_settings"]

_HEX = frozenset("0123456789abcdefABCDEF")


def from_settings(*, in_flight: int) -> PushProvider | None:
    if not settings.PUSH_APNS_KEY_FILE:
        return None
    return ApnsProvider(
        key_file=settings.PUSH_APNS_KEY_FILE,
        key_id=settings.PUSH_APNS_KEY_ID,
        team_id=settings.PUSH_APNS_TEAM_ID,
        topic=settings.PUSH_APNS_TOPIC,
        base_url=settings.PUSH_APNS_BASE_URL,
    )


def address_error(address: str) -> str | None:
    if not all(c in _HEX for c in address):
        return "an APNs device token is hexadecimal."
    return None
