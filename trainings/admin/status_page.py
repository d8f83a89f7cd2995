"""The operator's status page at /admin/status/: the engine's figures (reminders/ops/figures.py) plus the push
side (queue depth, the gateway's last delivery). Operators only; a coach gets the friendly 403 page."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST
from kombu import Connection

from reminders.api import (
    ERROR_PREFIX,
    FAILURE_SAMPLE,
    EngineStatus,
    MinutePoint,
    engine_status,
    failures_retry,
)
from trainings.models import DeliveredPush
from trainings.selectors import user_sees_all_teams

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 10


@dataclass(frozen=True)
class PushStatus:
    queue: str
    depth: int | None  # None: not measurable on this broker (or it did not answer)
    consumers: int | None
    note: str
    gateway_last_at: datetime | None


def push_queue_depth() -> tuple[int | None, int | None, str]:
    """Messages waiting in the push queue and its consumers, from RabbitMQ (a passive declare)."""
    url = settings.REMINDERS_CALLBACK_BROKER_URL
    if not url.startswith(("amqp://", "amqps://", "pyamqp://")):
        return None, None, "n/a (the broker is not RabbitMQ)"
    try:
        with Connection(url, connect_timeout=1) as broker:
            channel: Any = broker.channel()
            try:
                _, depth, consumers = channel.queue_declare(queue=settings.TRAININGS_PUSH_QUEUE, passive=True)
            finally:
                channel.close()
    except Exception as exc:  # a status page reports a broker problem, it does not fail on it
        if "NOT_FOUND" in str(exc):
            return 0, 0, "queue not declared yet (nothing published)"
        logger.warning("status page: push queue depth unavailable: %s", exc)
        return None, None, f"n/a (broker: {type(exc).__name__})"
    return int(depth), int(consumers), ""


def push_status() -> PushStatus:
    depth, consumers, note = push_queue_depth()
    # The newest delivery record by primary key: one index entry, however many there are.
    last = DeliveredPush.objects.order_by("-pk").values_list("delivered_at", flat=True).first()
    return PushStatus(settings.TRAININGS_PUSH_QUEUE, depth, consumers, note, last)


def deliveries_chart(points: list[MinutePoint], *, width: int = 960, height: int = 160) -> SafeString:
    """Deliveries (and failures) per minute as an inline SVG: no script, no external host."""
    top = max([p.delivered + p.failed for p in points] + [1])
    pad_left, pad_bottom = 64, 20
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - 8
    bar = plot_w / max(len(points), 1)
    bars = []
    for i, point in enumerate(points):
        x = pad_left + i * bar
        for value, offset, css in (
            (point.delivered, 0, "delivered"),
            (point.failed, point.delivered, "failed"),
        ):
            if value:
                h = plot_h * value / top
                y = 8 + plot_h - plot_h * (offset + value) / top
                local = timezone.localtime(point.minute)
                bars.append(
                    (css, f"{x + 0.5:.1f}", f"{y:.1f}", f"{max(bar - 1, 1):.1f}", f"{h:.1f}",
                     f"{local:%H:%M}: {value} {css}")
                )  # fmt: skip
    rects = format_html_join(
        "",
        '<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        bars,
    )
    first, last = timezone.localtime(points[0].minute), timezone.localtime(points[-1].minute)
    return format_html(
        '<svg class="chart" role="img" aria-label="deliveries per minute" width="{w}" height="{h}" '
        'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
        '<line x1="{l}" y1="8" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" class="axis"/>'
        '<text x="{tl}" y="16" text-anchor="end">{top}/min</text>'
        '<text x="{tl}" y="{b}" text-anchor="end">0</text>'
        '<text x="{l}" y="{ty}">{first}</text>'
        '<text x="{w}" y="{ty}" text-anchor="end">{last}</text>{rects}</svg>',
        w=width,
        h=height,
        l=pad_left,
        tl=pad_left - 4,
        b=8 + plot_h,
        ty=height - 4,
        top=top,
        first=f"{first:%H:%M}",
        last=f"{last:%H:%M}",
        rects=rects,
    )


def _require_operator(request: HttpRequest) -> None:
    if not user_sees_all_teams(request.user):
        raise PermissionDenied("The status page is for operators.")


def _failures_link(error: str) -> str:
    query = urlencode({"status__exact": "failed", "error": error})
    return f"{reverse('admin:reminders_occurrence_changelist')}?{query}"


def status_view(request: HttpRequest) -> HttpResponse:
    _require_operator(request)
    engine: EngineStatus = engine_status()
    scan_age = None if engine.last_scan_at is None else engine.now - engine.last_scan_at
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Scheduler status",
        "engine": engine,
        "push": push_status(),
        "chart": deliveries_chart(engine.per_minute),
        "delivered_last_hour": sum(p.delivered for p in engine.per_minute),
        "failures": [(group, _failures_link(group.error)) for group in engine.failures],
        "scan_age": scan_age,
        "scan_stale": scan_age is None or scan_age > timedelta(seconds=30),
        "refresh_seconds": REFRESH_SECONDS,
        "failure_sample": FAILURE_SAMPLE,
        "zone": timezone.get_current_timezone_name(),
    }
    return TemplateResponse(request, "admin/status.html", context)


@require_POST
def status_retry_view(request: HttpRequest) -> HttpResponse:
    """Retry the last 24 h's failed occurrences whose error starts with the group's text."""
    _require_operator(request)
    error = request.POST.get("error", "")[:ERROR_PREFIX]
    count = failures_retry(error=error, since=timezone.now() - timedelta(hours=24))
    messages.success(request, f"{count} failed occurrence(s) due again now.")
    return HttpResponseRedirect(reverse("admin-status"))
