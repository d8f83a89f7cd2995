"""Operators' view: search jobs by key, filter occurrences, cancel or retry them, see the last error."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from reminders.models import Job, Occurrence
from reminders.services import occurrences_cancel, occurrences_retry_now


class OccurrenceInline(admin.TabularInline):
    model = Occurrence
    fields = ["fire_at", "status", "attempts", "next_attempt_at", "delivered_at", "last_error"]
    readonly_fields = fields
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
        count = occurrences_cancel(queryset, reason=f"cancelled by {request.user} in the admin")
        self.message_user(request, f"{count} occurrence(s) cancelled.", messages.SUCCESS)

    @admin.action(description="Retry now (failed or waiting ones)")
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Occurrence]) -> None:
        count = occurrences_retry_now(queryset)
        self.message_user(request, f"{count} occurrence(s) due now.", messages.SUCCESS)
