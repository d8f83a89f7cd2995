"""The training page's forms and inlines: the player list (RSVPs set by hand), the players' answers
(read as fields), and the training's own form (times typed in the training's zone)."""

from __future__ import annotations

from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib import admin
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from common.fields import INSTANT_RANGE_TEXT
from trainings.admin.html import answers_html, local_time
from trainings.admin.people import PlayerSearchInline
from trainings.answers.questionnaires import definition_of
from trainings.models import AnswerSource, Invitation, InvitationStatus, QuestionnaireAnswer, Training
from trainings.planning.offsets import is_time_zone


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
            self.instance.response_source = ""
        elif status and "status" in self.changed_data:
            self.instance.response_source = AnswerSource.ADMIN  # the coach's page says a coach set it
            if "responded_at" not in self.changed_data:
                data["responded_at"] = timezone.now()
        return data


class InvitationInline(PlayerSearchInline, admin.TabularInline):
    model = Invitation
    form = InvitationForm
    extra = 0
    fields = ["player", "status", "responded_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Invitation]:
        return super().get_queryset(request).select_related("player")

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "player" and field is not None:
            # No edit/add/view icons beside every row's box (the player's own page is one click away in
            # the grid's names).
            for flag in ("can_add_related", "can_change_related", "can_view_related", "can_delete_related"):
                setattr(field.widget, flag, False)
        return field


class AnswerInline(admin.TabularInline):
    """Answers are the players' (sent through their links or the app): shown as fields, not edited here."""

    model = QuestionnaireAnswer
    extra = 0
    fields = ["player", "phase", "answered_local", "readable_answers"]
    readonly_fields = fields  # type: ignore[assignment]
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[QuestionnaireAnswer]:
        return super().get_queryset(request).select_related("player", "training")

    @admin.display(description=_("answered at"))
    def answered_local(self, answer: QuestionnaireAnswer) -> str:
        return local_time(answer.answered_at, answer.training.zone)

    @admin.display(description=_("answers"))
    def readable_answers(self, answer: QuestionnaireAnswer) -> SafeString:
        return answers_html(answer.answers, definition_of(answer.training.team_id, answer.phase))


class TrainingForm(ModelForm):
    """Start and end are typed and shown in the training's own zone (the `time_zone` field), whatever the
    zone of the person typing: a coach in Paris types 17:25 for a 17:25 Paris training."""

    class Meta:
        model = Training
        fields = ["team", "title", "start", "end", "time_zone", "location", "cancelled"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("time_zone") and data.get("team") is not None:
            data["time_zone"] = data["team"].time_zone  # left empty on the add form: the team's zone
            self.instance.time_zone = data["time_zone"]
        name = data.get("time_zone")
        if name and is_time_zone(name):
            zone = ZoneInfo(name)
            current = timezone.get_current_timezone()
            for field in ("start", "end"):
                value = data.get(field)
                if value is None:
                    continue
                try:  # parsed in the active zone: read the same wall time in the training's
                    data[field] = timezone.make_aware(timezone.make_naive(value, current), zone)
                    data[field].astimezone(UTC)
                except OverflowError:  # a wall time at the calendar's edge with no instant in that zone
                    del data[field]
                    self.add_error(field, gettext("Must be {range}.").format(range=INSTANT_RANGE_TEXT))
            if data.get("start") and data.get("end") and data["end"] <= data["start"]:
                self.add_error("end", gettext("The training must end after it starts."))
        return data
