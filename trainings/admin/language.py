"""The admin in a coach's own language: the one their coach profile names (the language of their digests),
else the browser's (LocaleMiddleware, Accept-Language). Only admin pages of a signed-in person pay the one
primary-key lookup; the API and the answer pages decide their language themselves."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import translation

from common.i18n import spoken
from trainings.models import Coach


def coach_language(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if not (request.path.startswith("/admin/") and user is not None and user.is_authenticated):
            return get_response(request)
        chosen = Coach.objects.filter(user=user).values_list("language", flat=True).first()
        if chosen is None:
            return get_response(request)
        language = spoken(chosen)
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = get_response(request)
        response.headers["Content-Language"] = language
        return response

    return middleware
