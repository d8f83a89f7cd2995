from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class DeliveryConfig(AppConfig):
    """The push gateway's app: devices, the send records, the channels (delivery/api.py is its door)."""

    name = "delivery"
    verbose_name = gettext_lazy("Delivery")

    def ready(self) -> None:
        # Bounces and complaints from the email provider's tracking webhook (channels/email/bounces.py).
        from anymail.signals import tracking

        from delivery.channels.email.bounces import tracking_received

        tracking.connect(tracking_received, dispatch_uid="trainings-email-bounces")
        # A provider configured without the key its tracking events are signed with (webhooks.py).
        from django.core import checks

        from delivery.channels.email.webhooks import webhook_keys_check

        checks.register(webhook_keys_check, checks.Tags.security, deploy=True)
