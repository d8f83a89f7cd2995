from __future__ import annotations

from django.apps import AppConfig


class TrainingsConfig(AppConfig):
    name = "trainings"
    verbose_name = "Trainings"

    def ready(self) -> None:
        from trainings import schema  # noqa: F401 - registers the OpenAPI field extension
