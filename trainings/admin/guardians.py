"""Admin for guardians (trainings/models/guardians.py), scoped like players: a coach sees the guardians of
their teams' players and links guardians to those players only; operators see everyone."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from delivery.models import Device
from trainings.access import users_linkable_to_guardian
from trainings.admin.people import OwnDeviceInline, PlayerSearchInline, ZoneAndLanguageLists
from trainings.models import Guardian, Guardianship
from trainings.selectors import (
    guardians_visible_to,
    players_visible_to,
    team_zone_of_players,
    teams_visible_to,
    user_sees_all_teams,
)

# A coach sees a guardian through the guardian's players: one saved without any of theirs would read
# "added successfully" and then "doesn't exist", a row no coach could find again or delete.
NEEDS_A_PLAYER = _("A guardian guards at least one player: name one of your players below.")
KEEPS_A_PLAYER = _("A guardian keeps at least one player: to remove this guardian, delete them (below).")


def _players_elsewhere(request: HttpRequest, guardian: Guardian) -> bool:
    """The guardian also guards players the user does not see (another coach's)."""
    return guardian.guardianships.exclude(player__in=players_visible_to(request.user)).exists()


class GuardianshipInline(PlayerSearchInline, admin.TabularInline):
    """On a guardian's page: whose guardian they are, among the user's players (a coach neither reads nor
    changes another team's rows). A new guardian needs one; a coach cannot take a guardian's last one away
    (the guardian would vanish from their lists)."""

    model = Guardianship
    extra = 0
    fields = ["player", "relation"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Guardianship]:
        visible = players_visible_to(request.user)
        return super().get_queryset(request).filter(player__in=visible).select_related("player")

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
                if not kept and (obj is None or not _players_elsewhere(request, obj)):
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

    def has_delete_permission(self, request: HttpRequest, obj: Guardian | None = None) -> bool:
        """A coach deletes a guardian of their players alone; one who also guards another team's player
        stays (the coach unlinks their own players from them instead)."""
        if not super().has_delete_permission(request, obj):
            return False
        return obj is None or user_sees_all_teams(request.user) or not _players_elsewhere(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """The guardian's devices go with them: their app registered them, nobody deletes one on its own
        in the admin (a coach may read them only), so they need no permission of their own here."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, perms_needed - {Device._meta.verbose_name}, protected

    def get_form(
        self, request: HttpRequest, obj: Guardian | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # The accounts a player's login may be (no staff, no coach, nobody's login yet), or their own.
        user_field = form.base_fields.get("user")
        if isinstance(user_field, ModelChoiceField):
            user_field.queryset = users_linkable_to_guardian(obj)
        zone_field = form.base_fields.get("time_zone")
        if obj is None and zone_field is not None and not user_sees_all_teams(request.user):
            # A coach's new guardian starts in their (first) team's zone; `save_related` moves an untouched
            # zone to the team of the players named below.
            first_zone = (
                teams_visible_to(request.user).order_by("pk").values_list("time_zone", flat=True).first()
            )
            zone_field.initial = first_zone or zone_field.initial
        return form

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """A new guardian whose zone was left as offered lives in their players' team's zone."""
        super().save_related(request, form, formsets, change)
        if change or "time_zone" in form.changed_data:
            return
        guardian = form.instance
        zone = team_zone_of_players(list(guardian.players.all()))
        if zone and zone != guardian.time_zone:
            guardian.time_zone = zone
            guardian.save(update_fields=["time_zone"])
