from __future__ import annotations

from django.apps import AppConfig


class TrainingsConfig(AppConfig):
    name = "trainings"
    verbose_name = "Trainings"
