"""Abuse limits that every request meets: the request body limit, the rate limits, the client address.

- Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (REMINDERS_MAX_REQUEST_BYTES) get a JSON 413 on the API, decided
  from Content-Length before anything is read (a WSGI server hands Django no more than Content-Length).
  A chunked body (Transfer-Encoding, no Content-Length) is read, up to the same limit, where the server
  says its input ends (gunicorn's `wsgi.input_terminated`); elsewhere (runserver, wsgiref) the API answers
  411, since Django would otherwise read it as empty.
- Per client address, every request under ADDRESS_LIMITED_PATHS (the API, the email pages and the email
  provider's webhook) is counted before authentication (`AddressThrottleMiddleware`), so random or missing
  tokens and forged links meet the limit too; per token (or session user), DRF's throttling after it; per
  link, once the link's signature holds (the answer-link API in the address's statement, the email pages
  in their views). Every count is an upsert in the service's database (reminders/http/counts.py), shared
  by every process and host. All answer 429 with Retry-After.
  Rates are read on every request, so a settings change takes effect.
- One notion of the client address for throttling and django-axes: REMOTE_ADDR, or the address
  API_NUM_PROXIES hops back in X-Forwarded-For when the site runs behind that many proxies.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle

from reminders.http.counts import Limit, Refused, digest, parse_rate, request_count, requests_count


def client_ip(request: HttpRequest) -> str:
    """The caller's address: REMOTE_ADDR, or API_NUM_PROXIES entries from the right of X-Forwarded-For."""
    proxies = settings.API_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return str(request.META.get("REMOTE_ADDR", ""))


class CountedRateThrottle(SimpleRateThrottle):
    """DRF's throttle interface (rate, key, allow, wait) over the database's counters: `get_cache_key`
    names whom a request counts for (None: not counted here), `request_count` counts it."""

    refused: Refused | None = None

    def get_rate(self) -> str:
        return str(settings.API_THROTTLE_RATES[str(self.scope)])

    def parse_rate(self, rate: str | None) -> tuple[int | None, int | None]:
        if rate is None:
            return None, None
        return parse_rate(rate)

    def allow_request(self, request: Request | HttpRequest, view: Any) -> bool:
        ident = self.get_cache_key(request, view)  # type: ignore[arg-type]
        if ident is None:
            return True
        self.refused = request_count(scope=str(self.scope), ident=ident, rate=self.get_rate())
        return self.refused is None

    def wait(self) -> float | None:
        return None if self.refused is None else float(self.refused.retry_after)


class TokenRateThrottle(CountedRateThrottle):
    """Per API token (TokenAuthentication) or, for a browser session, per user."""

    scope = "token"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None  # anonymous callers meet the address limit only
        key = getattr(request.auth, "key", None)
        return f"token-{digest(key)}" if key else f"user-{request.user.pk}"


def too_many(refused: Refused, *, json: bool) -> HttpResponse:
    """The 429 of a refused request: JSON on the API, a line of text on a page; Retry-After either way."""
    wait = refused.retry_after
    detail = f"Request was throttled. Expected available in {wait} seconds."
    response: HttpResponse = (
        JsonResponse({"detail": detail}, status=429)
        if json
        else HttpResponse(detail, status=429, content_type="text/plain; charset=utf-8")
    )
    response["Retry-After"] = str(wait)
    return response


class AddressThrottleMiddleware:
    """The per-address limit on ADDRESS_LIMITED_PATHS, before authentication: DRF checks its throttles
    only after the authentication and permission checks, so a flood of bad or missing tokens was never
    counted (and each bad token still cost a database lookup). A session-free view (an answer link's)
    counts its own limits in the same statement (`_view_limits`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(tuple(settings.ADDRESS_LIMITED_PATHS)):
            address = Limit("ip", client_ip(request), str(settings.API_THROTTLE_RATES["ip"]))
            refused = requests_count([address, *_view_limits(request)])
            if refused is not None:
                return too_many(refused, json=_is_api(request))
        return self.get_response(request)


def _view_limits(request: HttpRequest) -> list[Limit]:
    """The limits of a session-free view's request (SESSION_FREE_PATHS): its class's `request_limits`,
    counted with the address in one statement, before the view runs (a link's, once its signature holds).
    The match is kept for SessionFreeMiddleware."""
    if not request.path_info.startswith(tuple(settings.SESSION_FREE_PATHS)):
        return []
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return []
    limits = getattr(getattr(match.func, "view_class", None), "request_limits", None)
    if limits is None:
        return []
    request.resolver_match = match
    return list(limits(request, *match.args, **match.kwargs))


class RequestBodyLimitMiddleware:
    """A JSON 413 for an API request whose body is over the limit (HTML stays Django's elsewhere), and a
    JSON 411 for a chunked one that the server did not read (see `read_chunked_body`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _is_api(request):
            if request.META.get(_OVER_LIMIT):
                return _too_large(None)
            if not request.META.get("CONTENT_LENGTH") and request.META.get("HTTP_TRANSFER_ENCODING"):
                detail = "a request body needs a Content-Length header here (chunked bodies are not read)."
                return JsonResponse({"detail": detail}, status=411)
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                return _too_large(length)
        return self.get_response(request)


_OVER_LIMIT = "reminders.chunked_body_over_limit"
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def read_chunked_body(app: WsgiApp) -> WsgiApp:
    """Wrap the WSGI application so a chunked request body reaches Django.

    Django reads exactly CONTENT_LENGTH bytes of input, none without it, so a body sent with
    ``Transfer-Encoding: chunked`` was parsed as empty (a valid job answered 400 naming every field).
    Where the server has already removed the chunk framing and ends the input at the body's end
    (`wsgi.input_terminated`, set by gunicorn), the body is read here, at most the request limit plus one
    byte, and handed on with its length; one over the limit is marked for a 413 without keeping it."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if (
            "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
            and not environ.get("CONTENT_LENGTH")
            and environ.get("wsgi.input_terminated")
        ):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            body = _read_at_most(environ["wsgi.input"], limit + 1)
            if len(body) > limit:
                environ[_OVER_LIMIT] = True
                body = b""
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return application


def _read_at_most(stream: Any, size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        part = stream.read(min(left, 64 * 1024))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus a JSON 400 for a body Django refuses to parse (more fields or files than
    DATA_UPLOAD_MAX_NUMBER_FIELDS / _FILES), which otherwise became Django's HTML error page."""
    from rest_framework.views import exception_handler  # DRF's views load this module's throttles

    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return Response({"detail": f"the body has more than {limit:,} form fields."}, status=400)
    if isinstance(exc, TooManyFilesSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
        return Response({"detail": f"the body has more than {limit:,} files."}, status=400)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        detail = f"the body is over the limit of {limit:,} bytes"
        return Response({"detail": detail, "limit_bytes": limit}, status=413)
    return exception_handler(exc, context)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _too_large(length: int | None) -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    size = "the body" if length is None else f"{length:,} bytes"
    return JsonResponse(
        {"detail": f"{size} is over the limit of {limit:,} bytes", "limit_bytes": limit}, status=413
    )


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 for a path no URL matches (a key the router's pattern refuses, a player id that is
    not a number): JSON on the API, as every other API answer, and Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
