"""Admin for coaches' profiles (trainings/models/coaches.py) and the digests they were sent: a coach sees and
changes their own profile and reads the digests of their teams; operators see everyone's."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from trainings.admin.html import rule_label
from trainings.admin.operators import _EngineFieldsForOperators
from trainings.admin.people import OwnDeviceInline, ZoneAndLanguageLists
from trainings.kinds import coach_kinds
from trainings.models import CoachPush
from trainings.models.coaches import Coach
from trainings.selectors import teams_visible_to, user_sees_all_teams


class CoachDeviceInline(OwnDeviceInline):
    fk_name = "coach"


@admin.register(Coach)
class CoachAdmin(ZoneAndLanguageLists, admin.ModelAdmin):
    list_display = ["__str__", "language", "time_zone", "channels"]
    search_fields = ["user__username", "user__first_name", "user__last_name"]
    fields = ["user", "language", "time_zone", "channels", "quiet_start", "quiet_end"]
    raw_id_fields = ["user"]
    inlines = [CoachDeviceInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Coach]:
        coaches = super().get_queryset(request).select_related("user")
        return coaches if user_sees_all_teams(request.user) else coaches.filter(user=request.user.pk)

    def get_readonly_fields(self, request: HttpRequest, obj: Coach | None = None) -> list[str]:
        return [] if user_sees_all_teams(request.user) or obj is None else ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return user_sees_all_teams(request.user)


class CoachKindFilter(admin.SimpleListFilter):
    """The coaches' kinds only (a coach's push is never a player's reminder kind)."""

    title = "kind"
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

    @admin.display(description="rule")
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
