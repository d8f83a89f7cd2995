"""The delivery channels: one row each, the only list of them in the code.

Everything that depends on which channels exist is derived from `CHANNELS`: the device choices and check
constraints (`delivery/models.py`), the API's validation of a registered address
(`trainings/serializers.py`), the providers the gateway builds and `Providers.describe()`
(`delivery/channels/providers.py`), and which stand-in TRAININGS_PUSH_PROVIDER may name. The gateway itself
(`delivery/gateway/consumer.py`, `sender.py`) knows nothing of any channel: retries, Retry-After, dead
addresses and dead letters work on a provider's `SendResult`.

To add a channel (say `sms`):
1. A folder `delivery/channels/sms/` whose `__init__.py` defines
   `from_settings(*, in_flight: int) -> PushProvider | None` (None when its settings are unset: the
   stand-in serves its addresses then; raise ImproperlyConfigured when they are set but wrong) and
   `address_error(address: str) -> str | None` (why an address the app registers cannot be one of this
   channel's, or None). The provider it returns follows `delivery.messages.PushProvider`: `send()`
   returns a `SendResult` for every answer of the service and never raises for one.
2. A line in `CHANNELS` below, naming the folder, the platforms its addresses live on and what an
   address is. A new platform also gets its label in `PLATFORMS`.
Then `manage.py makemigrations` (the choices and constraints follow), its settings in `config/settings.py`
if it has any, and its tests under `tests/trainings/`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from delivery.messages import PushProvider

# Where a device's address lives, with its label (the device's `platform`).
PLATFORMS: dict[str, str] = {"ios": "iOS", "android": "Android", "web": "Web", "email": "Email"}


class ChannelModule(Protocol):
    """What a channel's folder (`delivery/channels/<name>/__init__.py`) provides."""

    def from_settings(self, *, in_flight: int) -> PushProvider | None: ...

    def address_error(self, address: str) -> str | None: ...


@dataclass(frozen=True)
class Channel:
    name: str  # stored in Device.provider and PushSend.provider (at most 10 characters)
    label: str
    package: str  # the channel's folder, imported only when a provider or an address check is needed
    platforms: tuple[str, ...] = ()  # where its addresses live; () for a stand-in, which has none
    address: str = ""  # what an address of this channel is, for people (API help, errors, docs)
    standin: bool = False  # serves the addresses of channels without credentials (TRAININGS_PUSH_PROVIDER)
    # Sent only when no other channel's address reached the person (none enabled, or every send failed or
    # was dead), or when they prefer it for that kind (delivery/gateway/sender.py).
    fallback: bool = False

    def module(self) -> ChannelModule:
        return cast("ChannelModule", importlib.import_module(self.package))


CHANNELS: tuple[Channel, ...] = (
    Channel("apns", "Apple Push Notification service", "delivery.channels.apns", platforms=("ios", "web"),
            address="an APNs device token (hexadecimal)"),
    Channel("fcm", "Firebase Cloud Messaging", "delivery.channels.fcm", platforms=("android", "ios", "web"),
            address="an FCM registration token"),
    Channel("email", "Email", "delivery.channels.email", platforms=("email",), address="an email address",
            fallback=True),
    Channel("logging", "Logging stand-in (development)", "delivery.channels.logging", standin=True),
    Channel("webhook", "Webhook stand-in (TRAININGS_PUSH_WEBHOOK_URL)", "delivery.channels.webhook",
            standin=True),
)  # fmt: skip

BY_NAME: dict[str, Channel] = {c.name: c for c in CHANNELS}


def address_channels() -> tuple[Channel, ...]:
    """The channels an app registers addresses (devices) for."""
    return tuple(c for c in CHANNELS if not c.standin)


def fallback_channel_names() -> frozenset[str]:
    return frozenset(c.name for c in CHANNELS if c.fallback)


def standin_channels() -> tuple[Channel, ...]:
    return tuple(c for c in CHANNELS if c.standin)


def standin_names() -> frozenset[str]:
    return frozenset(c.name for c in CHANNELS if c.standin)


def standin_words(name: str) -> str:
    """What a stand-in's "accepted" means, for people: no phone or inbox got anything."""
    return f"{name} stand-in, nothing sent"


def device_provider_choices() -> list[tuple[str, str]]:
    return [(c.name, c.label) for c in address_channels()]


def device_platform_choices() -> list[tuple[str, str]]:
    used = {p for c in address_channels() for p in c.platforms}
    return [(value, label) for value, label in PLATFORMS.items() if value in used]
