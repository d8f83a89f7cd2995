"""Admin for coaches and operators.

Coaches are staff users in the "Coaches" group (`coach_group_ensure`); every queryset and every related
choice is scoped with the same selectors as the API, so a coach sees and picks only their own teams'
trainings and players, and another team's object is "does not exist". Operators (superusers or
`trainings.manage_all_teams`) see everything and edit the rules. Saves go through the services so the
reminders are rescheduled in the admin's own transaction.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

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
    Team,
    Training,
)
from trainings.selectors import (
    players_visible_to,
    teams_visible_to,
    training_timeline,
    trainings_visible_to,
    user_sees_all_teams,
)
from trainings.services import (
    rule_delete,
    rule_reschedule_on_commit,
    training_cancel,
    training_delete,
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


class AnswerInline(_ScopedChoices, admin.TabularInline):
    model = QuestionnaireAnswer
    extra = 0
    fields = ["player", "phase", "answered_at", "answers"]


@admin.register(Training)
class TrainingAdmin(_ScopedChoices, admin.ModelAdmin):
    list_display = ["title", "team", "start", "end", "time_zone", "cancelled"]
    list_filter = ["cancelled", "start"]
    search_fields = ["title", "team__name"]
    date_hierarchy = "start"
    list_select_related = ["team"]
    readonly_fields = ["reminder_timeline"]
    inlines = [InvitationInline, AnswerInline]
    actions = ["cancel_trainings"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Training]:
        return trainings_visible_to(request.user)

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

    @admin.display(description="Reminder timeline")
    def reminder_timeline(self, training: Training) -> SafeString:
        if training.pk is None or training._state.adding:
            return format_html("<p>{}</p>", "Scheduled when the training is saved.")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    entry.fire_at.isoformat(timespec="minutes"),
                    entry.rule,
                    entry.status,
                    entry.outcome or "",
                    "" if entry.recipients is None else entry.recipients,
                    entry.players_reached,
                )
                for entry in training_timeline(training=training)
            ),
        )
        return format_html(
            "<table><thead><tr><th>fire at (UTC)</th><th>rule</th><th>status</th><th>outcome</th>"
            "<th>pending players</th><th>pushes sent</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )


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
    list_display = ["slug", "kind", "offsets", "active", "updated_at"]
    list_filter = ["kind", "active"]
    inlines = [TemplateInline]

    def get_readonly_fields(self, request: HttpRequest, obj: ReminderRule | None = None) -> list[str]:
        return ["slug"] if obj is not None else []

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
    list_display = ["fire_at", "training", "rule", "outcome", "recipients", "attempts", "ran_at"]
    list_filter = ["outcome", "rule"]
    list_select_related = ["training", "rule"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReminderRun]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))


@admin.register(Push)
class PushAdmin(_ReadOnlyAdmin):
    list_display = ["created_at", "player", "kind", "title", "status", "sent_at"]
    list_filter = ["status", "kind"]
    search_fields = ["key", "occurrence_key"]
    list_select_related = ["player"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Push]:
        return super().get_queryset(request).filter(training__in=trainings_visible_to(request.user))


@admin.register(DeliveredPush)
class DeliveredPushAdmin(_ReadOnlyAdmin):
    list_display = ["key", "provider", "delivered_at"]
    search_fields = ["key"]


# Devices: their admin lives with the push code (trainings/push/admin.py).
from trainings.push import admin as _push_admin  # noqa: E402, F401
