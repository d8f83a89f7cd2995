"""Django's error pages for what DRF's own handler never sees, in JSON under /api/.

An exception a view does not handle (a 500), a SuspiciousOperation (400) and Django's PermissionDenied
(403) reach Django's handlers, not DRF's: these answer an API caller in the API's shape, `{"detail": …}`,
and never with the traceback or an HTML page. Elsewhere (the admin, the email pages) Django's own pages
stay. A path no URL matches is `reminders.http.limits.page_not_found`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def server_error(request: HttpRequest) -> HttpResponse:
    """A 500: what went wrong is in the server's log (django.request), not in the answer."""
    if _is_api(request):
        return JsonResponse({"detail": "Internal server error."}, status=500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)
    return defaults.permission_denied(request, exception)
