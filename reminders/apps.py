from __future__ import annotations

from django.apps import AppConfig


class RemindersConfig(AppConfig):
    name = "reminders"
    verbose_name = "Reminders"

    def ready(self) -> None:
        # Each installed app may register in-process callback handlers in its own `handlers` module.
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("handlers")
