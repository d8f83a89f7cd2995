"""Admin for operators: reminder rules and their templates, and the read-only record of runs and pushes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import F, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from common.admin_widgets import pretty_json
from common.history_admin import AuditedAdmin
from common.templatetags.admin_time import seconds
from delivery.api import standin_names, standin_words, token_preview
from delivery.models import Device, PushSend, SendStatus
from reminders.api import job_describer_register
from trainings.admin.html import local_time, rule_label
from trainings.admin.offsets_field import OffsetsField
from trainings.models import Push, PushStatus, ReminderRule, ReminderRun, ReminderTemplate, TrainingJob
from trainings.planning import kinds
from trainings.planning.offsets import OffsetError
from trainings.planning.writes import rule_delete, rule_reschedule_on_commit
from trainings.reminding.outcomes import Outcome, push_outcome, push_outcomes, push_sends
from trainings.selectors import trainings_visible_to, user_sees_all_teams


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


class _EngineFieldsForOperators:
    """Idempotency keys and the gateway's raw message are the engine's words: an operator's page shows
    them, a coach's leaves them out (`operator_fields`)."""

    operator_fields: tuple[str, ...] = ()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if user_sees_all_teams(request.user):
            return fieldsets
        kept = []
        for name, options in fieldsets:
            fields = [field for field in options["fields"] if field not in self.operator_fields]
            if fields:
                kept.append((name, {**options, "fields": fields}))
        return kept


class RuleFilter(admin.SimpleListFilter):
    """The rules by the names a coach reads ("Coach's digest before a training"), not their slugs."""

    title = _("rule")
    parameter_name = "rule"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(rule.pk), rule_label(rule)) for rule in ReminderRule.objects.order_by("kind", "slug")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(rule_id=self.value()) if self.value() else queryset


class TemplateInline(_OperatorsOnly, admin.StackedInline):
    model = ReminderTemplate
    extra = 0


@admin.register(ReminderRule)
class ReminderRuleAdmin(_OperatorsOnly, AuditedAdmin):
    list_display = ["slug", "kind", "readable_offsets", "active", "critical_offsets", "escalate",
                    "updated_at"]  # fmt: skip
    list_filter = ["kind", "active"]
    inlines = [TemplateInline]

    def get_readonly_fields(self, request: HttpRequest, obj: ReminderRule | None = None) -> list[str]:
        return ["slug"] if obj is not None else []

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        """Offsets typed like the experiment form's, "90m, 75m, 15m", not as JSON."""
        if db_field.name == "offsets":
            return OffsetsField(
                label="Offsets", help_text='e.g. "90m, 6h, 3d": minutes, hours or days from the training.'
            )
        if db_field.name == "critical_offsets":
            return OffsetsField(
                allow_all=True, required=False, label="Critical offsets",
                help_text="Reminders that players' mute and quiet hours cannot hide: some of the offsets "
                'above ("15m"), "all", or empty for none.',
            )  # fmt: skip
        if db_field.name == "escalate":  # typed like the offsets; the model's help text
            return OffsetsField(required=False, label=_("Escalate"), help_text=db_field.help_text)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description=_("offsets"))
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
    """Records the engine and the gateway write: no Add, no Save; a POST to a change page is a 403."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _training_jobs_described(job_ids: list[int]) -> dict[int, str]:
    """The engine admin's names for training jobs: "Sprint drills · U15 Paris · Invitation"."""
    links = TrainingJob.objects.filter(job_id__in=job_ids).select_related("training__team", "rule")
    return {
        link.job_id: f"{link.training.title} · {link.training.team.name} · {rule_label(link.rule)}"
        for link in links
    }


job_describer_register(_training_jobs_described)


@admin.register(ReminderRun)
class ReminderRunAdmin(_EngineFieldsForOperators, _ReadOnlyAdmin):
    list_display = ["fire_at_local", "training", "team", "rule_name", "outcome", "recipients", "attempts",
                    "lateness"]  # fmt: skip
    list_filter = ["outcome", RuleFilter]
    list_select_related = ["training__team", "rule"]
    operator_fields = ("occurrence_key",)
    ordering = ["-fire_at", "-id"]  # the latest reminders first
    fields = ["training", "rule_name", "fire_at_local", "outcome", "recipients", "attempts", "ran_local",
              "lateness", "occurrence_key"]  # fmt: skip
    readonly_fields = fields  # type: ignore[assignment]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReminderRun]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))

    @admin.display(description=_("team"))
    def team(self, run: ReminderRun) -> str:
        return run.training.team.name if run.training else "—"

    @admin.display(description=_("rule"))
    def rule_name(self, run: ReminderRun) -> str:
        return rule_label(run.rule) if run.rule else "(deleted rule)"

    @admin.display(description=_("fired at"), ordering="fire_at")
    def fire_at_local(self, run: ReminderRun) -> str:
        return local_time(run.fire_at, run.training.zone if run.training else None)

    @admin.display(description=_("ran at"))
    def ran_local(self, run: ReminderRun) -> str:
        return local_time(run.ran_at, run.training.zone if run.training else None)

    @admin.display(description=_("lateness"))
    def lateness(self, run: ReminderRun) -> str:
        """When the last attempt ran, after the instant it was for."""
        return seconds(run.ran_at - run.fire_at)


class PushOutcomeFilter(admin.SimpleListFilter):
    """The publication's status; what the phone side did is the "on the phone" column."""

    title = _("published")
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, str(label)) for value, label in PushStatus.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Push]) -> QuerySet[Push]:
        return queryset.filter(status=self.value()) if self.value() else queryset


@admin.register(Push)
class PushAdmin(_EngineFieldsForOperators, _ReadOnlyAdmin):
    list_display = ["created_local", "player", "training", "kind_label", "title", "on_the_phone"]
    list_filter = [PushOutcomeFilter, "kind", ("training", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["player__name", "training__title", "key", "occurrence_key"]
    list_select_related = ["player", "training", "rule"]
    ordering = ["-created_at", "-id"]
    _main: list[Any] = ["player", "training", "kind_label", "offset", "title", "body", "language",
                        "on_the_phone", "device_sends", "created_local", "sent_local"]  # fmt: skip
    fieldsets = [
        (None, {"fields": _main}),
        (
            "As published (the gateway's message)",
            {"fields": ("message_json", "key"), "classes": ("collapse",)},
        ),
    ]
    readonly_fields = [*_main, "message_json", "key"]
    operator_fields = ("message_json", "key")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Push]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        outcomes = push_outcomes(page)
        for push in page:
            push.outcome = outcomes[push.key]
        return changelist

    def _outcome(self, push: Push) -> Outcome:
        found = getattr(push, "outcome", None)
        if found is None:
            found = push_outcome(push, push_sends([push.key]).get(push.key, []))
            push.outcome = found  # type: ignore[attr-defined]
        return found

    @admin.display(description=_("on the phone"))
    def on_the_phone(self, push: Push) -> SafeString:
        outcome = self._outcome(push)
        return format_html('<span class="outcome outcome-{}">{}</span>', outcome.code, outcome.text)

    @admin.display(description=_("device sends"))
    def device_sends(self, push: Push) -> SafeString:
        sends = self._outcome(push).sends
        if not sends:
            return format_html("{}", "none recorded by the gateway yet")
        zone = push.training.zone
        return format_html(
            '<table class="device-sends"><thead><tr><th>device</th><th>outcome</th><th>attempts</th>'
            "<th>recorded</th><th>error</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        _device_name(s.device) if s.device else f"{s.provider} (no device)",
                        _send_outcome(s),
                        s.attempts,
                        local_time(s.recorded_at, zone),
                        s.error,
                    )
                    for s in sends
                ),
            ),
        )

    @admin.display(description=_("reminder"))
    def kind_label(self, push: Push) -> str:
        return rule_label(push.rule) if push.rule else push.get_kind_display()

    @admin.display(description=_("created"), ordering="created_at")
    def created_local(self, push: Push) -> str:
        return local_time(push.created_at, push.training.zone)

    @admin.display(description=_("published"), ordering="sent_at")
    def sent_local(self, push: Push) -> str:
        return local_time(push.sent_at, push.training.zone) if push.sent_at else "not published"

    @admin.display(description=_("message"))
    def message_json(self, push: Push) -> SafeString:
        return pretty_json(push.message())


def _send_outcome(send: PushSend) -> str:
    """A send's status as people read it: a stand-in's "accepted" is not a phone's, and is said as such."""
    if send.status == SendStatus.ACCEPTED and send.provider in standin_names():
        return f"Accepted: {standin_words(send.provider)}"
    return str(send.get_status_display())


def _device_name(device: Device) -> str:
    return f"{device.get_platform_display()} via {device.provider.upper()} ({token_preview(device.token)})"


class _NamedByPush(_ReadOnlyAdmin):
    """Send and delivery records carry the push's key; their pages show its player and training instead."""

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        pushes = {
            p.key: p
            for p in Push.objects.filter(key__in=[row.push_key_of for row in page]).select_related(
                "player", "training"
            )
        }
        for row in page:
            row.push = pushes.get(row.push_key_of)
        return changelist

    def _push(self, row: Any) -> Push | None:
        if not hasattr(row, "push"):
            row.push = Push.objects.filter(key=row.push_key_of).select_related("player", "training").first()
        return row.push

    @admin.display(description=_("player"))
    def player_name(self, row: Any) -> str:
        push = self._push(row)
        return push.player.name if push else "(push removed)"

    @admin.display(description=_("training"))
    def training_title(self, row: Any) -> str:
        push = self._push(row)
        return (
            f"{push.training.title} ({local_time(push.training.start, push.training.zone)})" if push else "—"
        )


@admin.register(PushSend)
class PushSendAdmin(_NamedByPush):
    list_display = [
        "recorded_at",
        "player_name",
        "training_title",
        "device_name",
        "outcome",
        "attempts",
        "error",
    ]
    list_filter = ["status", "provider"]
    list_select_related = ["device"]
    search_fields = ["push_key"]
    ordering = ["-recorded_at", "-id"]
    fields = ["player_name", "training_title", "device_name", "outcome", "attempts", "recorded_at", "error",
              "provider_message_id", "push_key"]  # fmt: skip
    readonly_fields = fields  # type: ignore[assignment]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PushSend]:
        visible = Push.objects.filter(training__in=trainings_visible_to(request.user)).values("key")
        # Joined here for the change page too: a send may name a device deleted while its push was in flight
        # (no database constraint), which the join reads as none.
        sends = super().get_queryset(request).filter(push_key__in=visible).select_related("device")
        return sends.annotate(push_key_of=F("push_key"))

    @admin.display(description=_("device"))
    def device_name(self, send: PushSend) -> str:
        return _device_name(send.device) if send.device else f"{send.provider} (no device)"

    @admin.display(description=_("outcome"), ordering="status")
    def outcome(self, send: PushSend) -> str:
        return _send_outcome(send)
