"""A team's questionnaires in the admin: per phase, its questions in order (a built-in one, or the coach's
own), scoped like teams: a coach edits only their teams' questionnaires. A new one starts from the
built-in questions of its phase (`?phase=POST` on the add page), which a team without one asks."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from trainings.answers.presets import DEFAULTS, PRESETS
from trainings.models import Question, Questionnaire, fresh_revision
from trainings.selectors import teams_visible_to

# A questionnaire asks something: one without questions could not be answered.
NEEDS_A_QUESTION = _("A questionnaire asks at least one question: add one, or delete the questionnaire.")

_WIDTHS = {"position": 3, "key": 8, "text": 18, "minimum": 4, "maximum": 4, "minimum_label": 9,
           "maximum_label": 9}  # fmt: skip


class QuestionInline(admin.TabularInline):
    model = Question
    fields = ["position", "key", "preset", "text", "type", "minimum", "maximum", "minimum_label",
              "maximum_label", "required"]  # fmt: skip

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        width = _WIDTHS.get(db_field.name)
        if field is not None and width:  # one row a question, within a laptop's window
            field.widget.attrs["style"] = f"width: {width}em"
        return field

    def get_extra(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> int:
        return 1 if obj is not None else len(_built_in_rows(request)) + 1  # and a row for their own

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        rows = _built_in_rows(request) if obj is None and request.method == "GET" else []

        class AtLeastOneQuestion(formset):  # type: ignore[misc,valid-type]
            """A new one starts from the built-in questions (to change); none may be left without any."""

            def __init__(self, *args: Any, **kw: Any) -> None:
                if rows:
                    kw.setdefault("initial", rows)
                super().__init__(*args, **kw)

            def clean(self) -> None:
                super().clean()
                kept = [f for f in self.forms if f.has_changed() or f.instance.pk]
                kept = [f for f in kept if not (self.can_delete and self._should_delete_form(f))]
                if not any(self.errors) and not kept:
                    raise ValidationError(NEEDS_A_QUESTION)

        return AtLeastOneQuestion


def _built_in_rows(request: HttpRequest) -> list[dict[str, Any]]:
    phase = request.GET.get("phase", "PRE")
    keys = DEFAULTS.get(phase, ())
    return [{"position": i, "key": key, "preset": key, "type": PRESETS[key].type,
             "required": PRESETS[key].required} for i, key in enumerate(keys, 1)]  # fmt: skip


@admin.register(Questionnaire)
class QuestionnaireAdmin(admin.ModelAdmin):
    list_display = ["team", "phase", "questions_count"]
    list_filter = ["phase"]
    inlines = [QuestionInline]
    fields = ["team", "phase"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Questionnaire]:
        queryset = super().get_queryset(request).filter(team__in=teams_visible_to(request.user))
        return queryset.select_related("team").annotate(questions_count=Count("questions"))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "team":
            kwargs["queryset"] = teams_visible_to(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "team" and field is not None:  # the team is chosen here, not edited
            for flag in ("can_add_related", "can_change_related", "can_view_related", "can_delete_related"):
                setattr(field.widget, flag, False)
        return field

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"phase": request.GET.get("phase", "PRE"), **super().get_changeform_initial_data(request)}

    @admin.display(description=_("questions"), ordering="questions_count")
    def questions_count(self, questionnaire: Questionnaire) -> int:
        return getattr(questionnaire, "questions_count", 0)

    def save_model(self, request: HttpRequest, obj: Questionnaire, form: Any, change: bool) -> None:
        obj.revision = fresh_revision()  # its team or phase may have changed: no process's guess holds
        super().save_model(request, obj, form, change)
