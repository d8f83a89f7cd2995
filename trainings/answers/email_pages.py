"""The pages an email's links open: the answer page (its button records the answer) and the RFC 8058
one-click unsubscribe. No session: the signed token in the path is the credential, so these forms need no
CSRF cookie (a forged request would need the token, which is all the power there is). Both meet the
limits an answer link meets: per address (the middleware) and, once the token's signature holds, per link
(trainings/answers/limits.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext, gettext_noop
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from common.i18n import spoken
from delivery.api import unsubscribe_read, words
from reminders.api import Refused
from trainings.answers.following import answer_link_record
from trainings.answers.limits import link_count
from trainings.answers.links import LinkInvalid, answer_link_read, expects_response
from trainings.answers.questionnaires import AnswersRefused, definition_of, form_answers, form_questions
from trainings.answers.questions import answer_question
from trainings.answers.reading import LinkGone, answer_link_current, answer_link_open
from trainings.models import Guardian, Player
from trainings.planning import kinds
from trainings.reminding.preferences import preference_set


@csrf_exempt
@require_http_methods(["GET", "POST"])
def answer_page(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the question and the buttons (records nothing: mail scanners follow links); POST records."""
    try:
        answer_link_read(token)
    except LinkInvalid:
        return _page(request, gettext("This is not a valid answer link."), status=400)
    refused = link_count(token)
    if refused is not None:
        return _too_many(request, refused)
    try:
        target = answer_link_open(token)
    except LinkInvalid:
        return _page(request, gettext("This is not a valid answer link."), status=400)
    except LinkGone as exc:
        return _page(request, gettext(exc.detail), status=410)
    language, question = answer_question(target)
    # The reader's language, whatever the browser says (LocaleMiddleware activates each request's anew and
    # writes it in Content-Language).
    translation.activate(language)
    invitation = expects_response(target.link.kind)
    context: dict[str, Any] = {"question": question, "language": language, "words": words(language),
                               "invitation": invitation, "training": target.training}  # fmt: skip
    status, typed, errors = 200, {}, {}
    recorded: dict[str, Any] | None = None  # the invitation's response as this POST left it
    if request.method == "POST":
        response = request.POST.get("response")
        if invitation and response not in ("accepted", "denied"):
            return _page(request, gettext('response: "accepted" or "denied".'), status=400)
        if invitation:
            recorded = answer_link_record(target=target, response=response).answer
            context["done"] = True
        else:
            typed = form_answers(request.POST, definition_of(target.training.team_id, target.link.kind))
            try:
                answer_link_record(target=target, answers=typed)
                context["done"] = True
            except AnswersRefused as exc:  # the page again, each refused question saying why
                status, errors = 400, exc.errors
    context["answer"] = answer = recorded or answer_link_current(target)
    context["chosen"] = request.GET.get("response", "")
    if invitation:
        context["recorded"] = _recorded_words(answer, language)
    else:
        definition = definition_of(target.training.team_id, target.link.kind)
        stored = (answer or {}).get("answers") or {}
        context["questions"] = form_questions(definition, language, typed if errors else stored, errors)
        context["whole_error"] = errors.get("", "")
    with translation.override(language):  # the page's own words in the reader's language too
        return render(request, "trainings/email/answer_page.html", context, status=status)


def _recorded_words(answer: dict[str, Any] | None, language: str) -> str:
    """Which answer is stored, said as the person reads it ("You're in"), or nothing before any."""
    response = (answer or {}).get("response")
    if response is None:
        return ""
    with translation.override(language):
        return (gettext("You're in: your coach sees that you will come.") if response == "accepted"
                else gettext("You've declined: your coach sees that you can't come."))  # fmt: skip


@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """RFC 8058: a POST (`List-Unsubscribe=One-Click`) unsubscribes at once; a GET asks with a button."""
    try:
        player_id, kind, guardian_id = unsubscribe_read(token)
    except signing.SignatureExpired:
        days = settings.TRAININGS_EMAIL_UNSUBSCRIBE_DAYS
        return _page(request, gettext(_UNSUBSCRIBE_EXPIRED).format(days=days), status=410)
    except (signing.BadSignature, ValueError, TypeError):
        return _page(request, gettext("This is not a valid unsubscribe link."), status=400)
    refused = link_count(token)
    if refused is not None:
        return _too_many(request, refused)
    translation.activate(_reader_language(player_id, guardian_id))  # as on the answer page
    if request.method == "POST":
        owner = (None, guardian_id) if guardian_id is not None else (player_id, None)
        if not preference_set(player_id=owner[0], guardian_id=owner[1], kind=kind, channels="push"):
            return _page(request, gettext("This player no longer exists."), status=410)
        return _page(request, gettext("You will no longer receive these reminders by email."))
    label = kinds.of(kind).label_text if kind in kinds.KINDS else kind
    return _page(request, "", template="trainings/email/unsubscribe.html", kind=label)


_UNSUBSCRIBE_EXPIRED = gettext_noop(
    "This unsubscribe link has expired: links work for {days} days after their email. The unsubscribe link "
    "in a newer reminder email works."
)


def _reader_language(player_id: int, guardian_id: int | None) -> str:
    """The language of whom the unsubscribe link was sent to (a spoken one; English when they are gone)."""
    model: type[Player | Guardian] = Guardian if guardian_id is not None else Player
    pk = guardian_id if guardian_id is not None else player_id
    return spoken(model.objects.filter(pk=pk).values_list("language", flat=True).first())


def _page(
    request: HttpRequest,
    message: str,
    *,
    status: int = 200,
    template: str = "trainings/email/message.html",
    **context: Any,
) -> HttpResponse:
    """A page in the active language: the reader's where the link names them, else the browser's."""
    return render(request, template, {"message": message, **context}, status=status)


def _too_many(request: HttpRequest, refused: Refused) -> HttpResponse:
    wait = refused.retry_after
    message = gettext("This link was followed too often: try again in {wait} seconds.").format(wait=wait)
    response = _page(request, message, status=429)
    response["Retry-After"] = str(wait)
    return response
