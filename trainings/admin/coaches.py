"""Admin for coaches' profiles (trainings/models/coaches.py) and the digests they were sent: a coach sees and
changes their own profile and reads the digests of their teams; operators see everyone's."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext, gettext_lazy
from django.utils.translation import gettext_lazy as _

from delivery.models import Device
from trainings.admin.html import rule_label
from trainings.admin.operators import _EngineFieldsForOperators
from trainings.admin.people import OwnDeviceInline, ZoneAndLanguageLists
from trainings.digest.profiles import EMAIL, coach_profile_ensure
from trainings.models import CoachPush, Team
from trainings.models.coaches import Coach
from trainings.planning.kinds import coach_kinds
from trainings.selectors import teams_visible_to, user_sees_all_teams


class CoachDeviceInline(OwnDeviceInline):
    fk_name = "coach"


class CoachForm(forms.ModelForm):
    """The profile, and the email address the coach's digests go to (an email `Device` of the coach's):
    the one address a coach types in; their phones are their app's to register."""

    email = forms.EmailField(
        required=False,
        label=gettext_lazy("Email for your digests"),
        help_text=gettext_lazy("Your digests and alerts come to this address (empty: to your phones only)."),
    )

    class Meta:
        model = Coach
        fields = ["user", "language", "time_zone", "channels", "quiet_start", "quiet_end"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["email"].initial = _email_device(self.instance, "token")

    def clean_email(self) -> str:
        address = self.cleaned_data["email"].strip()
        taken = Device.objects.filter(provider=EMAIL, token=address)
        if self.instance.pk:
            taken = taken.exclude(coach=self.instance.pk)
        if address and taken.exists():
            raise forms.ValidationError(gettext("This address is already someone else's."))
        return address


def _email_device(coach: Coach, field: str = "pk") -> Any:
    return (
        Device.objects.filter(coach=coach, provider=EMAIL)
        .order_by("pk")
        .values_list(field, flat=True)
        .first()
    )


@admin.register(Coach)
class CoachAdmin(ZoneAndLanguageLists, admin.ModelAdmin):
    form = CoachForm
    list_display = ["__str__", "language", "time_zone", "channels"]
    search_fields = ["user__username", "user__first_name", "user__last_name"]
    fields = ["user", "language", "time_zone", "channels", "quiet_start", "quiet_end", "email"]
    raw_id_fields = ["user"]
    inlines = [CoachDeviceInline]

    def save_model(self, request: HttpRequest, obj: Coach, form: Any, change: bool) -> None:
        """The profile, then its email address: replaced when changed, removed when emptied."""
        super().save_model(request, obj, form, change)
        if "email" not in form.changed_data:
            return
        address = form.cleaned_data["email"]
        Device.objects.filter(coach=obj, provider=EMAIL).exclude(token=address).delete()
        if address:
            Device.objects.get_or_create(
                provider=EMAIL, token=address, defaults={"coach": obj, "platform": EMAIL}
            )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Coach]:
        coaches = super().get_queryset(request).select_related("user")
        return coaches if user_sees_all_teams(request.user) else coaches.filter(user=request.user.pk)

    def get_readonly_fields(self, request: HttpRequest, obj: Coach | None = None) -> list[str]:
        return [] if user_sees_all_teams(request.user) or obj is None else ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return user_sees_all_teams(request.user)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """A coach of a team finds their own profile here, made on the first visit if need be (they
        cannot add one: a profile is a user's, and an operator's list is everyone's)."""
        if not user_sees_all_teams(request.user):
            team = Team.objects.filter(coaches=request.user.pk).order_by("pk").first()
            if team is not None:
                coach_profile_ensure(request.user, time_zone=team.time_zone)
        return super().changelist_view(request, extra_context)


class CoachKindFilter(admin.SimpleListFilter):
    """The coaches' kinds only (a coach's push is never a player's reminder kind)."""

    title = _("kind")
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind.code, kind.label_text) for kind in coach_kinds()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[CoachPush]) -> QuerySet[CoachPush]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(CoachPush)
class CoachPushAdmin(_EngineFieldsForOperators, admin.ModelAdmin):
    """What each coach was told, or why not (held, skipped), read-only."""

    list_display = ["fire_at", "kind", "coach", "team", "owing", "status", "status_reason"]
    list_filter = [CoachKindFilter, "status"]
    fields = ("coach", "team", "training", "rule_name", "player", "kind", "language", "title", "body",
              "owing", "fire_at", "expires_at", "status", "release_at", "status_reason", "sent_at",
              "key")  # fmt: skip
    readonly_fields = fields
    operator_fields = ("key",)

    @admin.display(description=_("rule"))
    def rule_name(self, push: CoachPush) -> str:
        return rule_label(push.rule) if push.rule else "—"

    date_hierarchy = "fire_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[CoachPush]:
        pushes = super().get_queryset(request).select_related("coach__user", "team")
        return pushes.filter(team__in=teams_visible_to(request.user))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
