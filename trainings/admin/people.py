"""Admin for teams and players, scoped like the API: a coach sees and picks only their own teams."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from trainings.models import Membership, Player, Team
from trainings.selectors import players_visible_to, teams_visible_to, user_sees_all_teams


class ScopedChoices:
    """Limit team and player dropdowns to the user's teams."""

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "team":
            kwargs["queryset"] = teams_visible_to(request.user)
        elif db_field.name == "player":
            kwargs["queryset"] = players_visible_to(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class MembershipInline(ScopedChoices, admin.TabularInline):
    model = Membership
    extra = 0
    fields = ["player", "active", "joined_at"]
    readonly_fields = ["joined_at"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "time_zone"]
    search_fields = ["name"]
    filter_horizontal = ["coaches"]
    inlines = [MembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return teams_visible_to(request.user)

    def get_readonly_fields(self, request: HttpRequest, obj: Team | None = None) -> list[str]:
        return [] if user_sees_all_teams(request.user) else ["coaches"]


class PlayerAddForm(ModelForm):
    """A new player joins a team in the same save: a coach sees players only through their teams."""

    team = forms.ModelChoiceField(
        queryset=Team.objects.none(), help_text="The team the new player joins (its active member)."
    )

    class Meta:
        model = Player
        fields = ["name", "user", "time_zone", "language"]


@admin.register(Player)
class PlayerAdmin(admin.ModelAdmin):
    list_display = ["name", "language", "time_zone"]
    search_fields = ["name"]
    raw_id_fields = ["user"]
    # Legacy and never read (push tokens are Device rows, registered by the app): a field here would
    # let a coach type tokens that nothing sends to.
    exclude = ["device_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Player]:
        return players_visible_to(request.user)

    def get_form(
        self, request: HttpRequest, obj: Player | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            return super().get_form(request, obj, change=change, **kwargs)
        base = super().get_form(request, obj, change=change, form=PlayerAddForm, **kwargs)
        teams = teams_visible_to(request.user)
        required = not user_sees_all_teams(request.user)  # operators may add a player to no team yet

        class ScopedPlayerAddForm(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                self.fields["team"].queryset = teams
                self.fields["team"].required = required

        return ScopedPlayerAddForm

    def save_model(self, request: HttpRequest, obj: Player, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        team = None if change else form.cleaned_data.get("team")
        if team is not None:
            Membership.objects.create(team=team, player=obj)
