"""A team's questionnaires in the admin: per phase, its questions in order (a built-in one, or the coach's
own), scoped like teams: a coach edits only their teams' questionnaires. A new one starts from the
built-in questions of its phase (`?phase=POST` on the add page), which a team without one asks."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from trainings.answers.presets import DEFAULTS, PRESETS
from trainings.models import Question, Questionnaire, fresh_revision
from trainings.selectors import teams_visible_to


class QuestionInline(admin.TabularInline):
    model = Question
    min_num = 1  # a questionnaire asks something: one without questions could not be answered
    validate_min = True
    fields = ["position", "key", "preset", "text", "type", "minimum", "maximum", "minimum_label",
              "maximum_label", "required"]  # fmt: skip

    def get_extra(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> int:
        return 1 if obj is not None else len(_built_in_rows(request))

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        if obj is None and request.method == "GET":  # a new one: the built-in questions, to change
            rows = _built_in_rows(request)

            class StartsBuiltIn(formset):  # type: ignore[misc,valid-type]
                def __init__(self, *args: Any, **kw: Any) -> None:
                    kw.setdefault("initial", rows)
                    super().__init__(*args, **kw)

            return StartsBuiltIn
        return formset


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

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"phase": request.GET.get("phase", "PRE"), **super().get_changeform_initial_data(request)}

    @admin.display(description="questions", ordering="questions_count")
    def questions_count(self, questionnaire: Questionnaire) -> int:
        return getattr(questionnaire, "questions_count", 0)

    def save_model(self, request: HttpRequest, obj: Questionnaire, form: Any, change: bool) -> None:
        obj.revision = fresh_revision()  # its team or phase may have changed: no process's guess holds
        super().save_model(request, obj, form, change)
