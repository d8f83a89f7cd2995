"""Durations and instants the way a person reads them on the admin pages."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def seconds(value: float | timedelta | None) -> str:
    """12 ms, 3.4 s, 4 min 03 s, 2 h 05 min, 3 d 4 h; an em dash for nothing."""
    if value is None or value == "":
        return "—"
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign, total = ("-" if total < 0 else ""), abs(total)
    if total < 1:
        return f"{sign}{total * 1000:.0f} ms"
    if total < 60:
        return f"{sign}{total:.1f} s"
    minutes, secs = divmod(int(total), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{sign}{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{sign}{days} d {hours} h"


@register.filter
def local(value: datetime | None, zone: str = "") -> str:
    """An instant in `zone` (default: the person's active zone), to the second, with the zone's name."""
    if value is None:
        return "—"
    shown = timezone.localtime(value, ZoneInfo(zone)) if zone else timezone.localtime(value)
    return f"{shown:%Y-%m-%d %H:%M:%S} {shown.tzname()}"
