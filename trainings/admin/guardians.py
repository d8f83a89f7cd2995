"""Admin for guardians (trainings/models/guardians.py), scoped like players: a coach sees the guardians of
their teams' players and links guardians to those players only; operators see everyone."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest

from trainings.access import users_linkable_to_guardian
from trainings.admin.people import OwnDeviceInline, PlayerSearchInline, ZoneAndLanguageLists
from trainings.models import Guardian, Guardianship
from trainings.selectors import guardians_visible_to, user_sees_all_teams

# A coach sees a guardian through the guardian's players: one saved without any of theirs would read
# "added successfully" and then "doesn't exist", a row no coach could find again or delete.
NEEDS_A_PLAYER = "A guardian guards at least one player: name one of your players below."
KEEPS_A_PLAYER = (
    "A guardian keeps at least one player: to remove this guardian, delete them instead of their players."
)


class GuardianshipInline(PlayerSearchInline, admin.TabularInline):
    """On a guardian's page: whose guardian they are (players of the user's teams). A new guardian needs
    one; a coach cannot take a guardian's last one away (the guardian would vanish from their lists)."""

    model = Guardianship
    extra = 0
    fields = ["player", "relation"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Guardianship]:
        return super().get_queryset(request).select_related("player")

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        keeps_one = obj is None or not user_sees_all_teams(request.user)

        class AtLeastOnePlayer(formset):  # type: ignore[misc,valid-type]
            def clean(self) -> None:
                super().clean()
                if not keeps_one or any(self.errors):
                    return
                kept = [
                    form
                    for form in self.forms
                    if form.cleaned_data.get("player") is not None and not self._should_delete_form(form)
                ]
                if not kept:
                    raise ValidationError(NEEDS_A_PLAYER if obj is None else KEEPS_A_PLAYER)

        return AtLeastOnePlayer


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
        user_field = form.base_fields.get("user")
        if isinstance(user_field, ModelChoiceField):
            user_field.queryset = users_linkable_to_guardian(obj)
        return form
