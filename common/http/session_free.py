"""Routes whose URL carries its own credential (a signed answer link) skip the browser middleware.

Sessions, CSRF, authentication, the admin's time zone, the change history's request, messages,
clickjacking headers and django-axes do nothing for a request that is answered from a token in its path:
no session is read, no user is looked up, no form is posted from a page. Yet each costs every request that
passes through it. `SessionFreeMiddleware`, placed after the limits (body size, per-address throttle),
SecurityMiddleware and CommonMiddleware, calls a view marked `session_free` directly for a path under
SESSION_FREE_PATHS, as Django's handler would (resolve, view, render), and sets X-Frame-Options as the
skipped clickjacking middleware would. Every other request goes on through the whole stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

View = Callable[..., Any]


def session_free(view: View) -> View:
    """Mark a view that authenticates by its URL alone, so SessionFreeMiddleware may call it directly."""
    view.session_free = True  # type: ignore[attr-defined]
    return view


class SessionFreeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.prefixes = tuple(settings.SESSION_FREE_PATHS)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not (self.prefixes and request.path_info.startswith(self.prefixes)):
            return self.get_response(request)
        try:  # resolved already when the address's limit counted the view's own (http/limits.py)
            match = request.resolver_match or resolve(request.path_info)
        except Resolver404:
            return self.get_response(request)
        if not getattr(match.func, "session_free", False):
            return self.get_response(request)
        request.resolver_match = match
        response = match.func(request, *match.args, **match.kwargs)
        if callable(getattr(response, "render", None)):  # DRF's Response renders late, as a template does
            response = response.render()
        if response.get("X-Frame-Options") is None and not getattr(response, "xframe_options_exempt", False):
            response["X-Frame-Options"] = getattr(settings, "X_FRAME_OPTIONS", "DENY").upper()
        return response
