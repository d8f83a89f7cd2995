"""Push providers: where the gateway sends one push to one device.

`await provider.send(push, device)` never raises for an answer of the service: it returns a `SendResult`
saying what the gateway must do (record it accepted, disable the device, retry later, give up on this
device, or stop: an authentication failure is the operator's to fix). `prepare()` runs before a batch,
outside the event loop (FCM refreshes its OAuth token there).

Which provider serves a device: `providers_from_settings()` asks each channel of the registry
(`delivery/channels/registry.py`) for its provider; a channel whose settings are unset has none, and the
stand-in named by TRAININGS_PUSH_PROVIDER (logging by default, or the webhook) takes its devices, so a
development machine needs no credentials. Credentials (keys, JWTs, access tokens) are never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from delivery.channels.registry import BY_NAME, address_channels, standin_channels
from delivery.messages import (
    SCHEMAS,
    AuthFailure,
    PushMessage,
    PushProvider,
    SendResult,
    Target,
    Verdict,
    retry_after_seconds,
)

__all__ = [
    "SCHEMAS",
    "AuthFailure",
    "Providers",
    "PushMessage",
    "PushProvider",
    "SendResult",
    "Target",
    "Verdict",
    "providers_from_settings",
    "retry_after_seconds",
    "standin_from_settings",
]


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
        """Which provider serves each channel's devices, e.g. `apns=apns, fcm=logging`."""
        return ", ".join(
            f"{c.name}={self.for_device(Target(0, c.name, '', '')).name}" for c in address_channels()
        )


def standin_from_settings(*, in_flight: int) -> PushProvider:
    name = settings.TRAININGS_PUSH_PROVIDER
    channel = BY_NAME.get(name)
    provider = channel.module().from_settings(in_flight=in_flight) if channel and channel.standin else None
    if provider is None:
        names = " or ".join(repr(c.name) for c in standin_channels())
        raise ImproperlyConfigured(f"TRAININGS_PUSH_PROVIDER={name!r}: use {names}")
    return provider


def providers_from_settings() -> Providers:
    """Each channel's provider where its settings are set; the stand-in for the rest."""
    in_flight = settings.TRAININGS_GATEWAY_IN_FLIGHT
    providers = Providers(standin=standin_from_settings(in_flight=in_flight))
    for channel in address_channels():
        provider = channel.module().from_settings(in_flight=in_flight)
        if provider is not None:
            providers.by_device[channel.name] = provider
    return providers
