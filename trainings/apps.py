from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class TrainingsConfig(AppConfig):
    name = "trainings"
    verbose_name = gettext_lazy("Trainings")
