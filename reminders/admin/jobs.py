"""Operators' view: search jobs by key, filter occurrences, cancel or retry them, see the last error."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponseRedirect
from django.utils import timezone

from common.history_admin import AuditedAdmin
from common.templatetags.admin_time import seconds
from reminders.engine.occurrences import occurrences_cancel, occurrences_retry_now
from reminders.models import Job, Occurrence, OccurrenceStatus, Schedule, ThrottlePolicy
from reminders.ops.figures import occurrence_state
from reminders.schedules.cron import ExpressionError, timeline_for
from reminders.schedules.lifecycle import (
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_update,
    schedules_advance,
)

# The lists (occurrences, trainings) need the page's width to fit 1,400 px without scrolling sideways;
# the app list stays one click away on the index.
admin.site.enable_nav_sidebar = False


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
class JobAdmin(AuditedAdmin):
    list_display = ["key", "callback_type", "target", "priority", "version", "owner", "updated_at"]
    list_filter = ["callback_type", "priority"]
    search_fields = ["key"]
    readonly_fields = ["version", "created_at", "updated_at"]
    exclude = ["http_secret"]
    raw_id_fields = ["owner"]
    inlines = [OccurrenceInline]


def _local(instant: datetime | None) -> str:
    """To the second, in the person's zone (the middleware activates it), with the zone's abbreviation."""
    if instant is None:
        return "—"
    shown = timezone.localtime(instant)
    return f"{shown:%Y-%m-%d %H:%M:%S} {shown.tzname()}"


class StateFilter(admin.SimpleListFilter):
    """What an operator asks first: what fires next, what is waiting, what is retrying, what failed."""

    title = "state"
    parameter_name = "state"
    DEFAULT = "upcoming"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("upcoming", "Upcoming (scheduled or in flight)"),
            ("due", "Due now, not delivered"),
            ("retrying", "Retrying (an attempt failed)"),
            ("failed", "Failed"),
            ("all", "All"),
        ]

    def choices(self, changelist: Any) -> Any:
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Occurrence]) -> QuerySet[Occurrence]:
        state = self.value()
        scheduled = queryset.filter(status=OccurrenceStatus.SCHEDULED)
        if state == "upcoming":
            return queryset.filter(status__in=[OccurrenceStatus.SCHEDULED, OccurrenceStatus.CLAIMED])
        if state == "due":
            return scheduled.filter(next_attempt_at__lte=timezone.now())
        if state == "retrying":
            return scheduled.filter(attempts__gt=0)
        if state == "failed":
            return queryset.filter(status=OccurrenceStatus.FAILED)
        return queryset


class ErrorFilter(admin.SimpleListFilter):
    """`?error=<start of the message>`: the status page's failure groups link here."""

    title = "error"
    parameter_name = "error"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value[:60])] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Occurrence]) -> QuerySet[Occurrence]:
        value = self.value()
        return queryset.filter(last_error__startswith=value) if value else queryset


@admin.register(Occurrence)
class OccurrenceAdmin(admin.ModelAdmin):
    list_display = [
        "fire_at_local",
        "job",
        "state",
        "attempts",
        "next_attempt_local",
        "delivered_local",
        "lateness",
        "short_error",
    ]
    list_display_links = ["fire_at_local"]
    list_filter = [StateFilter, "status", ErrorFilter, "priority"]
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

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        # No filter chosen: show what fires next (a 5 M-row history is not where an operator starts).
        if request.method == "GET" and not request.GET:
            return HttpResponseRedirect(f"{request.path}?state={StateFilter.DEFAULT}")
        return super().changelist_view(request, extra_context)

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        state = request.GET.get("state")
        status = request.GET.get("status__exact")
        if state in ("upcoming", "due", "retrying") or status in ("scheduled", "claimed"):
            return ["next_attempt_at", "id"]  # what fires next first
        if state == "failed" or status in ("failed", "delivered", "cancelled", "skipped"):
            return ["-finished_at", "-id"]  # the latest outcome first
        return ["-fire_at", "-id"]

    @admin.display(description="fire at", ordering="fire_at")
    def fire_at_local(self, occurrence: Occurrence) -> str:
        return _local(occurrence.fire_at)

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt_local(self, occurrence: Occurrence) -> str:
        return _local(occurrence.next_attempt_at) if occurrence.status == OccurrenceStatus.SCHEDULED else ""

    @admin.display(description="delivered", ordering="delivered_at")
    def delivered_local(self, occurrence: Occurrence) -> str:
        return _local(occurrence.delivered_at) if occurrence.delivered_at else ""

    @admin.display(description="state", ordering="status")
    def state(self, occurrence: Occurrence) -> str:
        return occurrence_state(occurrence.status, occurrence.attempts)

    @admin.display(description="lateness")
    def lateness(self, occurrence: Occurrence) -> str:
        """Delivered time minus fire time: how late the scheduler was for this one."""
        if occurrence.delivered_at is None:
            return ""
        return seconds(occurrence.delivered_at - occurrence.fire_at)

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
                fires_after=timezone.now(),
            )
        except ExpressionError as exc:
            field = "timezone" if "time zone" in str(exc) else "expression"
            self.add_error(field, str(exc))
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(AuditedAdmin):
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
class ThrottlePolicyAdmin(AuditedAdmin):
    list_display = ["name", "max_per_second", "burst", "window_seconds", "owner"]
    search_fields = ["name"]
    fields = ["name", "max_per_second", "burst", "window_seconds", "owner"]
    raw_id_fields = ["owner"]


# --- django-celery-beat: superusers only --------------------------------------------------------------
# Its "Periodic tasks" hold the scan kick the project manages itself (reminders/beat.py); operators and
# coaches must not be invited to edit it, so its models are hidden from everyone but superusers.
def _superusers_only(model_admin: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    class SuperusersOnly(model_admin):  # type: ignore[valid-type, misc]
        def has_module_permission(self, request: HttpRequest) -> bool:
            return bool(request.user.is_superuser)

        def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return bool(request.user.is_superuser)

        def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
            return bool(request.user.is_superuser)

        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return bool(request.user.is_superuser)

        def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return bool(request.user.is_superuser)

    SuperusersOnly.__name__ = model_admin.__name__
    return SuperusersOnly


for _model, _model_admin in list(admin.site._registry.items()):
    if _model._meta.app_label == "django_celery_beat":
        admin.site.unregister(_model)
        admin.site.register(_model, _superusers_only(type(_model_admin)))
