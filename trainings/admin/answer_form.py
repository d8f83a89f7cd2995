"""A coach records a player's questionnaire answer on the training's page (a player who answered on
paper, or told the coach): the team's questions of the phase, checked as every other way in checks them
(trainings/answers/questionnaires.py), a field error beside each refused question."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import get_language, gettext

from trainings.answers.questionnaires import AnswersRefused, definition_of, form_answers, form_questions
from trainings.models import AnswerSource, Training
from trainings.planning import kinds
from trainings.planning.writes import answer_record


def answer_page(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """GET: the form for `?phase=` (PRE by default); POST: records it for the chosen player, or the form
    again with each refusal."""
    training: Training | None = model_admin.get_object(request, object_id)
    if training is None:
        return HttpResponseRedirect(reverse("admin:index"))  # as the admin answers "does not exist"
    if not model_admin.has_change_permission(request, training):
        raise PermissionDenied("you may not change this training")
    phases = [(kind.code, kind.label) for kind in kinds.questionnaire_kinds()]
    phase = request.POST.get("phase") or request.GET.get("phase") or phases[0][0]
    if phase not in dict(phases):
        phase = phases[0][0]
    definition = definition_of(training.team_id, phase)
    invitations = list(training.invitations.select_related("player").order_by("player__name"))
    typed: dict[str, Any] = {}
    errors: dict[str, str] = {}
    chosen = request.POST.get("player", "")
    if request.method == "POST":
        invitation = next((i for i in invitations if str(i.player_id) == chosen), None)
        typed = form_answers(request.POST, definition)
        if invitation is None:
            errors["player"] = gettext("Choose a player on this training's list.")
        else:
            try:
                answer_record(training=training, player=invitation.player, phase=phase, answers=typed,
                              source=AnswerSource.ADMIN)  # fmt: skip
            except AnswersRefused as exc:
                errors.update(exc.errors)
            else:
                model_admin.message_user(
                    request,
                    gettext("Answer recorded for {player}.").format(player=invitation.player.name),
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(reverse("admin:trainings_training_change", args=[training.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": gettext("Record an answer: {title}").format(title=training.title),
        "training": training, "opts": model_admin.opts, "phases": phases, "phase": phase,
        "invitations": invitations, "chosen": chosen, "player_error": errors.pop("player", ""),
        "whole_error": errors.get("", ""),
        "questions": form_questions(definition, get_language() or "en", typed, errors),
    }  # fmt: skip
    return TemplateResponse(
        request, "admin/trainings/training/answer.html", context, status=400 if errors else 200
    )
