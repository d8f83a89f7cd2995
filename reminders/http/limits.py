"""Abuse limits that every request meets: the request body limit, API throttling, the client address.

- Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (REMINDERS_MAX_REQUEST_BYTES) get a JSON 413 on the API, decided
  from Content-Length before anything is read (a WSGI server hands Django no more than Content-Length).
- DRF throttling per token (or session user) and per client address, rates from API_THROTTLE_RATES; DRF
  answers 429 with Retry-After. Rates are read on every request, so a settings change takes effect.
- One notion of the client address for throttling and django-axes: REMOTE_ADDR, or the address
  API_NUM_PROXIES hops back in X-Forwarded-For when the site runs behind that many proxies.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """ "100/s" -> (100, 1); a malformed rate stops the process instead of silently not limiting."""
    match = _RATE.match(rate)
    if not match:
        raise ImproperlyConfigured(f"throttle rate {rate!r} is not '<n>/<s|m|h|d>'")
    return int(match.group(1)), _PERIODS[match.group(2)[0]]


def client_ip(request: HttpRequest) -> str:
    """The caller's address: REMOTE_ADDR, or API_NUM_PROXIES entries from the right of X-Forwarded-For."""
    proxies = settings.API_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return str(request.META.get("REMOTE_ADDR", ""))


class _SettingsRateThrottle(SimpleRateThrottle):
    cache = caches["throttle"]

    def get_rate(self) -> str:
        return str(settings.API_THROTTLE_RATES[str(self.scope)])

    def parse_rate(self, rate: str | None) -> tuple[int | None, int | None]:
        if rate is None:
            return None, None
        return parse_rate(rate)


class TokenRateThrottle(_SettingsRateThrottle):
    """Per API token (TokenAuthentication) or, for a browser session, per user."""

    scope = "token"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None  # anonymous callers meet the address limit only
        key = getattr(request.auth, "key", None)
        ident = f"token-{key}" if key else f"user-{request.user.pk}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AddressRateThrottle(_SettingsRateThrottle):
    """Per client address, authenticated or not."""

    scope = "ip"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": client_ip(request)}


class RequestBodyLimitMiddleware:
    """A JSON 413 for an API request whose body is over the limit (HTML stays Django's elsewhere)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _is_api(request):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                return _too_large(length)
        return self.get_response(request)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _too_large(length: int) -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return JsonResponse(
        {"detail": f"{length:,} bytes is over the limit of {limit:,} bytes", "limit_bytes": limit}, status=413
    )
