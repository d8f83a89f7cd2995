"""Admin for coaches and operators.

Coaches are staff users in the "Coaches" group (`coach_group_ensure`); every queryset and every related
choice is scoped with the same selectors as the API, so a coach sees and picks only their own teams'
trainings and players, and another team's object is "does not exist". Operators (superusers or
`trainings.manage_all_teams`) see everything and edit the rules. Saves go through the services so the
reminders are rescheduled in the admin's own transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

import trainings.admin.coaches as _admin_coaches  # noqa: F401  (registers the coaches' admin)
import trainings.admin.guardians as _admin_guardians  # noqa: F401  (registers the guardians' admin)
import trainings.admin.operators as _admin_operators  # noqa: F401  (registers the operators' admins)
from common.admin_widgets import zone_field
from common.history_admin import AuditedAdmin
from trainings.admin.answer_form import answer_page
from trainings.admin.forms import AnswerInline, InvitationInline, TrainingForm
from trainings.admin.html import (
    answered_owed_html,
    invitations_html,
    local_html,
    local_time,
    player_grid_html,
    reminder_timeline_html,
    rule_label,
)
from trainings.admin.people import ScopedChoices
from trainings.models import (
    ReminderRule,
    Training,
)
from trainings.planning import kinds
from trainings.planning.scheduling import training_reminders_schedule
from trainings.planning.windows import open_kind, open_until, window_state
from trainings.planning.writes import (
    training_cancel,
    training_copy,
    training_delete,
    training_lock,
    training_members_invite,
)
from trainings.reminding.notices import CANCELLED_TOLD, training_cancelled_notice_schedule
from trainings.reminding.recipients import reminder_recipients
from trainings.reminding.remind_now import training_remind_now
from trainings.selectors import (
    answered_owed,
    teams_visible_to,
    trainings_next_reminder,
    trainings_visible_to,
    trainings_with_counts,
)


def _players_rules() -> QuerySet[ReminderRule]:
    """The active rules a coach may fire now for a training: the players' (a coach's digest is not theirs
    to push to players)."""
    return ReminderRule.objects.filter(active=True, kind__in=[kind.code for kind in kinds.rule_kinds()])


@admin.register(Training)
class TrainingAdmin(ScopedChoices, AuditedAdmin):
    form = TrainingForm
    list_display = [
        "title",
        "team",
        "local_start",
        "next_reminder",
        "invitations",
        "state",
    ]  # and before "state", a column per questionnaire kind (`get_list_display`)
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

    def history_visible_when_deleted(self, request: HttpRequest, last_state: Training) -> bool:  # type: ignore[override]
        """A deleted training's history is its team's coaches' (and operators'), as it was when it lived."""
        return teams_visible_to(request.user).filter(pk=last_state.team_id).exists()

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        upcoming = trainings_next_reminder(page)
        rules = list(ReminderRule.objects.filter(active=True))
        for training in page:
            training.next_reminder_at = upcoming.get(training.pk)
            training.active_rules = rules
        return changelist

    def get_fieldsets(self, request: HttpRequest, obj: Training | None = None) -> Any:
        main = ["team", "title", "start", "end", "time_zone", "location", "cancelled"]
        if obj is None:
            return [(None, {"fields": main})]
        return [
            (None, {"fields": main}),
            (_("Players"), {"fields": ["player_grid"]}),
            (pgettext_lazy("training page", "Reminders"), {"fields": ["reminder_timeline"]}),
        ]

    def get_form(
        self, request: HttpRequest, obj: Training | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        where = f"{obj.time_zone}, {timezone.localtime(obj.start, obj.zone).tzname()}" if obj else None
        for name in ("start", "end"):
            form.base_fields[name].help_text = gettext("Local time in the training's zone ({zone}).").format(
                zone=where or gettext("the zone below")
            )
        form.base_fields["time_zone"] = zone_field(
            blank=None if obj else gettext("The team's zone"),
            required=obj is not None,
            label=gettext("Time zone"),
            help_text=gettext("Where the training takes place; its times are typed and shown in this zone."),
        )
        if obj is None:
            teams = list(teams_visible_to(request.user)[:2])
            if len(teams) == 1:  # a coach of one team: it is that team's training
                form.base_fields["team"].initial = teams[0].pk
            form.base_fields["team"].help_text = gettext(
                "Its active players are invited unless you list players below, as through the API."
            )
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
        if not training.invitations.exists():
            self.message_user(
                request,
                gettext("Nobody is invited: its reminders reach no one. Add players below."),
                messages.WARNING,
            )
        with timezone.override(training.zone):
            extra = {
                **(extra_context or {}),
                "remind_rules": self._remind_choices(training),
                "click": uuid.uuid4().hex,
            }
            try:
                response = super().changeform_view(request, object_id, form_url, extra)
            except Training.DoesNotExist:  # deleted while the form was saved (save_model's lock)
                return self._missing(request, str(object_id))
            if hasattr(response, "render"):
                response.render()  # render while the training's zone is active
        return response

    def _remind_choices(self, training: Training) -> list[tuple[int, str, int, bool]]:
        """(rule, label, pending players, preselected): the open phase's rule first and selected."""
        rules = list(_players_rules().order_by("kind", "slug"))
        kind = open_kind(training, rules, timezone.now())
        choices = [
            (
                rule.pk,
                rule_label(rule),
                reminder_recipients(training=training, rule=rule).count(),
                rule.kind == kind,
            )
            for rule in rules
        ]
        return sorted(choices, key=lambda c: not c[3])

    def get_urls(self) -> list[Any]:
        """The training page's own actions (the answer form: trainings/admin/answer_form.py)."""
        views = {"remind": self.remind_view, "copy": self.copy_view, "answer": self.answer_view,
                 "cancel": self.cancel_view}  # fmt: skip
        extra = [path(f"<path:object_id>/{name}/", self.admin_site.admin_view(view),
                      name=f"trainings_training_{name}") for name, view in views.items()]  # fmt: skip
        return extra + super().get_urls()

    answer_view = answer_page

    def _training_for_action(self, request: HttpRequest, object_id: str) -> Training | None:
        """The coach's own training for a POST; None (answered like the admin: "does not exist") else."""
        if request.method != "POST":
            raise PermissionDenied("POST only")
        training = self.get_object(request, object_id)
        if training is not None and not self.has_change_permission(request, training):
            raise PermissionDenied("you may not change this training")
        return training

    def _missing(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)

    def remind_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        training = self._training_for_action(request, object_id)
        if training is None:
            return self._missing(request, object_id)
        click = request.POST.get("click", "")
        rule = _players_rules().filter(pk=request.POST.get("rule") or 0).first()
        if rule is None or not click.isalnum() or len(click) > 64:
            self.message_user(request, gettext("Choose a reminder rule to send."), messages.ERROR)
        else:
            result = training_remind_now(training=training, rule=rule, click=click)
            left_out = gettext("{n} player(s) reminded of it less than a minute ago were left out.")
            again = " " + left_out.format(n=result.already) if result.already else ""
            if result.error:
                self.message_user(
                    request,
                    gettext("Pushes not all queued: {error}").format(error=result.error),
                    messages.ERROR,
                )
            elif result.recipients:
                names = ", ".join(result.names[:5]) + (", …" if len(result.names) > 5 else "")
                self.message_user(
                    request,
                    gettext(
                        "{rule}: queued for {n} player(s) ({names}). The player grid shows whether it "
                        "reached their phones."
                    ).format(rule=rule_label(rule), n=result.recipients, names=names)
                    + again,
                    messages.SUCCESS,
                )
            else:
                text = gettext("Nobody to remind of {rule}.").format(rule=rule_label(rule))
                self.message_user(request, text + again, messages.INFO)
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[training.pk]))

    def copy_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        training = self._training_for_action(request, object_id)
        if training is None:
            return self._missing(request, object_id)
        copy = training_copy(training=training)
        self.message_user(
            request,
            gettext("Copied to {start}.").format(start=local_time(copy.start, copy.zone)),
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[copy.pk]))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        found = self._training_for_action(request, object_id)
        if found is None:
            return self._missing(request, object_id)
        try:
            training = training_cancel(training=found)
        except Training.DoesNotExist:  # deleted meanwhile
            return self._missing(request, object_id)
        self.message_user(request, str(CANCELLED_TOLD), messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[training.pk]))

    def save_model(self, request: HttpRequest, obj: Training, form: ModelForm, change: bool) -> None:
        if change:
            # Lock first (the one lock order, trainings.planning.writes.training_lock): a concurrent rule
            # rescan must not schedule from the old times after us. Deleted meanwhile: DoesNotExist, which
            # changeform_view answers as "does not exist" instead of saving the row back to life.
            before = training_lock(training_id=obj.pk)
            if obj.cancelled and not before.cancelled:  # the box ticked: as the Cancel button does
                training_cancelled_notice_schedule(training=obj)
        obj.save()

    def save_related(self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool) -> None:
        # Inlines (the player list) are saved by now; the admin view's transaction is still open.
        super().save_related(request, form, formsets, change)
        if not change:  # no player listed: the team's active players, as the API does
            training_members_invite(training=form.instance)
        training_reminders_schedule(training=form.instance, new=not change)  # new: its invitation at creation

    def delete_model(self, request: HttpRequest, obj: Training) -> None:
        with suppress(Training.DoesNotExist):  # someone else deleted it first: what was asked is done
            training_delete(training=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        for training in queryset.order_by("pk"):  # the lock order of several trainings
            with suppress(Training.DoesNotExist):
                training_delete(training=training)

    @admin.action(description=_("Cancel selected trainings (and their pending reminders)"))
    def cancel_trainings(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        for training in queryset.order_by("pk"):  # the lock order of several trainings
            with suppress(Training.DoesNotExist):
                training_cancel(training=training)
        self.message_user(
            request, gettext("{n} training(s) cancelled.").format(n=queryset.count()), messages.SUCCESS
        )

    @admin.action(description=_("Copy selected trainings to next week (same local time)"))
    def copy_to_next_week(self, request: HttpRequest, queryset: QuerySet[Training]) -> None:
        copies = [training_copy(training=training) for training in queryset]
        self.message_user(
            request, gettext("{n} training(s) copied to next week.").format(n=len(copies)), messages.SUCCESS
        )

    @admin.display(description=_("start (local)"), ordering="start")
    def local_start(self, training: Training) -> SafeString:
        return format_html(
            '{} <span class="zone">{}</span>', local_html(training.start, training.zone), training.time_zone
        )

    @admin.display(description=_("next reminder (local)"))
    def next_reminder(self, training: Training) -> SafeString:
        return local_html(getattr(training, "next_reminder_at", None), training.zone)

    @admin.display(description=_("invitations ✓ / ✗ / ?"))
    def invitations(self, training: Training) -> SafeString:
        counts = (getattr(training, f"n_{name}", 0) for name in ("accepted", "declined", "pending"))
        return invitations_html(*counts)

    def _window(self, training: Training, kind: str) -> str:
        rules = getattr(training, "active_rules", None)
        if rules is None:  # a detail page (a list page reads them once for all its rows)
            rules = list(ReminderRule.objects.filter(active=True))
            training.active_rules = rules  # type: ignore[attr-defined]
        return window_state(training, kind, rules, timezone.now())

    def _answered_owed(self, training: Training, kind: str, answered: int, owed: int) -> SafeString:
        """Owed only while the questionnaire is open: "not yet" before, "missed" after, none if cancelled."""
        return answered_owed_html(
            answered, owed, None if training.cancelled else self._window(training, kind)
        )

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        """The list's columns, with answered and owed for each questionnaire kind of the kinds table."""
        columns: list[Any] = list(super().get_list_display(request))
        at = columns.index("state")
        columns[at:at] = [self._answers_column(kind) for kind in kinds.questionnaire_kinds()]
        return columns

    def _answers_column(self, kind: kinds.Kind) -> Callable[[Training], SafeString]:
        @admin.display(description=gettext("{kind} answers").format(kind=kind.short))
        def column(training: Training) -> SafeString:
            return self._answered_owed(training, kind.code, *answered_owed(training, kind))

        column.__name__ = f"{kind.short.replace(' ', '_')}_questionnaire"  # the column's CSS class
        return column

    @admin.display(description=_("status"), ordering="cancelled")
    def state(self, training: Training) -> SafeString:
        now = timezone.now()
        if training.cancelled:
            return format_html('<span class="state-cancelled">{}</span>', gettext("Cancelled"))
        if now < training.start:
            return format_html("{}", gettext("Upcoming"))
        if now < training.end:
            return format_html("{}", gettext("In progress"))
        rules = getattr(training, "active_rules", None)
        rules = list(ReminderRule.objects.filter(active=True)) if rules is None else rules
        until = open_until(training, rules, now)
        if until is None:
            return format_html("{}", gettext("Done"))
        # Ended, but players are still asked and answers still count as owed: not "Done" yet.
        return format_html(
            "{} {}", gettext("Ended; questionnaire open until"), local_html(until, training.zone)
        )

    @admin.display(description=_("Player grid"))
    def player_grid(self, training: Training) -> SafeString:
        return player_grid_html(
            training, {kind.code: self._window(training, kind.code) for kind in kinds.questionnaire_kinds()}
        )

    @admin.display(description=_("Reminder timeline"))
    def reminder_timeline(self, training: Training) -> SafeString:
        return reminder_timeline_html(training)
