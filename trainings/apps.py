from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class TrainingsConfig(AppConfig):
    name = "trainings"
    verbose_name = gettext_lazy("Trainings")

    def ready(self) -> None:
        # The squad's kinds (the short-squad alert, the "you're in" notice) in the kinds table.
        # Bounces and complaints from the email provider's tracking webhook (trainings/push/email/bounces.py).
        from anymail.signals import tracking

        import trainings.squads.kinds  # noqa: F401
        from trainings.push.email.bounces import tracking_received

        tracking.connect(tracking_received, dispatch_uid="trainings-email-bounces")
        # A provider configured without the key its tracking events are signed with (webhooks.py).
        from django.core import checks

        from trainings.push.email.webhooks import webhook_keys_check

        checks.register(webhook_keys_check, checks.Tags.security, deploy=True)
