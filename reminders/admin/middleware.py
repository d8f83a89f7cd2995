"""Each signed-in person reads and types times in the admin in their chosen zone (UserPreference; without
one, the zone an app says is theirs, e.g. their team's, else UTC). The API keeps answering in UTC (with
`*_local` fields where a person reads them), and pays no query."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from reminders.models import UserPreference

# Who else may know a person's zone (trainings: the zone of the team they coach or play in). Each takes the
# user and returns a zone name or None; asked only for people with no preference of their own.
DefaultZone = Callable[[Any], str | None]
_default_zones: list[DefaultZone] = []


def default_zone_register(resolver: DefaultZone) -> None:
    if resolver not in _default_zones:
        _default_zones.append(resolver)


def _default_zone(user: Any) -> str:
    for resolver in _default_zones:
        name = resolver(user)
        if name:
            return name
    return "UTC"


def user_time_zone(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    def middleware(request: HttpRequest) -> HttpResponse:
        name = "UTC"
        user = getattr(request, "user", None)
        if request.path.startswith("/admin/") and user is not None and user.is_authenticated:
            # One primary-key lookup through the unique user_id index.
            chosen = UserPreference.objects.filter(user=user).values_list("time_zone", flat=True).first()
            name = chosen or _default_zone(user)
        timezone.activate(zoneinfo.ZoneInfo(name))
        try:
            return get_response(request)
        finally:
            timezone.deactivate()

    return middleware
