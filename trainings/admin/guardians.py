"""Admin for guardians (trainings/models/guardians.py), scoped like players: a coach sees the guardians of
their teams' players and links guardians to those players only; operators see everyone."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest

from trainings.access import users_linkable_to_player
from trainings.admin.people import OwnDeviceInline, PlayerSearchInline, ZoneAndLanguageLists
from trainings.models import Guardian, Guardianship
from trainings.selectors import guardians_visible_to


class GuardianshipInline(PlayerSearchInline, admin.TabularInline):
    """On a guardian's page: whose guardian they are (players of the user's teams)."""

    model = Guardianship
    extra = 0
    fields = ["player", "relation"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Guardianship]:
        return super().get_queryset(request).select_related("player")


@admin.register(Guardian)
class GuardianAdmin(ZoneAndLanguageLists, admin.ModelAdmin):
    list_display = ["name", "language", "time_zone"]
    search_fields = ["name"]
    fields = ["name", "user", "language", "time_zone", "quiet_start", "quiet_end"]
    raw_id_fields = ["user"]
    inlines = [GuardianshipInline, OwnDeviceInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Guardian]:
        return guardians_visible_to(request.user)

    def get_form(
        self, request: HttpRequest, obj: Guardian | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # The accounts a player's login may be (no staff, no coach, nobody's login yet), or their own.
        accounts = users_linkable_to_player(None)
        if obj is not None and obj.user_id is not None:
            accounts = accounts | get_user_model().objects.filter(pk=obj.user_id)
        user_field = form.base_fields.get("user")
        if isinstance(user_field, ModelChoiceField):
            user_field.queryset = accounts.distinct()
        return form
