"""Each signed-in person reads and types times in the admin in their chosen zone (UserPreference, default
UTC). The API keeps answering in UTC (with `*_local` fields where a person reads them), and pays no query."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from reminders.models import UserPreference


def user_time_zone(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        name = "UTC"
        user = getattr(request, "user", None)
        if request.path.startswith("/admin/") and user is not None and user.is_authenticated:
            # One primary-key lookup through the unique user_id index.
            chosen = UserPreference.objects.filter(user=user).values_list("time_zone", flat=True).first()
            name = chosen or "UTC"
        timezone.activate(zoneinfo.ZoneInfo(name))
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return middleware
