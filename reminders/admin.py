"""Operators' view: search jobs by key, filter occurrences, cancel or retry them, see the last error."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from reminders.cron import ExpressionError, timeline_for
from reminders.models import Job, Occurrence, OccurrenceStatus, Schedule, ThrottlePolicy
from reminders.occurrences import occurrences_cancel, occurrences_retry_now
from reminders.schedules import (
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_update,
    schedules_advance,
)


class OccurrenceInline(admin.TabularInline):
    model = Occurrence
    fields = ["fire_at", "status", "attempts", "next_attempt_at", "delivered_at", "last_error"]
    readonly_fields = ["fire_at", "status", "attempts", "next_attempt_at", "delivered_at", "last_error"]
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["fire_at"]
    max_num = 0

    def get_queryset(self, request: HttpRequest) -> QuerySet[Occurrence]:
        return super().get_queryset(request).order_by("fire_at")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["key", "callback_type", "target", "priority", "version", "owner", "updated_at"]
    list_filter = ["callback_type", "priority"]
    search_fields = ["key"]
    readonly_fields = ["version", "created_at", "updated_at"]
    exclude = ["http_secret"]
    raw_id_fields = ["owner"]
    inlines = [OccurrenceInline]


@admin.register(Occurrence)
class OccurrenceAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "job",
        "fire_at",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "short_error",
    ]
    list_filter = ["status", "fire_at", "priority"]
    search_fields = ["job__key", "idempotency_key"]
    date_hierarchy = "fire_at"
    list_select_related = ["job"]
    raw_id_fields = ["job"]
    actions = ["cancel", "retry_now"]
    readonly_fields = [
        "job",
        "fire_at",
        "next_attempt_at",
        "priority",
        "status",
        "attempts",
        "claimed_until",
        "lease_token",
        "delivered_at",
        "finished_at",
        "last_error",
        "idempotency_key",
        "job_version",
        "created_at",
    ]
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="last error")
    def short_error(self, occurrence: Occurrence) -> str:
        return occurrence.last_error[:120]

    @admin.action(description="Cancel selected (those not fired yet)")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Occurrence]) -> None:
        with transaction.atomic():
            ids = list(queryset.filter(status=OccurrenceStatus.SCHEDULED).values_list("id", flat=True))
            count = occurrences_cancel(
                Occurrence.objects.filter(id__in=ids), reason=f"cancelled by {request.user} in the admin"
            )
            # Cancelling a schedule's pending fire skips that one fire; the schedule goes on to the next.
            schedules_advance(occurrence_ids=ids, now=timezone.now())
        self.message_user(request, f"{count} occurrence(s) cancelled.", messages.SUCCESS)

    @admin.action(description="Retry now (failed or waiting ones)")
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Occurrence]) -> None:
        count = occurrences_retry_now(queryset)
        self.message_user(request, f"{count} occurrence(s) due now.", messages.SUCCESS)


class ScheduleAdminForm(forms.ModelForm):
    """Validates the expression and zone with the same parser the scheduler uses."""

    class Meta:
        model = Schedule
        fields = ["expression", "timezone", "start_at", "end_at", "misfire_policy"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        try:
            timeline_for(
                cleaned.get("expression", ""),
                zone=cleaned.get("timezone", "UTC"),
                anchor=cleaned.get("start_at") or timezone.now(),
            )
        except ExpressionError as exc:
            field = "timezone" if "time zone" in str(exc) else "expression"
            self.add_error(field, str(exc))
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Schedules are created through the API (they need a callback); operators change, pause or resume them
    here. Every change goes through reminders.schedules, so it bumps the version and replaces the pending
    fire point like an API update."""

    form = ScheduleAdminForm
    list_display = ["key", "expression", "timezone", "paused", "next_fire_at", "version_display", "owner"]
    list_filter = ["paused", "misfire_policy", "timezone"]
    search_fields = ["key"]
    list_select_related = ["job", "owner"]
    readonly_fields = ["key", "job", "version_display", "next_fire_at", "paused", "created_at", "updated_at"]
    actions = ["pause", "resume"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="version")
    def version_display(self, schedule: Schedule) -> int:
        return schedule.version

    def save_model(self, request: HttpRequest, obj: Schedule, form: forms.ModelForm, change: bool) -> None:
        current = Schedule.objects.select_related("job", "job__throttle").get(pk=obj.pk)
        schedule_update(
            schedule=current, changes={name: form.cleaned_data[name] for name in form.changed_data}
        )

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        schedule_delete(schedule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_delete(schedule=schedule)

    @admin.action(description="Pause selected (cancel their pending fire)")
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_pause(schedule=schedule)
        self.message_user(request, f"{queryset.count()} schedule(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume selected (from now)")
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_resume(schedule=schedule)
        self.message_user(request, f"{queryset.count()} schedule(s) resumed.", messages.SUCCESS)


@admin.register(ThrottlePolicy)
class ThrottlePolicyAdmin(admin.ModelAdmin):
    list_display = ["name", "max_per_second", "burst", "window_seconds", "owner"]
    search_fields = ["name"]
    fields = ["name", "max_per_second", "burst", "window_seconds", "owner"]
    raw_id_fields = ["owner"]
