"""Admin for teams and players, scoped like the API: a coach sees and picks only their own teams."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from common.admin_widgets import LongSelect, zone_field
from common.i18n import language_choices
from delivery.models import Device
from reminders.api import default_zone_register
from trainings.access import users_linkable_search, users_linkable_to_player
from trainings.digest.profiles import COACH_SETTINGS, team_coaches, team_unreached
from trainings.digest.schedule import DIGEST_FIELDS, team_digests_reschedule
from trainings.models import Membership, Player, Team
from trainings.selectors import players_visible_to, teams_visible_to, user_sees_all_teams


def _team_zone(user: Any) -> str | None:
    """A person with no zone of their own reads times in their team's (the first they coach or play in)."""
    coached = Team.objects.filter(coaches=user).order_by("pk").values_list("time_zone", flat=True).first()
    if coached:
        return coached
    return Player.objects.filter(user=user).values_list("time_zone", flat=True).first()


default_zone_register(_team_zone)


class ZoneAndLanguageLists:
    """`time_zone` and `language` model fields are chosen from lists in every form of this admin."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "time_zone":
            return zone_field(
                initial=db_field.default, help_text=db_field.help_text or "",
                label=db_field.verbose_name.capitalize(),
            )  # fmt: skip
        if db_field.name == "language":
            return forms.ChoiceField(
                choices=language_choices(), initial=db_field.default, help_text=db_field.help_text or "",
                label=db_field.verbose_name.capitalize(), widget=LongSelect(language_choices),
            )  # fmt: skip
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]


class ScopedChoices:
    """Limit team and player dropdowns to the user's teams."""

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "team":
            kwargs["queryset"] = teams_visible_to(request.user)
        elif db_field.name == "player":
            kwargs["queryset"] = players_visible_to(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class PlayerSearchBox(AutocompleteSelect):
    """A search box for a row's player instead of a list of every player the user may see.

    A list would put all of a club's players in every row of a team's or a training's page; the box finds
    them as the user types, through PlayerAdmin (its search and its scoping: a coach finds their teams'
    players only). It shows the row's own player from the row already read (`row_player`), where Django's
    box would read it again, one statement per row.
    """

    row_player: Player | None = None

    def optgroups(self, name: str, value: Sequence[str], attrs: dict[str, Any] | None = None) -> list[Any]:
        player = self.row_player
        if player is None or [str(v) for v in value if v not in (None, "")] != [str(player.pk)]:
            return super().optgroups(name, value, attrs)
        options = [] if self.is_required else [self.create_option(name, "", "", False, 0)]
        label = self.choices.field.label_from_instance(player)
        options.append(self.create_option(name, player.pk, label, True, len(options)))
        return [(None, options, 0)]


class PlayerSearchInline(ScopedChoices):
    """Inline rows naming a player pick it with a `PlayerSearchBox` (the inline's queryset reads each
    row's player with it: `select_related("player")`)."""

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)  # type: ignore[misc]

        class RowForm(formset.form):  # type: ignore[name-defined]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                widget = self.fields["player"].widget if "player" in self.fields else None
                while widget is not None and not isinstance(widget, PlayerSearchBox):
                    widget = getattr(widget, "widget", None)  # inside the admin's related-field wrapper
                if widget is not None and self.instance.player_id is not None:
                    widget.row_player = self.instance.player

        formset.form = RowForm
        return formset

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "player":
            kwargs["widget"] = PlayerSearchBox(db_field, self.admin_site)  # type: ignore[attr-defined]
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class MembershipInline(PlayerSearchInline, admin.TabularInline):
    model = Membership
    extra = 0
    fields = ["player", "active", "joined_at"]
    readonly_fields = ["joined_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        return super().get_queryset(request).select_related("player", "team")  # each row's title names both


@admin.register(Team)
class TeamAdmin(ZoneAndLanguageLists, admin.ModelAdmin):
    list_display = ["name", "time_zone", "reminds"]
    search_fields = ["name"]
    filter_horizontal = ["coaches"]
    inlines = [MembershipInline]
    fieldsets = [
        (None, {"fields": ["name", "time_zone", "quiet_start", "quiet_end", "reminds", "coaches"]}),
        (
            _("Coaches' digest (empty: none)"),
            {"fields": ["digest_before", "digest_morning_at", "decline_alert_within"]},
        ),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return teams_visible_to(request.user)

    def get_readonly_fields(self, request: HttpRequest, obj: Team | None = None) -> list[str]:
        return [] if user_sees_all_teams(request.user) else ["coaches"]

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        """A change of the coaches' digest times reschedules the team's trainings to come; switching one
        of the coaches' messages on makes the team's coaches their profiles (trainings/digest/profiles.py)."""
        super().save_model(request, obj, form, change)
        if change and set(form.changed_data) & set(DIGEST_FIELDS):
            team_digests_reschedule(team=obj)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # the coaches list as saved, from here on
        if any(getattr(form.instance, name) for name in COACH_SETTINGS):
            team_coaches({form.instance.pk})
        if "_continue" not in request.POST:  # else the change page, opened next, says it (below)
            for warning in team_unreached(form.instance):
                messages.warning(request, warning)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method == "GET":
            team = self.get_object(request, object_id)
            for warning in team_unreached(team) if team is not None else []:
                messages.warning(request, warning)
        return super().change_view(request, object_id, form_url, extra_context)


class PlayerAddForm(ModelForm):
    """A new player joins a team in the same save: a coach sees players only through their teams."""

    team = forms.ModelChoiceField(
        queryset=Team.objects.none(), help_text=_("The team the new player joins (its active member).")
    )

    class Meta:
        model = Player
        fields = ["name", "user", "time_zone", "language"]


class PlayerUserSelect(AutocompleteSelect):
    """The admin's autocomplete box for a player's account, asking `PlayerAdmin.user_search_view`
    (linkable accounts only) instead of the site's autocomplete, which would search every user."""

    def get_url(self) -> str:
        return reverse(f"{self.admin_site.name}:trainings_player_user_search")


USER_HELP = _(
    "The player's own login (for the app). Type the account's exact username or email: only accounts "
    "free to link are found (not staff, not a coach, not linked to another player)."
)


@admin.register(Player)
class PlayerAdmin(ZoneAndLanguageLists, admin.ModelAdmin):
    list_display = ["name", "language", "time_zone"]
    search_fields = ["name"]
    # Read-only here: a guardian is linked on the guardian's page (trainings/admin/guardians.py), so this
    # form keeps no formset a client must post. The external id is the API caller's key (trainings/roster/).
    readonly_fields = ["guardians_list", "external_id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Player]:
        return players_visible_to(request.user)

    @admin.display(description=_("Guardians"))
    def guardians_list(self, player: Player) -> str:
        """Who guards the player: "Maria (mother)"."""
        if player.pk is None:
            return gettext("none yet")
        rows = player.guardianships.select_related("guardian").order_by("guardian__name")
        names = [f"{g.guardian.name} ({g.relation or gettext('guardian')})" for g in rows]
        return ", ".join(names) or gettext("none")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user":
            kwargs["queryset"] = users_linkable_to_player(None)
            kwargs["widget"] = PlayerUserSelect(db_field, self.admin_site)
            kwargs["help_text"] = USER_HELP
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(
        self, request: HttpRequest, obj: Player | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            base = super().get_form(request, obj, change=change, **kwargs)
        else:
            base = super().get_form(request, obj, change=change, form=PlayerAddForm, **kwargs)
        teams = teams_visible_to(request.user)
        required = not user_sees_all_teams(request.user)  # operators may add a player to no team yet
        # The player's own account stays a valid choice; a crafted id of any other account outside the
        # linkable ones (a superuser's, another player's) is "not one of the available choices".
        accounts = users_linkable_to_player(obj)
        # A new player starts in the zone of the coach's (first) team; `save_model` moves an untouched
        # zone to the team actually picked.
        first_zone = teams.order_by("pk").values_list("time_zone", flat=True).first() if required else None

        class ScopedPlayerForm(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                if "user" in self.fields:
                    self.fields["user"].queryset = accounts
                if "team" in self.fields:
                    self.fields["team"].queryset = teams
                    self.fields["team"].required = required
                if obj is None and first_zone and "time_zone" in self.fields:
                    self.fields["time_zone"].initial = first_zone

        return ScopedPlayerForm

    def get_urls(self) -> list[URLPattern]:
        search = path(
            "user-search/",
            self.admin_site.admin_view(self.user_search_view),
            name="trainings_player_user_search",
        )
        return [search, *super().get_urls()]

    def user_search_view(self, request: HttpRequest) -> JsonResponse:
        """Select2's answer for the user box: the free accounts whose username or email is the term."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        found = users_linkable_search(request.GET.get("term", ""))
        results = [{"id": str(user.pk), "text": user.get_username()} for user in found]
        return JsonResponse({"results": results, "pagination": {"more": False}})

    def save_model(self, request: HttpRequest, obj: Player, form: ModelForm, change: bool) -> None:
        """A new player joins the team picked, in its zone unless another zone was chosen."""
        team = None if change else form.cleaned_data.get("team")
        if team is not None and "time_zone" not in form.changed_data:
            obj.time_zone = team.time_zone
        super().save_model(request, obj, form, change)
        if team is not None:
            Membership.objects.create(team=team, player=obj)


class OwnDeviceInline(admin.TabularInline):
    """Someone's devices and email addresses, read-only: their app registers them (`fk_name` says whose:
    a guardian's by default; the coach's inline sets `coach`)."""

    model = Device
    fk_name = "guardian"
    extra = 0
    fields = ("provider", "platform", "created_at", "last_success_at", "disabled_at", "disabled_reason")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
