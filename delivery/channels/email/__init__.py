"""The email channel: a reminder as an email through Django's email framework (`provider.py`), with its
answer links and a one-click unsubscribe per reminder kind (`message.py`, `views.py`), and hard bounces and
complaints from a django-anymail provider's tracking webhook disabling the address (`bounces.py`).

An address is a Device row of this channel (platform `email`, token = the address). Email is a fallback
channel: the gateway sends it when its person has no enabled device of another channel, when every such
device's send failed or was dead, or when they prefer email for that kind (delivery/gateway/sender.py). Its
row is in `delivery/channels/registry.py`; EMAIL_BACKEND says how mail leaves (SMTP by default, the console
under `make run`, an anymail backend for a provider).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from delivery.channels.email.provider import EmailProvider
from delivery.messages import PushProvider

__all__ = ["EmailProvider", "address_error", "from_settings"]


def from_settings(*, in_flight: int) -> PushProvider | None:
    return EmailProvider(connections=min(in_flight, settings.TRAININGS_EMAIL_CONNECTIONS))


def address_error(address: str) -> str | None:
    try:
        validate_email(address)
    except ValidationError:
        return "an email address such as anna@example.com."
    return None
