from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class TrainingsConfig(AppConfig):
    name = "trainings"
    verbose_name = gettext_lazy("Trainings")

    def ready(self) -> None:
        # What delivery asks of the domain (answer links, choices, outcomes): told, never imported by it.
        from trainings.devices.hooks import register

        register()
