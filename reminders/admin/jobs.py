"""Operators' view: search jobs by key, filter occurrences, cancel or retry them, see the last error."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponseRedirect
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy

from common.admin_widgets import pretty_json
from common.history_admin import AuditedAdmin
from common.templatetags.admin_time import seconds
from reminders.admin.labels import job_labels
from reminders.engine.occurrences import occurrences_cancel, occurrences_retry_now
from reminders.models import Job, Occurrence, OccurrenceStatus, ThrottlePolicy
from reminders.ops.figures import occurrence_state
from reminders.schedules.lifecycle import (
    schedules_advance,
)

# The lists (occurrences, trainings) need the page's width to fit 1,400 px without scrolling sideways;
# the app list stays one click away on the index.
admin.site.enable_nav_sidebar = False
# The admin is the product's: its header, the browser tab and the index name Reminders, not Django.
admin.site.site_header = gettext_lazy("Reminders")
admin.site.site_title = gettext_lazy("Reminders")
admin.site.index_title = gettext_lazy("Teams, trainings and the scheduler")


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


class LabelledPage:
    """Puts each listed row's job label on the row, for the whole page at once (one query per describer)."""

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)  # type: ignore[misc]
        page = list(changelist.result_list)
        labels = job_labels(self._job_id(row) for row in page)
        for row in page:
            row.label = labels.get(self._job_id(row), "")
        return changelist

    def _job_id(self, row: Any) -> int:
        return int(row.pk if isinstance(row, Job) else row.job_id)


def _read_only(model_admin: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    """The engine's records are written by the engine (the API and the actions go through its services):
    no Add, no Save, and a POST to a change page is refused (403) rather than quietly applied."""

    def no(self: Any, request: HttpRequest, obj: Any = None) -> bool:
        return False

    model_admin.has_add_permission = no  # type: ignore[method-assign]
    model_admin.has_change_permission = no  # type: ignore[method-assign]
    return model_admin


@admin.register(Job)
@_read_only
class JobAdmin(LabelledPage, AuditedAdmin):
    list_display = ["what", "callback_type", "target", "priority", "version", "owner", "updated_at"]
    list_display_links = ["what"]
    list_filter = ["callback_type", "priority"]
    search_fields = ["key"]
    fieldsets = [
        (None, {"fields": ["what", "key", "callback_type", "target", "priority", "deadline_seconds",
                           "batch_size", "throttle", "version", "owner", "created_at", "updated_at"]}),
        ("Payload (as sent)", {"fields": ["payload_json"], "classes": ["collapse"]}),
    ]  # fmt: skip
    readonly_fields = [
        "what", "key", "callback_type", "target", "priority", "deadline_seconds", "batch_size", "throttle",
        "version", "owner", "created_at", "updated_at", "payload_json",
    ]  # fmt: skip
    inlines = [OccurrenceInline]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        job = self.get_object(request, object_id)
        if job is not None:  # titled in words where the job belongs to something a person knows
            extra_context = {**(extra_context or {}), "subtitle": self.what(job)}
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="job", ordering="key")
    def what(self, job: Job) -> str:
        label = getattr(job, "label", None)
        if label is None:  # a detail page: no list to label
            label = job_labels([job.pk]).get(job.pk, "")
        return label or job.key

    @admin.display(description="payload")
    def payload_json(self, job: Job) -> SafeString:
        return pretty_json(job.payload)


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
@_read_only
class OccurrenceAdmin(LabelledPage, admin.ModelAdmin):
    list_display = [
        "fire_at_local",
        "what",
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
        "what",
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
    # The same, in reading order: what it is, when, what happened; the engine's bookkeeping last.
    fields = ["what", "fire_at", "status", "attempts", "next_attempt_at", "delivered_at", "finished_at",
              "last_error", "priority", "job", "idempotency_key", "job_version", "claimed_until",
              "lease_token", "batch_index", "throttle", "created_at"]  # fmt: skip
    show_full_result_count = False

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        occurrence = self.get_object(request, object_id)
        if occurrence is not None:  # titled in words: what it is for and when it fires
            what = job_labels([occurrence.job_id]).get(occurrence.job_id) or occurrence.job.key
            extra_context = {**(extra_context or {}), "subtitle": f"{what}, {_local(occurrence.fire_at)}"}
        return super().change_view(request, object_id, form_url, extra_context)

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

    @admin.display(description="reminder / job")
    def what(self, occurrence: Occurrence) -> str:
        label = getattr(occurrence, "label", None)
        if label is None:
            label = job_labels([occurrence.job_id]).get(occurrence.job_id, "")
        return label or occurrence.job.key

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
