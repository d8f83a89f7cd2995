"""Admin for operators: reminder rules and their templates, and the read-only record of runs and pushes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from common.history_admin import AuditedAdmin
from common.templatetags.admin_time import seconds
from trainings import kinds
from trainings.admin.html import local_time
from trainings.models import (
    DeliveredPush,
    Push,
    ReminderRule,
    ReminderRun,
    ReminderTemplate,
)
from trainings.offsets import OffsetError
from trainings.selectors import trainings_visible_to, user_sees_all_teams
from trainings.services import rule_delete, rule_reschedule_on_commit


class _OperatorsOnly:
    """Rules and their templates belong to operators, as in the API (`IsOperatorOrReadOnly`): a user with
    `trainings.manage_all_teams` edits them without also needing the four model permissions of each."""

    def _operator(self, request: HttpRequest) -> bool:
        return user_sees_all_teams(request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._operator(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)


class TemplateInline(_OperatorsOnly, admin.StackedInline):
    model = ReminderTemplate
    extra = 0


@admin.register(ReminderRule)
class ReminderRuleAdmin(_OperatorsOnly, AuditedAdmin):
    list_display = ["slug", "kind", "readable_offsets", "active", "updated_at"]
    list_filter = ["kind", "active"]
    inlines = [TemplateInline]

    def get_readonly_fields(self, request: HttpRequest, obj: ReminderRule | None = None) -> list[str]:
        return ["slug"] if obj is not None else []

    @admin.display(description="offsets")
    def readable_offsets(self, rule: ReminderRule) -> str:
        """["90m", "6h"] as "90 min, 6 h before the start"."""
        try:
            offsets = rule.parsed_offsets()
        except OffsetError:
            return str(rule.offsets)
        return f"{', '.join(offset.human() for offset in reversed(offsets))} {kinds.of(rule.kind).when}"

    def save_model(self, request: HttpRequest, obj: ReminderRule, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change or {"offsets", "active", "kind"} & set(form.changed_data):
            rule_reschedule_on_commit(rule=obj)
            self.message_user(request, "Future trainings are being rescheduled in the background.")

    def delete_model(self, request: HttpRequest, obj: ReminderRule) -> None:
        rule_delete(rule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ReminderRule]) -> None:
        for rule in queryset:
            rule_delete(rule=rule)


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ReminderRun)
class ReminderRunAdmin(_ReadOnlyAdmin):
    list_display = ["fire_at_local", "training", "rule", "outcome", "recipients", "attempts", "lateness"]
    list_filter = ["outcome", "rule"]
    list_select_related = ["training", "rule"]
    ordering = ["-fire_at", "-id"]  # the latest reminders first

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReminderRun]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))

    @admin.display(description="fired at", ordering="fire_at")
    def fire_at_local(self, run: ReminderRun) -> str:
        return local_time(run.fire_at)

    @admin.display(description="lateness")
    def lateness(self, run: ReminderRun) -> str:
        """When the last attempt ran, after the instant it was for."""
        return seconds(run.ran_at - run.fire_at)


@admin.register(Push)
class PushAdmin(_ReadOnlyAdmin):
    list_display = ["created_local", "player", "training", "kind", "title", "status", "sent_local"]
    list_filter = ["status", "kind", ("training", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["key", "occurrence_key", "player__name", "training__title"]
    list_select_related = ["player", "training"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Push]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))

    @admin.display(description="created", ordering="created_at")
    def created_local(self, push: Push) -> str:
        return local_time(push.created_at)

    @admin.display(description="sent", ordering="sent_at")
    def sent_local(self, push: Push) -> str:
        return local_time(push.sent_at) if push.sent_at else ""


@admin.register(DeliveredPush)
class DeliveredPushAdmin(_ReadOnlyAdmin):
    list_display = ["key", "provider", "delivered_at"]
    search_fields = ["key"]
