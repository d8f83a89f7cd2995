"""Admin for coaches and operators.

Coaches are staff users in the "Coaches" group (`coach_group_ensure`); every queryset and every related
choice is scoped with the same selectors as the API, so a coach sees and picks only their own teams'
trainings and players, and another team's object is "does not exist". Operators (superusers or
`trainings.manage_all_teams`) see everything and edit the rules. Saves go through the services so the
reminders are rescheduled in the admin's own transaction.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from reminders.status import occurrence_state
from reminders.templatetags.admin_time import seconds
from trainings.models import (
    DeliveredPush,
    Invitation,
    InvitationStatus,
    Membership,
    Player,
    Push,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    ReminderTemplate,
    RuleKind,
    RunOutcome,
    Team,
    Training,
)
from trainings.offsets import OffsetError, is_time_zone
from trainings.selectors import (
    players_visible_to,
    reminder_recipients,
    teams_visible_to,
    timeline_reached,
    training_player_grid,
    training_timeline,
    trainings_next_reminder,
    trainings_visible_to,
    trainings_with_counts,
    user_sees_all_teams,
)
from trainings.services import (
    rule_delete,
    rule_reschedule_on_commit,
    training_cancel,
    training_copy,
    training_delete,
    training_remind_now,
    training_reminders_schedule,
)


class _ScopedChoices:
    """Limit team and player dropdowns to the user's teams."""

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "team":
            kwargs["queryset"] = teams_visible_to(request.user)
        elif db_field.name == "player":
            kwargs["queryset"] = players_visible_to(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class MembershipInline(_ScopedChoices, admin.TabularInline):
    model = Membership
    extra = 0
    fields = ["player", "active", "joined_at"]
    readonly_fields = ["joined_at"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "time_zone"]
    search_fields = ["name"]
    filter_horizontal = ["coaches"]
    inlines = [MembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return teams_visible_to(request.user)

    def get_readonly_fields(self, request: HttpRequest, obj: Team | None = None) -> list[str]:
        return [] if user_sees_all_teams(request.user) else ["coaches"]


class PlayerAddForm(ModelForm):
    """A new player joins a team in the same save: a coach sees players only through their teams."""

    team = forms.ModelChoiceField(
        queryset=Team.objects.none(), help_text="The team the new player joins (its active member)."
    )

    class Meta:
        model = Player
        fields = ["name", "user", "time_zone", "language", "device_tokens"]


@admin.register(Player)
class PlayerAdmin(admin.ModelAdmin):
    list_display = ["name", "language", "time_zone"]
    search_fields = ["name"]
    raw_id_fields = ["user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Player]:
        return players_visible_to(request.user)

    def get_form(
        self, request: HttpRequest, obj: Player | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            return super().get_form(request, obj, change=change, **kwargs)
        base = super().get_form(request, obj, change=change, form=PlayerAddForm, **kwargs)
        teams = teams_visible_to(request.user)
        required = not user_sees_all_teams(request.user)  # operators may add a player to no team yet

        class ScopedPlayerAddForm(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **form_kwargs: Any) -> None:
                super().__init__(*args, **form_kwargs)
                self.fields["team"].queryset = teams
                self.fields["team"].required = required

        return ScopedPlayerAddForm

    def save_model(self, request: HttpRequest, obj: Player, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        team = None if change else form.cleaned_data.get("team")
        if team is not None:
            Membership.objects.create(team=team, player=obj)


class InvitationForm(ModelForm):
    """An RSVP set by hand is stamped like one the player sent: `responded_at` is when it was given."""

    class Meta:
        model = Invitation
        fields = ["player", "status", "responded_at"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        status = data.get("status")
        if status == InvitationStatus.PENDING:
            data["responded_at"] = None  # no answer, so no time of answer
        elif status and "status" in self.changed_data and "responded_at" not in self.changed_data:
            data["responded_at"] = timezone.now()
        return data


class InvitationInline(_ScopedChoices, admin.TabularInline):
    model = Invitation
    form = InvitationForm
    extra = 0
    fields = ["player", "status", "responded_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Invitation]:
        return super().get_queryset(request).select_related("player")


class AnswerInline(_ScopedChoices, admin.TabularInline):
    model = QuestionnaireAnswer
    extra = 0
    fields = ["player", "phase", "answered_at", "answers"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[QuestionnaireAnswer]:
        return super().get_queryset(request).select_related("player")


def _local(instant: datetime | None, zone: ZoneInfo | None = None) -> str:
    """An instant as a person reads it: local wall time to the second, with the zone's abbreviation."""
    if instant is None:
        return "—"
    shown = timezone.localtime(instant, zone)
    return f"{shown:%a %Y-%m-%d %H:%M:%S} {shown.tzname()}"


def _local_html(instant: datetime | None, zone: ZoneInfo) -> SafeString:
    """The same for a narrow list column: the date above the time."""
    if instant is None:
        return format_html("{}", "—")
    shown = timezone.localtime(instant, zone)
    return format_html("{}<br>{} {}", f"{shown:%a %Y-%m-%d}", f"{shown:%H:%M:%S}", shown.tzname())


class TrainingForm(ModelForm):
    """Start and end are typed and shown in the training's own zone (the `time_zone` field), whatever the
    zone of the person typing: a coach in Paris types 17:25 for a 17:25 Paris training."""

    class Meta:
        model = Training
        fields = ["team", "title", "start", "end", "time_zone", "location", "cancelled"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("time_zone")
        if name and is_time_zone(name):
            zone = ZoneInfo(name)
            current = timezone.get_current_timezone()
            for field in ("start", "end"):
                value = data.get(field)
                if value is not None:  # parsed in the active zone: read the same wall time in the training's
                    data[field] = timezone.make_aware(timezone.make_naive(value, current), zone)
            if data.get("start") and data.get("end") and data["end"] <= data["start"]:
                self.add_error("end", "The training must end after it starts.")
        return data


@admin.register(Training)
class TrainingAdmin(_ScopedChoices, admin.ModelAdmin):
    form = TrainingForm
    list_display = [
        "title",
        "team",
        "local_start",
        "next_reminder",
        "invitations",
        "pre_questionnaire",
        "post_questionnaire",
        "cancelled",
    ]
    list_filter = ["cancelled", "start"]
    search_fields = ["title", "team__name"]
    date_hierarchy = "start"
    list_select_related = ["team"]
    readonly_fields = ["player_grid", "reminder_timeline"]
    inlines = [InvitationInline, AnswerInline]
    actions = ["cancel_trainings", "copy_to_next_week"]
    change_form_template = "admin/trainings/training/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Training]:
        queryset = trainings_visible_to(request.user)
        if request.resolver_match and request.resolver_match.url_name == "trainings_training_changelist":
            queryset = trainings_with_counts(queryset)
        return queryset

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        upcoming = trainings_next_reminder(page)
        for training in page:
            training.next_reminder_at = upcoming.get(training.pk)
        return changelist

    def get_fieldsets(self, request: HttpRequest, obj: Training | None = None) -> Any:
        main = ["team", "title", "start", "end", "time_zone", "location", "cancelled"]
        if obj is None:
            return [(None, {"fields": main})]
        return [
            (None, {"fields": main}),
            ("Players", {"fields": ["player_grid"]}),
            ("Reminders", {"fields": ["reminder_timeline"]}),
        ]

    def get_form(
        self, request: HttpRequest, obj: Training | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        where = (
            f"{obj.time_zone}, {timezone.localtime(obj.start, obj.zone).tzname()}"
            if obj
            else "the zone below"
        )
        for name in ("start", "end"):
            form.base_fields[name].help_text = f"Local time in the training's zone ({where})."
        return form

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: Any = None,
    ) -> Any:
        # The form shows and parses times in the training's zone (the add form: in the person's own zone,
        # then re-read in the chosen zone by TrainingForm.clean).
        training = self.get_object(request, object_id) if object_id else None
        if training is None:
            return super().changeform_view(request, object_id, form_url, extra_context)
        with timezone.override(training.zone):
            extra = {
                **(extra_context or {}),
                "remind_rules": self._remind_choices(training),
                "click": uuid.uuid4().hex,
            }
            response = super().changeform_view(request, object_id, form_url, extra)
            if hasattr(response, "render"):
                response.render()  # render while the training's zone is active
        return response

    def _remind_choices(self, training: Training) -> list[tuple[int, str, int]]:
        rules = ReminderRule.objects.filter(active=True).order_by("kind", "slug")
        return [
            (
                rule.pk,
                f"{rule.slug} ({rule.get_kind_display().split(' (')[0].lower()})",
                reminder_recipients(training=training, rule=rule).count(),
            )
            for rule in rules
        ]

    def get_urls(self) -> list[Any]:
        extra = [
            path(
                "<path:object_id>/remind/",
                self.admin_site.admin_view(self.remind_view),
                name="trainings_training_remind",
            ),
            path(
                "<path:object_id>/copy/",
                self.admin_site.admin_view(self.copy_view),
                name="trainings_training_copy",
            ),
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(self.cancel_view),
                name="trainings_training_cancel",
            ),
        ]
        return extra + super().get_urls()

    def _training_for_action(self, request: HttpRequest, object_id: str) -> Training | None:
        """The coach's own training for a POST; None (answered like the admin: "does not exist") else."""
        if request.method != "POST":
            raise PermissionDenied("POST only")
        training = self.get_object(request, object_id)
        if training is not None and not self.has_change_permission(request, training):
            raise PermissionDenied("you may not change this training")
        return training

    def _missing(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]

    def remind_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        training = self._training_for_action(request, object_id)
        if training is None:
            return self._missing(request, object_id)
        click = request.POST.get("click", "")
        rule = ReminderRule.objects.filter(pk=request.POST.get("rule") or 0, active=True).first()
        if rule is None or not click.isalnum() or len(click) > 64:
            self.message_user(request, "Choose a reminder rule to send.", messages.ERROR)
        else:
            result = training_remind_now(training=training, rule=rule, click=click)
            if result.error:
                self.message_user(request, f"Pushes not all published: {result.error}", messages.ERROR)
            else:
                self.message_user(
                    request,
                    f"{result.published} push(es) sent to the {result.recipients} pending player(s).",
                    messages.SUCCESS,
                )
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[training.pk]))

    def copy_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        training = self._training_for_action(request, object_id)
        if training is None:
            return self._missing(request, object_id)
        copy = training_copy(training=training)
        self.message_user(request, f"Copied to {_local(copy.start, copy.zone)}.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[copy.pk]))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        found = self._training_for_action(request, object_id)
        if found is None:
            return self._missing(request, object_id)
        training = training_cancel(training=found)
        self.message_user(
            request, "Training cancelled; its pending reminders are cancelled.", messages.SUCCESS
        )
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[training.pk]))

    def save_model(self, request: HttpRequest, obj: Training, form: ModelForm, change: bool) -> None:
        if change:
            # Lock first: a concurrent rule rescan must not schedule from the old times after us.
            Training.objects.select_for_update().filter(pk=obj.pk).first()
        obj.save()

    def save_related(self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool) -> None:
        # Inlines (the player list) are saved by now; the admin view's transaction is still open.
        super().save_related(request, form, formsets, change)
        training_reminders_schedule(training=form.instance)

    def delete_model(self, request: HttpRequest, obj: Training) -> None:
        training_delete(training=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        for training in queryset:
            training_delete(training=training)

    @admin.action(description="Cancel selected trainings (and their pending reminders)")
    def cancel_trainings(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        for training in queryset:
            training_cancel(training=training)
        self.message_user(request, f"{queryset.count()} training(s) cancelled.", messages.SUCCESS)

    @admin.action(description="Copy selected trainings to next week (same local time)")
    def copy_to_next_week(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        copies = [training_copy(training=training) for training in queryset]
        self.message_user(request, f"{len(copies)} training(s) copied to next week.", messages.SUCCESS)

    @admin.display(description="start (local)", ordering="start")
    def local_start(self, training: Training) -> SafeString:
        return format_html(
            '{} <span class="zone">{}</span>', _local_html(training.start, training.zone), training.time_zone
        )

    @admin.display(description="next reminder (local)")
    def next_reminder(self, training: Training) -> SafeString:
        return _local_html(getattr(training, "next_reminder_at", None), training.zone)

    @admin.display(description="invitations ✓ / ✗ / ?")
    def invitations(self, training: Training) -> SafeString:
        return format_html(
            '<span title="accepted">{} ✓</span> / <span title="declined">{} ✗</span> / '
            '<span title="pending" class="pending">{} pending</span>',
            getattr(training, "n_accepted", 0),
            getattr(training, "n_declined", 0),
            getattr(training, "n_pending", 0),
        )

    @admin.display(description="pre answered / owed")
    def pre_questionnaire(self, training: Training) -> str:
        return f"{getattr(training, 'n_pre_answered', 0)} / {getattr(training, 'n_pre_owed', 0)}"

    @admin.display(description="post answered / owed")
    def post_questionnaire(self, training: Training) -> str:
        return f"{getattr(training, 'n_post_answered', 0)} / {getattr(training, 'n_post_owed', 0)}"

    @admin.display(description="Player grid")
    def player_grid(self, training: Training) -> SafeString:
        if training.pk is None or training._state.adding:
            return format_html("<p>{}</p>", "Shown once the training is saved.")
        zone = training.zone

        def answered(at: datetime | None, declined: bool) -> SafeString:
            if at is not None:
                return format_html('<span class="grid-ok">✓ {}</span>', _local(at, zone))
            return (
                format_html("<span>{}</span>", "—")
                if declined
                else format_html('<span class="grid-owed">{}</span>', "owed")
            )

        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    row.player,
                    f"{row.invitation} ({_local(row.responded_at, zone)})"
                    if row.responded_at
                    else row.invitation,
                    answered(row.pre_answered_at, row.declined),
                    answered(row.post_answered_at, row.declined),
                    row.reminders_received,
                    f"{row.last_push}, {_local(row.last_push_at, zone)}" if row.last_push else "—",
                )
                for row in training_player_grid(training=training)
            ),
        )
        return format_html(
            '<table class="player-grid"><thead><tr><th>player</th><th>invitation</th>'
            "<th>pre questionnaire</th><th>post questionnaire</th><th>reminders received</th>"
            "<th>last push</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="Reminder timeline")
    def reminder_timeline(self, training: Training) -> SafeString:
        if training.pk is None or training._state.adding:
            return format_html("<p>{}</p>", "Scheduled when the training is saved.")
        entries = training_timeline(training=training)
        reached = timeline_reached(training=training, occurrence_keys=[e.occurrence_key for e in entries])
        zone = training.zone
        by_rule: dict[str, list[Any]] = {}
        for entry in entries:
            by_rule.setdefault(entry.rule, []).append(entry)
        if not by_rule:
            return format_html("<p>{}</p>", "No reminders (cancelled, or every instant is past).")
        sections = format_html_join(
            "",
            '<div class="timeline-rule"><h3>{}</h3><table><thead><tr><th>fires at ({})</th><th>status</th>'
            "<th>outcome</th><th>reached</th></tr></thead><tbody>{}</tbody></table></div>",
            (
                (
                    rule,
                    training.time_zone,
                    format_html_join(
                        "",
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        (
                            (
                                _local(e.fire_at, zone),
                                occurrence_state(e.status, e.attempts),
                                RunOutcome(e.outcome).label if e.outcome else "",
                                ", ".join(reached.get(e.occurrence_key, [])) or "—",
                            )
                            for e in rule_entries
                        ),
                    ),
                )
                for rule, rule_entries in by_rule.items()
            ),
        )
        return sections


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
class ReminderRuleAdmin(_OperatorsOnly, admin.ModelAdmin):
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
        anchor = "after the end" if rule.kind == RuleKind.POST else "before the start"
        return f"{', '.join(offset.human() for offset in reversed(offsets))} {anchor}"

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
        return _local(run.fire_at)

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
        return _local(push.created_at)

    @admin.display(description="sent", ordering="sent_at")
    def sent_local(self, push: Push) -> str:
        return _local(push.sent_at) if push.sent_at else ""


@admin.register(DeliveredPush)
class DeliveredPushAdmin(_ReadOnlyAdmin):
    list_display = ["key", "provider", "delivered_at"]
    search_fields = ["key"]


# Devices: their admin lives with the push code (trainings/push/admin.py).
from trainings.push import admin as _push_admin  # noqa: E402, F401
