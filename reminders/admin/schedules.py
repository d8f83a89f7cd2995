"""Schedules in the admin, as django-celery-beat's admin offers periodic tasks: create one (validated by
the API's own serializer), change, pause, resume, run now, and preview its next fire times in its zone.
Every write goes through reminders.schedules, so it bumps the version and replaces the pending fire point
like an API call."""

from __future__ import annotations

import json
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminSplitDateTime
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from common.admin_widgets import pretty_json, zone_field
from common.history_admin import AuditedAdmin
from common.http.parsers import json_object_unique
from reminders.http.schedule_serializers import EXPRESSION_HELP, ScheduleInputSerializer
from reminders.jobs import OwnershipError
from reminders.models import CallbackType, MisfirePolicy, Schedule
from reminders.schedules.cron import ExpressionError, timeline_for
from reminders.schedules.lifecycle import (
    ScheduleSpec,
    schedule_delete,
    schedule_pause,
    schedule_preview,
    schedule_resume,
    schedule_run_now,
    schedule_update,
    schedule_upsert,
)
from reminders.transports.queue_access import QueueAccess

PREVIEW_COUNT = 10


class ScheduleAdminForm(forms.ModelForm):
    """Changes: validates the expression and zone with the same parser the scheduler uses."""

    timezone = zone_field(initial="UTC", help_text="IANA zone the crontab is read in.")

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


class ScheduleCreateForm(forms.ModelForm):
    """A new schedule: the fields of `POST /api/schedules/`, checked by the API's serializer, so the admin
    accepts exactly what the API accepts and names the same field when it refuses."""

    key = forms.CharField(max_length=190, help_text="Caller-chosen unique key, e.g. nightly-report.")
    expression = forms.CharField(max_length=200, help_text=EXPRESSION_HELP)
    timezone = zone_field(initial="UTC", help_text="IANA zone the crontab is read in.")
    callback_type = forms.ChoiceField(choices=CallbackType.choices, initial=CallbackType.RABBITMQ)
    target = forms.CharField(max_length=2000, help_text="Queue name, URL or handler name.")
    payload = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), initial="{}", help_text="JSON.")
    priority = forms.IntegerField(initial=5, min_value=0, max_value=9)
    batch_size = forms.IntegerField(initial=1, min_value=1)
    misfire_policy = forms.ChoiceField(choices=MisfirePolicy.choices, initial=MisfirePolicy.FIRE_ONCE)
    start_at = forms.SplitDateTimeField(required=False, widget=AdminSplitDateTime)
    end_at = forms.SplitDateTimeField(required=False, widget=AdminSplitDateTime)

    class Meta:
        model = Schedule
        fields: list[str] = []

    _TARGETS = {CallbackType.RABBITMQ: "queue", CallbackType.HTTP: "url", CallbackType.HANDLER: "name"}
    caller: Any = None  # the signed-in operator (ScheduleAdmin.get_form): their queue grants apply here too

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        try:
            payload = json.loads(cleaned.get("payload") or "{}", object_pairs_hook=json_object_unique)
        except ValueError as exc:
            self.add_error("payload", f"not JSON: {exc}")
            return cleaned
        kind = cleaned.get("callback_type", CallbackType.RABBITMQ)
        data = {
            "key": cleaned.get("key"),
            "expression": cleaned.get("expression"),
            "timezone": cleaned.get("timezone"),
            "callback": {"type": kind, "data": {self._TARGETS.get(kind, "target"): cleaned.get("target"),
                                                "payload": payload}},
            "priority": cleaned.get("priority"),
            "batch_size": cleaned.get("batch_size"),
            "misfire_policy": cleaned.get("misfire_policy"),
            "start_at": cleaned["start_at"].isoformat() if cleaned.get("start_at") else None,
            "end_at": cleaned["end_at"].isoformat() if cleaned.get("end_at") else None,
        }  # fmt: skip
        serializer = ScheduleInputSerializer(data=data, context={"queue_access": QueueAccess(self.caller)})
        if not serializer.is_valid():
            for name, errors in serializer.errors.items():
                field = {"callback": "target"}.get(name, name)
                self.add_error(field if field in self.fields else None, f"{name}: {_flat(errors)}")
            return cleaned
        self.validated = dict(serializer.validated_data)
        return cleaned


def _flat(errors: Any) -> str:
    if isinstance(errors, dict):
        return "; ".join(f"{key}: {_flat(value)}" for key, value in errors.items())
    if isinstance(errors, list):
        return " ".join(_flat(e) for e in errors)
    return str(errors)


@admin.register(Schedule)
class ScheduleAdmin(AuditedAdmin):
    list_display = ["key", "expression", "timezone", "state", "next_fire_local", "version_display", "owner"]
    list_filter = ["paused", "misfire_policy", "timezone"]
    search_fields = ["key"]
    list_select_related = ["job", "owner"]
    readonly_fields = ["key", "job_target", "version_display", "next_fire_local", "state", "preview",
                       "payload_json", "created_at", "updated_at"]  # fmt: skip
    actions = ["run_now", "pause", "resume"]

    def get_form(
        self, request: HttpRequest, obj: Schedule | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        kwargs["form"] = ScheduleAdminForm if obj is not None else ScheduleCreateForm
        form = super().get_form(request, obj, change=change, **kwargs)
        form.caller = request.user  # a class made for this request by modelform_factory
        return form

    def get_fieldsets(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        if obj is None:
            return [
                (None, {"fields": ["key", "expression", "timezone", "start_at", "end_at", "misfire_policy"]}),
                (
                    "What it sends",
                    {"fields": ["callback_type", "target", "payload", "priority", "batch_size"]},
                ),
            ]
        return [
            (None, {"fields": ["key", "state", "expression", "timezone", "start_at", "end_at",
                               "misfire_policy", "next_fire_local", "preview"]}),
            ("What it sends", {"fields": ["job_target"]}),
            ("Payload (as sent)", {"fields": ["payload_json"], "classes": ["collapse"]}),
            ("Record", {"fields": ["version_display", "created_at", "updated_at"], "classes": ["collapse"]}),
        ]  # fmt: skip

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        return self.readonly_fields if obj is not None else []

    @admin.display(description="version")
    def version_display(self, schedule: Schedule) -> int:
        return schedule.version

    @admin.display(description="state", ordering="paused")
    def state(self, schedule: Schedule) -> str:
        if schedule.paused:
            return "paused"
        return "active" if schedule.next_fire_at else "ended (no fire time left)"

    @admin.display(description="next fire", ordering="next_fire_at")
    def next_fire_local(self, schedule: Schedule) -> str:
        if schedule.next_fire_at is None:
            return "—"
        shown = timezone.localtime(schedule.next_fire_at, ZoneInfo(schedule.timezone))
        return f"{shown:%a %Y-%m-%d %H:%M:%S} {shown.tzname()}"

    @admin.display(description=f"next {PREVIEW_COUNT} fire times (its zone)")
    def preview(self, schedule: Schedule) -> SafeString:
        try:
            fires = schedule_preview(schedule, count=PREVIEW_COUNT)
        except ExpressionError as exc:
            return format_html("{}", f"cannot compute: {exc}")
        if not fires:
            return format_html("{}", "none: the schedule has ended")
        zone = ZoneInfo(schedule.timezone)
        shown = [timezone.localtime(fire, zone) for fire in fires]
        return format_html(
            '<ol class="schedule-preview">{}</ol>',
            format_html_join("", "<li>{}</li>", ((f"{s:%a %Y-%m-%d %H:%M:%S} {s.tzname()}",) for s in shown)),
        )

    @admin.display(description="sends to")
    def job_target(self, schedule: Schedule) -> str:
        return f"{schedule.job.get_callback_type_display()}: {schedule.job.target}"

    @admin.display(description="payload")
    def payload_json(self, schedule: Schedule) -> SafeString:
        return pretty_json(schedule.job.payload)

    def save_model(self, request: HttpRequest, obj: Schedule, form: forms.ModelForm, change: bool) -> None:
        if not change:
            values = dict(form.validated)  # type: ignore[attr-defined]
            key = values.pop("key")
            try:
                created, _ = schedule_upsert(key=key, spec=ScheduleSpec(**values), owner=request.user)  # type: ignore[arg-type]
            except OwnershipError as exc:
                raise forms.ValidationError(str(exc)) from exc
            obj.pk, obj.key = created.pk, created.key
            return
        current = Schedule.objects.select_related("job", "job__throttle").get(pk=obj.pk)
        schedule_update(
            schedule=current, changes={name: form.cleaned_data[name] for name in form.changed_data}
        )

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        schedule_delete(schedule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_delete(schedule=schedule)

    @admin.action(description="Run selected now (once, beside their timeline)")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        events = sum(schedule_run_now(schedule=s) for s in queryset.select_related("job", "job__throttle"))
        self.message_user(
            request, f"{queryset.count()} schedule(s) run now ({events} event(s) due).", messages.SUCCESS
        )

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
